//! [`AuditFile`]: the audit log on disk. Its folder is opened through `checked_dir` (this
//! user's, writable by nobody else); the file is opened relative to it with `O_APPEND |
//! O_NOFOLLOW | O_CLOEXEC` (and `O_NONBLOCK`, so a FIFO put there cannot hang the bridge),
//! created `0600`, and refused unless it is a regular file of this user that nobody else may
//! write. Each line is one `write(2)` of the whole line; when the file would grow past the
//! size limit it is rotated: `PATH.2` → `PATH.3`, `PATH.1` → `PATH.2`, `PATH` → `PATH.1` (the
//! oldest dropped), and a new `0600` file started. Nothing goes unannounced: when a rotation
//! drops `PATH.3`, the new file's first line is a `rotated` record saying how many lines and
//! which runs it held (`dropped.rs`), and the first such drop is logged as a warning.
//!
//! Lines are chained (`mac.rs`): several bridges may append to one log, so each append holds
//! an exclusive `flock` on `PATH.lock` (beside the log, never renamed), opens the current
//! file again (another bridge may have rotated it), rotates when due, reads the last line's
//! MAC from the file's last bytes only, and writes its line sealed after it. A file's first
//! line names the MAC it follows (`PATH.1`'s last, so a rotation carries the chain on); a
//! line after one with no MAC starts the chain afresh from zeros.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::checked_dir::{Access, CheckedDir};
use crate::shown::ShownPath;

use super::dropped::summarize;
use super::head::Head;
use super::mac::{seal, ChainKey, Mac, GENESIS, MAC_FIELD, PREV_FIELD};
use super::record::{Record, RotatedRecord};
use super::AuditError;

/// What to do about a refused audit log folder.
pub const FIX_AUDIT: &str =
    "set MCP_BRIDGE_AUDIT_LOG to a file in a folder that only you can write to";

/// How many rotated files are kept (`PATH.1` .. `PATH.3`).
pub const ROTATED: usize = 3;

/// The open audit log file.
pub struct AuditFile {
    dir: CheckedDir,
    name: String,
    /// The current file as last opened.
    file: File,
    /// `NAME.lock`: held while a line is appended.
    lock: File,
    key: ChainKey,
    /// The last MAC written, kept in the state folder; `None` in tests that need none.
    head: Option<Head>,
    /// Whether a log not ending in the head was warned of (once per process).
    warned_cut: bool,
    max: u64,
    /// Whether dropping a rotated file was warned of (once per process).
    warned_drop: bool,
}

