//! One server entry (`"name": {...}`) of a config file, parsed into a [`ServerSpec`] with the
//! file's variable syntax applied. Accepts every client's shape: `command`/`args`/`env`/`cwd`,
//! `type` (or `transport`) `stdio`/`http`/`sse`, a remote `url` without `type` (Cursor), Windsurf's
//! `serverUrl`, `disabled`, and the policy keys (`entry_policy.rs`: `allowedTools`,
//! `disabledTools`, `requireApproval`, `autoApprove`, `callsPerMinute`, `maxCallsPerRun`,
//! `maxResultBytesPerRun`), and `perClient` (one process per client under `serve --http`; a
//! project's file may set it too: it only adds isolation, and its approval pins it), and
//! Claude Code's `headersHelper` on remote entries (in Claude Code's files and the user's own).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::clients::{Client, Origin};
use super::consent::{entry_hash, Consent};
use super::entry_policy::parse_policy;
use super::expand::{ExpandError, Expander};
use super::oauth::parse_oauth;
use super::spec::{ConfigIssue, ServerSpec, Transport};

/// Parses the entry `name` of `file`, expanding variables with `expander`.
pub fn parse_entry(
    file: &Path,
    origin: Origin,
    name: &str,
    entry: &Value,
    expander: &mut Expander<'_>,
) -> Result<ServerSpec, ConfigIssue> {
    let err = |m: String| ConfigIssue {
        source: format!("{} (server '{name}')", file.display()),
        message: m,
    };
    if name.trim().is_empty() || name.len() > 128 || name.chars().any(crate::shown::is_unsafe) {
        return Err(err("invalid server name".into()));
    }
    let obj = entry
        .as_object()
        .ok_or_else(|| err("the entry must be an object".into()))?;
    let fields = Fields { obj, err: &err };
    let mut x = |field: &str, text: String| -> Result<String, ConfigIssue> {
        expander
            .expand(&text)
            .map_err(|e| err(expand_problem(field, &e)))
    };
    let disabled = match obj.get("disabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(err("\"disabled\" must be true or false".into())),
    };
    let per_client = match obj.get("perClient") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(err("\"perClient\" must be true or false".into())),
    };
    let shared_credentials = match obj.get("sharedCredentials") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(err("\"sharedCredentials\" must be true or false".into())),
    };
    let policy = parse_policy(obj).map_err(&err)?;
    let kind = fields
        .string("type")?
        .or(fields.string("transport")?)
        .map(|k| k.to_ascii_lowercase());
    let remote_url = fields.string("url")?.or(fields.string("serverUrl")?);
    let has_command = obj.get("command").is_some_and(|c| !c.is_null());
    let transport = match kind.as_deref() {
        Some("stdio") | None if has_command || remote_url.is_none() => {
            let command = fields
                .string("command")?
                .filter(|c| !c.trim().is_empty())
                .ok_or_else(|| err("missing \"command\"".into()))?;
            let command = x("command", command)?;
            let args = fields
                .strings("args")?
                .into_iter()
                .map(|a| x("args", a))
                .collect::<Result<_, _>>()?;
            let mut env = BTreeMap::new();
            for (k, v) in fields.map("env")? {
                env.insert(k.clone(), x(&format!("env.{k}"), v)?);
            }
            let cwd = match fields.string("cwd")? {
                Some(c) => Some(PathBuf::from(x("cwd", c)?)),
                None => None,
            };
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            }
        }
        None | Some("http" | "streamable-http" | "streamablehttp" | "streamable_http") => {
            let url = expanded_url(remote_url, &mut x, &err)?;
            Transport::Http {
                url,
                headers: expand_headers(fields.map("headers")?, &mut x)?,
            }
        }
        Some("sse") => {
            let url = expanded_url(remote_url, &mut x, &err)?;
            Transport::Sse {
                url,
                headers: expand_headers(fields.map("headers")?, &mut x)?,
            }
        }
        Some(other) => {
            return Err(err(format!(
                "unknown transport type \"{other}\" (expected stdio, http or sse)"
            )))
        }
    };
    // `"oauth"` (remote entries only): its secret joins the values kept out of messages.
    let oauth = match &transport {
        Transport::Stdio { .. } => None,
        _ => parse_oauth(obj, &mut |f, t| x(f, t).map_err(|e| e.message)).map_err(&err)?,
    };
    if let Some(secret) = oauth.as_ref().and_then(|o| o.client_secret.clone()) {
        if !expander.secrets.contains(&secret) {
            expander.secrets.push(secret);
        }
    }
    if let Some(f) = ["envFile", "envfile"]
        .iter()
        .find(|f| obj.contains_key(**f))
    {
        return Err(err(format!(
            "\"{f}\" is not supported by the bridge; put the variables in \"env\""
        )));
    }
    let headers_helper = match &transport {
        Transport::Stdio { .. } => None,
        _ => headers_helper(origin, &fields)?,
    };
    let mut spec = ServerSpec::new(name, transport, file);
    spec.headers_helper = headers_helper;
    spec.disabled = disabled;
    spec.per_client = per_client;
    spec.shared_credentials = shared_credentials;
    spec.oauth = oauth.map(Arc::new);
    spec.policy = Arc::new(policy);
    spec.description = fields.string("description")?;
    spec.origin = origin;
    spec.entry_sha256 = entry_hash(entry);
    spec.consent = if origin.needs_consent() {
        Consent::Needed
    } else {
        Consent::Own
    };
    Ok(spec)
}

