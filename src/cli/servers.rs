//! `mcp-code-bridge servers`: lists the discovered servers with their provenance and state,
//! notes and problems, every piece from a config file escaped (`crate::shown`). Starts nothing.
//! `--allow` is `cli/servers_allow.rs`; pinned tools' pending changes (`change` lines, a diff)
//! and `--approve-changes` are `cli/servers_pins.rs`.

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
    let tokens = crate::upstream::oauth::store::TokenFile::new(&settings.state_dir);
    let mut changes = Vec::new();
    let mut pin_problems = Vec::new();
    for s in &found.specs {
        let mut state = with_callers(with_sign_in(state(s, &pool), s, &tokens), s, &tokens);
        // Pinned tools changed since: the state says so, the diff follows the table.
        match crate::cli::servers_pins::pending(settings, s) {
            Ok(None) => {}
            Ok(Some((pending, diff))) => {
                state = format!("{state}; {pending}");
                changes.extend(diff.into_iter().map(|l| (s.name.clone(), l)));
            }
            Err(e) => pin_problems.push(e),
        }
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}",
            Shown(&s.name),
            s.transport.kind(),
            ShownPath(&s.source),
            safe_line(&state),
            s.origin.label()
        );
    }
    for (name, line) in &changes {
        let _ = writeln!(out, "change\t{}\t{}", Shown(name), safe_line(line));
    }
    for p in &pin_problems {
        let _ = writeln!(out, "problem\tpins\t{}", safe_line(p));
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
    if found.issues.is_empty() && pin_problems.is_empty() {
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

/// A remote server's state with its sign-in: signed in (until when), or the command that signs
/// in when the entry names an OAuth client or its last sign-in is void.
fn with_sign_in(
    state: String,
    s: &ServerSpec,
    tokens: &crate::upstream::oauth::store::TokenFile,
) -> String {
    use crate::upstream::oauth::login::{status, SignIn};
    match status(s, tokens) {
        Ok(Some(SignIn::SignedIn {
            until: Some(t),
            refreshable: false,
        })) if t <= now() => format!(
            "{state}; sign-in expired: run `mcp-code-bridge login {}`",
            Shown(&s.name)
        ),
        Ok(Some(SignIn::SignedIn { until, refreshable })) => {
            let until = match until {
                Some(t) => format!(" until {}", crate::cli::login::utc(t)),
                None => String::new(),
            };
            let refresh = if refreshable {
                ", refreshes by itself"
            } else {
                ""
            };
            format!("{state}; signed in{until}{refresh}")
        }
        Ok(Some(SignIn::Needed)) => format!(
            "{state}; needs sign-in: run `mcp-code-bridge login {}`",
            Shown(&s.name)
        ),
        Ok(Some(SignIn::NotSignedIn)) => state,
        Ok(None) => state,
        Err(e) => format!("{state}; sign-in unknown: {e}"),
    }
}

/// Callers of `serve` named after the state when they signed in to the server themselves (at
/// most `CALLERS_SHOWN` of them, then how many more); a caller's tokens go when its token
/// leaves the tokens file.
fn with_callers(
    state: String,
    s: &ServerSpec,
    tokens: &crate::upstream::oauth::store::TokenFile,
) -> String {
    match crate::upstream::oauth::login::callers_signed_in(s, tokens) {
        Ok(names) if names.is_empty() => state,
        Ok(names) => format!("{state}; {}", callers_line(&names)),
        Err(e) => format!("{state}; callers' sign-ins unknown: {e}"),
    }
}

/// How many caller names one `servers` line shows.
const CALLERS_SHOWN: usize = 8;

fn callers_line(names: &[String]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(CALLERS_SHOWN)
        .map(|n| Shown(n).to_string())
        .collect();
    let more = names.len().saturating_sub(CALLERS_SHOWN);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("signed in for serve callers: {}{tail}", shown.join(", "))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_are_named_up_to_a_bound() {
        let few: Vec<String> = vec!["alice".into(), "bob".into()];
        assert_eq!(
            callers_line(&few),
            "signed in for serve callers: alice, bob"
        );
        let many: Vec<String> = (0..11).map(|i| format!("c{i:02}")).collect();
        let line = callers_line(&many);
        assert!(line.ends_with("c07 and 3 more"), "{line}");
        assert!(!line.contains("c08"), "{line}");
    }
}
