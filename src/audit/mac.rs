//! The audit log's chain, as bytes: a line is its record's JSON with a MAC put last
//! (`{...,"mac":"<64 hex>"}`), the MAC being HMAC-SHA256, under the chain's key, of the
//! previous line's MAC (32 bytes) and the line's own content (the line without its `mac`
//! field). A line that starts a file, or follows a line with no MAC, names what it links to in
//! a `prev` field (the previous file's last MAC, or zeros where the chain begins). Pure: no
//! I/O; `key.rs` holds the key, `file.rs` appends, `verify.rs` checks.

use hmac::{KeyInit, Mac as _};
use serde::Deserialize;

/// HMAC-SHA256.
type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// A MAC: 32 bytes.
pub type Mac = [u8; 32];

/// What the chain's first line links to.
pub const GENESIS: Mac = [0; 32];

/// The text before a line's MAC.
const MAC_KEY: &[u8] = b",\"mac\":\"";

/// Bytes a line's MAC field takes, from its comma to the closing brace.
pub const MAC_FIELD: usize = MAC_KEY.len() + 64 + 2;

/// Bytes a `prev` field adds at most (`,"prev":"<64 hex>"`).
pub const PREV_FIELD: usize = 9 + 64 + 1;

/// The chain's key: 32 random bytes. Its `Debug` never shows them.
#[derive(Clone)]
pub struct ChainKey(pub(super) [u8; 32]);

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChainKey(..)")
    }
}

/// `mac`'s 64 lowercase hex digits.
pub fn hex(mac: &Mac) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect()
}

/// The MAC of 64 lowercase hex digits; `None` for anything else.
pub fn from_hex(text: &[u8]) -> Option<Mac> {
    if text.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut mac = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        mac[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(mac)
}

/// The MAC of `content` following `prev`.
pub fn mac(key: &ChainKey, prev: &Mac, content: &[u8]) -> Mac {
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(&key.0).expect("HMAC takes any key length");
    m.update(prev);
    m.update(content);
    m.finalize().into_bytes().into()
}

/// The line for `record` (a JSON object, no newline) following `prev`: with `anchor`, a `prev`
/// field naming it first. Returns the line (with its newline) and its MAC.
pub fn seal(key: &ChainKey, record: &[u8], prev: &Mac, anchor: bool) -> (Vec<u8>, Mac) {
    let body = record.strip_suffix(b"}").unwrap_or(record);
    let mut line = Vec::with_capacity(record.len() + PREV_FIELD + MAC_FIELD + 1);
    line.extend_from_slice(body);
    if anchor {
        line.extend_from_slice(b",\"prev\":\"");
        line.extend_from_slice(hex(prev).as_bytes());
        line.push(b'"');
    }
    line.push(b'}');
    let mac = mac(key, prev, &line);
    line.pop();
    line.extend_from_slice(MAC_KEY);
    line.extend_from_slice(hex(&mac).as_bytes());
    line.extend_from_slice(b"\"}\n");
    (line, mac)
}

/// The MAC a line (its newline removed) ends with; `None` when it ends otherwise.
pub fn trailing(line: &[u8]) -> Option<Mac> {
    let at = line.len().checked_sub(MAC_FIELD)?;
    let field = &line[at..];
    if !field.starts_with(MAC_KEY) || !field.ends_with(b"\"}") {
        return None;
    }
    from_hex(&field[MAC_KEY.len()..MAC_KEY.len() + 64])
}

/// A line (its newline removed) split into what its MAC covers and the MAC; `None` when it
/// does not end in a MAC field.
pub fn unseal(line: &[u8]) -> Option<(Vec<u8>, Mac)> {
    let mac = trailing(line)?;
    let at = line.len() - MAC_FIELD;
    if at == 0 {
        return None;
    }
    let mut content = line[..at].to_vec();
    content.push(b'}');
    Some((content, mac))
}

/// A line's content that the bridge cannot have sealed: not a JSON object, or its `prev` is
/// not a MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSealed;

/// The `prev` a line's content names, if any; `Err` when the content naming one is not a JSON
/// object or its `prev` is not a MAC.
pub fn prev_of(content: &[u8]) -> Result<Option<Mac>, NotSealed> {
    #[derive(Deserialize)]
    struct Link<'a> {
        #[serde(borrow, default)]
        prev: Option<&'a str>,
    }
    // Most lines name none: not parsed (a MAC that holds shows the content is the bridge's,
    // which writes `prev` only as this plain key).
    if memchr::memmem::find(content, b"\"prev\"").is_none() {
        return Ok(None);
    }
    let link: Link<'_> = serde_json::from_slice(content).map_err(|_| NotSealed)?;
    match link.prev {
        None => Ok(None),
        Some(text) => from_hex(text.as_bytes()).map(Some).ok_or(NotSealed),
    }
}

