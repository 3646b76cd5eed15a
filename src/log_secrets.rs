//! Values that must never reach a log line even when another library logs them (rmcp logs a
//! remote server's error body, which may echo the header it was sent): a `headersHelper`'s
//! header values are registered here when they come in, and the log writer
//! ([`SafeStderr`](crate::cli::safe_line::SafeStderr)) replaces each with `[redacted]`. Bounded:
//! the newest [`MAX_SECRETS`] are kept; values under 4 bytes are not (they would blank ordinary
//! words).

use std::borrow::Cow;
use std::sync::Mutex;

/// The most values kept; the oldest go first.
pub const MAX_SECRETS: usize = 256;

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Keeps `value` out of every later log line.
pub fn register(value: &str) {
    if value.len() < 4 {
        return;
    }
    let mut all = SECRETS.lock().unwrap_or_else(|p| p.into_inner());
    if all.iter().any(|s| s == value) {
        return;
    }
    if all.len() >= MAX_SECRETS {
        all.remove(0);
    }
    all.push(value.to_string());
    // Longest first, so a value is replaced whole before a part of it.
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `line` with every registered value replaced by `[redacted]`.
pub fn redact(line: &str) -> Cow<'_, str> {
    let all = SECRETS.lock().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| line.contains(s.as_str())) {
        return Cow::Borrowed(line);
    }
    let mut out = line.to_string();
    for s in all.iter() {
        out = out.replace(s.as_str(), "[redacted]");
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_values_are_replaced_and_short_ones_ignored() {
        register("Bearer ls-token-77a1");
        register("ls-token-77a1");
        register("abc");
        assert_eq!(
            redact("body: Bearer ls-token-77a1 / ls-token-77a1 abc"),
            "body: [redacted] / [redacted] abc"
        );
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
    }
}
