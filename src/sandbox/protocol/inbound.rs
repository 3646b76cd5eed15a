//! Frames from the sandbox and their parsing: [`parse_inbound`] reads one line into an
//! [`Inbound`]; `call` frames can also be recognised and their id read without parsing the rest
//! ([`is_call`], [`call_id`]), since a call is charged for before it is read.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::result::ResultFrame;
use super::state_frames::{OutputFrame, PreloadedFrame, RestoredFrame, SavedFrame};
use crate::log_limit::clipped;
use crate::outbox::FileChunk;

/// A frame from the sandbox (see [`parse_inbound`]).
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// The entrypoint booted.
    Ready(ReadyFrame),
    /// The entrypoint took exec `id` off its queue and is about to run it.
    Started {
        /// The exec id.
        id: u64,
    },
    /// An exec finished.
    Result(ResultFrame),
    /// Sandbox code asks the host for something.
    Call(CallFrame),
    /// A chunk of a file the exec delivers to the host (`crate::outbox`).
    File(FileChunk),
    /// The running exec's output so far (the answer to a `progress` frame).
    Output(OutputFrame),
    /// A chunk of the namespace snapshot a `save_namespace` frame asked for (opaque bytes, base64).
    Snapshot {
        /// The save's id.
        id: u64,
        /// Base64 of the chunk's bytes.
        data: String,
    },
    /// The snapshot a `save_namespace` frame asked for is complete.
    Saved(SavedFrame),
    /// What a restore brought back.
    Restored(RestoredFrame),
    /// How the imports a `preload` frame asked for went.
    Preloaded(PreloadedFrame),
}

/// The entrypoint's `ready` frame.
#[derive(Debug, Deserialize, PartialEq, Default)]
pub struct ReadyFrame {
    /// Protocol version.
    pub v: u32,
    /// Python version in the sandbox.
    #[serde(default)]
    pub python: Option<String>,
    /// `socket` when frames moved to the socket channel, else `stdio`.
    #[serde(default)]
    pub channel: Option<String>,
    /// Why an offered channel was not used.
    #[serde(default)]
    pub channel_error: Option<String>,
    /// The sandbox's view of its own isolation (`entrypoint/selfcheck.py`), as text: read
    /// into a value only for the first `ready` and within the frame limit (`json_cost.rs`).
    #[serde(default)]
    pub posture: Option<RawJson>,
}

/// A request from sandbox code to the host.
#[derive(Debug, Deserialize, PartialEq)]
pub struct CallFrame {
    /// Request id chosen by the sandbox.
    pub id: u64,
    /// The exec during which the request was made.
    pub exec: u64,
    /// Host method name.
    pub method: String,
    /// Method parameters. A `call` line is read only once what it takes read has been charged
    /// against the frame limit and the request budget ([`is_call`], `session/calls.rs`).
    #[serde(default)]
    pub params: Value,
}

/// JSON text from the sandbox, kept as text until it is charged for (`json_cost.rs`).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct RawJson(pub Box<RawValue>);

