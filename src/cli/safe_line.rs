//! The last guard before a terminal: a finished line (a message whose untrusted pieces went
//! through [`crate::shown`], or should have) printed with any control, bidirectional or
//! invisible character that is still in it escaped. Backslashes are left as they are, so text
//! already escaped with `Shown` is unchanged; a piece someone forgot to escape can at worst look
//! like an escape, never act as one. [`SafeStderr`] applies it to every log line, after
//! replacing the values registered in [`crate::log_secrets`].

use std::borrow::Cow;
use std::io::Write;

/// `text` with every unsafe character escaped as `\u{..}` (`\n`, `\r`, `\t` by their names).
pub fn safe_line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// [`safe_line`] for text of several lines: newlines are kept, everything else escaped.
pub fn safe_text(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// [`safe_text`] that also keeps tabs: a file's text shown as a diff (VS Code indents with tabs).
pub fn safe_diff(text: &str) -> Cow<'_, str> {
    escape_but(text, &['\n', '\t'])
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    escape_but(text, if keep_newlines { &['\n'] } else { &[] })
}

fn escape_but<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    crate::shown::escape(text, keep, false)
}

/// A `tracing_subscriber` writer to standard error that writes each event as one line, with
/// [`safe_line`] applied to everything before its final newline.
#[derive(Debug, Clone, Copy, Default)]
pub struct SafeStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for SafeStderr {
    type Writer = EventLine;

    fn make_writer(&'a self) -> Self::Writer {
        EventLine(Vec::with_capacity(256))
    }
}

/// One event's formatted bytes, written escaped to standard error when dropped.
#[derive(Debug)]
pub struct EventLine(Vec<u8>);

impl Write for EventLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl EventLine {
    /// The bytes to write: the event escaped into one line, ending in a newline.
    fn line(&self) -> String {
        let text = String::from_utf8_lossy(&self.0);
        let body = text.strip_suffix('\n').unwrap_or(&text);
        let body = crate::log_secrets::redact(body);
        let mut line = safe_line(&body).into_owned();
        line.push('\n');
        line
    }
}

impl Drop for EventLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let _ = std::io::stderr().lock().write_all(self.line().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_is_left_and_keeps_escapes_as_they_are() {
        assert_eq!(safe_line("plain \\u{202e} text"), "plain \\u{202e} text");
        assert_eq!(
            safe_line("a\u{202E}b\x1b[2K\rc"),
            "a\\u{202e}b\\u{1b}[2K\\rc"
        );
        assert_eq!(safe_text("one\ntwo\u{2028}"), "one\ntwo\\u{2028}");
        assert_eq!(safe_line("one\ntwo"), "one\\ntwo");
        assert_eq!(safe_diff("+\t\"a\u{202E}\"\n"), "+\t\"a\\u{202e}\"\n");
    }

    #[test]
    fn an_event_is_one_line() {
        let mut e = EventLine(Vec::new());
        e.write_all(b"WARN server \x1b[1Aforged\nsecond\n")
            .expect("test");
        assert_eq!(e.line(), "WARN server \\u{1b}[1Aforged\\nsecond\n");
        e.0.clear();
    }
}
