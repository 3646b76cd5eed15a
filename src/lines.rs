//! Lines out of byte streams: newline reassembly over chunked output ([`LineAssembler`]) and
//! the bounded tail of a stream's last lines kept for error messages ([`LineTail`]).
//!
//! Chunks from the engine are not lines (conmon cuts at 8 KiB, dockerd at 32 KiB, and small
//! lines share a chunk). [`LineAssembler`] joins them, scanning each byte once (memchr), and
//! enforces a maximum frame length: an oversized frame is reported and skipped up to its newline
//! without buffering it, so a hostile container cannot grow the bridge's memory.
//!
//! A leaf: used by the bridge (sandbox frames and stderr) and upstream (server messages and
//! stderr); knows neither.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};

/// One event out of the assembler.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameEvent {
    /// A complete line, without its `\n`.
    Line(Bytes),
    /// A line longer than the limit was dropped; `seen` bytes of it had arrived when it was cut.
    TooLong {
        /// Bytes of the line received before it was dropped.
        seen: usize,
    },
}

/// Reassembles `\n`-terminated frames from arbitrary chunks.
#[derive(Debug)]
pub struct LineAssembler {
    buf: BytesMut,
    max: usize,
    discarding: bool,
}

impl LineAssembler {
    /// An assembler accepting lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        LineAssembler {
            buf: BytesMut::new(),
            max,
            discarding: false,
        }
    }

    /// Feeds one chunk; complete frames and errors are appended to `out` in order.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<FrameEvent>) {
        while !chunk.is_empty() {
            if self.discarding {
                match memchr::memchr(b'\n', chunk) {
                    Some(i) => {
                        self.discarding = false;
                        chunk = &chunk[i + 1..];
                        continue;
                    }
                    None => return,
                }
            }
            // Only copy what can still belong to an acceptable line.
            let room = self.max + 1 - self.buf.len();
            match memchr::memchr(b'\n', chunk) {
                Some(i) if i < room => {
                    // A whole line: hand it out without scanning it again.
                    let line = if self.buf.is_empty() {
                        Bytes::copy_from_slice(&chunk[..i])
                    } else {
                        self.buf.extend_from_slice(&chunk[..i]);
                        // Taken whole: a split would leave the buffer's spare capacity here,
                        // held (with the line's allocation) by every idle stream until its next
                        // long line.
                        std::mem::take(&mut self.buf).freeze()
                    };
                    // Its buffers, freed, would stay with the allocator (`heap`).
                    crate::heap::note_large(line.len());
                    out.push(FrameEvent::Line(line));
                    chunk = &chunk[i + 1..];
                    continue;
                }
                _ => {
                    let take = chunk.len().min(room);
                    self.buf.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                }
            }
            if self.buf.len() > self.max {
                out.push(FrameEvent::TooLong {
                    seen: self.buf.len(),
                });
                self.buf.clear();
                self.discarding = true;
            }
        }
    }

    /// Bytes of an unfinished frame still buffered (a frame cut at EOF when the stream ends).
    pub fn pending(&self) -> usize {
        if self.discarding {
            0
        } else {
            self.buf.len()
        }
    }
}

/// The last lines of a stream (a process's stderr), bounded in count and in characters per
/// line, for error messages. Shared by reference: pushing and joining lock a std mutex only
/// for the copy.
#[derive(Debug)]
pub struct LineTail {
    lines: Mutex<VecDeque<String>>,
    max_lines: usize,
    max_chars: usize,
}

impl LineTail {
    /// A tail keeping the last `max_lines` lines, each cut to `max_chars` characters.
    pub fn new(max_lines: usize, max_chars: usize) -> Self {
        LineTail {
            lines: Mutex::new(VecDeque::with_capacity(max_lines)),
            max_lines,
            max_chars,
        }
    }

    /// Appends `line` (cut to the character bound), dropping the oldest line when full.
    pub fn push(&self, mut line: String) {
        if let Some((cut, _)) = line.char_indices().nth(self.max_chars) {
            line.truncate(cut);
        }
        let mut lines = self.lines.lock().expect("line tail lock: never poisoned");
        if lines.len() == self.max_lines {
            lines.pop_front();
        }
        if self.max_lines > 0 {
            lines.push_back(line);
        }
    }

