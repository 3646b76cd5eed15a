//! Tests of the chain check: edits, cuts, rotations, removed files and racing writers.

use super::super::file::AuditFile;
use super::super::mac::ChainKey;
use super::*;

fn key() -> ChainKey {
    ChainKey([3; 32])
}

fn record(i: u64) -> Vec<u8> {
    format!("{{\"kind\":\"call\",\"run\":\"{i:016x}\",\"tool\":\"t{i}\"}}").into_bytes()
}

fn write(path: &Path, max: u64, range: std::ops::Range<u64>) {
    let mut log = AuditFile::open(path, max, key()).expect("open");
    for i in range {
        log.append(&record(i)).expect("append");
    }
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

fn put(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").expect("write");
}

fn broken(path: &Path) -> (String, u64, Reason) {
    match verify(path, &key(), Marks::default()).expect("read") {
        Verdict::Broken(b) => (
            b.file.file_name().expect("name").to_string_lossy().into(),
            b.line,
            b.reason,
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_chain_holds_and_an_edited_deleted_or_swapped_line_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    write(&path, 1 << 20, 0..10);
    let Verdict::Holds(held) = verify(&path, &key(), Marks::default()).expect("read") else {
        panic!("does not hold")
    };
    assert_eq!((held.lines, held.files.len(), held.unchained), (10, 1, 0));
    // Another key does not hold, from the first line.
    let other = verify(&path, &ChainKey([4; 32]), Marks::default()).expect("read");
    assert!(
        matches!(other, Verdict::Broken(Broken { line: 1, .. })),
        "{other:?}"
    );
    let good = lines_of(&path);

    let mut edited = good.clone();
    edited[4] = edited[4].replace("\"t4\"", "\"t5\"");
    put(&path, &edited);
    assert_eq!(broken(&path), ("audit.log".into(), 5, Reason::MacMismatch));

    let mut deleted = good.clone();
    deleted.remove(6);
    put(&path, &deleted);
    assert_eq!(broken(&path), ("audit.log".into(), 7, Reason::MacMismatch));

    let mut swapped = good.clone();
    swapped.swap(2, 3);
    put(&path, &swapped);
    assert_eq!(broken(&path), ("audit.log".into(), 3, Reason::MacMismatch));

    let mut stripped = good.clone();
    stripped[8] = String::from_utf8(record(8)).expect("utf-8");
    put(&path, &stripped);
    assert_eq!(broken(&path), ("audit.log".into(), 9, Reason::MissingMac));

    // The head cut off: the first line left does not name what it follows.
    put(&path, &good[3..]);
    assert_eq!(broken(&path), ("audit.log".into(), 1, Reason::BrokenLink));
}

#[test]
fn rotation_carries_the_chain_into_the_next_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    // About four lines per file: rotations, and then rotated files dropped.
    write(&path, 600, 0..40);
    let Verdict::Holds(held) = verify(&path, &key(), Marks::default()).expect("read") else {
        panic!("does not hold")
    };
    assert_eq!(held.files.len(), 4, "{held:?}");
    // The new file's first line names the old file's last MAC.
    let older = lines_of(&rotated(&path, 1));
    let newer = lines_of(&path);
    let last = super::super::mac::trailing(older.last().expect("a line").as_bytes());
    let first = unseal(newer[0].as_bytes()).expect("sealed").0;
    assert_eq!(prev_of(&first).expect("json"), last);
    assert!(newer[0].contains("\"kind\":\"rotated\""), "{}", newer[0]);
    // A rotated file replaced by another's lines breaks the link at its successor.
    std::fs::copy(rotated(&path, 3), rotated(&path, 2)).expect("copy");
    assert_eq!(broken(&path), ("audit.log.2".into(), 1, Reason::BrokenLink));
}

#[test]
fn lines_from_before_the_chain_are_counted_and_the_chain_starts_after_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    let old: Vec<String> = (0..3)
        .map(|i| String::from_utf8(record(i)).expect("utf-8"))
        .collect();
    put(&path, &old);
    assert!(
        matches!(verify(&path, &key(), Marks::default()), Ok(Verdict::NoChain(h)) if h.unchained == 3)
    );
    write(&path, 1 << 20, 3..6);
    let Verdict::Holds(held) = verify(&path, &key(), Marks::default()).expect("read") else {
        panic!("does not hold")
    };
    assert_eq!((held.lines, held.unchained), (3, 3));
    // A line cut short is kept apart and fails; one being written at the end is noted.
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str("{\"kind\":\"ca");
    std::fs::write(&path, &text).expect("write");
    assert!(matches!(verify(&path, &key(), Marks::default()), Ok(Verdict::Holds(h)) if h.partial));
    write(&path, 1 << 20, 6..7);
    assert_eq!(broken(&path), ("audit.log".into(), 7, Reason::MissingMac));
    assert!(verify(&dir.path().join("none.log"), &key(), Marks::default()).is_err());
}

#[test]
fn lines_cut_from_the_newest_end_show_against_the_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, path) = (dir.path().join("state"), dir.path().join("audit.log"));
    let open = || {
        let head = super::super::head::Head::open(&state, &path).expect("head");
        AuditFile::open(&path, 1 << 20, key())
            .expect("open")
            .with_head(head)
    };
    let mut log = open();
    for i in 0..5 {
        log.append(&record(i)).expect("append");
    }
    let head = || super::super::head::load(&state, &path).expect("head");
    assert!(matches!(
        verify(&path, &key(), head()),
        Ok(Verdict::Holds(_))
    ));
    let lines = lines_of(&path);
    put(&path, &lines[..3]);
    // Without the head the chain alone cannot tell; with it, the cut is named.
    assert!(matches!(
        verify(&path, &key(), Marks::default()),
        Ok(Verdict::Holds(_))
    ));
    let cut = verify(&path, &key(), head()).expect("read");
    assert!(
        matches!(
            &cut,
            Verdict::Broken(Broken {
                line: 4,
                reason: Reason::Cut,
                ..
            })
        ),
        "{cut:?}"
    );
    // The next line follows the last one written: the gap is a broken link.
    let mut log = open();
    log.append(&record(9)).expect("append");
    assert_eq!(
        match verify(&path, &key(), head()).expect("read") {
            Verdict::Broken(b) => (b.line, b.reason),
            other => panic!("{other:?}"),
        },
        (4, Reason::BrokenLink)
    );
}

