//! [`ReadChunk`]: the buffer a server's pipe is read into, sized by what the pipe carries.
//!
//! Every configured server has two pipes read all the time (stdout, stderr), so a fixed
//! buffer sized for large results (64 KiB) costs that much per server whether or not it ever
//! sends more than a short reply: 4 MiB with 50 servers, most of the bridge's heap. A
//! `ReadChunk` starts small and doubles, up to its ceiling, whenever a read fills it, so a
//! server that sends a large result soon reads it in large pieces; once reads are small again
//! (the result is over) it goes back to its first size, so a server keeps a page or so between
//! large results.

/// A read buffer that starts at `min` bytes, doubles up to `max` after each full read, and
/// goes back to `min` after a read of a quarter of it or less.
#[derive(Debug)]
pub struct ReadChunk {
    buf: Vec<u8>,
    min: usize,
    max: usize,
    /// What the last read asks of the next one.
    next: Next,
}

/// The size of the next read's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Same,
    Grow,
    Shrink,
}

impl ReadChunk {
    /// A buffer of `min` bytes that may grow to `max`.
    pub fn new(min: usize, max: usize) -> Self {
        let max = max.max(1);
        let min = min.clamp(1, max);
        ReadChunk {
            buf: vec![0; min],
            min,
            max,
            next: Next::Same,
        }
    }

    /// The space to read into: grown first when the previous read filled it, back to its
    /// first size when the previous read was small.
    pub fn space(&mut self) -> &mut [u8] {
        match self.next {
            Next::Grow if self.buf.len() < self.max => {
                let len = (self.buf.len() * 2).min(self.max);
                self.buf.resize(len, 0);
            }
            Next::Shrink if self.buf.len() > self.min => {
                self.buf.truncate(self.min);
                self.buf.shrink_to_fit();
            }
            _ => {}
        }
        self.next = Next::Same;
        &mut self.buf
    }

    /// The `n` bytes the last read put in [`ReadChunk::space`].
    pub fn filled(&mut self, n: usize) -> &[u8] {
        self.next = if n == self.buf.len() {
            Next::Grow
        } else if n <= self.buf.len() / 4 {
            Next::Shrink
        } else {
            Next::Same
        };
        &self.buf[..n]
    }

    /// The buffer's size now.
    #[cfg(test)]
    fn size(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_after_full_reads_up_to_its_ceiling_and_shrinks_after_small_ones() {
        let mut c = ReadChunk::new(4, 16);
        assert_eq!(c.space().len(), 4);
        assert_eq!(c.filled(3), [0, 0, 0]);
        assert_eq!(c.space().len(), 4, "a partial read does not grow it");
        c.space()[..4].copy_from_slice(b"abcd");
        assert_eq!(c.filled(4), b"abcd");
        assert_eq!(c.space().len(), 8);
        c.filled(8);
        assert_eq!(c.space().len(), 16);
        c.filled(16);
        assert_eq!(c.space().len(), 16, "never past the ceiling");
        c.filled(5);
        assert_eq!(
            c.space().len(),
            16,
            "a read of more than a quarter keeps the size"
        );
        c.filled(4);
        assert_eq!(c.space().len(), 4, "a small read: back to the first size");
        assert_eq!(c.size(), 4);
        c.filled(1);
        assert_eq!(c.space().len(), 4, "never below the first size");
    }

    #[test]
    fn a_ceiling_below_the_start_wins() {
        assert_eq!(ReadChunk::new(64, 8).size(), 8);
        assert_eq!(ReadChunk::new(0, 0).size(), 1);
    }
}
