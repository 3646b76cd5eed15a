//! `mcp-code-bridge setup`: registers the bridge in the MCP clients found on this machine
//! (Claude Code, Cursor, VS Code, Claude Desktop, Windsurf; user scope), and with
//! `--import-servers` copies their servers into the user's folder (`~/MCPs`).
//!
//! Everything is decided first ([`plan`]), shown as a unified diff per file, and written only
//! after confirmation on a terminal (or `--yes`): each changed file backed up next to itself
//! first (`<file>.bak-<UTC time>`, owner, group and mode kept; the newest
//! `MCP_BRIDGE_SETUP_BACKUPS` kept), then replaced atomically with its owner, group and mode;
//! copies are new files only.
//! `--dry-run` shows the diffs and writes nothing; a second run finds nothing to change.
//! A file that cannot be read, parsed or edited is reported and left as it was; the others
//! proceed.
//!
//! Layout: `targets` (which files), `launch` (which command), `shape` (each client's entry),
//! `document` (a parsed file), `register` and `import` (the edits), `plan`, `diff`, `files`
//! (atomic writes), `backups`, `error`.

mod backups;
mod diff;
mod document;
mod error;
mod files;
mod import;
mod launch;
mod moves;
mod plan;
mod register;
mod shape;
mod take;
mod targets;
mod undo;

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

pub use error::SetupError;

use crate::cli::safe_line::{safe_diff, safe_line};
use crate::config::{Client, Settings};
use crate::shown::ShownPath;
use plan::{Change, Plan, Request};

/// Exit code when a file was left untouched because of a problem, or the changes were declined.
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit code when nothing could be done: no terminal to confirm on and no `--yes`, or a bad
/// `--command`, or no home folder.
pub const EXIT_REFUSED: u8 = 2;

/// What `setup` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The clients to register in (`--client`); empty: every client found.
    pub clients: Vec<Client>,
    /// The bridge's server name in the clients' files (`--name`).
    pub name: String,
    /// The command line clients start the bridge with (`--command`); `None`: this binary.
    pub command: Option<String>,
    /// Copy the clients' servers into the user's folder (`--import-servers`).
    pub import_servers: bool,
    /// Then take the copied servers out of the clients' files (`--move`).
    pub move_servers: bool,
    /// Put back what `--move` took out (`--undo`).
    pub undo: bool,
    /// Apply without asking (`--yes`).
    pub yes: bool,
    /// Show the diffs only (`--dry-run`).
    pub dry_run: bool,
}

/// Runs `setup`; prints the plan, the diffs and what was written to stdout, problems to stderr.
pub fn run(settings: &Settings, opts: &Options) -> ExitCode {
    let Some(home) = settings.home.as_deref() else {
        return refuse("no home folder (set HOME)");
    };
    if opts.move_servers && !opts.import_servers {
        return refuse(
            "--move takes out of the clients the servers it copies into ~/MCPs: \
             use it with --import-servers",
        );
    }
    let records = moves::RecordFile::new(&settings.state_dir);
    if opts.undo {
        return run_undo(settings, opts, home, &records);
    }
    // A damaged record is refused before anything is decided, so nothing changes.
    let recorded = match opts.move_servers.then(|| records.read()).transpose() {
        Ok(r) => r.unwrap_or_default(),
        Err(e) => return refuse(&e.to_string()),
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return refuse(&format!("cannot tell where this binary is: {e}")),
    };
    let launch = match launch::choose(
        opts.command.as_deref(),
        &exe,
        settings.uv_cache_dir.as_deref(),
    ) {
        Ok(l) => l,
        Err(e) => return refuse(&e.to_string()),
    };
    let found = targets::find(home, settings.claude_config_dir.as_deref(), &opts.clients);
    let import_into = settings.server_sources.dir.as_deref();
    if opts.import_servers && import_into.is_none() {
        return refuse("no folder to copy servers into (set MCP_BRIDGE_CONFIG_DIR)");
    }
    let mut plan = plan::plan(&Request {
        found: &found,
        named: !opts.clients.is_empty(),
        name: &opts.name,
        launch: &launch,
        import_into: import_into.filter(|_| opts.import_servers),
        move_servers: opts.move_servers,
    });
    let mut out = std::io::stdout().lock();
    if let Some(code) = show_and_confirm(&plan, opts, &mut out, "Nothing to change.") {
        return code;
    }
    let pending = std::mem::take(&mut plan.moves);
    if !pending.is_empty() {
        // Recorded before any client file changes: a move that cannot be recorded is not made.
        let mut all = recorded.clone();
        all.files.extend(pending.iter().map(|m| m.record.clone()));
        if let Err(e) = records.write(&all) {
            return refuse(&format!("{e}; nothing was changed"));
        }
    }
    let written = apply(&mut plan, &pending, settings.setup_backups, &mut out);
    if !pending.is_empty() {
        let mut all = recorded;
        all.files.extend(
            pending
                .into_iter()
                .filter(|m| {
                    written.contains(&m.record.path)
                        && m.record
                            .copy
                            .as_ref()
                            .is_some_and(|c| written.contains(&c.path))
                })
                .map(|m| m.record),
        );
        match records.write(&all) {
            Ok(()) if !all.is_empty() => {
                let _ = writeln!(
                    out,
                    "recorded what was moved in {} (`setup --undo` puts it back)",
                    ShownPath(&records.path())
                );
            }
            Ok(()) => {}
            Err(e) => plan.problems.push(SetupError::Record(e)),
        }
    }
    finish(&plan.problems)
}

