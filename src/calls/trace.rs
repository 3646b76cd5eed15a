//! [`Trace`]: what one run's code did through the bridge, as the `run_python` result's
//! `_meta["mcp-code-bridge/trace"]` shows it: each tool call (server, tool, start offset from
//! the run's arrival, duration, bytes in and out, outcome), the run's totals, and an estimate
//! of the tokens the same work would have cost as direct tool calls (the `tools/list` of the
//! servers the run called, the arguments and the raw results) beside what the run cost (its
//! code and its output). Tokens are estimated from bytes ([`BYTES_PER_TOKEN`], calibrated
//! against a real tokenizer by the benchmark `trace`); no tokenizer ships in the binary.
//! Recorded by the dispatcher; bounded ([`MAX_TRACED`] calls kept, the rest counted).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

pub use crate::report::Tokens;

/// Calls a trace lists at most; later ones count in the totals only.
pub const MAX_TRACED: usize = 100;
/// Bytes of JSON per token, the estimate's one constant: ten real servers' `tools/list`
/// (49,720 bytes) are 11,139 o200k_base tokens, 4.46 bytes a token (benches/RESULTS.md,
/// "Issue 33: trace"; the `trace` benchmark checks the estimate of a whole run against it).
pub const BYTES_PER_TOKEN: f64 = 4.4;

/// One tool call as traced.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedCall {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// From the run's arrival to the call's start.
    pub start: Duration,
    /// How long the call took.
    pub duration: Duration,
    /// Bytes of its arguments as JSON.
    pub bytes_in: u64,
    /// Bytes of its result as JSON (0 for an error).
    pub bytes_out: u64,
    /// `ok`, or the error's kind (`tool`, `limit_exceeded`...).
    pub outcome: &'static str,
}

/// A run's traced calls and totals.
#[derive(Debug, Default)]
pub struct Trace {
    calls: Mutex<Vec<TracedCall>>,
    count: AtomicU64,
    errors: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    busy_us: AtomicU64,
}

/// What the estimate needs besides the calls: the run's own size and the servers' listings.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunSize {
    /// Bytes of the run's code.
    pub code: u64,
    /// Bytes of what the run gave back (stdout, stderr, error).
    pub output: u64,
    /// Bytes of the `tools/list` results of the servers the run called.
    pub listings: u64,
    /// From arrival to the report.
    pub elapsed: Duration,
}

impl Trace {
    /// Records `call`: kept while fewer than [`MAX_TRACED`] are, counted always.
    pub fn record(&self, call: TracedCall) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if call.outcome != "ok" {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_in.fetch_add(call.bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(call.bytes_out, Ordering::Relaxed);
        let us = u64::try_from(call.duration.as_micros()).unwrap_or(u64::MAX);
        self.busy_us.fetch_add(us, Ordering::Relaxed);
        let mut calls = self.calls.lock().expect("trace lock");
        if calls.len() < MAX_TRACED {
            calls.push(call);
        }
    }

    /// The servers called, each once, in the order first called (of the calls kept).
    pub fn servers(&self) -> Vec<String> {
        let calls = self.calls.lock().expect("trace lock");
        let mut out: Vec<String> = Vec::new();
        for c in calls.iter() {
            if !out.contains(&c.server) {
                out.push(c.server.clone());
            }
        }
        out
    }

    /// Calls made, over the whole run.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The trace as the result's `_meta` carries it.
    pub fn to_json(&self, size: RunSize) -> Value {
        let calls = self.calls.lock().expect("trace lock");
        let listed: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!({
                    "server": c.server,
                    "tool": c.tool,
                    "start_ms": ms(c.start),
                    "duration_ms": ms(c.duration),
                    "bytes_in": c.bytes_in,
                    "bytes_out": c.bytes_out,
                    "outcome": c.outcome,
                })
            })
            .collect();
        let count = self.count();
        let estimate = self.tokens(size);
        json!({
            "calls": listed,
            "calls_left_out": count.saturating_sub(listed.len() as u64),
            "totals": {
                "calls": count,
                "errors": self.errors.load(Ordering::Relaxed),
                "bytes_in": self.bytes_in.load(Ordering::Relaxed),
                "bytes_out": self.bytes_out.load(Ordering::Relaxed),
                "calls_ms": ms(Duration::from_micros(self.busy_us.load(Ordering::Relaxed))),
                "run_ms": ms(size.elapsed),
            },
            "tokens": {
                "direct_estimate": estimate.direct,
                "run_estimate": estimate.run,
                "saved_estimate": estimate.direct.saturating_sub(estimate.run),
                "bytes_per_token": BYTES_PER_TOKEN,
            },
        })
    }

    /// The token estimate: the same work as direct tool calls, and what the run cost.
    pub fn tokens(&self, size: RunSize) -> Tokens {
        let direct = size.listings
            + self.bytes_in.load(Ordering::Relaxed)
            + self.bytes_out.load(Ordering::Relaxed);
        Tokens {
            direct: tokens(direct),
            run: tokens(size.code + size.output),
        }
    }
}

