//! The ranking this crate had before its BM25F ranking (src/upstream/search.rs at that time), kept
//! as a baseline, verbatim but for the tokenizer, which the crate still has: fuzzy tool search
//! (strsim), tolerant of typos.
//!
//! Names and descriptions are split into lowercase word tokens (`create_issue`, `createIssue`
//! and `create-issue` all give `create`, `issue`). Each query token is matched to its most
//! similar token of a tool by Jaro-Winkler, weighted by where the token occurs (tool name over
//! server name over description); a tool's score is the mean over query tokens. Similarities
//! are computed once per distinct token, so cost grows with the vocabulary, not the tool count;
//! the tokenized [`Index`] is built once per set of known tools and reused.

use std::collections::HashMap;

// The tokenizer is the crate's, unchanged since then.
use mcp_code_bridge::upstream::search::{tokens, Entry};

/// Weight of a match in the tool name.
const W_NAME: f64 = 1.0;
/// Weight of a match in the server name.
const W_SERVER: f64 = 0.8;
/// Weight of a match in the description.
const W_DESC: f64 = 0.7;
/// Token similarities below this count as no match.
const MIN_SIM: f64 = 0.75;

/// Entries tokenized once: a vocabulary of distinct tokens and, per entry, the token ids of its
/// tool name, server name and description. Built when the set of known tools changes and reused
/// by every search until then.
#[derive(Debug, Default)]
pub struct Index {
    vocab: Vec<String>,
    /// Per entry: token ids of (tool name, server name, description).
    entries: Vec<[Vec<u32>; 3]>,
}

/// Weights of the three token groups of an entry, in `Index::entries` order.
const WEIGHTS: [f64; 3] = [W_NAME, W_SERVER, W_DESC];

impl Index {
    /// Tokenizes `entries`.
    pub fn build(entries: &[Entry]) -> Index {
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut vocab = Vec::new();
        let mut intern = |text: &str| -> Vec<u32> {
            let mut out: Vec<u32> = tokens(text)
                .into_iter()
                .map(|t| {
                    *ids.entry(t).or_insert_with_key(|t| {
                        vocab.push(t.clone());
                        (vocab.len() - 1) as u32
                    })
                })
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        let entries = entries
            .iter()
            .map(|e| [intern(&e.tool), intern(&e.server), intern(&e.description)])
            .collect();
        Index { vocab, entries }
    }

    /// Ranks the entries against `query`; `(entry index, score)` best first, at most `limit`.
    pub fn rank(&self, query: &str, limit: usize) -> Vec<(usize, f64)> {
        let q = tokens(query);
        if q.is_empty() || limit == 0 {
            return Vec::new();
        }
        // Similarity of every vocabulary token to each query token (0 below the threshold).
        let sim: Vec<f64> = self
            .vocab
            .iter()
            .flat_map(|t| {
                q.iter().map(move |qt| {
                    let s = similarity(qt, t);
                    if s >= MIN_SIM {
                        s
                    } else {
                        0.0
                    }
                })
            })
            .collect();
        let nq = q.len();
        let mut best = vec![0.0f64; nq];
        let mut scored: Vec<(usize, f64)> = Vec::new();
        for (i, groups) in self.entries.iter().enumerate() {
            best.iter_mut().for_each(|b| *b = 0.0);
            for (ids, w) in groups.iter().zip(WEIGHTS) {
                for &id in ids {
                    let row = &sim[id as usize * nq..(id as usize + 1) * nq];
                    for (b, s) in best.iter_mut().zip(row) {
                        *b = b.max(s * w);
                    }
                }
            }
            let score = best.iter().sum::<f64>() / nq as f64;
            if score > 0.0 {
                scored.push((i, score));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        scored
    }
}

fn similarity(q: &str, t: &str) -> f64 {
    if q == t {
        return 1.0;
    }
    let jw = strsim::jaro_winkler(q, t);
    // A query token that is a prefix of a longer token ("cal" → "calendar") is a good match.
    if t.len() > q.len() && q.len() >= 3 && t.starts_with(q) {
        return jw.max(0.9);
    }
    jw
}
