//! Tool search quality (benches/RESULTS.md, "Tool search quality"): recall@1, recall@5 and MRR of the crate's ranking against
//! the old fuzzy ranking, plain BM25 and the Python bridge's substring filter, on real MCP
//! servers' frozen tool lists (`catalogs/`) and hand-written queries (`queries.json`, split
//! into a dev half used for tuning and a held-out test half); then rank() latency over an
//! index of 5,000 tools.
//!
//! `cargo bench --bench search_eval` prints the tables; `SEARCH_EVAL_MISSES=1` also lists the
//! queries whose correct tool is not first for the new ranking.

mod baselines;
mod old;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use mcp_code_bridge::upstream::search::{Entry, Index};
use serde::Deserialize;

/// Tools in the latency index at least.
const LATENCY_TOOLS: usize = 5_000;
/// Results asked of each method (MRR is MRR@10).
const LIMIT: usize = 10;

#[derive(Deserialize)]
struct Catalog {
    server: String,
    source: Source,
    tools: Vec<Tool>,
}

#[derive(Deserialize)]
struct Source {
    package: String,
    version: String,
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
struct Queries {
    queries: Vec<Query>,
}

#[derive(Deserialize)]
struct Query {
    split: String,
    kind: String,
    query: String,
    answers: Vec<String>,
}

type Ranker<'a> = Box<dyn Fn(&str) -> Vec<(usize, f64)> + 'a>;

/// Sums of the three measures over a set of queries.
#[derive(Default, Clone, Copy)]
struct Score {
    n: usize,
    r1: f64,
    r5: f64,
    rr: f64,
}

impl Score {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(r) = rank {
            self.r1 += f64::from(u8::from(r == 0));
            self.r5 += f64::from(u8::from(r < 5));
            self.rr += 1.0 / (r + 1) as f64;
        }
    }

    fn cells(&self) -> String {
        let n = self.n.max(1) as f64;
        format!(
            "{:.2} | {:.2} | {:.2}",
            self.r1 / n,
            self.r5 / n,
            self.rr / n
        )
    }
}

fn load(dir: &Path) -> (Vec<Catalog>, Vec<Query>) {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("catalogs"))
        .expect("catalogs/ is in the repository")
        .map(|e| e.expect("readable catalogs/").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let catalogs = files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("readable catalog");
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect();
    let text = std::fs::read_to_string(dir.join("queries.json")).expect("queries.json");
    let q: Queries = serde_json::from_str(&text).expect("valid queries.json");
    (catalogs, q.queries)
}