fn tokens(bytes: u64) -> u64 {
    (bytes as f64 / BYTES_PER_TOKEN).ceil() as u64
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Bytes of `value` as JSON, without building the text.
pub fn json_bytes(value: &impl serde::Serialize) -> u64 {
    let mut counter = Counter(0);
    // Writing to a counter cannot fail, and a JSON value always serializes.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Counts the bytes written to it.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// When a call started and the run arrived: the offset a [`TracedCall`] shows.
pub fn offset(arrived: Instant, start: Instant) -> Duration {
    start.saturating_duration_since(arrived)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(server: &str, outcome: &'static str) -> TracedCall {
        TracedCall {
            server: server.into(),
            tool: "t".into(),
            start: Duration::from_micros(1500),
            duration: Duration::from_micros(250),
            bytes_in: 10,
            bytes_out: 90,
            outcome,
        }
    }

    #[test]
    fn calls_totals_and_the_estimate() {
        let trace = Trace::default();
        trace.record(call("a", "ok"));
        trace.record(call("b", "tool"));
        trace.record(call("a", "ok"));
        assert_eq!(trace.servers(), ["a", "b"]);
        let size = RunSize {
            code: 44,
            output: 0,
            listings: 3600,
            elapsed: Duration::from_millis(5),
        };
        let v = trace.to_json(size);
        assert_eq!(v["calls"][0]["start_ms"], 1.5);
        assert_eq!(v["calls"][1]["outcome"], "tool");
        assert_eq!(v["totals"]["calls"], 3);
        assert_eq!(v["totals"]["errors"], 1);
        assert_eq!(v["totals"]["bytes_out"], 270);
        assert_eq!(v["totals"]["calls_ms"], 0.75);
        // (3600 + 30 + 270) / 4.4 and 44 / 4.4.
        assert_eq!(v["tokens"]["direct_estimate"], 887);
        assert_eq!(v["tokens"]["run_estimate"], 10);
        assert_eq!(v["tokens"]["saved_estimate"], 877);
    }

    #[test]
    fn a_long_run_keeps_the_first_calls_and_counts_the_rest() {
        let trace = Trace::default();
        for _ in 0..MAX_TRACED + 5 {
            trace.record(call("a", "ok"));
        }
        let v = trace.to_json(RunSize::default());
        assert_eq!(v["calls"].as_array().map(Vec::len), Some(MAX_TRACED));
        assert_eq!(v["calls_left_out"], 5);
        assert_eq!(v["totals"]["calls"], (MAX_TRACED + 5) as u64);
    }

    #[test]
    fn json_bytes_counts_what_serde_writes() {
        let v = json!({"a": [1, "x"]});
        assert_eq!(
            json_bytes(&v),
            serde_json::to_string(&v).expect("json").len() as u64
        );
    }
}
