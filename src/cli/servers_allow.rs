//! `mcp-code-bridge servers --allow NAME [--from FILE] [--yes]`: shows the one definition it
//! would approve (every field that decides what runs, as written), asks on a terminal (or takes
//! `--yes`), and records that definition alone: its name, file and the SHA-256 of its entry as
//! written. Another file's definition of the same name is approved only with `--from FILE`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use crate::cli::safe_line::safe_line;
use crate::config::{
    discover, pick, project_definitions, AllowList, Approval, Consent, PickError, ProjectEntry,
    Settings,
};
use crate::shown::{Shown, ShownPath};

/// What `servers --allow` was asked.
#[derive(Debug, Clone, Default)]
pub struct AllowArgs {
    /// The servers to approve.
    pub names: Vec<String>,
    /// Approve the definition in this file rather than the one `servers` shows.
    pub from: Option<PathBuf>,
    /// Approve without asking.
    pub yes: bool,
}

/// Approves the definitions asked for. Exit 0 when each was approved or needed nothing, 1
/// otherwise (not found, turned down, declined, or no terminal to ask on without `--yes`).
pub fn allow(settings: &Settings, args: &AllowArgs) -> ExitCode {
    let sources = &settings.server_sources;
    let entries = project_definitions(sources, &|k| std::env::var(k).ok());
    let mut list = AllowList::load(&settings.state_dir);
    let mut ok = true;
    for name in &args.names {
        let result = match pick(&entries, name, args.from.as_deref()) {
            Ok((chosen, others)) => allow_one(chosen, &others, args, &mut list, settings),
            Err(why) => not_picked(settings, name, args.from.as_deref(), why),
        };
        match result {
            Ok(message) => say(&message),
            Err(message) => {
                eprintln!("mcp-code-bridge: {}", safe_line(&message));
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", safe_line(text));
    let _ = out.flush();
}

fn not_picked(
    settings: &Settings,
    name: &str,
    from: Option<&Path>,
    why: PickError,
) -> Result<String, String> {
    let found = discover(&settings.server_sources);
    let shown = Shown(name);
    match why {
        PickError::NotInFile(files) => Err(format!(
            "'{shown}' is not defined in {}; it is defined in: {}",
            ShownPath(from.unwrap_or(Path::new("?"))),
            files
                .iter()
                .map(|f| ShownPath(f).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        PickError::NotDefined => match found.get(name) {
            Some(spec) => Ok(format!(
                "'{shown}' comes from your own configuration ({}): it needs no approval",
                ShownPath(&spec.source)
            )),
            None => {
                // A broken file may be what hides it: name the problems rather than deny it exists.
                let problems: Vec<String> = found
                    .issues
                    .iter()
                    .map(|i| format!("{}: {}", Shown(&i.source), Shown(&i.message)))
                    .collect();
                let servers: Vec<String> =
                    found.names().iter().map(|n| Shown(n).to_string()).collect();
                let mut msg = format!(
                    "no server named '{shown}' is defined here (servers: {})",
                    servers.join(", ")
                );
                if !problems.is_empty() {
                    msg.push_str(&format!(
                        "; files with problems, which may hold it: {}",
                        problems.join("; ")
                    ));
                }
                Err(msg)
            }
        },
    }
}

fn allow_one(
    chosen: &ProjectEntry,
    others: &[&ProjectEntry],
    args: &AllowArgs,
    list: &mut AllowList,
    settings: &Settings,
) -> Result<String, String> {
    let name = Shown(&chosen.name);
    let file = ShownPath(&chosen.source);
    say(&describe(chosen));
    for other in others {
        say(&format!(
            "  (also defined in {} ({}), {}: approve that one with --from {})",
            ShownPath(&other.source),
            other.origin.label(),
            Shown(&other.consent.label()),
            ShownPath(&other.source)
        ));
    }
    match &chosen.consent {
        Consent::Own => return Ok(format!("'{name}' needs no approval")),
        Consent::Allowed(why) => {
            return Ok(format!(
                "'{name}' from {file} is already approved ({})",
                Shown(why)
            ))
        }
        Consent::Denied(why) => {
            return Err(format!(
            "'{name}' from {file} was turned down in its client ({}); change that record to use it",
            Shown(why)
        ))
        }
        Consent::Needed => {}
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(format!(
                "'{name}' was not approved: standard input is not a terminal to ask on; read the \
                 definition above and run again with --yes to approve it"
            ));
        }
        if !confirmed(&chosen.name) {
            return Err(format!("'{name}' was not approved"));
        }
    }
    list.allow(Approval {
        name: chosen.name.clone(),
        source: chosen.source.clone(),
        sha256: chosen.sha256.clone(),
    })
    .map_err(|e| format!("cannot record the approval: {e}"))?;
    Ok(format!(
        "approved '{name}' from {file}: this definition only, as written \
         (recorded in {}; a change to this entry needs approval again)",
        ShownPath(&AllowList::file(&settings.state_dir))
    ))
}

/// Asks on the terminal; true for `y` or `yes`.
fn confirmed(name: &str) -> bool {
    eprint!("Approve this definition of '{}'? [y/N] ", Shown(name));
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// The definition as written, every field escaped: what is approved.
pub fn describe(e: &ProjectEntry) -> String {
    let mut out = format!(
        "server '{}' in {} ({}):\n",
        Shown(&e.name),
        ShownPath(&e.source),
        e.origin.label()
    );
    let Some(obj) = e.entry.as_object() else {
        out.push_str(&format!(
            "  (not an object: {})\n",
            Shown(&e.entry.to_string())
        ));
        return out;
    };
    let mut line = |label: &str, value: String| out.push_str(&format!("  {label}: {value}\n"));
    for key in ["type", "transport", "command"] {
        if let Some(v) = obj.get(key) {
            line(key, text(v));
        }
    }
    if let Some(args) = obj.get("args") {
        match args.as_array() {
            Some(list) if list.is_empty() => line("args", "(none)".into()),
            Some(list) => {
                for (i, a) in list.iter().enumerate() {
                    line(&format!("args[{i}]"), text(a));
                }
            }
            None => line("args", text(args)),
        }
    }
    match obj.get("env").and_then(Value::as_object) {
        Some(env) => {
            for (k, v) in env {
                line(&format!("env {}", Shown(k)), text(v));
            }
        }
        None => {
            if let Some(v) = obj.get("env") {
                line("env", text(v));
            }
        }
    }
    for key in ["cwd", "url", "serverUrl"] {
        if let Some(v) = obj.get(key) {
            line(key, text(v));
        }
    }
    if let Some(headers) = obj.get("headers") {
        let names = match headers.as_object() {
            Some(h) => h
                .keys()
                .map(|k| Shown(k).to_string())
                .collect::<Vec<_>>()
                .join(", "),
            None => text(headers),
        };
        line("headers (names only)", names);
    }
    let shown = [
        "type",
        "transport",
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "serverUrl",
        "headers",
    ];
    for (k, v) in obj.iter().filter(|(k, _)| !shown.contains(&k.as_str())) {
        line(&Shown(k).to_string(), text(v));
    }
    if let Some(problem) = &e.problem {
        line(
            "problem now",
            format!(
                "{}; approving it approves the entry as written",
                Shown(problem)
            ),
        );
    }
    out.push_str("  (values are shown as written: ${...} variables are expanded from your environment when it starts)");
    out
}

/// A JSON value for one line, whole: a string in quotes, anything else as JSON; escaped.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{}\"", Shown(s)),
        other => Shown(&other.to_string()).to_string(),
    }
}
