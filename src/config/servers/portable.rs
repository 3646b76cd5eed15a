//! A client's server entry judged as `mcp-code-bridge setup` sees it: whether it launches this
//! bridge, and whether it keeps its meaning when copied, as written, into the user's own files
//! (`~/MCPs`), where values are literal.

use std::path::Path;

use serde_json::Value;

use super::clients::{Client, Origin};
use super::entry::parse_entry;
use super::expand::{variable_forms, Expander, Syntax};
use super::read::launches_self;
use super::spec::ServerSpec;

/// What copying an entry into `~/MCPs` as written would give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Portability {
    /// The entry launches this bridge: never copied.
    Bridge,
    /// The bridge would not read it from `~/MCPs`: the reason.
    Unreadable(String),
    /// It would do more in `~/MCPs` than in its client: the reason.
    MoreThere(String),
    /// It uses variables the client expands and `~/MCPs` files would not: the forms as written.
    Variables(Vec<String>),
    /// It means the same in `~/MCPs`.
    Portable,
}

/// Judges the entry `name` of a `client` file for copying into `~/MCPs`.
pub fn portability(client: Client, name: &str, entry: &Value) -> Portability {
    let spec = match literal_spec(name, entry) {
        Ok(spec) => spec,
        Err(message) => return Portability::Unreadable(message),
    };
    if launches_self(&spec) {
        return Portability::Bridge;
    }
    if client != Client::ClaudeCode && spec.headers_helper.is_some() {
        return Portability::MoreThere(format!(
            "its \"headersHelper\" is Claude Code's: {} does not run that command, the bridge's own files would",
            client.label()
        ));
    }
    let forms = expanded_values(entry)
        .into_iter()
        .flat_map(|v| variable_forms(client.syntax(), v))
        .collect::<Vec<_>>();
    if forms.is_empty() {
        Portability::Portable
    } else {
        Portability::Variables(forms)
    }
}

/// Whether a client's entry, as written, launches this bridge (`mcp-code-bridge run`, its
/// path, or `uvx mcp-code-bridge run`): the test that skips the bridge's own entry when a
/// client's file is read.
pub fn launches_bridge(entry: &Value) -> bool {
    literal_spec("bridge", entry).is_ok_and(|spec| launches_self(&spec))
}

/// The entry read as the bridge reads its own files: values literal.
fn literal_spec(name: &str, entry: &Value) -> Result<ServerSpec, String> {
    let no_env = |_: &str| None;
    let mut x = Expander::new(Syntax::Literal, &no_env, None, None);
    parse_entry(Path::new(""), Origin::Own, name, entry, &mut x).map_err(|i| i.message)
}

/// Every string of the entry that a client expands variables in (`entry.rs`: command, args,
/// env, cwd, url, serverUrl, headers).
fn expanded_values(entry: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    for key in ["command", "cwd", "url", "serverUrl"] {
        out.extend(entry.get(key).and_then(Value::as_str));
    }
    if let Some(args) = entry.get("args").and_then(Value::as_array) {
        out.extend(args.iter().filter_map(Value::as_str));
    }
    for key in ["env", "headers"] {
        if let Some(map) = entry.get(key).and_then(Value::as_object) {
            out.extend(map.values().filter_map(Value::as_str));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bridge_in_any_launch_form_is_recognised() {
        for entry in [
            json!({"command": "/opt/bin/mcp-code-bridge", "args": ["run"]}),
            json!({"type": "stdio", "command": "uvx", "args": ["mcp-code-bridge", "run"]}),
            json!({"command": "${HOME}/.cargo/bin/mcp-code-bridge", "args": ["run"], "alwaysLoad": true}),
        ] {
            assert!(launches_bridge(&entry), "{entry}");
            assert_eq!(
                portability(Client::ClaudeCode, "code", &entry),
                Portability::Bridge
            );
        }
        for entry in [
            json!({"command": "mcp-code-bridge", "args": ["servers"]}),
            json!({"command": "npx", "args": ["-y", "server-memory"]}),
            json!({"url": "https://example.test/mcp"}),
            json!("not an entry"),
        ] {
            assert!(!launches_bridge(&entry), "{entry}");
        }
    }

    #[test]
    fn variables_are_judged_by_the_clients_syntax() {
        let entry = json!({
            "command": "npx",
            "args": ["-y", "linear", "--home", "${userHome}"],
            "env": {"TOKEN": "${env:LINEAR_KEY}", "PLAIN": "lin_literal_secret"},
            "description": "${not_expanded_here}"
        });
        assert_eq!(
            portability(Client::Cursor, "linear", &entry),
            Portability::Variables(vec!["${userHome}".into(), "${env:LINEAR_KEY}".into()])
        );
        // Claude Desktop expands nothing: the text means the same in ~/MCPs.
        assert_eq!(
            portability(Client::ClaudeDesktop, "linear", &entry),
            Portability::Portable
        );
        // Claude Code keeps `${env:...}` as written; `${userHome}` is its variable `userHome`.
        assert_eq!(
            portability(Client::ClaudeCode, "linear", &entry),
            Portability::Variables(vec!["${userHome}".into()])
        );
        let headers = json!({"type": "http", "url": "https://x.test/mcp",
            "headers": {"Authorization": "Bearer ${TOKEN:-none}"}});
        assert_eq!(
            portability(Client::ClaudeCode, "h", &headers),
            Portability::Variables(vec!["${TOKEN:-none}".into()])
        );
    }

    #[test]
    fn a_headers_helper_is_copied_only_from_claude_code() {
        let entry = json!({"type": "http", "url": "https://x.test/mcp",
            "headersHelper": "/opt/bin/get-mcp-auth-headers.sh"});
        assert_eq!(
            portability(Client::ClaudeCode, "h", &entry),
            Portability::Portable
        );
        let Portability::MoreThere(why) = portability(Client::Cursor, "h", &entry) else {
            panic!("Cursor does not run a headersHelper")
        };
        assert!(why.contains("Cursor does not run that command"), "{why}");
    }

    #[test]
    fn an_entry_the_bridge_would_not_read_says_why() {
        let entry =
            json!({"type": "stdio", "command": "node", "envFile": "${workspaceFolder}/.env"});
        let Portability::Unreadable(why) = portability(Client::VsCode, "x", &entry) else {
            panic!("envFile is not read by the bridge")
        };
        assert!(why.contains("envFile"), "{why}");
    }
}
