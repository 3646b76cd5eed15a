//! The record of `setup --import-servers --move`: per client file, the entries taken out (name,
//! position, text as written), the file's whole text just before they were taken out with the
//! SHA-256 of the text written (so that an undo of an untouched file restores it byte for byte),
//! and the copy made in `~/MCPs` with its SHA-256. Kept in the state folder as
//! `setup/moved.json` (a private folder, the file 0600: entries hold secrets), written only once
//! a move is applied, read by `setup --undo`. Bounded: a larger, damaged or foreign file is an
//! error and nothing is changed.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::checked_dir::own_file::{self, Keep};
use crate::checked_dir::private_file::parse_json;
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};
use crate::config::Client;

/// The folder in the state folder.
const DIR: &str = "setup";
/// The record's file name.
const FILE: &str = "moved.json";
/// What the record says it is.
const FORMAT: &str = "mcp-code-bridge setup --move record";
/// The record's version.
const VERSION: u32 = 1;
/// The largest record read (a client file's whole text is kept only when it fits).
pub const MAX_FILE: u64 = 16 << 20;
/// The largest client file text kept whole for a byte-exact undo.
pub const MAX_KEPT_TEXT: usize = 4 << 20;
/// The most client files and entries a record holds.
const MAX_ITEMS: usize = 1000;

/// An entry taken out of a client file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The server's name.
    pub name: String,
    /// The server table it was in (`mcpServers`, `servers`).
    pub key: String,
    /// Its position in the server table.
    pub index: usize,
    /// Its value as written in the client file.
    pub text: String,
}

/// The copy made in the user's folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Copy {
    /// The file.
    pub path: PathBuf,
    /// The SHA-256 (hex) of the text written.
    pub sha256: String,
}

/// What was moved out of one client file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileMove {
    /// The client's id (`claude-code`, `cursor`, ...).
    pub client: String,
    /// The client file.
    pub path: PathBuf,
    /// The entries taken out, in file order.
    pub entries: Vec<Entry>,
    /// The file's text just before they were taken out (`None` when too large to keep).
    pub before: Option<String>,
    /// The SHA-256 (hex) of the text written by the move.
    pub after_sha256: String,
    /// The copy in the user's folder (`None` when it could not be written).
    pub copy: Option<Copy>,
}

impl FileMove {
    /// The client, when the id is one `setup` knows.
    pub fn client(&self) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.id() == self.client)
    }
}

/// The whole record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    format: String,
    version: u32,
    /// The client files with entries moved, oldest move first.
    pub files: Vec<FileMove>,
}

/// Why the record cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The state folder or the record's folder is refused.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// Reading or writing failed.
    #[error("{path}: cannot {what}: {source}")]
    Io {
        /// The record's path, as shown.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a record this version wrote.
    #[error("{path}: not a record of `setup --move` ({why}); nothing was changed (move it away to start afresh)")]
    Damaged {
        /// The record's path, as shown.
        path: String,
        /// What is wrong (never the file's text: it holds secrets).
        why: String,
    },
    /// The record would hold more than it may.
    #[error("{path}: the record would hold more than {MAX_ITEMS} files or entries, or {MAX_FILE} bytes; run `setup --undo` first")]
    Full {
        /// The record's path, as shown.
        path: String,
    },
}

/// The hex SHA-256 of `text`.
pub fn sha256(text: &[u8]) -> String {
    Sha256::digest(text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The record of one state folder.
#[derive(Debug, Clone)]
pub struct RecordFile {
    state_dir: PathBuf,
}

impl RecordFile {
    /// The record under `state_dir` (nothing is read or made yet).
    pub fn new(state_dir: &Path) -> Self {
        RecordFile {
            state_dir: state_dir.to_path_buf(),
        }
    }

    /// The record's path.
    pub fn path(&self) -> PathBuf {
        self.state_dir.join(DIR).join(FILE)
    }

    fn shown(&self) -> String {
        crate::shown::ShownPath(&self.path()).to_string()
    }

    fn dir(&self) -> Result<CheckedDir, DirError> {
        CheckedDir::open(&self.state_dir, Access::Shared, FIX_STATE)?.sub(
            DIR,
            Access::Private,
            FIX_STATE,
        )
    }

    /// The record; an empty one when there is none.
    ///
    /// # Errors
    /// The folder or file is refused, too large, damaged or foreign.
    pub fn read(&self) -> Result<Record, RecordError> {
        if !self.path().exists() {
            return Ok(Record::default());
        }
        let dir = self.dir()?;
        let io = |what| {
            move |source| RecordError::Io {
                path: self.shown(),
                what,
                source,
            }
        };
        let mut file = match dir.open_file(FILE, libc::O_RDONLY | libc::O_CLOEXEC, 0) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
            Err(e) => return Err(io("open it")(e)),
        };
        own_file::check(file.as_fd(), Keep::Private).map_err(|e| io("check it")(e.into_io()))?;
        let mut bytes = Vec::new();
        (&mut file)
            .take(MAX_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(io("read it"))?;
        let damaged = |why: String| RecordError::Damaged {
            path: self.shown(),
            why,
        };
        if bytes.len() as u64 > MAX_FILE {
            return Err(damaged(format!("larger than {MAX_FILE} bytes")));
        }
        let record: Record = parse_json(&bytes).map_err(damaged)?;
        record.check().map_err(damaged)?;
        Ok(record)
    }

    /// Writes `record` (removes the file when it holds nothing).
    ///
    /// # Errors
    /// The folder is refused, or the file cannot be written.
    pub fn write(&self, record: &Record) -> Result<(), RecordError> {
        let io = |what| {
            move |source| RecordError::Io {
                path: self.shown(),
                what,
                source,
            }
        };
        let dir = self.dir()?;
        if record.files.is_empty() {
            return match dir.remove_file(FILE) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("remove it")(e)),
                _ => Ok(()),
            };
        }
        if record.items() > MAX_ITEMS {
            return Err(RecordError::Full { path: self.shown() });
        }
        let mut stamped = record.clone();
        stamped.format = FORMAT.into();
        stamped.version = VERSION;
        let mut text = serde_json::to_vec_pretty(&stamped).expect("a record serializes");
        // Too large to read back: the oldest whole texts go first (their undo is then entry by
        // entry), then the record is full.
        for at in 0..stamped.files.len() {
            if text.len() as u64 <= MAX_FILE {
                break;
            }
            stamped.files[at].before = None;
            text = serde_json::to_vec_pretty(&stamped).expect("a record serializes");
        }
        if text.len() as u64 > MAX_FILE {
            return Err(RecordError::Full { path: self.shown() });
        }
        let mut new = dir.new_file(FILE).map_err(io("create it"))?;
        new.file().write_all(&text).map_err(io("write it"))?;
        new.commit(0o600).map_err(|e| io("write it")(e.into_io()))
    }
}