/// The longest `headersHelper` command accepted.
const MAX_HELPER: usize = 4096;

/// A remote entry's `"headersHelper"`, in the files where it means something: Claude Code's
/// (which defines it) and the user's own. Other clients do not run it, so neither does the
/// bridge for their files. Kept as written: the shell it runs in expands `$VAR`, `${VAR}` and
/// `${VAR:-default}` itself, so no value of the environment is put into the command text.
fn headers_helper<E: Fn(String) -> ConfigIssue>(
    origin: Origin,
    fields: &Fields<'_, E>,
) -> Result<Option<String>, ConfigIssue> {
    let honoured = matches!(origin, Origin::Own | Origin::Client(Client::ClaudeCode, _));
    if !honoured {
        return Ok(None);
    }
    let Some(helper) = fields.string("headersHelper")? else {
        return Ok(None);
    };
    if helper.trim().is_empty() {
        return Err((fields.err)("\"headersHelper\" is empty".into()));
    }
    if helper.len() > MAX_HELPER || helper.contains('\0') {
        return Err((fields.err)(format!(
            "\"headersHelper\" must be a command of at most {MAX_HELPER} bytes without NUL"
        )));
    }
    Ok(Some(helper))
}

fn expand_headers(
    headers: BTreeMap<String, String>,
    x: &mut impl FnMut(&str, String) -> Result<String, ConfigIssue>,
) -> Result<BTreeMap<String, String>, ConfigIssue> {
    headers
        .into_iter()
        .map(|(k, v)| {
            let v = x(&format!("headers.{k}"), v)?;
            Ok((k, v))
        })
        .collect()
}

/// The message for a variable that could not be expanded: names the field and the variable,
/// never a value.
fn expand_problem(field: &str, e: &ExpandError) -> String {
    format!("in \"{field}\": {e}; the server is not started with the text unexpanded")
}

/// The entry's URL with its variables expanded, which must then be http(s); a message shows the
/// URL as written, never an expanded value.
fn expanded_url(
    raw: Option<String>,
    x: &mut impl FnMut(&str, String) -> Result<String, ConfigIssue>,
    err: &impl Fn(String) -> ConfigIssue,
) -> Result<String, ConfigIssue> {
    let raw = raw.ok_or_else(|| err("missing \"url\"".into()))?;
    let url = x("url", raw.clone())?;
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        Ok(url)
    } else if url == raw {
        Err(err(format!(
            "\"url\" must start with http:// or https://, got {raw:?}"
        )))
    } else {
        Err(err(format!(
            "\"url\" must start with http:// or https:// once expanded; {raw:?} does not"
        )))
    }
}

