//! Tests of `file`.

use std::os::unix::fs::symlink;

use super::*;

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

fn key() -> ChainKey {
    ChainKey([5; 32])
}

#[test]
fn a_new_log_is_0600_and_rotates_by_size_keeping_three() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    let mut log = AuditFile::open(&path, 1000, key()).expect("open");
    assert_eq!(mode_of(&path), 0o600);
    // Each record is 320 bytes, about 400 sealed: two fit in 1000 (with a rotation
    // line), the third starts a new file.
    let record = |i: u64| {
        let head = format!("{{\"kind\":\"call\",\"run\":\"{i:016x}\",\"pad\":\"");
        format!("{head}{}\"}}", "x".repeat(320 - head.len() - 2))
    };
    let body = |i: u64| record(i).trim_end_matches('}').to_string();
    for i in 0..9 {
        assert_eq!(record(i).len(), 320);
        log.append(record(i).as_bytes()).expect("append");
    }
    let read = |p: &Path| std::fs::read_to_string(p).expect("read");
    let at = |n: &str| PathBuf::from(format!("{}{n}", path.display()));
    // Two lines per file: PATH [8], .1 [6, 7], .2 [4, 5], .3 [2, 3]; [0, 1] dropped, and
    // the file started by the rotation that dropped them says so first.
    let current = read(&path);
    let lines: Vec<&str> = current.lines().collect();
    assert_eq!(lines.len(), 2, "{current}");
    let Record::Rotated(r) = serde_json::from_str(lines[0]).expect("a record") else {
        panic!("{current}")
    };
    assert_eq!(r.dropped_file, "audit.log.3");
    assert_eq!(r.dropped_lines, 2);
    assert_eq!(
        r.dropped_runs,
        [format!("{:016x}", 0), format!("{:016x}", 1)]
    );
    assert!(lines[1].starts_with(&body(8)), "{}", lines[1]);
    assert!(read(&at(".1")).starts_with(&body(6)));
    assert!(read(&at(".3")).starts_with(&body(2)));
    assert!(!at(".4").exists(), "only three rotated files are kept");
    for p in [path.clone(), at(".1"), at(".2"), at(".3")] {
        assert_eq!(mode_of(&p), 0o600, "{}", p.display());
    }
    // Opening again appends to the current file.
    let mut again = AuditFile::open(&path, 1 << 20, key()).expect("reopen");
    again.append(record(9).as_bytes()).expect("append");
    assert_eq!(read(&path).lines().count(), 3);
    // Rotations that drop nothing announce nothing.
    let fresh = dir.path().join("fresh.log");
    let mut log = AuditFile::open(&fresh, 1000, key()).expect("open");
    for i in 0..4 {
        log.append(record(i).as_bytes()).expect("append");
    }
    assert!(read(&fresh).starts_with(&body(2)));
}

#[test]
fn a_file_rotated_by_another_writer_is_followed_and_a_cut_line_kept_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    let mut a = AuditFile::open(&path, 1 << 20, key()).expect("open");
    a.append(b"{\"n\":1}").expect("append");
    // Moved aside (as another bridge's rotation does): the next line goes to a new file
    // at PATH, and names the moved file's last MAC.
    std::fs::rename(&path, dir.path().join("audit.log.1")).expect("rename");
    a.append(b"{\"n\":2}").expect("append");
    let old = std::fs::read_to_string(dir.path().join("audit.log.1")).expect("read");
    let new = std::fs::read_to_string(&path).expect("read");
    let last = super::super::mac::trailing(old.trim_end().as_bytes()).expect("a MAC");
    let prev = format!("\"prev\":\"{}\"", super::super::mac::hex(&last));
    assert!(new.starts_with("{\"n\":2,") && new.contains(&prev), "{new}");
    // A line cut short (no newline): ours starts on a line of its own, from zeros.
    std::fs::write(&path, "{\"n\":").expect("write");
    a.append(b"{\"n\":3}").expect("append");
    let text = std::fs::read_to_string(&path).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "{\"n\":");
    assert!(lines[1].contains(&"0".repeat(64)), "{text}");
}

#[test]
fn a_link_a_fifo_and_a_file_others_may_write_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("target");
    std::fs::write(&target, "").expect("write");
    let link = dir.path().join("link.log");
    symlink(&target, &link).expect("symlink");
    let err = AuditFile::open(&link, 4096, key())
        .err()
        .expect("link refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");

    let fifo = dir.path().join("fifo.log");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = AuditFile::open(&fifo, 4096, key())
        .err()
        .expect("fifo refused");
    assert!(matches!(err, AuditError::File { .. }), "{err}");

    let open = dir.path().join("open.log");
    std::fs::write(&open, "").expect("write");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let err = AuditFile::open(&open, 4096, key())
        .err()
        .expect("world-writable refused");
    assert!(err.to_string().contains("mode 0666"), "{err}");
    assert_eq!(mode_of(&open), 0o666, "a refused file is left as it is");

    // Readable by others only: ours, so it is closed to them.
    let readable = dir.path().join("readable.log");
    std::fs::write(&readable, "").expect("write");
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    AuditFile::open(&readable, 4096, key()).expect("tightened");
    assert_eq!(mode_of(&readable), 0o600);
}

#[test]
fn a_foreign_file_or_a_folder_others_may_write_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open_dir = dir.path().join("shared");
    std::fs::create_dir(&open_dir).expect("mkdir");
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let err = AuditFile::open(&open_dir.join("audit.log"), 4096, key())
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
    let err = AuditFile::open(&foreign, 4096, key())
        .err()
        .expect("foreign refused");
    assert!(err.to_string().contains("uid 65534"), "{err}");
}
