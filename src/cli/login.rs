//! `mcp-code-bridge login NAME` and `logout NAME`: signing in to a remote server for the user
//! (`upstream::oauth::login`), on a terminal. Exit 0 signed in (or out), 1 the sign-in failed,
//! 2 no such remote server (or one that needs consent first).

use std::io::Write;
use std::process::ExitCode;

use crate::cli::safe_line::safe_line;
use crate::config::{discover, ServerSpec, Settings};
use crate::shown::Shown;
use crate::upstream::oauth::login::{self, LoginOptions};
use crate::upstream::oauth::logout::{self, LoggedOut, Revoked};
use crate::upstream::oauth::store::TokenFile;

/// Exit code when the sign-in (or out) failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code for a name that is no remote server the bridge may reach.
pub const EXIT_USAGE: u8 = 2;

/// The server `name`, when it is configured, remote and allowed.
fn remote(settings: &Settings, name: &str) -> Result<ServerSpec, String> {
    let found = discover(&settings.server_sources);
    let Some(spec) = found.specs.iter().find(|s| s.name == name) else {
        let names: Vec<String> = found
            .specs
            .iter()
            .map(|s| Shown(&s.name).to_string())
            .collect();
        return Err(format!(
            "no MCP server named '{}' is configured (configured: {})",
            Shown(name),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ));
    };
    if let Some(why) = spec.consent.refusal(&spec.name, &spec.source) {
        return Err(why);
    }
    crate::upstream::oauth::remote_url(spec).map_err(|e| e.to_string())?;
    Ok(spec.clone())
}

/// `login NAME`: signs in and stores the tokens; prints the link when no browser opened it.
pub async fn login(settings: &Settings, name: &str) -> ExitCode {
    let spec = match remote(settings, name) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcp-code-bridge: {}", safe_line(&e));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let tokens = TokenFile::new(&settings.state_dir);
    let opts = LoginOptions {
        timeout: settings.oauth.login_timeout,
        client_metadata_url: settings.oauth.client_metadata_url.clone(),
        public: None,
    };
    // The link goes to stderr (stdout stays the answer): a line the server shaped is escaped.
    let mut tell = |line: &str| eprintln!("{}", safe_line(line));
    match login::login(&spec, &tokens, &opts, &mut tell).await {
        Ok(signed) => {
            let until = match signed.expires_at {
                Some(t) => format!(" until {}", utc(t)),
                None => String::new(),
            };
            let refresh = if signed.refreshable {
                " (refreshed without you after that)"
            } else {
                ""
            };
            let _ = writeln!(
                std::io::stdout(),
                "signed in to '{}'{until}{refresh}",
                Shown(&spec.name)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "mcp-code-bridge: signing in to '{}' failed: {}",
                Shown(&spec.name),
                safe_line(&spec.redact(&e.to_string()))
            );
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `logout NAME [--caller TOKEN_NAME]`: revokes (where the server offers it) and forgets the
/// server's tokens, the operator's own or those a `serve` caller signed in with; a server no
/// longer configured is signed out of by its stored URL.
pub async fn logout(settings: &Settings, name: &str, caller: Option<&str>) -> ExitCode {
    let operator = TokenFile::new(&settings.state_dir);
    let files = match caller {
        None => vec![operator],
        Some(token_name) => match operator.callers_named(token_name) {
            Ok(keys) if keys.is_empty() => {
                println!(
                    "no serve caller named '{}' holds tokens; nothing to forget",
                    Shown(token_name)
                );
                return ExitCode::SUCCESS;
            }
            Ok(keys) => keys
                .iter()
                .map(|k| operator.for_caller(k, token_name))
                .collect(),
            Err(e) => {
                eprintln!(
                    "mcp-code-bridge: signing out failed: {}",
                    safe_line(&e.to_string())
                );
                return ExitCode::from(EXIT_FAILED);
            }
        },
    };
    let found = discover(&settings.server_sources);
    let mut code = ExitCode::SUCCESS;
    for tokens in &files {
        let Some(spec) = spec_to_sign_out(&found.specs, tokens, name) else {
            eprintln!(
                "mcp-code-bridge: no MCP server named '{}' is configured or signed in to",
                Shown(name)
            );
            return ExitCode::from(EXIT_USAGE);
        };
        if !sign_out(&spec, tokens).await {
            code = ExitCode::from(EXIT_FAILED);
        }
    }
    code
}

/// The configured server `name`, else one made from the URL its stored tokens were issued for.
fn spec_to_sign_out(specs: &[ServerSpec], tokens: &TokenFile, name: &str) -> Option<ServerSpec> {
    if let Some(spec) = specs.iter().find(|s| s.name == name) {
        return Some(spec.clone());
    }
    let record = tokens.all().ok()?.get(name).cloned()?;
    Some(ServerSpec::new(
        name,
        crate::config::Transport::Http {
            url: record.resource,
            headers: Default::default(),
        },
        &tokens.path(),
    ))
}

/// Signs `tokens`' holder out of `spec` and says how it went; false when it failed.
async fn sign_out(spec: &ServerSpec, tokens: &TokenFile) -> bool {
    let shown = Shown(&spec.name);
    let whose = match tokens.caller_name() {
        Some(n) => format!(" for serve caller '{}'", Shown(n)),
        None => String::new(),
    };
    match logout::logout(spec, tokens).await {
        Ok(LoggedOut::NotSignedIn) => {
            println!("not signed in to '{shown}'{whose}; nothing to forget");
            true
        }
        Ok(LoggedOut::Forgot { revoked }) => {
            let how = match revoked {
                Revoked::Yes => "revoked at the server and forgotten".to_string(),
                Revoked::NotOffered => {
                    "forgotten (the server offers no revocation endpoint)".to_string()
                }
                Revoked::Failed(why) => {
                    eprintln!(
                        "mcp-code-bridge: warning: revoking the tokens failed: {}",
                        safe_line(&why)
                    );
                    "forgotten here (revocation failed)".to_string()
                }
            };
            println!("signed out of '{shown}'{whose}: tokens {how}");
            true
        }
        Err(e) => {
            eprintln!(
                "mcp-code-bridge: signing out of '{shown}'{whose} failed: {}",
                safe_line(&e.to_string())
            );
            false
        }
    }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM UTC`.
pub fn utc(secs: u64) -> String {
    chrono::DateTime::from_timestamp(secs as i64, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| format!("{secs} (epoch seconds)"))
}