/// `setup --undo`: puts back what the record says was moved, then keeps in the record only
/// the parts not undone.
fn run_undo(
    settings: &Settings,
    opts: &Options,
    home: &std::path::Path,
    records: &moves::RecordFile,
) -> ExitCode {
    let record = match records.read() {
        Ok(r) => r,
        Err(e) => return refuse(&e.to_string()),
    };
    let mut out = std::io::stdout().lock();
    if record.is_empty() {
        let _ = writeln!(
            out,
            "Nothing to undo: no servers were moved by `setup --move`."
        );
        return ExitCode::SUCCESS;
    }
    let undo::UndoPlan { mut plan, parts } = undo::plan(
        &record,
        &opts.clients,
        home,
        settings.claude_config_dir.as_deref(),
        settings.server_sources.dir.as_deref(),
    );
    if plan.changes.is_empty() {
        for line in &plan.lines {
            let _ = writeln!(out, "{}", safe_line(line));
        }
        let _ = writeln!(out, "Nothing to change.");
        if opts.dry_run {
            return finish(&plan.problems);
        }
    } else if let Some(code) = show_and_confirm(&plan, opts, &mut out, "Nothing to change.") {
        return code;
    }
    let written = if plan.changes.is_empty() {
        Vec::new()
    } else {
        apply(&mut plan, &[], settings.setup_backups, &mut out)
    };
    let mut rest = record.clone();
    rest.files = record
        .files
        .into_iter()
        .zip(&parts)
        .filter(|(_, done)| match done {
            Some(files) => !files.iter().all(|f| written.contains(f)),
            None => true,
        })
        .map(|(f, _)| f)
        .collect();
    match records.write(&rest) {
        Ok(()) if rest.is_empty() => {
            let _ = writeln!(out, "The record of moved servers is removed: all undone.");
        }
        Ok(()) => {
            let _ = writeln!(
                out,
                "{} client file(s) not undone stay in {}",
                rest.files.len(),
                ShownPath(&records.path())
            );
        }
        Err(e) => plan.problems.push(SetupError::Record(e)),
    }
    finish(&plan.problems)
}

/// Prints `plan`'s lines and diffs and asks; `Some(exit code)` when nothing is to be written
/// (nothing to change, a dry run, no confirmation).
fn show_and_confirm(
    plan: &Plan,
    opts: &Options,
    out: &mut impl Write,
    nothing: &str,
) -> Option<ExitCode> {
    for line in &plan.lines {
        let _ = writeln!(out, "{}", safe_line(line));
    }
    if plan.changes.is_empty() {
        let _ = writeln!(out, "{nothing}");
        return Some(finish(&plan.problems));
    }
    for c in &plan.changes {
        let _ = write!(
            out,
            "\n{}",
            safe_diff(&diff::unified(&c.path, c.original.as_deref(), &c.text))
        );
    }
    let _ = out.flush();
    if opts.dry_run {
        let _ = writeln!(out, "\nDry run: nothing was changed.");
        return Some(finish(&plan.problems));
    }
    if !opts.yes {
        if !std::io::stdin().is_terminal() {
            return Some(refuse(
                "not changing anything without confirmation: standard input is not a terminal; \
                 review the changes above and run again with --yes to apply them",
            ));
        }
        if !confirmed() {
            let _ = writeln!(out, "Nothing was changed.");
            return Some(ExitCode::from(EXIT_PROBLEMS));
        }
    }
    None
}

