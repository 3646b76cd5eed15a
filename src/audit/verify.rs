//! Checking the audit log's chain (`audit --verify`): the kept files oldest first (`PATH.3` ..
//! `PATH.1`, then `PATH`), each line's MAC against the one before it, up to the first line
//! that does not hold. Lines are read one at a time, each at most
//! [`MAX_LINE`](super::read::MAX_LINE) bytes.
//!
//! The chain may begin in two ways only: at the very first line looked at (the oldest kept
//! file's first line, which names the MAC of a line a rotation dropped), or at a line that
//! names zeros (the chain's start). Lines with no MAC before that start were written before
//! the chain existed: they are counted and reported, not verified. Any later line with no MAC,
//! a MAC that does not hold, or a `prev` that is not the MAC before it is where the chain
//! breaks. Given the marks (`head.rs`), a log in which no line carries the head (the last MAC
//! written) lost its newest lines, and one whose chain does not start at the floor (what the
//! oldest kept file follows) lost a whole file at its oldest end.

use std::path::{Path, PathBuf};

use super::file::ROTATED;
use super::head::Marks;
use super::mac::{holds, prev_of, unseal, ChainKey, Mac, GENESIS};
use super::read::{lines, named, open, rotated, Line};

/// Why a line does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Its MAC is not the one its content and the previous MAC give.
    MacMismatch,
    /// It carries no MAC, after the chain began.
    MissingMac,
    /// It names a previous MAC that is not the one before it, or the chain starts at it
    /// although lines came before.
    BrokenLink,
    /// Longer than any line the bridge writes.
    TooLong,
    /// The last line written (the head in the state folder) is not in the log: lines after
    /// this one were removed.
    Cut,
    /// The chain does not start where the last rotation left it (the floor in the state
    /// folder): a whole file was removed from the log's oldest end, or replaced.
    FileRemoved,
}

impl Reason {
    /// What the reason says, for a person.
    pub fn explain(self) -> &'static str {
        match self {
            Reason::MacMismatch => {
                "MAC mismatch: the line was changed, or a line before it was removed, added or moved"
            }
            Reason::MissingMac => {
                "missing MAC: the line was added or its MAC removed (or written by a bridge \
                 without the chain)"
            }
            Reason::BrokenLink => {
                "broken link: the line does not follow the line before it (lines removed, or a \
                 file replaced)"
            }
            Reason::TooLong => "longer than any audit line: added or changed",
            Reason::Cut => {
                "the newest lines were removed: the last line written (its MAC kept in the state \
                 folder) is not in the log"
            }
            Reason::FileRemoved => {
                "the oldest file kept does not start where the last rotation left the log (kept \
                 in the state folder): a whole file was removed, renamed or replaced"
            }
        }
    }
}

/// The first line that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// Its file.
    pub file: PathBuf,
    /// Its line number in the file, from 1.
    pub line: u64,
    /// Why.
    pub reason: Reason,
}

/// A chain that holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Held {
    /// Lines whose MAC held.
    pub lines: u64,
    /// The files read, oldest first.
    pub files: Vec<PathBuf>,
    /// Lines with no MAC before the chain began (not verified).
    pub unchained: u64,
    /// Whether the newest file's last line has no newline yet (being written): not judged.
    pub partial: bool,
}

/// The verdict on a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every chained line holds.
    Holds(Held),
    /// This line is the first that does not.
    Broken(Broken),
    /// There are lines, but none carries a MAC.
    NoChain(Held),
}

/// Where the check stands while reading.
struct Walk<'k> {
    key: &'k ChainKey,
    /// The MAC of the last line that held; `None` before the chain began.
    running: Option<Mac>,
    /// Whether any line came before.
    seen: bool,
    held: Held,
    broken: Option<(u64, Reason)>,
    /// The last MAC written, until a line carrying it is met.
    head: Option<Mac>,
    /// What the chain's first line must name, when known.
    floor: Option<Mac>,
}

