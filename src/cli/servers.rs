//! `mcp-code-bridge servers`: lists the discovered servers with their provenance and state,
//! notes and problems, every piece from a config file escaped (`crate::shown`). Starts nothing.
//! `--allow` is `cli/servers_allow.rs`.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use crate::cli::safe_line::safe_line;
use crate::config::{discover, Consent, ServerSpec, Settings};
use crate::shown::{Shown, ShownPath};
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
            safe_line(&describe_sources(settings))
        );
    }
    for s in &found.specs {
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}",
            Shown(&s.name),
            s.transport.kind(),
            ShownPath(&s.source),
            safe_line(&state(s, &pool)),
            s.origin.label()
        );
    }
    for n in &found.notes {
        let _ = writeln!(
            out,
            "note\t{}\t{}",
            safe_line(&n.source),
            safe_line(&n.message)
        );
    }
    for i in &found.issues {
        let _ = writeln!(
            out,
            "problem\t{}\t{}",
            safe_line(&i.source),
            safe_line(&i.message)
        );
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
                Shown(&s.name)
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

fn describe_sources(settings: &Settings) -> String {
    let src = &settings.server_sources;
    let mut parts: Vec<String> = src
        .dir
        .iter()
        .map(|d| format!("{}/*.json", ShownPath(d)))
        .collect();
    parts.extend(src.extra_file.iter().map(|f| ShownPath(f).to_string()));
    if !src.client_files.is_empty() {
        parts.push("client config files".into());
    }
    parts.join(", ")
}