/// Typed access to an entry's fields, with errors naming the field.
struct Fields<'a, E: Fn(String) -> ConfigIssue> {
    obj: &'a Map<String, Value>,
    err: &'a E,
}

impl<E: Fn(String) -> ConfigIssue> Fields<'_, E> {
    fn string(&self, key: &str) -> Result<Option<String>, ConfigIssue> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err((self.err)(format!("\"{key}\" must be a string"))),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<String>, ConfigIssue> {
        let bad = || (self.err)(format!("\"{key}\" must be an array of strings"));
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
                .collect(),
            Some(_) => Err(bad()),
        }
    }

    fn map(&self, key: &str) -> Result<BTreeMap<String, String>, ConfigIssue> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(n) => Ok((k.clone(), n.to_string())),
                    Value::Bool(b) => Ok((k.clone(), b.to_string())),
                    _ => Err((self.err)(format!("\"{key}.{k}\" must be a string"))),
                })
                .collect(),
            Some(_) => Err((self.err)(format!(
                "\"{key}\" must be an object of strings"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::servers::expand::Syntax;
    use serde_json::json;

    fn parse(entry: Value) -> Result<ServerSpec, ConfigIssue> {
        let no_env = |_: &str| None;
        let mut x = Expander::new(Syntax::Literal, &no_env, None, None);
        parse_entry(Path::new("/c.json"), Origin::Own, "s", &entry, &mut x)
    }

    #[test]
    fn per_client_is_a_boolean_off_by_default_and_a_bad_one_names_the_key() {
        let off = parse(json!({"command": "x"})).expect("valid");
        assert!(!off.per_client);
        let on = parse(json!({"command": "x", "perClient": true})).expect("valid");
        assert!(on.per_client);
        assert!(
            !parse(json!({"command": "x", "perClient": null}))
                .expect("valid")
                .per_client
        );
        let bad = parse(json!({"command": "x", "perClient": "yes"})).expect_err("a string");
        assert_eq!(bad.message, "\"perClient\" must be true or false");
        assert_eq!(bad.source, "/c.json (server 's')");
        // Part of the definition: the same entry without it is another definition.
        assert!(!on.same_definition(&off));
    }

    #[test]
    fn shared_credentials_is_a_boolean_off_by_default_and_only_remote_entries_go_per_caller() {
        let own = parse(json!({"type": "http", "url": "https://a/mcp"})).expect("valid");
        assert!(!own.shared_credentials && own.per_caller_identity());
        let shared =
            parse(json!({"type": "sse", "url": "https://a/sse", "sharedCredentials": true}))
                .expect("valid");
        assert!(shared.shared_credentials && !shared.per_caller_identity());
        assert!(!shared.same_definition(&own.clone()));
        let stdio = parse(json!({"command": "x"})).expect("valid");
        assert!(
            !stdio.per_caller_identity(),
            "a local process has no upstream identity"
        );
        let bad =
            parse(json!({"url": "https://a/mcp", "sharedCredentials": 1})).expect_err("a number");
        assert_eq!(bad.message, "\"sharedCredentials\" must be true or false");
    }

    #[test]
    fn a_server_name_with_an_invisible_or_control_character_is_a_problem() {
        let no_env = |_: &str| None;
        let entry = json!({"command": "x"});
        for name in [
            "gh\u{E0041}",
            "\u{3164}",
            "g\u{034F}h",
            "gh\u{FE0F}",
            "a\u{202E}b",
            "a\nb",
        ] {
            let mut x = Expander::new(Syntax::Literal, &no_env, None, None);
            let bad = parse_entry(Path::new("/c.json"), Origin::Own, name, &entry, &mut x)
                .expect_err(name);
            assert_eq!(bad.message, "invalid server name", "{name:?}");
        }
        let mut x = Expander::new(Syntax::Literal, &no_env, None, None);
        parse_entry(
            Path::new("/c.json"),
            Origin::Own,
            "github-é",
            &entry,
            &mut x,
        )
        .expect("valid");
    }
}