impl AuditFile {
    /// Opens (or creates, `0600`) the log at `path`, rotated past `max` bytes, its lines
    /// chained under `key`.
    ///
    /// # Errors
    /// [`AuditError`] when the folder or the file is not safe, or cannot be opened.
    pub fn open(path: &Path, max: u64, key: ChainKey) -> Result<AuditFile, AuditError> {
        let (parent, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(p), Some(n)) if !p.as_os_str().is_empty() => (p, n.to_string()),
            _ => return Err(file_error(path, "not a file path (or not UTF-8)".into())),
        };
        let dir = CheckedDir::open(parent, Access::Shared, FIX_AUDIT)?;
        let file = open_in(&dir, &name)?;
        let lock_name = format!("{name}.lock");
        let lock = dir
            .open_file(&lock_name, libc::O_RDWR | libc::O_CREAT, 0o600)
            .map_err(|e| file_error(&dir.join(&lock_name), e.to_string()))?;
        Ok(AuditFile {
            dir,
            name,
            file,
            lock,
            key,
            head: None,
            warned_cut: false,
            max,
            warned_drop: false,
        })
    }

    /// This file, keeping the last MAC written in `head` and chaining to it when the log does
    /// not end in it (lines cut from its end, or added).
    pub fn with_head(mut self, head: Head) -> Self {
        self.head = Some(head);
        self
    }

    /// The log's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// Appends `record` (one JSON object, no newline) as a chained line, rotating first when
    /// it would pass the limit; under the log's lock, so appends of several bridges never fork
    /// the chain.
    ///
    /// # Errors
    /// The lock, the rotation or the write failed.
    pub fn append(&mut self, record: &[u8]) -> io::Result<()> {
        let _held = Held::take(&self.lock)?;
        // Another bridge may have rotated the file since: write to the one the name holds.
        self.file = open_in(&self.dir, &self.name).map_err(io::Error::other)?;
        let size = self.file.metadata()?.len();
        let line = (record.len() + PREV_FIELD + MAC_FIELD + 2) as u64;
        if size > 0 && size.saturating_add(line) > self.max {
            self.rotate()?;
        }
        self.chain(record)
    }

    /// Writes `record` sealed after the current file's last MAC (see the module doc).
    fn chain(&mut self, record: &[u8]) -> io::Result<()> {
        let size = self.file.metadata()?.len();
        let (mut prev, mut anchor, newline) = if size == 0 {
            (self.last_of_previous(), true, false)
        } else {
            match last_mac(&self.file, size)? {
                Tail::Mac(mac) => (mac, false, false),
                Tail::None { ended } => (GENESIS, true, !ended),
            }
        };
        if let Some(last) = self.head.as_ref().and_then(Head::read) {
            if last != prev {
                // The log does not end in the last line written: it follows that line, so the
                // gap shows as a broken link.
                self.warn_cut();
                (prev, anchor) = (last, true);
            }
        }
        if let Some(head) = &self.head {
            if prev == GENESIS && head.read().is_none() && head.floor().is_none() {
                // The first line written to this log with marks, starting the chain: it
                // begins at zeros until a rotation drops a file.
                head.set_floor(Some(GENESIS))?;
            }
        }
        let (mut line, mac) = seal(&self.key, record, &prev, anchor);
        if newline {
            // A line cut short before ours stays a line of its own (and fails the check).
            line.insert(0, b'\n');
        }
        self.file.write_all(&line)?;
        if let Some(head) = &self.head {
            head.write(&mac)?;
        }
        Ok(())
    }

    fn warn_cut(&mut self) {
        if !self.warned_cut {
            self.warned_cut = true;
            tracing::warn!(
                file = %ShownPath(&self.path()),
                "the audit log does not end in the last line written to it: lines were removed \
                 or added; the next line follows the last one written, so `audit --verify` \
                 shows the gap (warned once)"
            );
        }
    }

    /// The last MAC of `NAME.1`, which a new file follows; zeros when there is none.
    fn last_of_previous(&self) -> Mac {
        let name = format!("{}.1", self.name);
        let Ok(file) = self
            .dir
            .open_file(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
        else {
            return GENESIS;
        };
        match file.metadata().map(|m| m.len()) {
            Ok(size) if size > 0 => match last_mac(&file, size) {
                Ok(Tail::Mac(mac)) => mac,
                _ => GENESIS,
            },
            _ => GENESIS,
        }
    }

    /// Flushes the file to disk (`fsync`).
    ///
    /// # Errors
    /// As `fsync(2)`.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()?;
        // The log first, then the head: after a crash the head names a line on disk (as far
        // as the kernel's write-back order allows).
        match &self.head {
            Some(head) => head.sync(),
            None => Ok(()),
        }
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.sync_all()?;
        let dropped = self.oldest_dropped();
        for n in (1..ROTATED).rev() {
            let from = format!("{}.{n}", self.name);
            let to = format!("{}.{}", self.name, n + 1);
            match self.dir.rename_file(&from, &to) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        self.dir
            .rename_file(&self.name, &format!("{}.1", self.name))?;
        self.file = open_in(&self.dir, &self.name).map_err(io::Error::other)?;
        if let Some((record, floor)) = dropped {
            // The oldest kept file now follows the dropped one's last line.
            if let Some(head) = &self.head {
                head.set_floor(floor)?;
            }
            self.announce(record)?;
        }
        Ok(())
    }

    /// What the oldest rotated file held, when a rotation is about to drop it (none when there
    /// is no such file), with the MAC its successor follows (zeros when its last line has none;
    /// `None` when it cannot be read). A file that cannot be read is still announced, its
    /// counts unknown (0).
    fn oldest_dropped(&self) -> Option<(RotatedRecord, Option<Mac>)> {
        let oldest = format!("{}.{ROTATED}", self.name);
        let flags = libc::O_RDONLY | libc::O_NONBLOCK;
        let read = match self.dir.open_file(&oldest, flags, 0) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Ok(file) => summarize(&file, &oldest, now()).and_then(|record| {
                let size = file.metadata()?.len();
                let last = match size {
                    0 => GENESIS,
                    _ => match last_mac(&file, size)? {
                        Tail::Mac(mac) => mac,
                        Tail::None { .. } => GENESIS,
                    },
                };
                Ok((record, Some(last)))
            }),
            Err(e) => Err(e),
        };
        Some(read.unwrap_or_else(|e| {
            tracing::warn!(
                file = %ShownPath(&self.dir.join(&oldest)),
                "cannot read the oldest audit log file before rotation drops it: {e}"
            );
            let record = RotatedRecord {
                time: now(),
                dropped_file: oldest,
                dropped_lines: 0,
                dropped_runs: Vec::new(),
                more_runs: 0,
            };
            (record, None)
        }))
    }

    /// Writes `record` as the new file's first line, and warns (once per process) that lines
    /// were rotated away.
    fn announce(&mut self, record: RotatedRecord) -> io::Result<()> {
        if !self.warned_drop {
            self.warned_drop = true;
            tracing::warn!(
                file = %ShownPath(&self.path()),
                "the audit log rotated away {} ({} lines of {} runs); its new first line says so. \
                 Raise MCP_BRIDGE_AUDIT_MAX_BYTES or copy the rotated files to keep them \
                 (warned once)",
                record.dropped_file,
                record.dropped_lines,
                record.dropped_runs.len() as u64 + record.more_runs
            );
        }
        let line = serde_json::to_vec(&Record::Rotated(record)).map_err(io::Error::other)?;
        self.chain(&line)
    }
}

