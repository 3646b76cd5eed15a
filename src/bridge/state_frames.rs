//! The frames of a cell's progress and of the namespace snapshot, as the entrypoint sends them
//! (ARCHITECTURE.md, "frame protocol"; `entrypoint/protocol.py` builds them). Pure serde types:
//! `protocol.rs` reads the tag and hands the line here. Every field comes from the sandbox and
//! is bounded only by the frame limit: users of these types cut what they keep.

use serde::Deserialize;

/// The entrypoint's `output` frame.
#[derive(Debug, Deserialize, PartialEq, Default)]
pub struct OutputFrame {
    /// The exec id.
    pub id: u64,
    /// The last characters of stdout so far.
    #[serde(default)]
    pub stdout: String,
    /// Characters written to stdout in all.
    #[serde(default)]
    pub stdout_total: u64,
    /// The last characters of stderr so far.
    #[serde(default)]
    pub stderr: String,
    /// Characters written to stderr in all.
    #[serde(default)]
    pub stderr_total: u64,
}

/// The entrypoint's `saved` frame.
#[derive(Debug, Deserialize, PartialEq, Default)]
pub struct SavedFrame {
    /// The save's id.
    pub id: u64,
    /// Bytes of snapshot sent in all.
    pub bytes: u64,
    /// User names in the namespace (saved or not); 0 when there was nothing to save.
    pub names: u64,
    /// Why saving failed, when it did.
    #[serde(default)]
    pub error: Option<String>,
}

/// The entrypoint's `restored` frame.
#[derive(Debug, Deserialize, PartialEq, Default)]
pub struct RestoredFrame {
    /// The restore's id.
    pub id: u64,
    /// The names that came back.
    #[serde(default)]
    pub names: Vec<String>,
    /// `[name, why]` for the names that did not.
    #[serde(default)]
    pub failed: Vec<(String, String)>,
}

#[cfg(test)]
mod tests {
    use crate::bridge::protocol::{parse_inbound, Inbound, Outbound};

    use super::*;

    #[test]
    fn parses_progress_and_snapshot_frames() {
        let out = parse_inbound(
            br#"{"t":"output","id":7,"stdout":"a\nb","stdout_total":3,"stderr":"","stderr_total":0}"#,
        );
        assert!(
            matches!(&out, Ok(Inbound::Output(OutputFrame { id: 7, stdout, stdout_total: 3, .. })) if stdout == "a\nb"),
            "{out:?}"
        );
        assert_eq!(
            parse_inbound(br#"{"t":"snapshot","id":9,"data":"AAE="}"#),
            Ok(Inbound::Snapshot {
                id: 9,
                data: "AAE=".into()
            })
        );
        assert_eq!(
            parse_inbound(br#"{"t":"saved","id":9,"bytes":2,"names":1}"#),
            Ok(Inbound::Saved(SavedFrame {
                id: 9,
                bytes: 2,
                names: 1,
                error: None
            }))
        );
        assert_eq!(
            parse_inbound(br#"{"t":"restored","id":10,"names":["df"],"failed":[["g","no"]]}"#),
            Ok(Inbound::Restored(RestoredFrame {
                id: 10,
                names: vec!["df".into()],
                failed: vec![("g".into(), "no".into())]
            }))
        );
        for bad in [
            &br#"{"t":"snapshot","id":9}"#[..],
            br#"{"t":"snapshot","id":9,"data":5}"#,
            br#"{"t":"saved","id":9,"bytes":-1,"names":1}"#,
            br#"{"t":"restored","id":10,"failed":[["g"]]}"#,
            br#"{"t":"output","id":"7"}"#,
        ] {
            assert!(
                parse_inbound(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// The entrypoint reads `restore` lines without its JSON decoder when they are spelled
    /// exactly so (`keeper.restore_frame`): this is that spelling.
    #[test]
    fn restore_lines_keep_the_spelling_the_entrypoint_reads_fast() {
        let line = Outbound::Restore {
            id: 3,
            data: "QQ==",
            done: false,
        }
        .to_line();
        assert_eq!(
            String::from_utf8(line).expect("utf-8"),
            "{\"t\":\"restore\",\"id\":3,\"data\":\"QQ==\",\"done\":false}\n"
        );
    }
}
