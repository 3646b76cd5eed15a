//! Tool search across every configured server: BM25F over tool name, server name and
//! description, with English stemming, a table of related words and a fuzzy fallback for typos.
//!
//! Each tool is a document of three fields. A query word scores a tool by BM25F: its weighted
//! frequency in the fields (tool name ≫ server name > description), each field's length
//! normalized so a long description does not win by having every word somewhere, saturated,
//! and times the word's rarity (IDF). Words are stemmed ("issues" = "issue"). A query word
//! also stands for related words at a lower weight (`synonyms.rs`: "open" → create, "folder"
//! → directory), and a word that is in no tool at all is matched to the most similar words
//! that are (Jaro-Winkler, or a prefix: "isue" → issue, "cal" → calendar). A tool's score is
//! the sum over query words of the best of each word's alternatives, plus a quarter of the
//! others.
//!
//! The [`Index`] holds, per written word, the tools containing it with their precomputed score, so a
//! query costs a few posting lists plus one pass over the vocabulary for unknown words.

mod synonyms;
mod text;

use std::collections::HashMap;

pub use text::tokens;
use text::{is_stop_word, stem};

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

/// Field weights, in `[tool name, server name, description]` order.
const FIELD_WEIGHT: [f64; 3] = [5.0, 1.5, 1.0];
/// BM25 length normalization per field (0 = none, 1 = full).
const FIELD_B: [f64; 3] = [0.3, 0.3, 0.75];
/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// Similarity a vocabulary word needs to stand in for an unknown query word.
const FUZZY_MIN: f64 = 0.86;
/// Vocabulary words an unknown query word may stand for at most.
const FUZZY_MAX: usize = 4;
/// Weight of a fuzzy match relative to an exact one, times the similarity to this power (a
/// typo's likeness to each candidate decides between them: "evnts" is "events", not "event").
const FUZZY_WEIGHT: f64 = 0.9;
/// See [`FUZZY_WEIGHT`].
const FUZZY_POWER: i32 = 4;
/// Share of a query word's other matches added to its best one: a tool matching a word and
/// its related words too ("time": time, current, timezone) is the likelier meaning.
const EXTRA_MATCHES: f64 = 0.25;

/// Ranks `entries` against `query`; returns `(index, score)` best first, at most `limit`.
pub fn rank(entries: &[Entry], query: &str, limit: usize) -> Vec<(usize, f64)> {
    Index::build(entries).rank(query, limit)
}

/// Entries indexed once: per written word, the entries containing it and its BM25F score in
/// each. Built when the set of known tools changes and reused by every search until then.
///
/// Postings are per written word so that a typo is scored by its likeness to each form
/// ("evnts" is nearer "events" than "event"); rarity (IDF) is per stem, so "issue" and
/// "issues" count as one word.
#[derive(Debug, Default)]
pub struct Index {
    /// Stem → the ids of its written forms.
    stems: HashMap<String, Vec<u32>>,
    /// Written words (lowercase), by id.
    words: Vec<String>,
    /// Per word id: (entry, score of the word in that entry), entries ascending.
    postings: Vec<Vec<(u32, f32)>>,
    /// Number of entries.
    len: usize,
}

