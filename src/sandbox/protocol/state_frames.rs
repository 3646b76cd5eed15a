//! The frames of a cell's progress, of the namespace snapshot and of the modules imported ahead,
//! as the entrypoint sends them
//! (ARCHITECTURE.md, "frame protocol"; `entrypoint/protocol.py` builds them). Pure serde types:
//! `inbound.rs` reads the tag and hands the line here. Every field comes from the sandbox and
//! is bounded only by the frame limit: users of these types cut what they keep.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Items of a list from the sandbox that are kept; the rest are only counted.
pub const LIST_KEPT: usize = 1000;

/// A list from the sandbox: its first [`LIST_KEPT`] items, and how many it had. A hostile list
/// of millions of short items then costs what its frame's bytes do, not many times that.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Bounded<T> {
    /// The first items.
    pub items: Vec<T>,
    /// How many items the list had.
    pub total: usize,
}

impl<T> Default for Bounded<T> {
    fn default() -> Self {
        Bounded {
            items: Vec::new(),
            total: 0,
        }
    }
}

impl<T> From<Vec<T>> for Bounded<T> {
    fn from(items: Vec<T>) -> Self {
        Bounded {
            total: items.len(),
            items,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Bounded<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<T> {
            type Value = Bounded<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bounded<T>, A::Error> {
                let mut list = Bounded::default();
                while list.items.len() < LIST_KEPT {
                    match seq.next_element()? {
                        Some(item) => list.items.push(item),
                        None => break,
                    }
                }
                list.total = list.items.len();
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    list.total += 1;
                }
                Ok(list)
            }
        }
        d.deserialize_seq(Items(PhantomData))
    }
}

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
    pub names: Bounded<String>,
    /// `[name, why]` for the names that did not.
    #[serde(default)]
    pub failed: Bounded<(String, String)>,
}

/// The entrypoint's `preloaded` frame: how the imports a `preload` frame asked for went.
#[derive(Debug, Deserialize, PartialEq, Default)]
pub struct PreloadedFrame {
    /// Modules imported.
    #[serde(default)]
    pub imported: u64,
    /// `[module, why]` for the modules that failed to import.
    #[serde(default)]
    pub failed: Bounded<(String, String)>,
    /// Milliseconds the imports took.
    #[serde(default)]
    pub ms: u64,
}

#[cfg(test)]
mod tests {
    use crate::sandbox::protocol::{parse_inbound, Inbound, Outbound};

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
                names: vec!["df".to_string()].into(),
                failed: vec![("g".to_string(), "no".to_string())].into()
            }))
        );
        assert_eq!(
            parse_inbound(
                br#"{"t":"preloaded","imported":1,"failed":[["x","ImportError: no"]],"ms":5}"#
            ),
            Ok(Inbound::Preloaded(PreloadedFrame {
                imported: 1,
                failed: vec![("x".to_string(), "ImportError: no".to_string())].into(),
                ms: 5
            }))
        );
        for bad in [
            &br#"{"t":"snapshot","id":9}"#[..],
            br#"{"t":"preloaded","failed":[["x"]]}"#,
            br#"{"t":"preloaded","ms":-1}"#,
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

    #[test]
    fn a_long_list_keeps_its_first_items_and_counts_the_rest() {
        let names: Vec<String> = (0..LIST_KEPT + 500).map(|i| format!("n{i}")).collect();
        let line = serde_json::json!({"t": "restored", "id": 1, "names": names}).to_string();
        let Ok(Inbound::Restored(frame)) = parse_inbound(line.as_bytes()) else {
            panic!("parses");
        };
        assert_eq!(frame.names.items.len(), LIST_KEPT);
        assert_eq!(frame.names.total, LIST_KEPT + 500);
        assert_eq!(
            frame.names.items[LIST_KEPT - 1],
            format!("n{}", LIST_KEPT - 1)
        );
        assert_eq!(frame.failed, Bounded::default());
    }

    /// The entrypoint reads `restore_namespace` lines without its JSON decoder when they are spelled
    /// exactly so (`keeper.restore_frame`): this is that spelling.
    #[test]
    fn restore_lines_keep_the_spelling_the_entrypoint_reads_fast() {
        let line = Outbound::RestoreNamespace {
            id: 3,
            data: "QQ==",
            done: false,
        }
        .to_line();
        assert_eq!(
            String::from_utf8(line).expect("utf-8"),
            "{\"t\":\"restore_namespace\",\"id\":3,\"data\":\"QQ==\",\"done\":false}\n"
        );
    }
}