    /// The kept lines, oldest first, joined with `\n`.
    pub fn joined(&self) -> String {
        let lines = self.lines.lock().expect("line tail lock: never poisoned");
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `tail` as a message section headed `<who> stderr (last lines):`, or nothing when it is blank.
pub fn stderr_section(who: &str, tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("\n{who} stderr (last lines):\n{}", tail.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(events: &[FrameEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                FrameEvent::Line(b) => String::from_utf8_lossy(b).into_owned(),
                FrameEvent::TooLong { seen } => format!("<too long {seen}>"),
            })
            .collect()
    }

    #[test]
    fn split_and_shared_chunks() {
        let mut a = LineAssembler::new(100);
        let mut out = Vec::new();
        a.push(b"{\"a\":", &mut out);
        assert!(out.is_empty());
        a.push(b"1}\n{\"b\":2}\n{\"c\"", &mut out);
        a.push(b":3}\n", &mut out);
        assert_eq!(lines(&out), ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
        assert_eq!(a.pending(), 0);
    }

    #[test]
    fn byte_at_a_time() {
        let mut a = LineAssembler::new(100);
        let mut out = Vec::new();
        for b in b"hello\nworld\n" {
            a.push(&[*b], &mut out);
        }
        assert_eq!(lines(&out), ["hello", "world"]);
    }

    #[test]
    fn oversized_frame_is_dropped_and_stream_recovers() {
        let mut a = LineAssembler::new(10);
        let mut out = Vec::new();
        a.push(b"ok\n0123456789ABCDEF", &mut out);
        a.push(&[b'x'; 10_000], &mut out);
        assert!(
            a.buf.capacity() < 1024,
            "discarded bytes must not be buffered"
        );
        a.push(b"tail\nnext\n", &mut out);
        assert_eq!(lines(&out), ["ok", "<too long 11>", "next"]);
    }

    #[test]
    fn exactly_max_is_accepted() {
        let mut a = LineAssembler::new(4);
        let mut out = Vec::new();
        a.push(b"abcd\nabcde\nz\n", &mut out);
        assert_eq!(lines(&out), ["abcd", "<too long 5>", "z"]);
    }

    #[test]
    fn partial_frame_at_eof_is_visible() {
        let mut a = LineAssembler::new(100);
        let mut out = Vec::new();
        a.push(b"{\"t\":\"res", &mut out);
        assert_eq!(a.pending(), 9);
    }

    #[test]
    fn a_large_line_is_noted_for_the_heap_trim_and_a_small_one_is_not() {
        let mut a = LineAssembler::new(1 << 20);
        let mut out = Vec::new();
        let before = crate::heap::noted();
        a.push(b"short\n", &mut out);
        let big = vec![b'x'; crate::heap::LARGE];
        a.push(&big, &mut out);
        a.push(b"\n", &mut out);
        let mut whole = big.clone();
        whole.push(b'\n');
        a.push(&whole, &mut out);
        assert_eq!(out.len(), 3);
        // Other tests may note lines of their own meanwhile: at least these two.
        assert!(crate::heap::noted() >= before + 2);
    }

    #[test]
    fn large_frame_in_small_chunks_is_linear() {
        // 8 MiB in 8 KiB chunks: rescanning from the start each time would take seconds.
        let mut a = LineAssembler::new(16 << 20);
        let mut out = Vec::new();
        let chunk = vec![b'a'; 8192];
        let start = std::time::Instant::now();
        for _ in 0..1024 {
            a.push(&chunk, &mut out);
        }
        a.push(b"\n", &mut out);
        assert_eq!(out.len(), 1);
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn tail_keeps_the_last_lines_each_cut_to_its_bound() {
        let tail = LineTail::new(3, 4);
        assert_eq!(tail.joined(), "");
        for line in ["one", "two", "three", "four", "fünfzig"] {
            tail.push(line.to_string());
        }
        assert_eq!(tail.joined(), "thre\nfour\nfünf");
    }
}
