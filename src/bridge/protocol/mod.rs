//! Frames exchanged with the sandbox entrypoint (see ARCHITECTURE.md, "frame protocol").
//!
//! Pure serde types, no I/O. `entrypoint/protocol.py` mirrors them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::error_kind::ErrorKind;
use super::log_limit::clipped;
use crate::outbox::{Delivery, FileChunk};

mod state_frames;

pub use state_frames::{Bounded, OutputFrame, RestoredFrame, SavedFrame};

/// The tools of the servers loaded for a run, by server name: for each, a JSON array of tool
/// entries (a name, or `{"name", "doc", "params", "returns"}` for the proxy's signature), shared
/// while the server's tool list is unchanged, so a session can tell what it already sent.
pub type LoadedTools = BTreeMap<String, Arc<RawValue>>;

/// Protocol version sent in `boot` and expected in `ready`.
pub const PROTOCOL_VERSION: u32 = 1;

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

/// The outcome of one exec, as reported by the entrypoint.
#[derive(Debug, Deserialize, PartialEq, Default, Clone)]
pub struct ResultFrame {
    /// The exec id.
    pub id: u64,
    /// False when user code raised.
    pub ok: bool,
    /// Captured stdout (possibly cut, see `stdout_dropped`).
    #[serde(default)]
    pub stdout: String,
    /// Captured stderr.
    #[serde(default)]
    pub stderr: String,
    /// Formatted traceback when `ok` is false.
    #[serde(default)]
    pub error: Option<String>,
    /// Characters of stdout dropped by the output limit.
    #[serde(default)]
    pub stdout_dropped: u64,
    /// Characters of stderr dropped by the output limit.
    #[serde(default)]
    pub stderr_dropped: u64,
    /// True when the exec stopped because of an interrupt.
    #[serde(default)]
    pub interrupted: bool,
    /// Set when the code raised `SystemExit`: the status `python3` would have exited with.
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// With `exit_code`, when the exit argument was neither None nor an int: what `python3`
    /// would have printed (`sys.exit("bad input")`).
    #[serde(default)]
    pub exit_message: Option<String>,
    /// The files the exec delivered (received from `file` frames before this one; not part
    /// of the frame).
    #[serde(skip)]
    pub files: Delivery,
    /// Frames the host dropped since the previous result (stray, unasked for, over a limit;
    /// counted by the session, not part of the frame).
    #[serde(skip)]
    pub dropped_frames: u64,
}

/// A frame to the sandbox.
#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Outbound<'a> {
    /// First frame: the entrypoint's sources.
    Boot {
        /// Protocol version.
        v: u32,
        /// Package name to install the files under.
        package: &'a str,
        /// File name → source.
        files: &'a BTreeMap<&'static str, &'static str>,
        /// The socket frame channel to switch to, if offered.
        #[serde(skip_serializing_if = "Option::is_none")]
        channel: Option<ChannelOffer<'a>>,
    },
    /// Run code.
    Exec {
        /// Exec id.
        id: u64,
        /// Python source.
        code: &'a str,
        /// Servers loaded for this exec.
        servers: &'a [String],
        /// The tool entries of the loaded servers whose tool list this sandbox has not been
        /// sent yet (new, or changed since); the others keep what they were last sent.
        tools: &'a BTreeMap<&'a str, ExecTools<'a>>,
        /// Characters kept per output stream.
        output_limit: usize,
    },
    /// Interrupt exec `id` if it still runs.
    Interrupt {
        /// Exec id.
        id: u64,
    },
    /// Asks for exec `id`'s output so far (answered with `output`).
    Progress {
        /// Exec id.
        id: u64,
        /// Characters of each stream's end to send.
        tail: usize,
    },
    /// Asks for a snapshot of the namespace (answered with `snapshot` chunks, then `saved`).
    SaveNamespace {
        /// The save's id.
        id: u64,
        /// Bytes the snapshot may have.
        limit: usize,
        /// Bytes per `snapshot` frame.
        chunk: usize,
    },
    /// A chunk of a snapshot to restore; the last frame has `done` (answered with `restored`).
    RestoreNamespace {
        /// The restore's id.
        id: u64,
        /// Base64 of the chunk's bytes.
        data: &'a str,
        /// True on the last frame.
        done: bool,
    },
    /// Answer to a `call`.
    Reply {
        /// The call's id.
        id: u64,
        /// Whether the call succeeded.
        ok: bool,
        /// The result (null on error).
        value: Value,
        /// The error message when `ok` is false.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The error class when `ok` is false.
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<ErrorKind>,
    },
    /// Exit cleanly.
    Shutdown,
}

impl Outbound<'_> {
    /// Serializes the frame as one `\n`-terminated JSON line.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line =
            serde_json::to_vec(self).expect("frames always serialize: plain data, string keys");
        line.push(b'\n');
        line
    }
}

/// A loaded server's tools in an exec frame.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ExecTools<'a> {
    /// The tool entries (a JSON array, see `dispatch::LoadedTools`).
    Listed(&'a RawValue),
}

impl<'a> ExecTools<'a> {
    /// The exec frame's `tools` for `loaded`: the entries of each server whose tool list `sent`
    /// (what this sandbox was sent so far, updated here) does not hold yet. A server it holds
    /// is left out, so an exec naming many servers costs what one naming few does; the
    /// sandbox keeps what it was sent. A new sandbox starts with an empty `sent`, so it gets
    /// every entry.
    pub fn for_exec(
        sent: &mut HashMap<String, Arc<RawValue>>,
        loaded: &'a LoadedTools,
    ) -> BTreeMap<&'a str, ExecTools<'a>> {
        loaded
            .iter()
            .filter(|(server, entries)| {
                let same = sent.get(*server).is_some_and(|s| Arc::ptr_eq(s, entries));
                if !same {
                    sent.insert((*server).clone(), (*entries).clone());
                }
                !same
            })
            .map(|(server, entries)| (server.as_str(), ExecTools::Listed(entries)))
            .collect()
    }
}

/// The socket channel named in the boot frame.
#[derive(Debug, Serialize)]
pub struct ChannelOffer<'a> {
    /// Socket path inside the sandbox.
    pub path: &'a str,
    /// Secret to send in the hello frame.
    pub token: &'a str,
}

/// The tags of the frames the sandbox may send.
const INBOUND_TAGS: &[&str] = &[
    "ready", "started", "result", "call", "file", "output", "snapshot", "saved", "restored",
];

/// Parses one line from the sandbox.
///
/// Two passes: the tag `t`, then the frame's own fields. Serde's internally tagged enums first
/// read every field into an intermediate tree and build the variant from that; on a proxied
/// call that cost more than the rest of the bridge's handling of it (callgrind).
///
/// # Errors
/// A message suitable for the user when the line is not valid UTF-8 JSON of a known frame type.
pub fn parse_inbound(line: &[u8]) -> Result<Inbound, String> {
    parse_tagged(line).map_err(|e| {
        // Both come from the sandbox (serde quotes an unknown tag whole): escaped and cut.
        let preview = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
        format!(
            "malformed frame from the sandbox ({}): \"{}\"",
            clipped(&e.to_string()),
            clipped(&preview)
        )
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
pub fn parse_call(line: &[u8]) -> Result<CallFrame, String> {
    match parse_inbound(line)? {
        Inbound::Call(frame) => Ok(frame),
        _ => Err("malformed frame from the sandbox (not a call)".into()),
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
        other => return Err(serde::de::Error::unknown_variant(other, INBOUND_TAGS)),
    })
}

#[cfg(test)]
mod tests;