impl Index {
    /// Tokenizes, stems and scores `entries`.
    pub fn build(entries: &[Entry]) -> Index {
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut words: Vec<String> = Vec::new();
        // Per entry, per field: word ids with repeats (term frequency).
        let mut docs: Vec<[Vec<u32>; 3]> = Vec::with_capacity(entries.len());
        for e in entries {
            let mut field = |text: &str| -> Vec<u32> {
                tokens(text)
                    .into_iter()
                    .filter(|t| !is_stop_word(t))
                    .map(|t| {
                        *ids.entry(t).or_insert_with_key(|t| {
                            words.push(t.clone());
                            (words.len() - 1) as u32
                        })
                    })
                    .collect()
            };
            docs.push([field(&e.tool), field(&e.server), field(&e.description)]);
        }
        // Stem number of every word, and the written forms of every stem.
        let mut stem_no: HashMap<String, usize> = HashMap::new();
        let mut stems: HashMap<String, Vec<u32>> = HashMap::new();
        let mut stem_of = Vec::with_capacity(words.len());
        for (id, w) in words.iter().enumerate() {
            let s = stem(w);
            let next = stem_no.len();
            stem_of.push(*stem_no.entry(s.clone()).or_insert(next));
            stems.entry(s).or_default().push(id as u32);
        }
        let n = docs.len().max(1) as f64;
        let mut avg = [0.0f64; 3];
        for d in &docs {
            for (a, f) in avg.iter_mut().zip(d) {
                *a += f.len() as f64 / n;
            }
        }
        // Weighted, length-normalized, saturated frequency per (word, entry); entries per stem.
        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); words.len()];
        let mut df = vec![0u32; stem_no.len()];
        let mut tf: HashMap<u32, f64> = HashMap::new();
        let mut seen: Vec<usize> = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            tf.clear();
            for (f, ids) in d.iter().enumerate() {
                let norm = 1.0 - FIELD_B[f] + FIELD_B[f] * ids.len() as f64 / avg[f].max(1.0);
                for &id in ids {
                    *tf.entry(id).or_default() += FIELD_WEIGHT[f] / norm;
                }
            }
            seen.clear();
            for (&id, &t) in &tf {
                postings[id as usize].push((i as u32, (t / (K1 + t)) as f32));
                seen.push(stem_of[id as usize]);
            }
            seen.sort_unstable();
            seen.dedup();
            for &s in &seen {
                df[s] += 1;
            }
        }
        for (id, p) in postings.iter_mut().enumerate() {
            let df = f64::from(df[stem_of[id]]);
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (_, s) in p.iter_mut() {
                *s = (f64::from(*s) * idf) as f32;
            }
            p.sort_unstable_by_key(|x| x.0);
        }
        Index {
            stems,
            words,
            postings,
            len: entries.len(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is nothing to search.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ranks the entries against `query`; `(entry index, score)` best first, at most `limit`.
    /// Scores are comparable within one query only.
    pub fn rank(&self, query: &str, limit: usize) -> Vec<(usize, f64)> {
        let all = tokens(query);
        let mut q: Vec<&String> = all.iter().filter(|t| !is_stop_word(t)).collect();
        if q.is_empty() {
            q = all.iter().collect();
        }
        q.sort_unstable();
        q.dedup();
        if q.is_empty() || limit == 0 || self.len == 0 {
            return Vec::new();
        }
        let mut total = vec![0.0f64; self.len];
        let mut best = vec![0.0f64; self.len];
        let mut sum = vec![0.0f64; self.len];
        for word in q {
            best.iter_mut().for_each(|b| *b = 0.0);
            sum.iter_mut().for_each(|b| *b = 0.0);
            for (term, weight) in self.alternatives(word) {
                for &(doc, s) in &self.postings[term as usize] {
                    let s = weight * f64::from(s);
                    let b = &mut best[doc as usize];
                    *b = b.max(s);
                    sum[doc as usize] += s;
                }
            }
            for ((t, b), s) in total.iter_mut().zip(&best).zip(&sum) {
                *t += b + EXTRA_MATCHES * (s - b);
            }
        }
        let mut scored: Vec<(usize, f64)> = total
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .collect();
        let by_score = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if scored.len() > limit {
            scored.select_nth_unstable_by(limit - 1, by_score);
            scored.truncate(limit);
        }
        scored.sort_by(by_score);
        scored
    }

    /// The terms a query word stands for, with weights: itself (or, when no tool has it, the
    /// most similar words that some tool has) and its related words.
    fn alternatives(&self, word: &str) -> Vec<(u32, f64)> {
        let stemmed = stem(word);
        let mut out: Vec<(u32, f64)> = Vec::new();
        let mut push = |term: u32, w: f64| match out.iter_mut().find(|(t, _)| *t == term) {
            Some(e) => e.1 = e.1.max(w),
            None => out.push((term, w)),
        };
        match self.stems.get(&stemmed) {
            Some(forms) => forms.iter().for_each(|&id| push(id, 1.0)),
            None => {
                for (id, sim) in self.fuzzy(word) {
                    push(id, FUZZY_WEIGHT * sim.powi(FUZZY_POWER));
                }
            }
        }
        for r in synonyms::related(&stemmed) {
            for &id in self.stems.get(r).into_iter().flatten() {
                push(id, synonyms::RELATED_WEIGHT);
            }
        }
        out
    }

    /// Up to [`FUZZY_MAX`] written words most similar to `word`.
    fn fuzzy(&self, word: &str) -> Vec<(u32, f64)> {
        let mut hits: Vec<(u32, f64)> = Vec::new();
        for (id, w) in self.words.iter().enumerate() {
            let sim = similarity(word, w);
            if sim >= FUZZY_MIN {
                hits.push((id as u32, sim));
            }
        }
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(FUZZY_MAX);
        hits
    }
}

/// Similarity of a query word to a vocabulary word: Jaro-Winkler, and at least 0.9 when the
/// query word is a prefix of at least three letters ("cal" → "calendar").
fn similarity(q: &str, t: &str) -> f64 {
    if q == t {
        return 1.0;
    }
    if t.len() > q.len() && q.len() >= 3 && t.starts_with(q) {
        return 0.9f64.max(strsim::jaro_winkler(q, t));
    }
    strsim::jaro_winkler(q, t)
}

#[cfg(test)]
mod tests {
    // Ranking tests: typos and partial names (kept from the fuzzy ranking this replaced) and task
    // wording, which that ranking got wrong.
    use super::*;

    fn e(server: &str, tool: &str, description: &str) -> Entry {
        Entry {
            server: server.into(),
            tool: tool.into(),
            description: description.into(),
        }
    }

    fn first<'a>(entries: &'a [Entry], query: &str) -> &'a str {
        let r = rank(entries, query, 5);
        assert!(!r.is_empty(), "no result for {query:?}");
        &entries[r[0].0].tool
    }

    /// A long description that mentions nearly everything, as real web-scraping servers have.
    const LONG: &str = "Scrape content from a single URL with advanced options. This is the most \
        powerful, fastest and most reliable scraper tool; use it when you need to get the content \
        of a page at any time, open it in a browser session, handle a new issue with dynamic \
        pages, or commit to a format. Returns markdown with a message on errors. Works in any \
        timezone and region, for example Tokyo or London, and for github pages too.";

    fn servers() -> Vec<Entry> {
        vec![
            e("firecrawl", "firecrawl_scrape", LONG),
            e(
                "time",
                "get_current_time",
                "Get current time in a specific timezone",
            ),
            e("time", "convert_time", "Convert time between timezones"),
            e(
                "github",
                "create_issue",
                "Create a new issue in a GitHub repository",
            ),
            e(
                "github",
                "list_issues",
                "List issues in a GitHub repository with filtering options",
            ),
            e(
                "github",
                "add_issue_comment",
                "Add a comment to an existing issue",
            ),
            e("git", "git_commit", "Records changes to the repository"),
            e("git", "git_status", "Shows the working tree status"),
            e(
                "memory",
                "open_nodes",
                "Open specific nodes in the knowledge graph by their names",
            ),
            e(
                "filesystem",
                "create_directory",
                "Create a new directory or ensure a directory exists",
            ),
        ]
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
        assert_eq!(first(&entries, "calender evnts"), "list_events");
        assert_eq!(first(&entries, "wether"), "forecast");
        assert_eq!(first(&entries, "isue"), "create_issue");
        assert!(rank(&entries, "zzzzqqq", 5).is_empty());
        assert_eq!(rank(&entries, "create", 10).len(), 2);
    }

    #[test]
    fn partial_names_find_the_tool() {
        let entries = servers();
        assert_eq!(first(&entries, "create_iss"), "create_issue");
        assert_eq!(first(&entries, "git_comm"), "git_commit");
        assert_eq!(first(&entries, "convert_t"), "convert_time");
    }

    #[test]
    fn task_wording_beats_a_long_description() {
        let entries = servers();
        assert_eq!(
            first(&entries, "what time is it in Tokyo"),
            "get_current_time"
        );
        assert_eq!(
            first(&entries, "open a new issue on github"),
            "create_issue"
        );
        assert_eq!(
            first(&entries, "commit my changes with a message"),
            "git_commit"
        );
        assert_eq!(first(&entries, "make a new folder"), "create_directory");
    }

    #[test]
    fn empty_and_stop_word_queries_find_nothing() {
        let entries = servers();
        assert!(rank(&entries, "", 5).is_empty());
        // Stop words are in no tool's index, so a query of only stop words finds nothing.
        assert!(rank(&entries, "what is it", 5).is_empty());
        assert!(rank(&entries, "create", 0).is_empty());
    }

    #[test]
    fn results_are_sorted_and_limited() {
        let entries = servers();
        let r = rank(&entries, "issue", 2);
        assert_eq!(r.len(), 2);
        assert!(r[0].1 >= r[1].1);
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
        let index = Index::build(&entries);
        let start = std::time::Instant::now();
        let r = index.rank("calender evnts", 5);
        let took = start.elapsed();
        assert_eq!(r.len(), 5);
        assert!(entries[r[0].0].tool.contains("calendar"));
        // Generous bound for debug builds on shared machines; the benchmark reports the real figure.
        assert!(took < std::time::Duration::from_millis(500), "{took:?}");
    }
}
