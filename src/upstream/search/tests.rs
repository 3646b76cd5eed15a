//! Ranking tests: typos and partial names (kept from the fuzzy ranking this replaced) and task
//! wording, which that ranking got wrong.

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
