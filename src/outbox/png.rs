//! The size of a PNG, read from its header (signature, then the `IHDR` chunk). Pure; the bytes
//! come from the sandbox, so anything that is not a well-formed header is `None`.

/// The 8-byte PNG signature.
const SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

/// `(width, height)` of a PNG, or `None` when `bytes` do not start like one.
pub fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let rest = bytes.strip_prefix(SIGNATURE.as_slice())?;
    // IHDR: length 13, type "IHDR", then width and height (big-endian).
    if rest.get(..8)? != b"\x00\x00\x00\x0dIHDR" {
        return None;
    }
    let word = |at: usize| -> Option<u32> {
        let b: [u8; 4] = rest.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_be_bytes(b))
    };
    let (w, h) = (word(8)?, word(12)?);
    (w > 0 && h > 0).then_some((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(w: u32, h: u32) -> Vec<u8> {
        let mut v = SIGNATURE.to_vec();
        v.extend_from_slice(b"\x00\x00\x00\x0dIHDR");
        v.extend_from_slice(&w.to_be_bytes());
        v.extend_from_slice(&h.to_be_bytes());
        v.extend_from_slice(&[8, 6, 0, 0, 0]);
        v
    }

    #[test]
    fn reads_the_header() {
        assert_eq!(png_size(&header(640, 480)), Some((640, 480)));
        assert_eq!(png_size(&header(0, 480)), None);
        assert_eq!(png_size(b"GIF89a"), None);
        assert_eq!(png_size(&header(640, 480)[..20]), None);
        let mut wrong = header(1, 1);
        wrong[12] = b'X';
        assert_eq!(png_size(&wrong), None);
    }
}
