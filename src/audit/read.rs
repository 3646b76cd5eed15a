//! Reading the audit log back (`mcp-code-bridge audit`): the last N entries of the log and, when
//! it holds fewer, of its rotated files, oldest first, in bounded memory (a ring of N, lines
//! read at most [`MAX_LINE`] bytes at a time). Lines that are not audit lines are counted, not
//! fatal; a last line cut short (the bridge writing, or a crash) is noted apart.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::file::ROTATED;
use super::record::Record;
use crate::checked_dir::own_file::{self, Keep};

/// The longest line read; a longer one is skipped and counted as garbage.
pub const MAX_LINE: usize = 1 << 20;

/// What was read.
#[derive(Debug, Default)]
pub struct Tail {
    /// The entries, oldest first.
    pub entries: VecDeque<Record>,
    /// Lines that were not audit lines (or too long).
    pub garbage: u64,
    /// Whether the log's last line was cut short (no newline, not a whole entry).
    pub partial: bool,
    /// The files read, oldest first.
    pub files: Vec<PathBuf>,
}

/// One line as the reader sees it.
pub(super) enum Line<'a> {
    /// A line within [`MAX_LINE`]; `ended` when a newline closed it.
    Text { bytes: &'a [u8], ended: bool },
    /// A line longer than [`MAX_LINE`] (skipped).
    TooLong,
}

/// The file at `path`, opened without following a link or waiting on a FIFO, if it is a
/// regular file; `None` when it does not exist.
pub(super) fn open(path: &Path) -> io::Result<Option<File>> {
    match own_file::open(path, libc::O_RDONLY, Keep::AnyOwner) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.is_missing() => Ok(None),
        Err(e) => Err(e.into_io()),
    }
}

/// Calls `each` with every line of `file`, never holding more than [`MAX_LINE`] bytes.
pub(super) fn lines(file: File, mut each: impl FnMut(Line<'_>)) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            if too_long {
                each(Line::TooLong);
            } else if !line.is_empty() {
                each(Line::Text {
                    bytes: &line,
                    ended: false,
                });
            }
            return Ok(());
        }
        let (piece, ended) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        if !too_long {
            if line.len() + piece.len() > MAX_LINE {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(piece);
            }
        }
        let used = piece.len() + usize::from(ended);
        reader.consume(used);
        if ended {
            if too_long {
                each(Line::TooLong);
            } else {
                each(Line::Text {
                    bytes: &line,
                    ended: true,
                });
            }
            line.clear();
            too_long = false;
        }
    }
}

fn parse(bytes: &[u8]) -> Option<Record> {
    serde_json::from_slice(bytes).ok()
}

/// The path of the log's `n`th rotated file (`0`: the log itself).
pub fn rotated(path: &Path, n: usize) -> PathBuf {
    if n == 0 {
        return path.to_path_buf();
    }
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// How many entries `file` holds.
fn count(file: File) -> io::Result<usize> {
    let mut n = 0;
    lines(file, |line| {
        if let Line::Text { bytes, .. } = line {
            if parse(bytes).is_some() {
                n += 1;
            }
        }
    })?;
    Ok(n)
}

/// The last `last` entries of the log at `path` and, when needed, its rotated files.
///
/// # Errors
/// A file exists but cannot be read (or is not a regular file).
pub fn tail(path: &Path, last: usize) -> io::Result<Tail> {
    // Newest first: how far back `last` reaches.
    let mut chosen = Vec::new();
    let mut have = 0;
    for n in 0..=ROTATED {
        let p = rotated(path, n);
        let Some(file) = open(&p).map_err(|e| named(&p, e))? else {
            if n == 0 {
                continue;
            }
            break;
        };
        if n < ROTATED {
            have += count(file).map_err(|e| named(&p, e))?;
        }
        chosen.push(p);
        if have >= last {
            break;
        }
    }
    let mut tail = Tail::default();
    for (i, p) in chosen.iter().enumerate().rev() {
        let Some(file) = open(p).map_err(|e| named(p, e))? else {
            continue;
        };
        let newest = i == 0;
        lines(file, |line| match line {
            Line::TooLong => tail.garbage += 1,
            Line::Text { bytes, ended } => match parse(bytes) {
                Some(record) => {
                    if last == 0 {
                        return;
                    }
                    if tail.entries.len() == last {
                        tail.entries.pop_front();
                    }
                    tail.entries.push_back(record);
                }
                None if newest && !ended => tail.partial = true,
                None if bytes.iter().all(u8::is_ascii_whitespace) => {}
                None => tail.garbage += 1,
            },
        })
        .map_err(|e| named(p, e))?;
        tail.files.push(p.clone());
    }
    Ok(tail)
}

pub(super) fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", crate::shown::ShownPath(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call_line(tool: &str) -> String {
        format!(
            "{{\"kind\":\"call\",\"time\":\"t\",\"run\":\"r\",\"server\":\"s\",\"tool\":\"{tool}\",\
             \"args_sha256\":\"h\",\"duration_ms\":1.0,\"outcome\":\"ok\",\"bytes_in\":1,\
             \"bytes_out\":2,\"decision\":\"allow\"}}\n"
        )
    }

    fn tools(t: &Tail) -> Vec<String> {
        t.entries
            .iter()
            .map(|r| match r {
                Record::Call(c) => c.tool.clone(),
                Record::Run(r) => format!("run {}", r.run),
                Record::Rotated(r) => format!("rotated {}", r.dropped_file),
                Record::Net(n) => format!("net {}", n.host),
            })
            .collect()
    }

    #[test]
    fn garbage_and_a_partial_last_line_are_counted_not_fatal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let mut text = String::new();
        text.push_str(&call_line("a"));
        text.push_str("not json\n\n{\"kind\":\"other\"}\n");
        text.push_str(&"x".repeat(MAX_LINE + 10));
        text.push('\n');
        text.push_str(&call_line("b"));
        text.push_str("{\"kind\":\"call\",\"ti");
        std::fs::write(&path, text).expect("write");
        let t = tail(&path, 10).expect("tail");
        assert_eq!(tools(&t), ["a", "b"]);
        assert_eq!(t.garbage, 3, "not json, an unknown kind, a line too long");
        assert!(t.partial);
    }

    #[test]
    fn last_n_keeps_a_ring_and_reaches_into_rotated_files_only_when_needed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        std::fs::write(rotated(&path, 2), call_line("old1") + &call_line("old2")).expect("w");
        std::fs::write(rotated(&path, 1), call_line("mid")).expect("w");
        std::fs::write(&path, call_line("new1") + &call_line("new2")).expect("w");
        let t = tail(&path, 2).expect("tail");
        assert_eq!(tools(&t), ["new1", "new2"]);
        assert_eq!(t.files, std::slice::from_ref(&path));
        let t = tail(&path, 4).expect("tail");
        assert_eq!(tools(&t), ["old2", "mid", "new1", "new2"]);
        assert_eq!(t.files.len(), 3);
        let t = tail(&path, 100).expect("tail");
        assert_eq!(t.entries.len(), 5);
        // A missing log with rotated files still shows them; nothing at all is empty.
        std::fs::remove_file(&path).expect("rm");
        assert_eq!(tail(&path, 100).expect("tail").entries.len(), 3);
        let empty = tail(&dir.path().join("none.log"), 5).expect("tail");
        assert!(empty.entries.is_empty() && empty.files.is_empty());
    }
}
