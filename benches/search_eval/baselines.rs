//! The two simple baselines: plain BM25 over tool name + description, and the Python bridge's
//! AND-of-substrings filter.

use std::collections::HashMap;

use mcp_code_bridge::upstream::search::{tokens, Entry};

/// Plain BM25 (k1 = 1.2, b = 0.75) over one field: tool name and description, lowercase word
/// tokens, no stemming, no stop words, no fuzzy matching.
pub struct Bm25 {
    /// Per token: (entry, tf).
    postings: HashMap<String, Vec<(usize, f64)>>,
    /// Token count per entry.
    lens: Vec<f64>,
    avg: f64,
}

impl Bm25 {
    /// Indexes `entries`.
    pub fn build(entries: &[Entry]) -> Bm25 {
        let mut postings: HashMap<String, Vec<(usize, f64)>> = HashMap::new();
        let mut lens = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let toks = tokens(&format!("{} {}", e.tool, e.description));
            lens.push(toks.len() as f64);
            let mut tf: HashMap<String, f64> = HashMap::new();
            for t in toks {
                *tf.entry(t).or_default() += 1.0;
            }
            for (t, f) in tf {
                postings.entry(t).or_default().push((i, f));
            }
        }
        let avg = lens.iter().sum::<f64>() / lens.len().max(1) as f64;
        Bm25 {
            postings,
            lens,
            avg,
        }
    }

    /// Entries best first, at most `limit`.
    pub fn rank(&self, query: &str, limit: usize) -> Vec<(usize, f64)> {
        let n = self.lens.len() as f64;
        let mut score = vec![0.0f64; self.lens.len()];
        let mut q = tokens(query);
        q.sort();
        q.dedup();
        for t in q {
            let Some(p) = self.postings.get(&t) else {
                continue;
            };
            let df = p.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(i, tf) in p {
                let norm = 1.2 * (0.25 + 0.75 * self.lens[i] / self.avg);
                score[i] += idf * tf * 2.2 / (tf + norm);
            }
        }
        let mut out: Vec<(usize, f64)> = score
            .into_iter()
            .enumerate()
            .filter(|x| x.1 > 0.0)
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out.truncate(limit);
        out
    }
}

/// The Python bridge's search: every whitespace-separated lowercase query word must be a
/// substring of "server alias tool alias description" (aliases: `-` → `_`); matches in
/// catalog order.
pub fn substring(entries: &[Entry], query: &str, limit: usize) -> Vec<(usize, f64)> {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    entries
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            let hay = format!(
                "{} {} {} {} {}",
                e.server,
                e.server.replace('-', "_"),
                e.tool,
                e.tool.replace('-', "_"),
                e.description
            )
            .to_lowercase();
            words.iter().all(|w| hay.contains(w.as_str()))
        })
        .map(|(i, _)| (i, 1.0))
        .take(limit)
        .collect()
}
