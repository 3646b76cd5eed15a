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
mod tests;
