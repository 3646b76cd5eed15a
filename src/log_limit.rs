//! Log lines caused by the sandbox, bounded: [`LogLimit`] lets the first [`LogLimit::PER_WINDOW`]
//! lines of a window through and counts the rest, and the next line let through says how many
//! were left out (so does [`LogLimit::flush`] when the session ends). [`clipped`] makes one
//! untrusted value fit in a log line: escaped (`crate::shown`) and cut.
//!
//! Every `warn!`/`info!`/`debug!` fed by sandbox input goes through a limiter: a sandbox that
//! sends a million stray frames then writes a few dozen lines, not a million.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::shown::escaped;

/// Characters of one untrusted value kept in a log line or a message.
pub const CLIP_CHARS: usize = 200;

/// `text` (untrusted) escaped and cut to [`CLIP_CHARS`] characters of the original, with `…`
/// and the count of characters left out.
pub fn clipped(text: &str) -> String {
    match text.char_indices().nth(CLIP_CHARS) {
        None => escaped(text).into_owned(),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!("{}… ({rest} more characters)", escaped(&text[..at]))
        }
    }
}

struct Window {
    began: Option<Instant>,
    let_through: u32,
    /// Lines left out since the last one let through.
    suppressed: u64,
}

/// A rate limiter for log lines from one untrusted source (a session, the dispatcher).
pub struct LogLimit {
    window: Mutex<Window>,
}

impl Default for LogLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl LogLimit {
    /// Lines let through per window.
    pub const PER_WINDOW: u32 = 20;
    /// The window's length.
    pub const WINDOW: Duration = Duration::from_secs(10);

    /// A limiter whose first window begins with its first line.
    pub const fn new() -> Self {
        LogLimit {
            window: Mutex::new(Window {
                began: None,
                let_through: 0,
                suppressed: 0,
            }),
        }
    }

    /// Whether to write the next line: `Some(n)` to write it, `n` lines having been left out
    /// before it (say so in the line when `n > 0`); `None` to leave it out (it is counted).
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<u64> {
        let mut w = self.window.lock().expect("log limit lock");
        let fresh = w
            .began
            .is_none_or(|began| now.saturating_duration_since(began) >= Self::WINDOW);
        if fresh {
            w.began = Some(now);
            w.let_through = 0;
        }
        if w.let_through >= Self::PER_WINDOW {
            w.suppressed = w.suppressed.saturating_add(1);
            return None;
        }
        w.let_through += 1;
        Some(std::mem::take(&mut w.suppressed))
    }

    /// Lines left out and not yet reported; the count starts again from zero.
    pub fn flush(&self) -> u64 {
        std::mem::take(&mut self.window.lock().expect("log limit lock").suppressed)
    }
}

/// Writes a log line at `level` (`tracing::Level::WARN`, ...) through `limit`, with the count
/// of lines left out before it.
#[macro_export]
#[doc(hidden)]
macro_rules! limited {
    ($limit:expr, $level:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limit.admit() {
            tracing::event!($level, suppressed_before = suppressed, $($arg)+);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_lets_its_first_lines_through_and_counts_the_rest() {
        let limit = LogLimit::new();
        let t0 = Instant::now();
        for _ in 0..LogLimit::PER_WINDOW {
            assert_eq!(limit.admit_at(t0), Some(0));
        }
        for _ in 0..1000 {
            assert_eq!(limit.admit_at(t0 + Duration::from_secs(1)), None);
        }
        // The next window's first line carries the count.
        assert_eq!(limit.admit_at(t0 + LogLimit::WINDOW), Some(1000));
        assert_eq!(limit.admit_at(t0 + LogLimit::WINDOW), Some(0));
        for _ in 0..LogLimit::PER_WINDOW {
            limit.admit_at(t0 + LogLimit::WINDOW);
        }
        assert_eq!(limit.flush(), 2);
        assert_eq!(limit.flush(), 0);
    }

    #[test]
    fn clipped_values_are_escaped_and_short() {
        assert_eq!(clipped("a\u{202E}b\x1b[2K"), "a\\u{202e}b\\u{1b}[2K");
        let long = "é".repeat(5000);
        let c = clipped(&long);
        assert!(c.starts_with(&"é".repeat(CLIP_CHARS)), "{c}");
        assert!(c.ends_with("… (4800 more characters)"), "{c}");
    }
}
