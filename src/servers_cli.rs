//! `mcp-code-bridge servers`: lists the discovered servers with their provenance and state,
//! notes and problems; `--allow NAME` approves a project's server. Starts nothing.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::config::{
    discover, project_definitions, AllowList, Approval, Consent, ServerSpec, Servers, Settings,
    Transport,
};
use crate::upstream::UpstreamPool;

/// Exit code of `servers` when the configuration has problems.
pub const EXIT_PROBLEMS: u8 = 3;

/// Prints one tab-separated line per server (`name, transport, source, state, origin`), then a
/// `note` line per decision and a `problem` line per problem. Exit code 3 only for problems.
pub fn list(settings: &Settings) -> ExitCode {
    let found = discover(&settings.server_sources);
    let pool = UpstreamPool::new(Arc::new(found.clone()), &settings.state_dir);
    let mut out = std::io::stdout().lock();
    if found.specs.is_empty() {
        let _ = writeln!(
            out,
            "no MCP servers configured (looked in {})",
            describe_sources(settings)
        );
    }
    for s in &found.specs {
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}",
            s.name,
            s.transport.kind(),
            s.source.display(),
            state(s, &pool),
            s.origin.label()
        );
    }
    for n in &found.notes {
        let _ = writeln!(out, "note\t{}\t{}", n.source, n.message);
    }
    for i in &found.issues {
        let _ = writeln!(out, "problem\t{}\t{}", i.source, i.message);
    }
    if found.issues.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROBLEMS)
    }
}

fn state(s: &ServerSpec, pool: &UpstreamPool) -> String {
    match &s.consent {
        Consent::Needed => {
            return format!(
                "needs consent: run `mcp-code-bridge servers --allow {}`",
                s.name
            )
        }
        Consent::Denied(why) => return format!("turned down ({why})"),
        Consent::Own | Consent::Allowed(_) => {}
    }
    match (s.disabled, pool.is_cached(s)) {
        (true, _) => "disabled".into(),
        (false, true) => "indexed".into(),
        (false, false) => "not indexed yet".into(),
    }
}

/// Records the user's approval of each project server in `names`, pinned to its entry as it is
/// now. Exit code 0 when every name was approved or needed nothing, 1 otherwise.
pub fn allow(settings: &Settings, names: &[String]) -> ExitCode {
    let sources = &settings.server_sources;
    let found = discover(sources);
    let pending = project_definitions(sources, &|k| std::env::var(k).ok());
    let mut list = AllowList::load(&settings.state_dir);
    let mut ok = true;
    for name in names {
        let defs: Vec<&ServerSpec> = pending.iter().filter(|s| &s.name == name).collect();
        let results = if defs.is_empty() {
            vec![not_a_project_server(&found, name)]
        } else {
            defs.into_iter()
                .map(|spec| allow_one(spec, &mut list, &settings.state_dir))
                .collect()
        };
        for r in results {
            match r {
                Ok(message) => {
                    let _ = writeln!(std::io::stdout().lock(), "{message}");
                }
                Err(message) => {
                    eprintln!("mcp-code-bridge: {message}");
                    ok = false;
                }
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn not_a_project_server(found: &Servers, name: &str) -> Result<String, String> {
    match found.get(name) {
        Some(spec) => Ok(format!(
            "'{name}' comes from your own configuration ({}): it needs no approval",
            spec.source.display()
        )),
        None => Err(format!(
            "no server named '{name}' is configured here (servers: {})",
            found.names().join(", ")
        )),
    }
}

fn allow_one(spec: &ServerSpec, list: &mut AllowList, state_dir: &Path) -> Result<String, String> {
    let name = &spec.name;
    match &spec.consent {
        Consent::Own => Ok(format!("'{name}' needs no approval")),
        Consent::Allowed(why) => Ok(format!(
            "'{name}' from {} is already approved ({why})",
            spec.source.display()
        )),
        Consent::Denied(why) => Err(format!(
            "'{name}' from {} was turned down in its client ({why}); change that record to use it",
            spec.source.display()
        )),
        Consent::Needed => {
            list.allow(Approval {
                name: name.to_string(),
                source: spec.source.clone(),
                sha256: spec.entry_sha256.clone(),
            })
            .map_err(|e| format!("cannot record the approval: {e}"))?;
            Ok(format!(
                "approved '{name}' from {}: {}\n(recorded in {}; a change to this entry needs approval again)",
                spec.source.display(),
                spec.redact(&what_runs(&spec.transport)),
                AllowList::file(state_dir).display()
            ))
        }
    }
}

/// What starting the server does, for the approval message.
fn what_runs(t: &Transport) -> String {
    match t {
        Transport::Stdio { command, args, .. } => {
            let mut line = format!("runs {command}");
            for a in args {
                line.push(' ');
                line.push_str(a);
            }
            line
        }
        Transport::Http { url, .. } | Transport::Sse { url, .. } => format!("connects to {url}"),
    }
}

fn describe_sources(settings: &Settings) -> String {
    let src = &settings.server_sources;
    let mut parts: Vec<String> = src
        .dir
        .iter()
        .map(|d| format!("{}/*.json", d.display()))
        .collect();
    parts.extend(src.extra_file.iter().map(|f| f.display().to_string()));
    if !src.client_files.is_empty() {
        parts.push("client config files".into());
    }
    parts.join(", ")
}
