//! [`CellProgress`]: a running cell's `output` frames as progress reports ("12.3 s: <last
//! line>"). Only a cell whose client sent a progress token has one. The frames come from the
//! sandbox: only the last line of the stream that grew is shown, on one line, cut short.

use tokio::time::Instant;

use crate::sandbox::progress::Progress;
use crate::sandbox::protocol::OutputFrame;

/// Characters of the last output line shown in a report.
const LINE_CHARS: usize = 160;

/// Where one running cell's output is reported.
pub(super) struct CellProgress {
    sink: Progress,
    began: Instant,
    /// Characters of stdout and stderr seen so far (to tell which stream grew).
    totals: (u64, u64),
    line: String,
}

impl CellProgress {
    /// Reports to `sink`, counting time from now.
    pub(super) fn new(sink: Progress) -> Self {
        CellProgress {
            sink,
            began: Instant::now(),
            totals: (0, 0),
            line: String::new(),
        }
    }

    /// One `output` frame: reports the time so far and the newest output line.
    pub(super) fn on_output(&mut self, frame: &OutputFrame) {
        let grew = if frame.stdout_total != self.totals.0 {
            Some(&frame.stdout)
        } else if frame.stderr_total != self.totals.1 {
            Some(&frame.stderr)
        } else {
            None
        };
        self.totals = (frame.stdout_total, frame.stderr_total);
        if let Some(text) = grew.and_then(|t| last_line(t)) {
            self.line = text;
        }
        let secs = self.began.elapsed().as_secs_f64();
        self.sink.report(if self.line.is_empty() {
            format!("{secs:.1} s, no output yet")
        } else {
            format!("{secs:.1} s: {}", self.line)
        });
    }
}

/// The last non-blank line of `text` (lines end at `\n` or `\r`, as progress bars redraw),
/// without control, bidirectional or invisible characters, cut to [`LINE_CHARS`].
fn last_line(text: &str) -> Option<String> {
    // Only the end can hold the last line worth showing: a long frame is not scanned whole.
    let mut from = text.len().saturating_sub(LINE_CHARS * 16);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let line = text[from..]
        .split(['\n', '\r'])
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    let mut out: String = line
        .chars()
        .filter(|c| !crate::shown::is_unsafe(*c))
        .take(LINE_CHARS)
        .collect();
    if line
        .chars()
        .filter(|c| !crate::shown::is_unsafe(*c))
        .nth(LINE_CHARS)
        .is_some()
    {
        out.push('…');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stdout: &str, out: u64, stderr: &str, err: u64) -> OutputFrame {
        OutputFrame {
            id: 1,
            stdout: stdout.into(),
            stdout_total: out,
            stderr: stderr.into(),
            stderr_total: err,
        }
    }

    #[tokio::test]
    async fn the_newest_line_of_the_stream_that_grew_is_reported() {
        let (sink, mut rx) = Progress::channel();
        let mut p = CellProgress::new(sink);
        p.on_output(&frame("", 0, "", 0));
        assert!(rx
            .try_recv()
            .expect("report")
            .ends_with(" s, no output yet"));
        p.on_output(&frame("step 1\nstep 2\n\n", 14, "", 0));
        assert!(rx.try_recv().expect("report").ends_with(" s: step 2"));
        p.on_output(&frame("step 1\nstep 2\n\n", 14, "10%\r 20%\r", 9));
        assert!(rx.try_recv().expect("report").ends_with(" s: 20%"));
        // Nothing new: the last line shown stays.
        p.on_output(&frame("step 1\nstep 2\n\n", 14, "10%\r 20%\r", 9));
        assert!(rx.try_recv().expect("report").ends_with(" s: 20%"));
    }

    #[test]
    fn hostile_output_stays_one_short_line() {
        assert_eq!(last_line("a\x1b[31mred\x07\n"), Some("a[31mred".into()));
        assert_eq!(last_line("evil\u{202E}txt\u{200B}"), Some("eviltxt".into()));
        let long = last_line(&"x".repeat(10_000)).expect("line");
        assert_eq!(long.chars().count(), LINE_CHARS + 1);
        assert_eq!(last_line(" \n\r\n"), None);
    }
}
