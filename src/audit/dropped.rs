//! What a rotated file about to be dropped held: its lines and the ids of the runs they
//! belong to ([`summarize`]), for the [`RotatedRecord`] that announces the loss. Reads in
//! fixed chunks, keeping only the start of each line (a run id sits near it), so a file of
//! any size and lines of any length cost bounded memory.

use std::io::{self, Read};

use super::record::{RotatedRecord, MAX_DROPPED_RUNS};

/// Bytes of a line's start looked at for its run id.
const LINE_START: usize = 512;

/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;

/// What a dropped file held, as a [`RotatedRecord`] named `file`, stamped `time`.
///
/// # Errors
/// Reading failed.
pub fn summarize(mut from: impl Read, file: &str, time: String) -> io::Result<RotatedRecord> {
    let mut record = RotatedRecord {
        time,
        dropped_file: file.to_string(),
        dropped_lines: 0,
        dropped_runs: Vec::new(),
        more_runs: 0,
    };
    // Runs beyond the listed ones, told apart only from the last one met (lines of a run
    // mostly sit together), so the count is an upper bound with bounded memory.
    let mut last_unlisted: Option<String> = None;
    let mut start = Vec::with_capacity(LINE_START);
    let mut chunk = vec![0u8; CHUNK];
    let mut pending = false;
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        for &b in &chunk[..n] {
            if b == b'\n' {
                line_done(&mut record, &start, &mut last_unlisted);
                start.clear();
                pending = false;
            } else {
                pending = true;
                if start.len() < LINE_START {
                    start.push(b);
                }
            }
        }
    }
    if pending {
        line_done(&mut record, &start, &mut last_unlisted);
    }
    Ok(record)
}

fn line_done(record: &mut RotatedRecord, start: &[u8], last_unlisted: &mut Option<String>) {
    record.dropped_lines += 1;
    let Some(run) = run_id(start) else {
        return;
    };
    if record.dropped_runs.iter().any(|r| r == run) {
        return;
    }
    if record.dropped_runs.len() < MAX_DROPPED_RUNS {
        record.dropped_runs.push(run.to_string());
    } else if last_unlisted.as_deref() != Some(run) {
        record.more_runs += 1;
        *last_unlisted = Some(run.to_string());
    }
}

/// The run id of a line: the value of its first `"run":"` key (the writer puts it before any
/// argument value), when it is a plain id (hex digits, at most 64).
fn run_id(start: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"run\":\"";
    let at = start.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = &start[at..];
    let end = rest.iter().position(|b| *b == b'"')?;
    let id = std::str::from_utf8(&rest[..end]).ok()?;
    (!id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_runs_are_counted_with_the_runs_bounded() {
        let mut text = String::new();
        for i in 0..100 {
            for _ in 0..3 {
                text.push_str(&format!(
                    "{{\"kind\":\"call\",\"time\":\"t\",\"run\":\"{i:016x}\",\"arguments\":{{\"run\":\"x\"}}}}\n"
                ));
            }
        }
        text.push_str("garbage\n");
        text.push_str(&format!(
            "{{\"kind\":\"run\",\"run\":\"{}\"}}",
            "a".repeat(10_000)
        ));
        let r = summarize(text.as_bytes(), "audit.log.3", "now".into()).expect("read");
        assert_eq!(r.dropped_lines, 302);
        assert_eq!(r.dropped_runs.len(), MAX_DROPPED_RUNS);
        assert_eq!(r.dropped_runs[0], format!("{:016x}", 0));
        assert_eq!(r.more_runs, 100 - MAX_DROPPED_RUNS as u64);
        assert_eq!(r.dropped_file, "audit.log.3");
    }
}