/// What a file's last bytes say of its last line.
enum Tail {
    /// It ends in a MAC.
    Mac(Mac),
    /// It carries none; `ended`: it ends in a newline.
    None {
        /// Whether the file ends in a newline.
        ended: bool,
    },
}

/// The MAC of the last line of `file` (`size` bytes), reading only its last bytes.
fn last_mac(file: &File, size: u64) -> io::Result<Tail> {
    let want = (MAC_FIELD + 1).min(size as usize);
    let mut buf = vec![0u8; want];
    file.read_exact_at(&mut buf, size - want as u64)?;
    let Some(line) = buf.strip_suffix(b"\n") else {
        return Ok(Tail::None { ended: false });
    };
    Ok(match super::mac::trailing(line) {
        Some(mac) => Tail::Mac(mac),
        None => Tail::None { ended: true },
    })
}

/// An exclusive `flock` on a file of the [`AuditFile`] (which outlives the guard), released
/// when dropped.
struct Held(std::os::fd::RawFd);

impl Held {
    /// Waits for the lock (another bridge holds it only while it appends one line).
    fn take(file: &File) -> io::Result<Held> {
        loop {
            // SAFETY: flock on a descriptor the AuditFile keeps open for the guard's life.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Held(file.as_raw_fd()));
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: as in `take`.
        unsafe { libc::flock(self.0, libc::LOCK_UN) };
    }
}

/// Now, RFC 3339 in UTC with milliseconds.
fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Opens `name` in `dir` for appending and checks it (see the module doc).
fn open_in(dir: &CheckedDir, name: &str) -> Result<File, AuditError> {
    let path = dir.join(name);
    // Read too: the last line's MAC is read back before each append.
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_APPEND | libc::O_NONBLOCK;
    let file = match dir.open_file(name, flags, 0o600) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(file_error(
                &path,
                "it is a symbolic link; the audit log is never written through a link".into(),
            ))
        }
        Err(e) => return Err(file_error(&path, e.to_string())),
    };
    let meta = file
        .metadata()
        .map_err(|e| file_error(&path, e.to_string()))?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        // Ours and writable by nobody else: close it to others as well.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| file_error(&path, e.to_string()))?;
        tracing::info!(file = %ShownPath(&path), "made the audit log 0600");
    }
    Ok(file)
}

fn file_error(path: &Path, cause: String) -> AuditError {
    AuditError::File {
        path: path.to_path_buf(),
        cause,
    }
}

#[cfg(test)]
mod tests;
