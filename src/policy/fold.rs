//! [`Folds`]: a run's refused calls folded into one audit line per refusal. Sandbox code can
//! make a refused call cost next to nothing, so a line per refusal would let it flood the log
//! and rotate everyone's lines away; instead the first refusal of a tool by a rule opens a
//! fold, and each repeat (same server, tool, verdict, rule and error kind) only counts in it.
//! A fold becomes one line, with its `count`, when the run ends, or when the run opens a fold
//! past [`MAX_FOLDS`] (then its oldest is written). Runs whose end is never heard of are
//! bounded too ([`MAX_RUNS`]: past it, a whole run's folds are written).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::audit::CallRecord;

/// Folds one run keeps open; past this its oldest is written.
pub const MAX_FOLDS: usize = 32;

/// Runs with open folds; past this, one run's folds are all written.
pub const MAX_RUNS: usize = 1024;

/// What makes two refusals the same.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    server: String,
    tool: String,
    decision: String,
    rule: Option<String>,
    error_kind: Option<String>,
}

impl Key {
    fn of(r: &CallRecord) -> Key {
        Key {
            server: r.server.clone(),
            tool: r.tool.clone(),
            decision: r.decision.clone(),
            rule: r.rule.clone(),
            error_kind: r.error_kind.clone(),
        }
    }
}

/// One open fold: the first refusal's line, counting the repeats.
struct Fold {
    key: Key,
    line: CallRecord,
}

/// The open folds of the runs in progress, by run id.
#[derive(Default)]
pub struct Folds {
    runs: Mutex<HashMap<String, Vec<Fold>>>,
}

impl Folds {
    /// Folds the refused call's `line` into its run's folds; returns the lines to write now
    /// (folds pushed out), none when it only counted.
    /// `ended` is the run's flag [`Folds::ended`] sets: a refusal after the end is its own
    /// line at once.
    pub fn refused(&self, line: CallRecord, ended: &AtomicBool) -> Vec<CallRecord> {
        let key = Key::of(&line);
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if ended.load(Ordering::Relaxed) {
            return vec![line];
        }
        let mut out = Vec::new();
        if runs.len() >= MAX_RUNS && !runs.contains_key(&line.run) {
            let any = runs.keys().next().cloned();
            if let Some(run) = any.and_then(|k| runs.remove(&k)) {
                out.extend(run.into_iter().map(|f| f.line));
            }
        }
        let folds = runs.entry(line.run.clone()).or_default();
        if let Some(fold) = folds.iter_mut().find(|f| f.key == key) {
            fold.line.count = fold.line.count.saturating_add(1);
            return out;
        }
        if folds.len() >= MAX_FOLDS {
            out.push(folds.remove(0).line);
        }
        folds.push(Fold { key, line });
        out
    }

    /// The run `run` ended: sets its `ended` flag and returns its folds' lines, in the order
    /// they opened.
    pub fn ended(&self, run: &str, ended: &AtomicBool) -> Vec<CallRecord> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        ended.store(true, Ordering::Relaxed);
        runs.remove(run)
            .map(|f| f.into_iter().map(|f| f.line).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(run: &str, tool: &str, rule: &str) -> CallRecord {
        CallRecord {
            time: "t".into(),
            run: run.into(),
            token: None,
            creds: None,
            server: "s".into(),
            tool: tool.into(),
            args_sha256: String::new(),
            arguments: None,
            arguments_cut: false,
            duration_ms: 0.0,
            outcome: "refused".into(),
            error_kind: Some("tool_disabled".into()),
            bytes_in: 0,
            bytes_out: 0,
            decision: "deny".into(),
            rule: Some(rule.into()),
            count: 1,
        }
    }

    #[test]
    fn repeats_of_a_refusal_are_one_line_with_a_count_written_at_the_run_end() {
        let folds = Folds::default();
        let no = AtomicBool::new(false);
        for _ in 0..1000 {
            assert!(folds
                .refused(refusal("r1", "rm", "deny rm"), &no)
                .is_empty());
            assert!(folds
                .refused(refusal("r1", "mv", "deny mv"), &no)
                .is_empty());
        }
        assert!(folds
            .refused(refusal("r2", "rm", "deny rm"), &no)
            .is_empty());
        let lines = folds.ended("r1", &AtomicBool::new(false));
        let got: Vec<(&str, u64)> = lines.iter().map(|l| (l.tool.as_str(), l.count)).collect();
        assert_eq!(got, [("rm", 1000), ("mv", 1000)]);
        assert!(
            folds.ended("r1", &AtomicBool::new(false)).is_empty(),
            "written once"
        );
        assert_eq!(folds.ended("r2", &AtomicBool::new(false)).len(), 1);
        // After the end, a refusal is its own line at once.
        let ended = AtomicBool::new(false);
        assert!(folds.ended("r3", &ended).is_empty());
        assert_eq!(
            folds.refused(refusal("r3", "rm", "deny rm"), &ended).len(),
            1
        );
    }

    #[test]
    fn past_the_most_folds_or_runs_the_oldest_is_written() {
        let folds = Folds::default();
        let no = AtomicBool::new(false);
        for i in 0..MAX_FOLDS {
            assert!(folds
                .refused(refusal("r", &format!("t{i}"), "x"), &no)
                .is_empty());
        }
        let out = folds.refused(refusal("r", "new", "x"), &no);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].tool, "t0");
        assert_eq!(folds.ended("r", &AtomicBool::new(false)).len(), MAX_FOLDS);
        for i in 0..MAX_RUNS {
            assert!(folds
                .refused(refusal(&format!("r{i}"), "t", "x"), &no)
                .is_empty());
        }
        assert_eq!(folds.refused(refusal("one-more", "t", "x"), &no).len(), 1);
        assert!(folds.runs.lock().expect("lock").len() <= MAX_RUNS);
    }
}