/// Whether `claimed` is the MAC `key` gives `content` after `prev` (compared in constant time).
pub fn holds(key: &ChainKey, prev: &Mac, content: &[u8], claimed: &Mac) -> bool {
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(&key.0).expect("HMAC takes any key length");
    m.update(prev);
    m.update(content);
    m.verify_slice(claimed).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> ChainKey {
        ChainKey([b; 32])
    }

    #[test]
    fn a_sealed_line_unseals_to_its_content_and_mac_and_only_its_key_and_prev_hold() {
        let record = br#"{"kind":"call","run":"r","tool":"t"}"#;
        let (line, m) = seal(&key(1), record, &GENESIS, false);
        assert!(line.ends_with(b"\"}\n"));
        let text = std::str::from_utf8(&line).expect("utf-8");
        let back: serde_json::Value = serde_json::from_str(text).expect("a JSON line");
        assert_eq!(back["mac"], hex(&m));
        let (content, claimed) = unseal(&line[..line.len() - 1]).expect("sealed");
        assert_eq!(content, record);
        assert_eq!(claimed, m);
        assert!(holds(&key(1), &GENESIS, &content, &claimed));
        assert!(!holds(&key(2), &GENESIS, &content, &claimed));
        assert!(!holds(&key(1), &[1; 32], &content, &claimed));
        let edited = br#"{"kind":"call","run":"r","tool":"T"}"#;
        assert!(!holds(&key(1), &GENESIS, edited, &claimed));
        assert_eq!(prev_of(&content), Ok(None));
    }

    #[test]
    fn an_anchor_names_its_prev_inside_what_the_mac_covers() {
        let prev = [7u8; 32];
        let (line, m) = seal(&key(1), br#"{"kind":"run"}"#, &prev, true);
        let (content, claimed) = unseal(&line[..line.len() - 1]).expect("sealed");
        assert_eq!(prev_of(&content), Ok(Some(prev)));
        assert!(holds(&key(1), &prev, &content, &claimed));
        assert_eq!(claimed, m);
        assert_eq!(line.len(), 13 + PREV_FIELD + MAC_FIELD + 1);
    }

    #[test]
    fn lines_without_a_mac_or_with_a_bad_one_do_not_unseal() {
        for line in [
            &b"{\"kind\":\"call\"}"[..],
            b"",
            b"garbage",
            b"{\"kind\":\"call\",\"mac\":\"XYZ\"}",
            &[b'x'; 200][..],
        ] {
            assert!(unseal(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
        let upper = format!("{{\"a\":1,\"mac\":\"{}\"}}", "A".repeat(64));
        assert!(unseal(upper.as_bytes()).is_none());
        assert_eq!(prev_of(b"not json \"prev\""), Err(NotSealed));
        assert_eq!(prev_of(br#"{"a":{"prev":1}}"#), Ok(None));
        assert_eq!(prev_of(br#"{"prev":"short"}"#), Err(NotSealed));
        assert_eq!(from_hex(hex(&[0xab; 32]).as_bytes()), Some([0xab; 32]));
        assert_eq!(format!("{:?}", key(9)), "ChainKey(..)");
    }
}
