//! Pinned tool definitions in `servers` (GUIDE.md, "Pinned tool definitions"): a server's
//! pending change as a unified diff of its pinned and its listed definitions (every line
//! escaped, bounded: `upstream/pins/diff.rs`), and `servers --approve-changes NAME [--yes]`,
//! which shows that diff, asks on a terminal (or takes `--yes`) and pins exactly what it showed.
//! Reads the pins file only; starts nothing.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use crate::cli::safe_line::safe_line;
use crate::config::{discover, ServerSpec, Settings};
use crate::shown::Shown;
use crate::upstream::pins::diff::{unified, Change};
use crate::upstream::pins::store::Record;
use crate::upstream::pins::{canonical, PinError, Pins};

/// `spec`'s pending change: the state text for its row and the diff lines (unescaped); `None`
/// when nothing is pending or its tools are not pinned.
///
/// # Errors
/// The pins file is damaged or unreadable: the message.
pub fn pending(
    settings: &Settings,
    spec: &ServerSpec,
) -> Result<Option<(String, Vec<String>)>, String> {
    let Some(rec) = record(settings, spec).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    if rec.pending.is_empty() {
        return Ok(None);
    }
    let state = format!(
        "{} tool change(s) since pinned, refused until approved: run `mcp-code-bridge servers --approve-changes {}`",
        rec.pending.len(),
        Shown(&spec.name)
    );
    Ok(Some((state, diff(&rec))))
}

/// `spec`'s pins record, when its tools are pinned and it has one.
fn record(settings: &Settings, spec: &ServerSpec) -> Result<Option<Record>, PinError> {
    let pins = Pins::new(&settings.state_dir, settings.pin_tools);
    if !pins.covers(spec) {
        return Ok(None);
    }
    pins.store().record(&spec.name, &canonical::identity(spec))
}

/// The diff lines of `rec`'s pending definitions against its pins.
fn diff(rec: &Record) -> Vec<String> {
    let changes: Vec<Change<'_>> = rec
        .pending
        .iter()
        .map(|(tool, pin)| Change {
            tool,
            pinned: rec.tools.get(tool).map(|p| p.text.as_str()),
            listed: &pin.text,
        })
        .collect();
    unified(&rec.name, &changes)
}

/// `servers --approve-changes NAME [--yes]`: exit 0 when the change was pinned or nothing was
/// pending, 1 otherwise (unknown server, not pinned, damaged file, declined, or no terminal
/// to ask on without `--yes`).
pub fn approve_changes(settings: &Settings, name: &str, yes: bool) -> ExitCode {
    match approve(settings, name, yes) {
        Ok(message) => {
            say(&message);
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("mcp-code-bridge: {}", safe_line(&message));
            ExitCode::FAILURE
        }
    }
}

fn approve(settings: &Settings, name: &str, yes: bool) -> Result<String, String> {
    let found = discover(&settings.server_sources);
    let shown = Shown(name);
    let spec = found.get(name).ok_or_else(|| {
        let names: Vec<String> = found.names().iter().map(|n| Shown(n).to_string()).collect();
        format!(
            "no server named '{shown}' is configured (servers: {})",
            names.join(", ")
        )
    })?;
    let pins = Pins::new(&settings.state_dir, settings.pin_tools);
    if !pins.covers(spec) {
        return Err(format!(
            "the tools of '{shown}' are not pinned (MCP_BRIDGE_PIN_TOOLS): nothing to approve"
        ));
    }
    let identity = canonical::identity(spec);
    let rec = pins
        .store()
        .record(name, &identity)
        .map_err(|e| e.to_string())?;
    let Some(rec) = rec.filter(|r| !r.pending.is_empty()) else {
        return Ok(format!(
            "'{shown}' has no tool changes waiting for approval"
        ));
    };
    for line in diff(&rec) {
        say(&line);
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(format!(
                "the changes of '{shown}' were not approved: standard input is not a terminal to \
                 ask on; read the diff above and run again with --yes to approve it"
            ));
        }
        if !confirmed(name, rec.pending.len()) {
            return Err(format!("the changes of '{shown}' were not approved"));
        }
    }
    let seen: BTreeMap<String, String> = rec
        .pending
        .iter()
        .map(|(t, p)| (t.clone(), p.sha256.clone()))
        .collect();
    let pinned = pins
        .store()
        .approve(name, &identity, &seen)
        .map_err(|e| format!("cannot record the approval: {e}"))?;
    Ok(format!(
        "pinned {pinned} new tool definition(s) of '{shown}': calls to them work from now on"
    ))
}

/// Asks on the terminal; true for `y` or `yes`.
fn confirmed(name: &str, count: usize) -> bool {
    eprint!(
        "Pin these {count} changed tool definition(s) of '{}'? [y/N] ",
        Shown(name)
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", safe_line(text));
    let _ = out.flush();
}