/// Writes every change of `plan`, backing up each existing file first and keeping its newest
/// `keep` backups; a failure is added to the plan's problems and the rest go on. A client file
/// of `moves` whose copy was not written gets only its text without the move. Returns the
/// files written (or removed).
fn apply(
    plan: &mut Plan,
    moves: &[plan::PendingMove],
    keep: usize,
    out: &mut impl Write,
) -> Vec<std::path::PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let mut restart = Vec::new();
    let mut written = Vec::new();
    let mut failed = Vec::new();
    for mut change in std::mem::take(&mut plan.changes) {
        let uncopied = moves.iter().find(|m| {
            m.record.path == change.path
                && m.record
                    .copy
                    .as_ref()
                    .is_some_and(|c| failed.contains(&c.path))
        });
        if let Some(m) = uncopied {
            let _ = writeln!(
                out,
                "{}: its servers stay in it, since their copy was not written",
                ShownPath(&change.path)
            );
            match &m.without {
                Some(text) => change.text = text.clone(),
                None => continue,
            }
        }
        match write_one(&change, &stamp) {
            Ok(backup) => {
                written.push(change.path.clone());
                if let Some(b) = backup {
                    let _ = writeln!(
                        out,
                        "backed up {} to {}",
                        ShownPath(&change.path),
                        ShownPath(&b)
                    );
                    match backups::prune(&change.path, keep) {
                        Ok(removed) => {
                            for old in removed {
                                let _ = writeln!(out, "removed the old backup {}", old.display());
                            }
                        }
                        Err(e) => plan.problems.push(e),
                    }
                }
                let verb = match (change.delete, change.original.is_some()) {
                    (true, _) => "removed",
                    (false, true) => "updated",
                    (false, false) => "created",
                };
                let _ = writeln!(out, "{verb} {}", ShownPath(&change.path));
                restart.extend(change.client.map(Client::label));
            }
            Err(e) => {
                failed.push(change.path.clone());
                plan.problems.push(e);
            }
        }
    }
    if !restart.is_empty() {
        restart.dedup();
        let _ = writeln!(out, "Restart {} to load the change.", restart.join(", "));
    }
    written
}

/// Backs up (when the file exists) and writes one change; returns the backup's path.
fn write_one(change: &Change, stamp: &str) -> Result<Option<std::path::PathBuf>, SetupError> {
    files::unchanged(&change.path, change.original.as_deref())?;
    if change.delete {
        std::fs::remove_file(&change.path).map_err(|source| SetupError::Write {
            path: change.path.clone(),
            source,
        })?;
        return Ok(None);
    }
    let backup = match &change.original {
        Some(text) => Some(backups::backup(&change.path, text.as_bytes(), stamp)?),
        None => None,
    };
    match change.client {
        Some(_) => files::replace(&change.path, change.original.as_deref(), &change.text)?,
        None => files::create(&change.path, &change.text)?,
    }
    Ok(backup)
}

/// Asks on the terminal; true for `y` or `yes`.
fn confirmed() -> bool {
    eprint!("Apply these changes? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn refuse(why: &str) -> ExitCode {
    eprintln!("mcp-code-bridge setup: {}", safe_line(why));
    ExitCode::from(EXIT_REFUSED)
}

fn finish(problems: &[SetupError]) -> ExitCode {
    for p in problems {
        eprintln!("problem: {}", safe_line(&p.to_string()));
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROBLEMS)
    }
}

/// An MCP client `setup` knows.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ClientArg {
    /// Claude Code (~/.claude.json, user scope).
    ClaudeCode,
    /// Cursor (~/.cursor/mcp.json).
    Cursor,
    /// VS Code (the user profile's mcp.json).
    Vscode,
    /// Claude Desktop (claude_desktop_config.json).
    ClaudeDesktop,
    /// Windsurf (~/.codeium/windsurf/mcp_config.json).
    Windsurf,
}

impl From<ClientArg> for crate::config::Client {
    fn from(c: ClientArg) -> crate::config::Client {
        match c {
            ClientArg::ClaudeCode => crate::config::Client::ClaudeCode,
            ClientArg::Cursor => crate::config::Client::Cursor,
            ClientArg::Vscode => crate::config::Client::VsCode,
            ClientArg::ClaudeDesktop => crate::config::Client::ClaudeDesktop,
            ClientArg::Windsurf => crate::config::Client::Windsurf,
        }
    }
}
