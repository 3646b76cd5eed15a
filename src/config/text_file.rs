//! Reading a config file that a repository may control (`.mcp.json`, `.cursor/mcp.json`,
//! `.claude/settings.local.json`, ...) or that a client keeps: only a regular file counts, it is
//! opened without blocking (a FIFO in its place cannot stall the bridge's start) and read up to
//! [`MAX_CONFIG_BYTES`] (a link to `/dev/zero` cannot fill the bridge's memory).

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest config file read: far above any client's (Claude Code's `~/.claude.json`, which
/// keeps per-project history, is a few MiB on a busy machine).
pub const MAX_CONFIG_BYTES: u64 = 32 << 20;

/// The text of the config file at `path`.
///
/// # Errors
/// `NotFound` as the file system says; `InvalidInput` for something that is not a regular file
/// (a FIFO, a device, a folder) or is larger than [`MAX_CONFIG_BYTES`]; `InvalidData` for text
/// that is not UTF-8; any other error of opening or reading.
pub fn read_text(path: &Path) -> io::Result<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_CONFIG_BYTES) as usize);
    file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("larger than {} MiB", MAX_CONFIG_BYTES >> 20),
        ));
    }
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read() {
        let d = tempfile::tempdir().expect("test");
        let p = d.path().join(".mcp.json");
        std::fs::write(&p, "{}").expect("test");
        assert_eq!(read_text(&p).expect("read"), "{}");
        let err = read_text(&d.path().join("missing")).expect_err("missing");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_fifo_a_device_or_a_folder_is_refused_without_blocking() {
        let d = tempfile::tempdir().expect("test");
        let fifo = d.path().join(".mcp.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("test");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // A plain read would block here for ever: nobody writes to the FIFO.
        let err = read_text(&fifo).expect_err("fifo");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        let link = d.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("test");
        let err = read_text(&link).expect_err("device");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        let err = read_text(d.path()).expect_err("folder");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused() {
        let d = tempfile::tempdir().expect("test");
        let p = d.path().join("big.json");
        let f = std::fs::File::create(&p).expect("test");
        f.set_len(MAX_CONFIG_BYTES + 1).expect("sparse");
        let err = read_text(&p).expect_err("too big");
        assert!(err.to_string().contains("larger than"), "{err}");
    }
}