#[test]
fn a_file_removed_from_the_oldest_end_shows_against_the_floor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, path) = (dir.path().join("state"), dir.path().join("audit.log"));
    let write_marked = |range: std::ops::Range<u64>| {
        let head = super::super::head::Head::open(&state, &path).expect("head");
        let mut log = AuditFile::open(&path, 600, key())
            .expect("open")
            .with_head(head);
        for i in range {
            log.append(&record(i)).expect("append");
        }
    };
    let marks = || super::super::head::load(&state, &path).expect("marks");
    let removed = |n: usize| {
        let (held, file) = (rotated(&path, n), dir.path().join("kept"));
        std::fs::rename(&held, &file).expect("remove");
        let verdict = verify(&path, &key(), marks()).expect("read");
        // The chain alone cannot tell a removed file from a rotation; the floor can.
        assert!(matches!(
            verify(&path, &key(), Marks::default()),
            Ok(Verdict::Holds(_))
        ));
        std::fs::rename(&file, &held).expect("put back");
        verdict
    };
    // Three files and no drop yet: the chain starts at zeros.
    let mut i = 0;
    while !rotated(&path, 2).exists() {
        write_marked(i..i + 1);
        i += 1;
    }
    assert!(!rotated(&path, 3).exists());
    assert_eq!(marks().floor, Some(GENESIS));
    let gone = removed(2);
    assert!(
        matches!(&gone, Verdict::Broken(b) if b.reason == Reason::FileRemoved && b.line == 1),
        "{gone:?}"
    );
    // Files dropped by rotation: the floor moves with them, so the log still holds.
    write_marked(i..i + 30);
    let kept = verify(&path, &key(), marks()).expect("read");
    assert!(
        matches!(&kept, Verdict::Holds(h) if h.files.len() == 4),
        "{kept:?}"
    );
    assert_ne!(marks().floor, Some(GENESIS));
    let gone = removed(3);
    assert!(
        matches!(&gone, Verdict::Broken(b) if b.reason == Reason::FileRemoved
            && b.file == rotated(&path, 2) && b.line == 1),
        "{gone:?}"
    );
    // A newer file moved into the oldest's place is caught the same way.
    std::fs::copy(rotated(&path, 2), rotated(&path, 3)).expect("copy");
    let moved = verify(&path, &key(), marks()).expect("read");
    assert!(
        matches!(&moved, Verdict::Broken(b) if b.reason == Reason::FileRemoved),
        "{moved:?}"
    );
}

#[test]
fn writers_at_once_do_not_fork_the_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    let (writers, each) = (4u64, 1000u64);
    let start = std::sync::Arc::new(std::sync::Barrier::new(writers as usize));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (path, start) = (path.clone(), start.clone());
            std::thread::spawn(move || {
                let mut log = AuditFile::open(&path, 1 << 30, key()).expect("open");
                start.wait();
                for i in w * each..(w + 1) * each {
                    log.append(&record(i)).expect("append");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    let verdict = verify(&path, &key(), Marks::default()).expect("read");
    assert!(
        matches!(&verdict, Verdict::Holds(h) if h.lines == writers * each),
        "the chain forked: {verdict:?}"
    );
    // With rotations racing too.
    let small = dir.path().join("small.log");
    let threads: Vec<_> = (0..2u64)
        .map(|w| {
            let small = small.clone();
            std::thread::spawn(move || write(&small, 4096, w * 1000..w * 1000 + 300))
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    let verdict = verify(&small, &key(), Marks::default()).expect("read");
    assert!(matches!(verdict, Verdict::Holds(_)), "{verdict:?}");
}
