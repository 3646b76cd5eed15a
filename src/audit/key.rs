//! The audit chain's key: 32 random bytes as hex in `STATE/audit/chain.key`, a `0600` file in
//! a `0700` folder of the private state folder (`MCP_BRIDGE_STATE_DIR`), never in the log's
//! folder and never logged. Made by the first bridge that writes a chained line (made aside
//! and given its name only if it is free, so two bridges starting at once agree on one key);
//! read by every later one and by `audit --verify`.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::mac::{from_hex, ChainKey};
use crate::checked_dir::private_file::PrivateFile;
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};
use crate::shown::ShownPath;

/// The key's folder under the state folder.
const DIR: &str = "audit";

/// The key's file name.
const FILE: &str = "chain.key";

/// The most bytes the key file may hold (64 hex digits and a newline).
const MAX_KEY_FILE: u64 = 65;

/// Why the chain's key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The state folder (or its `audit` folder) is not safe.
    #[error("the audit chain key's folder: {0}")]
    Folder(#[from] DirError),
    /// The key file cannot be read, written, or is not private.
    #[error("the audit chain key {}: {what}: {source}", ShownPath(path))]
    Io {
        /// The key file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The key file holds something other than 64 hex digits.
    #[error(
        "the audit chain key {} is damaged (not 64 hex digits)",
        ShownPath(path)
    )]
    Damaged {
        /// The key file.
        path: PathBuf,
    },
    /// There is no key (`audit --verify` before any chained line was written).
    #[error(
        "no audit chain key at {}: no chained line was written with this state folder \
         (set MCP_BRIDGE_STATE_DIR as the bridge has it)",
        ShownPath(path)
    )]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
}

/// Where the key of `state_dir` lives.
pub fn key_path(state_dir: &Path) -> PathBuf {
    state_dir.join(DIR).join(FILE)
}

/// The key's folder (`STATE/audit`, `0700`), made when missing.
pub(super) fn folder(state_dir: &Path) -> Result<CheckedDir, KeyError> {
    Ok(CheckedDir::open(state_dir, Access::Shared, FIX_STATE)?.sub(
        DIR,
        Access::Private,
        FIX_STATE,
    )?)
}

/// The key of `state_dir`; `None` when there is none yet.
///
/// # Errors
/// [`KeyError`] when the folder or file is unsafe, unreadable or damaged.
pub fn load(state_dir: &Path) -> Result<Option<ChainKey>, KeyError> {
    let dir = folder(state_dir)?;
    read(&dir, state_dir)
}

fn read(dir: &CheckedDir, state_dir: &Path) -> Result<Option<ChainKey>, KeyError> {
    let path = key_path(state_dir);
    let file = PrivateFile::new(dir, FILE, FILE, MAX_KEY_FILE);
    let bytes = file.read().map_err(|e| {
        e.said(
            |what, source| KeyError::Io {
                path: path.clone(),
                what,
                source,
            },
            |_| KeyError::Damaged { path: path.clone() },
        )
    })?;
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    let text = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    from_hex(text)
        .map(|k| Some(ChainKey(k)))
        .ok_or(KeyError::Damaged { path })
}

/// The key of `state_dir`, made (from the OS's random source) when there is none.
///
/// # Errors
/// [`KeyError`] when the folder or file is unsafe, or the key cannot be read or made.
pub fn load_or_make(state_dir: &Path) -> Result<ChainKey, KeyError> {
    let dir = folder(state_dir)?;
    if let Some(key) = read(&dir, state_dir)? {
        return Ok(key);
    }
    let path = key_path(state_dir);
    let io = |what| {
        let path = path.clone();
        move |source| KeyError::Io { path, what, source }
    };
    let mut raw = [0u8; 32];
    crate::ids::fill_random(&mut raw);
    let mut new = dir.new_file(FILE).map_err(io("making"))?;
    let text = format!("{}\n", super::mac::hex(&raw));
    new.file()
        .write_all(text.as_bytes())
        .map_err(io("writing"))?;
    match new.commit_new(0o600) {
        Ok(()) => Ok(ChainKey(raw)),
        // Another bridge made it first: theirs is the key.
        Err(e) if e.is_taken() => read(&dir, state_dir)?.ok_or(KeyError::Missing { path }),
        Err(e) => Err(io("writing")(e.into_io())),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn made_once_private_and_read_back_the_same() {
        let tmp = tempfile::tempdir().expect("tempdir");
        assert!(load(tmp.path()).expect("no key yet").is_none());
        let made = load_or_make(tmp.path()).expect("made");
        let again = load_or_make(tmp.path()).expect("read");
        assert_eq!(made.0, again.0);
        assert_eq!(load(tmp.path()).expect("read").expect("a key").0, made.0);
        let path = key_path(tmp.path());
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().expect("folder")), 0o700);
        let other = tempfile::tempdir().expect("tempdir");
        assert_ne!(load_or_make(other.path()).expect("made").0, made.0);
        // A damaged key is an error, never silently replaced.
        std::fs::write(&path, "nothex\n").expect("write");
        assert!(matches!(
            load_or_make(tmp.path()),
            Err(KeyError::Damaged { .. })
        ));
        // A key others may read is refused.
        std::fs::write(&path, format!("{}\n", "ab".repeat(32))).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(load(tmp.path()), Err(KeyError::Io { .. })));
    }
}