impl Walk<'_> {
    /// Judges one whole line (its newline removed); `Err` when it does not hold.
    fn line(&mut self, bytes: &[u8]) -> Result<(), Reason> {
        let first = !self.seen;
        self.seen = true;
        let Some((content, claimed)) = unseal(bytes) else {
            if self.running.is_some() {
                return Err(Reason::MissingMac);
            }
            self.held.unchained += 1;
            return Ok(());
        };
        // Not a JSON object: nothing the bridge sealed.
        let named = prev_of(&content).map_err(|_| Reason::MacMismatch)?;
        let prev = match (self.running, named) {
            (Some(running), None) => running,
            (Some(running), Some(p)) if p == running => running,
            (Some(_), Some(_)) => return Err(Reason::BrokenLink),
            (None, Some(p)) => match self.floor {
                Some(floor) if p != floor => {
                    return Err(if first {
                        Reason::FileRemoved
                    } else {
                        Reason::BrokenLink
                    })
                }
                _ if first || p == GENESIS => p,
                _ => return Err(Reason::BrokenLink),
            },
            (None, None) => return Err(Reason::BrokenLink),
        };
        if !holds(self.key, &prev, &content, &claimed) {
            return Err(Reason::MacMismatch);
        }
        self.running = Some(claimed);
        if self.head == Some(claimed) {
            self.head = None;
        }
        self.held.lines += 1;
        Ok(())
    }
}

/// Checks the chain of the log at `path` (and its rotated files) under `key`; with `marks`
/// (read before the files), also that no line after the head and no file before the floor
/// was removed.
///
/// # Errors
/// No file of the log exists, or one cannot be read (or is not a regular file).
pub fn verify(path: &Path, key: &ChainKey, marks: Marks) -> std::io::Result<Verdict> {
    let mut walk = Walk {
        key,
        running: None,
        seen: false,
        held: Held::default(),
        broken: None,
        head: marks.last,
        floor: marks.floor,
    };
    let mut files = Vec::new();
    for n in (0..=ROTATED).rev() {
        let p = rotated(path, n);
        if let Some(file) = open(&p).map_err(|e| named(&p, e))? {
            files.push((p, file));
        }
    }
    if files.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: no such audit log", crate::shown::ShownPath(path)),
        ));
    }
    let count = files.len();
    let mut number = 0u64;
    for (i, (p, file)) in files.into_iter().enumerate() {
        let newest = i + 1 == count;
        number = 0;
        lines(file, |line| {
            if walk.broken.is_some() {
                return;
            }
            number += 1;
            let judged = match line {
                Line::TooLong => Err(Reason::TooLong),
                Line::Text { ended: false, .. } if newest => {
                    walk.held.partial = true;
                    Ok(())
                }
                Line::Text { ended: false, .. } => Err(Reason::MissingMac),
                Line::Text { bytes, .. } => walk.line(bytes),
            };
            if let Err(reason) = judged {
                walk.broken = Some((number, reason));
            }
        })
        .map_err(|e| named(&p, e))?;
        if let Some((line, reason)) = walk.broken {
            return Ok(Verdict::Broken(Broken {
                file: p,
                line,
                reason,
            }));
        }
        walk.held.files.push(p);
    }
    if walk.running.is_none() && walk.held.unchained > 0 {
        return Ok(Verdict::NoChain(walk.held));
    }
    if walk.head.is_some() {
        let file = walk.held.files.pop().unwrap_or_else(|| path.to_path_buf());
        return Ok(Verdict::Broken(Broken {
            file,
            line: number + 1,
            reason: Reason::Cut,
        }));
    }
    Ok(Verdict::Holds(walk.held))
}

#[cfg(test)]
mod tests {
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
        assert!(
            matches!(verify(&path, &key(), Marks::default()), Ok(Verdict::Holds(h)) if h.partial)
        );
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
}