impl Record {
    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn items(&self) -> usize {
        self.files.len() + self.files.iter().map(|f| f.entries.len()).sum::<usize>()
    }

    /// Checks what a record of this version must hold.
    fn check(&self) -> Result<(), String> {
        if self.format != FORMAT || self.version != VERSION {
            return Err("unknown format or version".into());
        }
        if self.items() > MAX_ITEMS {
            return Err(format!("more than {MAX_ITEMS} files or entries"));
        }
        for f in &self.files {
            if f.client().is_none() {
                return Err("an unknown client".into());
            }
            if !f.path.is_absolute() || f.copy.as_ref().is_some_and(|c| !c.path.is_absolute()) {
                return Err("a path that is not absolute".into());
            }
            if f.entries
                .iter()
                .any(|e| !matches!(e.key.as_str(), "mcpServers" | "servers"))
            {
                return Err("an unknown server table".into());
            }
            let hex = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
            if !hex(&f.after_sha256) || f.copy.as_ref().is_some_and(|c| !hex(&c.sha256)) {
                return Err("a digest that is not SHA-256".into());
            }
            if f.entries.is_empty() {
                return Err("a file with no entries".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn one() -> FileMove {
        FileMove {
            client: "cursor".into(),
            path: "/h/.cursor/mcp.json".into(),
            entries: vec![Entry {
                name: "a".into(),
                key: "mcpServers".into(),
                index: 0,
                text: "{\"command\": \"x\"}".into(),
            }],
            before: Some("{}".into()),
            after_sha256: sha256(b"{}"),
            copy: Some(Copy {
                path: "/h/MCPs/from-cursor.json".into(),
                sha256: sha256(b"c"),
            }),
        }
    }

    #[test]
    fn the_record_is_private_and_a_damaged_or_foreign_one_is_refused() {
        let state = tempfile::tempdir().expect("tempdir");
        let file = RecordFile::new(state.path());
        assert!(file.read().expect("none yet").is_empty());
        let record = Record {
            files: vec![one()],
            ..Record::default()
        };
        file.write(&record).expect("written");
        let mode = std::fs::metadata(file.path()).expect("meta").permissions();
        assert_eq!(mode.mode() & 0o777, 0o600);
        assert_eq!(file.read().expect("read").files, record.files);

        for (text, why) in [
            (
                "{\"format\": \"x\", \"version\": 1, \"files\": []}",
                "unknown format",
            ),
            ("{\"files\": [", "line 1"),
            ("[1, 2]", "line 1"),
        ] {
            std::fs::write(file.path(), text).expect("damage");
            let err = file.read().expect_err("refused").to_string();
            assert!(
                err.contains(why) && err.contains("nothing was changed"),
                "{err}"
            );
        }
        let mut bad = Record {
            files: vec![one()],
            format: FORMAT.into(),
            version: VERSION,
        };
        bad.files[0].path = "relative.json".into();
        std::fs::write(file.path(), serde_json::to_vec(&bad).expect("json")).expect("write");
        assert!(matches!(file.read(), Err(RecordError::Damaged { .. })));
        std::fs::write(file.path(), vec![b' '; MAX_FILE as usize + 1]).expect("write");
        assert!(file
            .read()
            .expect_err("too big")
            .to_string()
            .contains("larger"));

        file.write(&Record::default()).expect("emptied");
        assert!(!file.path().exists());
    }
}
