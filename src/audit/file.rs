//! [`AuditFile`]: the audit log on disk. Its folder is opened through `private_dir` (this
//! user's, writable by nobody else); the file is opened relative to it with `O_APPEND |
//! O_NOFOLLOW | O_CLOEXEC` (and `O_NONBLOCK`, so a FIFO put there cannot hang the bridge),
//! created `0600`, and refused unless it is a regular file of this user that nobody else may
//! write. Each line is one `write(2)` of the whole line; when the file would grow past the
//! size limit it is rotated: `PATH.2` → `PATH.3`, `PATH.1` → `PATH.2`, `PATH` → `PATH.1` (the
//! oldest dropped), and a new `0600` file started.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::checked_dir::{Access, CheckedDir};
use crate::shown::ShownPath;

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
    file: File,
    size: u64,
    max: u64,
}

impl AuditFile {
    /// Opens (or creates, `0600`) the log at `path`, rotated past `max` bytes.
    ///
    /// # Errors
    /// [`AuditError`] when the folder or the file is not safe, or cannot be opened.
    pub fn open(path: &Path, max: u64) -> Result<AuditFile, AuditError> {
        let (parent, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(p), Some(n)) if !p.as_os_str().is_empty() => (p, n.to_string()),
            _ => return Err(file_error(path, "not a file path (or not UTF-8)".into())),
        };
        let dir = CheckedDir::open(parent, Access::Shared, FIX_AUDIT)?;
        let file = open_in(&dir, &name)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(AuditFile {
            dir,
            name,
            file,
            size,
            max,
        })
    }

    /// The log's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// Appends `line` (which ends in a newline), rotating first when it would pass the limit.
    ///
    /// # Errors
    /// The rotation or the write failed.
    pub fn append(&mut self, line: &[u8]) -> io::Result<()> {
        if self.size > 0 && self.size.saturating_add(line.len() as u64) > self.max {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    /// Flushes the file to disk (`fsync`).
    ///
    /// # Errors
    /// As `fsync(2)`.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.sync_all()?;
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
        self.size = self.file.metadata()?.len();
        Ok(())
    }
}

/// Opens `name` in `dir` for appending and checks it (see the module doc).
fn open_in(dir: &CheckedDir, name: &str) -> Result<File, AuditError> {
    let path = dir.join(name);
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_NONBLOCK;
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
    if mode & 0o022 != 0 {
        return Err(file_error(
            &path,
            format!("group or others may write to it (mode {mode:04o}); make it 0600"),
        ));
    }
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
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
    }

    #[test]
    fn a_new_log_is_0600_and_rotates_by_size_keeping_three() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let mut log = AuditFile::open(&path, 100).expect("open");
        assert_eq!(mode_of(&path), 0o600);
        // Each line is 40 bytes: two fit in 100, the third starts a new file.
        for i in 0..9u8 {
            let line = format!("{:039}\n", i);
            log.append(line.as_bytes()).expect("append");
        }
        let read = |p: &Path| std::fs::read_to_string(p).expect("read");
        let at = |n: &str| PathBuf::from(format!("{}{n}", path.display()));
        // Two lines per file: PATH [8], .1 [6, 7], .2 [4, 5], .3 [2, 3]; [0, 1] dropped.
        assert_eq!(read(&path).lines().count(), 1);
        assert!(read(&path).starts_with(&format!("{:039}", 8)));
        assert!(read(&at(".1")).starts_with(&format!("{:039}", 6)));
        assert!(read(&at(".3")).starts_with(&format!("{:039}", 2)));
        assert!(!at(".4").exists(), "only three rotated files are kept");
        for p in [path.clone(), at(".1"), at(".2"), at(".3")] {
            assert_eq!(mode_of(&p), 0o600, "{}", p.display());
        }
        // Opening again appends to the current file and knows its size.
        let mut again = AuditFile::open(&path, 100).expect("reopen");
        again
            .append(format!("{:039}\n", 9).as_bytes())
            .expect("append");
        assert_eq!(read(&path).lines().count(), 2);
    }

    #[test]
    fn a_link_a_fifo_and_a_file_others_may_write_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("target");
        std::fs::write(&target, "").expect("write");
        let link = dir.path().join("link.log");
        symlink(&target, &link).expect("symlink");
        let err = AuditFile::open(&link, 4096).err().expect("link refused");
        assert!(err.to_string().contains("symbolic link"), "{err}");

        let fifo = dir.path().join("fifo.log");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = AuditFile::open(&fifo, 4096).err().expect("fifo refused");
        assert!(matches!(err, AuditError::File { .. }), "{err}");

        let open = dir.path().join("open.log");
        std::fs::write(&open, "").expect("write");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let err = AuditFile::open(&open, 4096)
            .err()
            .expect("world-writable refused");
        assert!(err.to_string().contains("mode 0666"), "{err}");
        assert_eq!(mode_of(&open), 0o666, "a refused file is left as it is");

        // Readable by others only: ours, so it is closed to them.
        let readable = dir.path().join("readable.log");
        std::fs::write(&readable, "").expect("write");
        std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        AuditFile::open(&readable, 4096).expect("tightened");
        assert_eq!(mode_of(&readable), 0o600);
    }

    #[test]
    fn a_foreign_file_or_a_folder_others_may_write_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let open_dir = dir.path().join("shared");
        std::fs::create_dir(&open_dir).expect("mkdir");
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = AuditFile::open(&open_dir.join("audit.log"), 4096)
            .err()
            .expect("open folder refused");
        assert!(matches!(err, AuditError::Folder(_)), "{err}");
        assert!(err.to_string().contains("MCP_BRIDGE_AUDIT_LOG"), "{err}");

        if crate::checked_dir::euid() != 0 {
            eprintln!("skipped the foreign-owner case: chown needs root (CI runs as root)");
            return;
        }
        let foreign = dir.path().join("foreign.log");
        std::fs::write(&foreign, "").expect("write");
        std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).expect("chown");
        let err = AuditFile::open(&foreign, 4096)
            .err()
            .expect("foreign refused");
        assert!(err.to_string().contains("uid 65534"), "{err}");
    }
}
