//! Sample summaries and the result table.

use std::time::Duration;

use serde_json::{json, Value};

/// Median, p95 and count of a sample.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// 50th percentile.
    pub median: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Sample size.
    pub n: usize,
}

/// Summarizes `values` (any unit).
pub fn summarize(values: &[f64]) -> Summary {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Summary {
        median: at(0.5),
        p95: at(0.95),
        n: v.len(),
    }
}

/// Durations as milliseconds.
pub fn ms(d: &[Duration]) -> Vec<f64> {
    d.iter().map(|d| d.as_secs_f64() * 1e3).collect()
}

/// One result row.
pub struct Row {
    /// What was measured.
    pub name: String,
    /// Unit of the numbers.
    pub unit: &'static str,
    /// The measurement.
    pub value: Summary,
    /// Target or comparison, free text.
    pub note: String,
}

/// The rows collected in one run.
#[derive(Default)]
pub struct Table {
    rows: Vec<Row>,
}

impl Table {
    /// Adds a sampled row.
    pub fn add(&mut self, name: &str, unit: &'static str, value: Summary, note: impl Into<String>) {
        let note = note.into();
        eprintln!(
            "  {name}: median {:.3} p95 {:.3} {unit} (n={}) {note}",
            value.median, value.p95, value.n
        );
        self.rows.push(Row {
            name: name.into(),
            unit,
            value,
            note,
        });
    }

    /// Adds a single number.
    pub fn single(&mut self, name: &str, unit: &'static str, value: f64, note: impl Into<String>) {
        let s = Summary {
            median: value,
            p95: value,
            n: 1,
        };
        self.add(name, unit, s, note);
    }

    /// Appends the rows of `other`.
    pub fn extend(&mut self, other: Table) {
        self.rows.extend(other.rows);
    }

    /// The table as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| measurement | median | p95 | unit | n | note |\n");
        out.push_str("|---|---:|---:|---|---:|---|\n");
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.name,
                fmt(r.value.median),
                fmt(r.value.p95),
                r.unit,
                r.value.n,
                r.note
            ));
        }
        out
    }

    /// The table as JSON.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({"name": r.name, "unit": r.unit, "median": r.value.median,
                       "p95": r.value.p95, "n": r.value.n, "note": r.note})
            })
            .collect();
        json!({ "rows": rows })
    }
}

/// One row of a before/after comparison: a measurement's median over the runs of each build.
pub struct Compared {
    name: String,
    unit: &'static str,
    baseline: f64,
    current: f64,
}

/// Each row's median of medians over the runs of the baseline and of the current build, in
/// the current runs' order; rows missing from either side are left out.
pub fn compare(baseline: &[Table], current: &[Table]) -> Vec<Compared> {
    let medians = |runs: &[Table], name: &str| -> Option<f64> {
        let found: Vec<f64> = runs
            .iter()
            .flat_map(|t| t.rows.iter().filter(|r| r.name == name))
            .map(|r| r.value.median)
            .collect();
        (!found.is_empty()).then(|| summarize(&found).median)
    };
    let mut out: Vec<Compared> = Vec::new();
    for r in current.iter().flat_map(|t| &t.rows) {
        if out.iter().any(|c| c.name == r.name) {
            continue;
        }
        if let (Some(b), Some(c)) = (medians(baseline, &r.name), medians(current, &r.name)) {
            out.push(Compared {
                name: r.name.clone(),
                unit: r.unit,
                baseline: b,
                current: c,
            });
        }
    }
    out
}

/// A comparison as Markdown: baseline, current, and current ÷ baseline.
pub fn compared_markdown(rows: &[Compared], runs: usize) -> String {
    let mut out = format!(
        "| measurement (median of {runs} runs each) | unit | baseline | current | current ÷ baseline |\n"
    );
    out.push_str("|---|---|---:|---:|---:|\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} |\n",
            r.name,
            r.unit,
            fmt(r.baseline),
            fmt(r.current),
            r.current / r.baseline
        ));
    }
    out
}

/// A comparison as JSON.
pub fn compared_json(rows: &[Compared]) -> Value {
    rows.iter()
        .map(|r| {
            json!({"name": r.name, "unit": r.unit, "baseline": r.baseline,
                   "current": r.current, "ratio": r.current / r.baseline})
        })
        .collect()
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
