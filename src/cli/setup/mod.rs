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
mod plan;
mod register;
mod shape;
mod targets;

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
    });
    let mut out = std::io::stdout().lock();
    for line in &plan.lines {
        let _ = writeln!(out, "{}", safe_line(line));
    }
    if plan.changes.is_empty() {
        let _ = writeln!(out, "Nothing to change.");
        return finish(&plan.problems);
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
        return finish(&plan.problems);
    }
    if !opts.yes {
        if !std::io::stdin().is_terminal() {
            return refuse(
                "not changing anything without confirmation: standard input is not a terminal; \
                 review the changes above and run again with --yes to apply them",
            );
        }
        if !confirmed() {
            let _ = writeln!(out, "Nothing was changed.");
            return ExitCode::from(EXIT_PROBLEMS);
        }
    }
    apply(&mut plan, settings.setup_backups, &mut out);
    finish(&plan.problems)
}

/// Writes every change of `plan`, backing up each existing file first and keeping its newest
/// `keep` backups; a failure is added to the plan's problems and the rest go on.
fn apply(plan: &mut Plan, keep: usize, out: &mut impl Write) {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let mut restart = Vec::new();
    for change in std::mem::take(&mut plan.changes) {
        match write_one(&change, &stamp) {
            Ok(backup) => {
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
                let verb = if change.original.is_some() {
                    "updated"
                } else {
                    "created"
                };
                let _ = writeln!(out, "{verb} {}", ShownPath(&change.path));
                restart.extend(change.client.map(Client::label));
            }
            Err(e) => plan.problems.push(e),
        }
    }
    if !restart.is_empty() {
        restart.dedup();
        let _ = writeln!(out, "Restart {} to load the bridge.", restart.join(", "));
    }
}

/// Backs up (when the file exists) and writes one change; returns the backup's path.
fn write_one(change: &Change, stamp: &str) -> Result<Option<std::path::PathBuf>, SetupError> {
    files::unchanged(&change.path, change.original.as_deref())?;
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
