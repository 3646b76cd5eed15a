//! A small table of general software vocabulary: what else a query word may be called in a
//! tool's name or description ("open a new issue" → create; "folder" → directory).
//!
//! Entries are generic verbs and nouns of tool APIs, not tuned to any one server. A query word
//! is expanded to its related words at a lower weight than the word itself; the table is
//! one-way (a query's "open" may mean create or navigate; a query's "create" never means open).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::text::stem;

/// (query word, words it may stand for). Stemmed before use, so inflections need no entry.
const RELATED: &[(&str, &[&str])] = &[
    // Creating, changing, deleting.
    ("add", &["create", "new", "insert", "append", "sum"]),
    ("new", &["create", "add"]),
    ("make", &["create", "generate"]),
    ("create", &["add", "new", "generate", "insert"]),
    ("open", &["create", "new", "navigate", "read", "view"]),
    ("generate", &["create"]),
    ("write", &["create", "save", "edit"]),
    ("save", &["write", "store", "create", "record"]),
    ("store", &["save", "write", "create"]),
    (
        "remember",
        &["memory", "store", "save", "create", "observation"],
    ),
    ("forget", &["delete", "remove", "memory"]),
    ("delete", &["remove", "drop", "uninstall"]),
    ("remove", &["delete", "drop", "uninstall"]),
    ("erase", &["delete", "remove"]),
    ("drop", &["delete", "remove"]),
    ("destroy", &["delete", "remove"]),
    ("change", &["update", "edit", "modify", "diff"]),
    ("modify", &["update", "edit", "change"]),
    ("edit", &["update", "modify", "change"]),
    ("update", &["edit", "modify", "patch", "upgrade"]),
    ("rename", &["move"]),
    ("replace", &["edit", "update"]),
    ("undo", &["reset", "revert", "unstage"]),
    ("unstage", &["reset"]),
    ("stage", &["add", "staging", "staged"]),
    ("record", &["commit", "save"]),
    ("upload", &["push", "upload"]),
    // Reading and finding.
    (
        "show",
        &["list", "get", "read", "view", "display", "describe"],
    ),
    ("display", &["show", "list", "get", "view"]),
    ("view", &["show", "get", "read"]),
    ("list", &["get", "show", "find"]),
    ("get", &["retrieve", "fetch", "read", "list"]),
    ("fetch", &["get", "retrieve", "download", "read"]),
    ("retrieve", &["get", "fetch", "read"]),
    ("download", &["fetch", "get", "retrieve"]),
    ("read", &["get", "retrieve", "view"]),
    ("find", &["search", "query", "lookup", "list"]),
    ("search", &["find", "query", "lookup"]),
    ("look", &["search", "find", "query", "get"]),
    ("lookup", &["search", "find", "query", "get"]),
    ("query", &["search", "find", "sql"]),
    ("check", &["status", "validate", "get"]),
    ("describe", &["details", "get", "explain"]),
    ("details", &["describe", "get", "info"]),
    ("info", &["details", "information", "metadata"]),
    ("metadata", &["info", "details"]),
    // Running.
    ("run", &["execute", "trigger", "start", "evaluate"]),
    ("execute", &["run", "evaluate"]),
    ("trigger", &["run", "start"]),
    ("start", &["run", "trigger", "create"]),
    ("launch", &["run", "start", "trigger"]),
    ("rerun", &["retry", "restart", "run"]),
    ("retry", &["rerun"]),
    ("stop", &["close", "cancel", "end"]),
    ("close", &["stop", "end"]),
    ("cancel", &["stop"]),
    // Time and place.
    ("time", &["timezone", "clock", "current"]),
    ("clock", &["time", "current"]),
    ("now", &["current", "time"]),
    ("timezone", &["time", "zone"]),
    ("zone", &["timezone"]),
    ("date", &["time"]),
    ("translate", &["convert"]),
    ("address", &["location", "geocode", "place"]),
    (
        "coordinates",
        &["geocode", "latitude", "longitude", "location"],
    ),
    ("latitude", &["coordinates", "geocode", "location"]),
    ("longitude", &["coordinates", "geocode", "location"]),
    ("location", &["place", "coordinates", "geocode", "address"]),
    ("near", &["local", "nearby", "place", "location"]),
    ("nearby", &["local", "near", "place"]),
    ("shop", &["place", "business", "local"]),
    ("shops", &["place", "business", "local"]),
    ("restaurant", &["place", "business", "local"]),
    ("directions", &["route", "navigate", "travel"]),
    ("route", &["directions", "travel"]),
    ("drive", &["directions", "travel", "distance"]),
    ("travel", &["directions", "distance"]),
    ("far", &["distance"]),
    ("long", &["distance", "time", "duration"]),
    ("altitude", &["elevation", "height"]),
    ("height", &["elevation", "altitude"]),
    ("high", &["elevation", "height"]),
    // Files and code.
    ("folder", &["directory", "dir"]),
    ("dir", &["directory", "folder"]),
    ("directory", &["folder"]),
    ("document", &["file", "page", "doc"]),
    ("big", &["size"]),
    ("size", &["sizes", "info", "resize"]),
    ("modified", &["info", "metadata", "changed"]),
    ("repo", &["repository", "project"]),
    ("repository", &["repo", "project"]),
    ("project", &["repository", "repo"]),
    ("pr", &["pull", "request", "merge"]),
    ("mr", &["merge", "request"]),
    ("history", &["log", "commits", "history"]),
    ("changes", &["diff", "changed", "status"]),
    ("changed", &["diff", "files", "status"]),
    ("difference", &["diff"]),
    ("differences", &["diff"]),
    ("switch", &["checkout", "change", "set"]),
    ("checkout", &["switch", "branch"]),
    ("bug", &["issue", "error"]),
    ("ticket", &["issue"]),
    ("problem", &["issue", "error"]),
    ("error", &["issue", "exception", "failure", "bug"]),
    ("exception", &["error", "issue"]),
    ("crash", &["error", "issue", "failure"]),
    ("fail", &["failure", "failed", "error"]),
    ("failed", &["failure", "error"]),
    ("failing", &["failure", "error"]),
    ("why", &["cause", "analyze", "debug", "failure"]),
    ("cause", &["analyze", "root"]),
    ("debug", &["analyze", "logs", "failure"]),
    ("diagnose", &["analyze", "debug"]),
    ("fix", &["resolve", "fix"]),
    ("resolve", &["update", "status", "resolve"]),
    ("passing", &["status", "checks", "test"]),
    ("ci", &["build", "pipeline", "checks", "workflow"]),
    ("build", &["pipeline", "job", "workflow"]),
    ("pipeline", &["build", "workflow"]),
    ("flaky", &["flaky", "intermittent"]),
    ("config", &["configuration", "settings"]),
    ("configuration", &["config", "settings"]),
    ("settings", &["config", "configuration"]),
    ("validate", &["check", "config"]),
    ("javascript", &["js", "script", "evaluate", "code"]),
    ("js", &["javascript", "script", "evaluate"]),
    ("script", &["javascript", "code", "run"]),
    ("code", &["script", "javascript"]),
    ("sql", &["query", "database", "sqlite"]),
    ("database", &["sql", "db", "query", "table"]),
    ("db", &["database", "sql"]),
    ("table", &["database", "sql"]),
    ("compress", &["gzip", "zip"]),
    ("zip", &["gzip", "compress"]),
    ("env", &["environment", "variables"]),
    ("environment", &["env", "variables"]),
    ("variables", &["env", "environment"]),
    ("numbers", &["sum", "number"]),
    ("total", &["sum"]),
    ("plus", &["sum", "add"]),
    ("docs", &["documentation", "doc"]),
    ("documentation", &["docs", "doc"]),
    ("manual", &["documentation", "docs"]),
    ("library", &["package", "library"]),
    // Web and browser.
    ("web", &["internet", "online", "website"]),
    ("internet", &["web", "online"]),
    ("online", &["web", "internet"]),
    ("google", &["search", "web"]),
    ("url", &["page", "website", "link", "site"]),
    ("link", &["url", "page"]),
    ("website", &["site", "url", "web", "page"]),
    ("site", &["website", "url", "page"]),
    ("page", &["url", "website", "webpage"]),
    ("webpage", &["page", "url", "website"]),
    ("browser", &["page", "browser"]),
    ("go", &["navigate", "visit"]),
    ("visit", &["navigate", "go"]),
    ("browse", &["navigate", "browser"]),
    ("back", &["previous", "back"]),
    ("previous", &["back"]),
    ("click", &["press", "click"]),
    ("press", &["click", "key"]),
    ("tap", &["click", "press"]),
    ("type", &["fill", "input", "enter"]),
    ("enter", &["type", "fill", "input", "key"]),
    ("fill", &["type", "input", "form"]),
    ("input", &["type", "fill", "field"]),
    ("field", &["input", "form"]),
    ("dropdown", &["select", "option"]),
    ("choose", &["select", "option"]),
    ("pick", &["select", "option", "choose"]),
    ("mouse", &["hover", "click"]),
    ("alert", &["dialog"]),
    ("popup", &["dialog", "alert"]),
    ("modal", &["dialog"]),
    ("screenshot", &["capture", "image", "snapshot"]),
    ("capture", &["screenshot", "snapshot"]),
    ("picture", &["image", "photo", "screenshot"]),
    ("photo", &["image", "picture"]),
    ("image", &["picture", "screenshot", "photo"]),
    ("draw", &["generate", "image"]),
    ("console", &["log", "logs", "messages"]),
    ("output", &["logs", "log", "console"]),
    ("logs", &["log"]),
    ("scrape", &["extract", "fetch", "content"]),
    ("extract", &["scrape", "parse"]),
    ("crawl", &["spider", "crawl"]),
    ("urls", &["map", "links", "url"]),
    ("markdown", &["md", "markdown"]),
    ("news", &["search", "web", "current"]),
    ("latest", &["current", "recent"]),
    ("research", &["research", "investigate", "search"]),
    ("papers", &["paper", "arxiv"]),
    // People and messages.
    ("who", &["user", "users", "member", "whoami"]),
    ("people", &["users", "user", "member"]),
    ("person", &["user", "member"]),
    ("member", &["user", "users"]),
    ("message", &["post", "send", "chat"]),
    ("send", &["post", "message"]),
    ("post", &["send", "message", "create"]),
    ("chat", &["message", "channel"]),
    ("reply", &["respond", "thread"]),
    ("respond", &["reply"]),
    ("emoji", &["reaction", "emoji"]),
    ("react", &["reaction", "emoji"]),
    ("comment", &["comment", "note", "reply"]),
    ("note", &["comment", "notes"]),
    // Infrastructure.
    ("k8s", &["kubernetes", "kubectl"]),
    ("kubernetes", &["kubectl", "k8s"]),
    ("cluster", &["kubernetes", "kubectl", "node"]),
    ("container", &["pod", "docker"]),
    ("pod", &["pods", "container"]),
    ("replicas", &["scale", "replica"]),
    ("manifest", &["yaml", "apply"]),
    ("yaml", &["manifest"]),
    ("shell", &["exec", "command", "execute"]),
    ("command", &["exec", "execute", "run"]),
    ("deploy", &["deployment", "rollout", "apply", "install"]),
    ("install", &["deploy", "setup"]),
    ("release", &["releases", "rollout", "deploy"]),
    ("rollback", &["rollback", "undo", "revert"]),
    ("tunnel", &["forward", "port"]),
    ("maintenance", &["drain", "cordon", "node"]),
    // Reasoning and memory.
    ("think", &["thinking", "thought", "reasoning"]),
    ("reason", &["thinking", "thought"]),
    ("step", &["thought", "thinking", "sequential"]),
    ("knowledge", &["graph", "memory"]),
    ("graph", &["knowledge", "nodes"]),
    ("facts", &["observations", "entities", "knowledge"]),
];

/// Weight of a related word relative to the query word itself.
pub const RELATED_WEIGHT: f64 = 0.6;

/// The stems a query stem may stand for, besides itself.
pub fn related(stemmed: &str) -> &'static [String] {
    static TABLE: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut m: HashMap<String, Vec<String>> = HashMap::new();
        for (word, others) in RELATED {
            let key = stem(word);
            let v = m.entry(key.clone()).or_default();
            for o in *others {
                let s = stem(o);
                if s != key && !v.contains(&s) {
                    v.push(s);
                }
            }
        }
        m
    });
    table.get(stemmed).map(Vec::as_slice).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_may_mean_create() {
        assert!(related(&stem("open")).contains(&stem("create")));
        assert!(!related(&stem("create")).contains(&stem("open")));
        assert!(related("zzz").is_empty());
    }
}