fn entries(catalogs: &[Catalog], suffix: &str) -> Vec<Entry> {
    catalogs
        .iter()
        .flat_map(|c| {
            c.tools.iter().map(move |t| Entry {
                server: format!("{}{suffix}", c.server),
                tool: t.name.clone(),
                description: t.description.clone(),
            })
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/search_eval");
    let (catalogs, queries) = load(&dir);
    let entries = entries(&catalogs, "");
    let names: Vec<String> = entries
        .iter()
        .map(|e| format!("{}/{}", e.server, e.tool))
        .collect();
    for q in &queries {
        for a in &q.answers {
            assert!(names.contains(a), "{:?}: unknown answer {a}", q.query);
        }
    }
    println!(
        "# Tool search quality: {} servers, {} tools, {} queries ({} dev, {} test)\n",
        catalogs.len(),
        entries.len(),
        queries.len(),
        queries.iter().filter(|q| q.split == "dev").count(),
        queries.iter().filter(|q| q.split == "test").count(),
    );

    let ours = Index::build(&entries);
    let previous = old::Index::build(&entries);
    let bm25 = baselines::Bm25::build(&entries);
    let methods: Vec<(&str, Ranker)> = vec![
        (
            "new (BM25F + stems + related words + fuzzy)",
            Box::new(|q| ours.rank(q, LIMIT)),
        ),
        (
            "old (fuzzy mean of best matches)",
            Box::new(|q| previous.rank(q, LIMIT)),
        ),
        (
            "plain BM25 (name + description)",
            Box::new(|q| bm25.rank(q, LIMIT)),
        ),
        (
            "AND of substrings (Python bridge)",
            Box::new(|q| baselines::substring(&entries, q, LIMIT)),
        ),
    ];
    let misses = std::env::var_os("SEARCH_EVAL_MISSES").is_some();

    println!("| method | dev R@1 | dev R@5 | dev MRR | test R@1 | test R@5 | test MRR | all R@1 | all R@5 | all MRR |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut by_kind: Vec<(&str, BTreeMap<String, Score>)> = Vec::new();
    for (name, rank) in &methods {
        let mut split: BTreeMap<&str, Score> = BTreeMap::new();
        let mut kinds: BTreeMap<String, Score> = BTreeMap::new();
        for q in &queries {
            let got = rank(&q.query);
            let pos = got.iter().position(|(i, _)| q.answers.contains(&names[*i]));
            split.entry(q.split.as_str()).or_default().add(pos);
            split.entry("all").or_default().add(pos);
            kinds.entry(q.kind.clone()).or_default().add(pos);
            if misses && pos != Some(0) && name.starts_with("new") {
                let top: Vec<&str> = got
                    .iter()
                    .take(3)
                    .map(|(i, _)| names[*i].as_str())
                    .collect();
                eprintln!(
                    "[{}] {:?} → {pos:?} top {top:?} want {:?}",
                    q.split, q.query, q.answers
                );
            }
        }
        println!(
            "| {name} | {} | {} | {} |",
            split["dev"].cells(),
            split["test"].cells(),
            split["all"].cells()
        );
        by_kind.push((name, kinds));
    }

    println!("\nBy kind of query, all splits (R@1 | R@5 | MRR):\n");
    let kinds: Vec<String> = by_kind[0].1.keys().cloned().collect();
    let head: Vec<String> = kinds
        .iter()
        .map(|k| format!("{k} (n={})", by_kind[0].1[k].n))
        .collect();
    println!("| method | {} |", head.join(" | "));
    println!("|---|{}", "---|".repeat(kinds.len()));
    for (name, ks) in &by_kind {
        let cells: Vec<String> = kinds
            .iter()
            .map(|k| ks[k].cells().replace(" | ", " / "))
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }

    latency(&catalogs, &queries);
    let sources: Vec<String> = catalogs
        .iter()
        .map(|c| format!("{} {}", c.source.package, c.source.version))
        .collect();
    println!("\nCatalogs: {}", sources.join(", "));
}

/// p50/p95 of rank() over the catalogs copied under varied server names to 5,000+ tools.
fn latency(catalogs: &[Catalog], queries: &[Query]) {
    let regions = [
        "", "-prod", "-staging", "-eu", "-us", "-dev", "-team", "-backup",
    ];
    let mut big = Vec::new();
    let mut k = 0;
    while big.len() < LATENCY_TOOLS {
        let suffix = format!(
            "{}{}",
            regions[k % regions.len()],
            if k < regions.len() {
                String::new()
            } else {
                (k / regions.len()).to_string()
            }
        );
        big.extend(entries(catalogs, &suffix));
        k += 1;
    }
    let qs: Vec<&str> = queries.iter().take(100).map(|q| q.query.as_str()).collect();
    let t = Instant::now();
    let ours = Index::build(&big);
    let build_new = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let previous = old::Index::build(&big);
    let build_old = t.elapsed().as_secs_f64() * 1e3;
    let time = |f: &dyn Fn(&str) -> usize| {
        let mut ms = Vec::new();
        for _ in 0..5 {
            for q in &qs {
                let t = Instant::now();
                std::hint::black_box(f(q));
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        ms.sort_by(f64::total_cmp);
        (percentile(&ms, 0.5), percentile(&ms, 0.95))
    };
    let (n50, n95) = time(&|q| ours.rank(q, 10).len());
    let (o50, o95) = time(&|q| previous.rank(q, 10).len());
    println!(
        "\nLatency of rank(query, 10) over {} tools, {} queries x 5:\n",
        big.len(),
        qs.len()
    );
    println!("| method | p50 ms | p95 ms | index build ms |");
    println!("|---|---|---|---|");
    println!("| new | {n50:.2} | {n95:.2} | {build_new:.0} |");
    println!("| old | {o50:.2} | {o95:.2} | {build_old:.0} |");
}
