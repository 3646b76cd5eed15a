//! The result frame: the outcome of one exec as the entrypoint reports it, plus what the host
//! adds before handing it on (the files the exec delivered, the frames it dropped).

use serde::Deserialize;

use crate::outbox::Delivery;

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