impl RawJson {
    /// The JSON text.
    pub fn text(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

/// The tags of the frames the sandbox may send.
const INBOUND_TAGS: &[&str] = &[
    "ready",
    "started",
    "result",
    "call",
    "file",
    "output",
    "snapshot",
    "saved",
    "restored",
    "preloaded",
];

/// A line from the sandbox that is not a frame it may send there.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Not UTF-8 JSON of a known frame type.
    #[error("malformed frame from the sandbox ({}): \"{preview}\"", clipped(&.cause.to_string()))]
    Malformed {
        /// The line's start, escaped and cut (it comes from the sandbox).
        preview: String,
        /// What serde found wrong.
        #[source]
        cause: serde_json::Error,
    },
    /// A frame of another kind where a `call` was expected.
    #[error("malformed frame from the sandbox (not a call)")]
    NotACall,
}

impl PartialEq for FrameError {
    /// Equal when they say the same (serde's errors have no equality of their own).
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// Parses one line from the sandbox.
///
/// Two passes: the tag `t`, then the frame's own fields. Serde's internally tagged enums first
/// read every field into an intermediate tree and build the variant from that; on a proxied
/// call that cost more than the rest of the bridge's handling of it (callgrind).
///
/// # Errors
/// [`FrameError::Malformed`] when the line is not valid UTF-8 JSON of a known frame type; its
/// message is fit for the user.
pub fn parse_inbound(line: &[u8]) -> Result<Inbound, FrameError> {
    parse_tagged(line).map_err(|cause| {
        // Both come from the sandbox (serde quotes an unknown tag whole): escaped and cut.
        let preview = String::from_utf8_lossy(&line[..line.len().min(80)]);
        FrameError::Malformed {
            preview: clipped(&preview),
            cause,
        }
    })
}

/// Whether `line` is a `call` frame (by its tag alone; nothing else is read).
pub fn is_call(line: &[u8]) -> bool {
    tag_of(line).is_ok_and(|t| t == "call")
}

/// The `id` of a `call` frame, reading nothing else (its parameters are skipped, not kept).
pub fn call_id(line: &[u8]) -> Option<u64> {
    #[derive(Deserialize)]
    struct Head {
        id: u64,
    }
    serde_json::from_slice::<Head>(line).ok().map(|h| h.id)
}

/// Reads a `call` frame.
///
/// # Errors
/// As [`parse_inbound`], also for a frame of another kind.
pub fn parse_call(line: &[u8]) -> Result<CallFrame, FrameError> {
    match parse_inbound(line)? {
        Inbound::Call(frame) => Ok(frame),
        _ => Err(FrameError::NotACall),
    }
}

/// The tag of a frame: the canonical spelling's at once, else read by serde (other fields
/// skipped, not kept).
fn tag_of(line: &[u8]) -> Result<std::borrow::Cow<'_, str>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Tag<'a> {
        #[serde(borrow)]
        t: std::borrow::Cow<'a, str>,
    }
    match canonical_tag(line) {
        Some(t) => Ok(std::borrow::Cow::Borrowed(t)),
        None => Ok(serde_json::from_slice::<Tag<'_>>(line)?.t),
    }
}

/// The tag of a line that starts the way the entrypoint writes every frame, `{"t":"<tag>"`,
/// with no escape in the tag; None for any other line (the general parse finds the tag). The
/// frame's own fields are then read with `t` ignored, as an unknown field would be.
fn canonical_tag(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(br#"{"t":""#)?;
    let end = memchr::memchr(b'"', rest)?;
    let tag = &rest[..end];
    if tag.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(tag).ok()
}

fn parse_tagged(line: &[u8]) -> Result<Inbound, serde_json::Error> {
    #[derive(Deserialize)]
    struct Started {
        id: u64,
    }
    #[derive(Deserialize)]
    struct Chunk {
        id: u64,
        data: String,
    }
    let tag = tag_of(line)?;
    Ok(match tag.as_ref() {
        "ready" => Inbound::Ready(serde_json::from_slice(line)?),
        "started" => Inbound::Started {
            id: serde_json::from_slice::<Started>(line)?.id,
        },
        "result" => Inbound::Result(serde_json::from_slice(line)?),
        "call" => Inbound::Call(serde_json::from_slice(line)?),
        "file" => Inbound::File(serde_json::from_slice(line)?),
        "output" => Inbound::Output(serde_json::from_slice(line)?),
        "snapshot" => {
            let Chunk { id, data } = serde_json::from_slice(line)?;
            Inbound::Snapshot { id, data }
        }
        "saved" => Inbound::Saved(serde_json::from_slice(line)?),
        "restored" => Inbound::Restored(serde_json::from_slice(line)?),
        "preloaded" => Inbound::Preloaded(serde_json::from_slice(line)?),
        other => return Err(serde::de::Error::unknown_variant(other, INBOUND_TAGS)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_frames() {
        assert_eq!(
            parse_inbound(br#"{"t":"ready","v":1,"python":"3.11.2"}"#),
            Ok(Inbound::Ready(ReadyFrame {
                v: 1,
                python: Some("3.11.2".into()),
                ..Default::default()
            }))
        );
        let r =
            parse_inbound(br#"{"t":"result","id":7,"ok":false,"error":"Traceback","stdout":"x"}"#);
        assert_eq!(
            r,
            Ok(Inbound::Result(ResultFrame {
                id: 7,
                ok: false,
                error: Some("Traceback".into()),
                stdout: "x".into(),
                ..Default::default()
            }))
        );
        let r = parse_inbound(
            br#"{"t":"result","id":8,"ok":false,"error":"SystemExit: x","exit_code":1,"exit_message":"x"}"#,
        );
        assert_eq!(
            r,
            Ok(Inbound::Result(ResultFrame {
                id: 8,
                error: Some("SystemExit: x".into()),
                exit_code: Some(1),
                exit_message: Some("x".into()),
                ..Default::default()
            }))
        );
        assert_eq!(
            parse_inbound(br#"{"t":"started","id":4}"#),
            Ok(Inbound::Started { id: 4 })
        );
        assert_eq!(
            parse_inbound(
                br#"{"t":"file","exec":7,"n":1,"name":"a.csv","data":"eA==","end":true}"#
            ),
            Ok(Inbound::File(FileChunk {
                exec: 7,
                n: 1,
                name: "a.csv".into(),
                data: "eA==".into(),
                end: true,
                ..Default::default()
            }))
        );
        let c = parse_inbound(br#"{"t":"call","id":3,"exec":7,"method":"ping","params":{"a":1}}"#);
        assert!(matches!(
            c,
            Ok(Inbound::Call(CallFrame { id: 3, exec: 7, .. }))
        ));
    }

    #[test]
    fn the_tag_is_found_wherever_it_is() {
        for line in [
            &br#"{"t":"started","id":4}"#[..],
            br#"{"id":4,"t":"started"}"#,
            br#"{ "t" : "started", "id": 4 }"#,
            br#"{"t":"start\u0065d","id":4}"#,
            br#"{"t":"started","id":4,"extra":[1,{"t":"call"}]}"#,
        ] {
            assert_eq!(
                parse_inbound(line),
                Ok(Inbound::Started { id: 4 }),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        assert_eq!(canonical_tag(br#"{"t":"call","id":1}"#), Some("call"));
        assert_eq!(canonical_tag(br#"{"id":1,"t":"call"}"#), None);
        assert_eq!(canonical_tag(br#"{"t":"c\"all"}"#), None);
    }

    #[test]
    fn rejects_malformed_frames() {
        for bad in [
            &b"not json"[..],
            br#"{"t":"nuke","id":1}"#,
            br#"{"id":1,"t":"nuke"}"#,
            br#"{"t":"call","id":1,"exec":1}"#,
            br#"{"t":"started","id":1"#,
            br#"{"t":"started"#,
            br#"{"t":"result","id":"seven","ok":true}"#,
            br#"{"t":"call","id":-1,"exec":1,"method":"x"}"#,
            b"{\"t\":\"ready\",\"v\":1,\"python\":\"\xff\xfe\"}",
            br#"{"id":1}"#,
            b"",
        ] {
            let err = parse_inbound(bad).expect_err("must be rejected");
            assert!(err.to_string().starts_with("malformed frame"), "{err}");
        }
    }

    #[test]
    fn a_call_is_known_by_its_tag_and_its_id_read_alone() {
        for line in [
            &br#"{"t":"call","id":3,"exec":7,"method":"ping","params":[[0],[0]]}"#[..],
            br#"{"id":3,"params":{"t":"x"},"t":"call"}"#,
            br#"{"t":"c\u0061ll","id":3}"#,
        ] {
            assert!(is_call(line), "{}", String::from_utf8_lossy(line));
            assert_eq!(call_id(line), Some(3));
        }
        for line in [
            &br#"{"t":"result","id":3,"ok":true}"#[..],
            br#"{"params":{"t":"call"},"t":"ready"}"#,
            b"not json",
        ] {
            assert!(!is_call(line), "{}", String::from_utf8_lossy(line));
        }
        assert_eq!(call_id(br#"{"t":"call","id":"x"}"#), None);
        assert!(parse_call(br#"{"t":"started","id":1}"#).is_err());
    }
}
