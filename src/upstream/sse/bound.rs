//! The size bound on a legacy SSE server's event stream: the bytes of one event (from one
//! blank line to the next, field names included) may not pass a limit, so a server sending an
//! endless line or a huge event costs at most that much memory before the connection ends. Pure.

use memchr::memchr2_iter;

/// An event over the limit.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("an event of the stream is larger than {limit} bytes")]
pub struct TooLarge {
    /// The limit.
    pub limit: usize,
}

/// Counts the bytes of the event being received across the chunks a stream arrives in.
#[derive(Debug)]
pub struct EventBound {
    limit: usize,
    /// Bytes of the current event so far, line ends included.
    event: usize,
    /// Bytes of the current line so far (a blank line ends the event).
    line: usize,
    /// The last chunk ended in `\r` (a following `\n` belongs to the same line end).
    after_cr: bool,
}

impl EventBound {
    /// A bound of `limit` bytes per event.
    pub fn new(limit: usize) -> Self {
        EventBound {
            limit,
            event: 0,
            line: 0,
            after_cr: false,
        }
    }

    /// Takes the next chunk of the stream.
    ///
    /// # Errors
    /// [`TooLarge`] once the current event passes the limit (without newlines too).
    pub fn observe(&mut self, chunk: &[u8]) -> Result<(), TooLarge> {
        let mut start = 0;
        for end in memchr2_iter(b'\r', b'\n', chunk) {
            let len = end - start;
            let crlf_tail = self.after_cr && len == 0 && chunk[end] == b'\n';
            self.after_cr = false;
            if !crlf_tail {
                if self.line + len == 0 {
                    self.event = 0; // a blank line: the event is complete
                } else {
                    self.event += len + 1;
                }
                self.line = 0;
                self.after_cr = chunk[end] == b'\r';
            } else {
                self.event += 1;
            }
            start = end + 1;
            self.check()?;
        }
        let rest = chunk.len() - start;
        if rest > 0 {
            self.after_cr = false;
        }
        self.line += rest;
        self.event += rest;
        self.check()
    }

    fn check(&self) -> Result<(), TooLarge> {
        if self.event > self.limit {
            return Err(TooLarge { limit: self.limit });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_under_the_limit_pass_in_any_chunking() {
        let stream = b"event: endpoint\r\ndata: /m?s=1\r\n\r\ndata: {\"a\":1}\n\n: ping\n\n";
        for size in 1..stream.len() {
            let mut b = EventBound::new(31);
            for chunk in stream.chunks(size) {
                b.observe(chunk)
                    .expect("each event is at most 31 bytes, the first exactly");
            }
        }
    }

    #[test]
    fn one_byte_less_and_the_first_event_is_refused() {
        let mut b = EventBound::new(30);
        assert!(b
            .observe(b"event: endpoint\r\ndata: /m?s=1\r\n\r\n")
            .is_err());
    }

    #[test]
    fn an_event_over_the_limit_is_refused_however_it_is_split() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        for size in [1, 7, 64, 1000] {
            let mut b = EventBound::new(50);
            let got: Result<Vec<()>, _> =
                big.as_bytes().chunks(size).map(|c| b.observe(c)).collect();
            assert_eq!(got, Err(TooLarge { limit: 50 }), "chunks of {size}");
        }
        // Many short lines of one event add up.
        let mut b = EventBound::new(50);
        let lines = "data: 0123456789\n".repeat(10);
        assert!(b.observe(lines.as_bytes()).is_err());
    }

    #[test]
    fn an_endless_line_is_refused_before_it_ends() {
        let mut b = EventBound::new(1000);
        let chunk = [b'a'; 300];
        assert!(b.observe(&chunk).is_ok());
        assert!(b.observe(&chunk).is_ok());
        assert!(b.observe(&chunk).is_ok());
        assert_eq!(b.observe(&chunk), Err(TooLarge { limit: 1000 }));
    }

    #[test]
    fn crlf_split_across_chunks_is_one_line_end() {
        // "\r" then "\n" in the next chunk must not read as a blank line (which would reset
        // the count and let an event grow past the limit in pieces).
        let mut b = EventBound::new(30);
        for _ in 0..3 {
            if b.observe(b"data: 0123456789\r").is_err() || b.observe(b"\n").is_err() {
                return;
            }
        }
        panic!("the event passed 30 bytes unnoticed");
    }
}
