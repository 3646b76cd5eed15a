//! Fuzzy tool search across every configured server (strsim), tolerant of typos.
//!
//! Names and descriptions are split into lowercase word tokens (`create_issue`, `createIssue`
//! and `create-issue` all give `create`, `issue`). Each query token is matched to its most
//! similar token of a tool by Jaro-Winkler, weighted by where the token occurs (tool name over
//! server name over description); a tool's score is the mean over query tokens. Similarities
//! are computed once per distinct token, so cost grows with the vocabulary, not the tool count.

use std::collections::HashMap;

/// One searchable tool.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Server name.
    pub server: String,
    /// Tool name.
    pub tool: String,
    /// Tool description.
    pub description: String,
}

/// Weight of a match in the tool name.
const W_NAME: f64 = 1.0;
/// Weight of a match in the server name.
const W_SERVER: f64 = 0.8;
/// Weight of a match in the description.
const W_DESC: f64 = 0.7;
/// Token similarities below this count as no match.
const MIN_SIM: f64 = 0.75;

/// Splits text into lowercase word tokens (snake, kebab, camel case and punctuation).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Ranks `entries` against `query`; returns `(index, score)` best first, at most `limit`.
pub fn rank(entries: &[Entry], query: &str, limit: usize) -> Vec<(usize, f64)> {
    let q = tokens(query);
    if q.is_empty() || limit == 0 {
        return Vec::new();
    }
    // Token lists per entry, grouped by weight.
    let toks: Vec<[(Vec<String>, f64); 3]> = entries
        .iter()
        .map(|e| {
            [
                (tokens(&e.tool), W_NAME),
                (tokens(&e.server), W_SERVER),
                (tokens(&e.description), W_DESC),
            ]
        })
        .collect();
    // Similarity of each query token to each distinct vocabulary token, computed once.
    let mut sim: HashMap<&str, Vec<f64>> = HashMap::new();
    for t in toks
        .iter()
        .flat_map(|groups| groups.iter().flat_map(|(ts, _)| ts.iter()))
    {
        sim.entry(t.as_str())
            .or_insert_with(|| q.iter().map(|qt| similarity(qt, t)).collect());
    }
    let mut scored: Vec<(usize, f64)> = toks
        .iter()
        .enumerate()
        .map(|(i, groups)| {
            let mut best = vec![0.0f64; q.len()];
            for (ts, w) in groups {
                for t in ts {
                    for (b, s) in best.iter_mut().zip(&sim[t.as_str()]) {
                        let v = if *s >= MIN_SIM { s * w } else { 0.0 };
                        if v > *b {
                            *b = v;
                        }
                    }
                }
            }
            (i, best.iter().sum::<f64>() / q.len() as f64)
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(limit);
    scored
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

#[cfg(test)]
mod tests {
    use super::*;

    fn e(server: &str, tool: &str, description: &str) -> Entry {
        Entry {
            server: server.into(),
            tool: tool.into(),
            description: description.into(),
        }
    }

    #[test]
    fn tokenizes_all_cases() {
        assert_eq!(tokens("createIssue"), ["create", "issue"]);
        assert_eq!(
            tokens("list-calendar_events v2"),
            ["list", "calendar", "events", "v2"]
        );
        assert_eq!(tokens("HTTPServer"), ["httpserver"]);
    }

    #[test]
    fn typos_find_the_right_tool() {
        let entries = vec![
            e(
                "github",
                "create_issue",
                "Create a new issue in a repository",
            ),
            e(
                "gcal",
                "list_events",
                "List calendar events in a date range",
            ),
            e("weather", "forecast", "Weather forecast for a city"),
            e("gcal", "create_event", "Create a calendar event"),
        ];
        let r = rank(&entries, "calender evnts", 5);
        assert_eq!(entries[r[0].0].tool, "list_events", "{r:?}");
        let r = rank(&entries, "wether", 1);
        assert_eq!(entries[r[0].0].tool, "forecast");
        let r = rank(&entries, "isue", 1);
        assert_eq!(entries[r[0].0].tool, "create_issue");
        assert!(rank(&entries, "zzzzqqq", 5).is_empty());
        assert_eq!(rank(&entries, "create", 10).len(), 2);
    }

    #[test]
    fn thousand_tools_rank_quickly() {
        let topics = [
            "calendar events",
            "github issues",
            "weather forecast",
            "database query",
            "email inbox",
        ];
        let entries: Vec<Entry> = (0..1000)
            .map(|i| {
                e(
                    &format!("server{}", i / 20),
                    &format!("tool_{i}_{}", topics[i % 5].replace(' ', "_")),
                    &format!("Handles {} number {i}", topics[i % 5]),
                )
            })
            .collect();
        let start = std::time::Instant::now();
        let r = rank(&entries, "calender evnts", 5);
        let took = start.elapsed();
        assert_eq!(r.len(), 5);
        assert!(entries[r[0].0].tool.contains("calendar"));
        // Generous bound for debug builds on shared machines; the benchmark reports the real figure.
        assert!(took < std::time::Duration::from_millis(500), "{took:?}");
    }
}
