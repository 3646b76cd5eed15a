//! Variable expansion in imported client configs, as each client does it.
//!
//! | syntax | forms |
//! |---|---|
//! | Claude Code | `${VAR}`, `${VAR:-default}` |
//! | Cursor | `${env:VAR}`, `${userHome}`, `${workspaceFolder}`, `${workspaceFolderBasename}`, `${pathSeparator}`, `${/}` |
//! | VS Code | Cursor's forms and `${cwd}`; `${input:id}`, `${config:...}`, `${command:...}` and the editor's file variables need the editor: a config problem here (for `${input:id}`, one that gives the `${env:...}` text to write instead) |
//! | Windsurf | `${env:VAR}` (its `${file:...}` is a config problem here) |
//! | none | the bridge's own files and Claude Desktop: values are literal |
//!
//! An unset variable without a default, or a form the bridge cannot resolve, is an
//! [`ExpandError`] naming the variable (never its value); the caller turns it into a config
//! problem rather than sending the literal text to a server. Values taken from the environment
//! are recorded so messages about the server can be redacted.

use std::path::Path;

/// Which client's variable syntax applies to a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// No expansion: values are used as written.
    Literal,
    /// Claude Code's `${VAR}` and `${VAR:-default}`.
    ClaudeCode,
    /// Cursor's `${env:VAR}`, `${userHome}`, `${workspaceFolder}` and friends.
    Cursor,
    /// VS Code's predefined variables; `${input:...}` is not resolvable outside the editor.
    VsCode,
    /// Windsurf's `${env:VAR}`.
    Windsurf,
}

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// A variable with no value and no default.
    #[error("variable {0} is not set (and has no default)")]
    Unset(String),
    /// A form that only the client itself can resolve (an editor prompt, say).
    #[error("{0} cannot be resolved outside the client that defines it")]
    Unsupported(String),
    /// A `${` without its closing `}`.
    #[error("unterminated ${{...}} in {0:?}")]
    Unterminated(String),
    /// VS Code's `${input:ID}`: a prompt VS Code shows, whose answer it keeps in its own secret
    /// storage (which the bridge never reads). The text says what to write instead.
    #[error("{}", input_problem(.id, .declared.as_ref()))]
    Input {
        /// The input's id.
        id: String,
        /// Its declaration in the file's `inputs`, when there is one.
        declared: Option<VsInput>,
    },
}

/// One of VS Code's `inputs` (a prompt VS Code shows before it starts a server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VsInput {
    /// Its `id`, as `${input:ID}` names it.
    pub id: String,
    /// Its `description` (the prompt's text), cut to 80 characters.
    pub description: Option<String>,
    /// `"password": true`: VS Code masks the answer.
    pub password: bool,
}

/// The `inputs` array of a VS Code `mcp.json` (entries that are not objects with an `id` are
/// skipped; at most 100 are read).
pub fn vs_inputs(root: &serde_json::Map<String, serde_json::Value>) -> Vec<VsInput> {
    let Some(list) = root.get("inputs").and_then(|v| v.as_array()) else {
        return Vec::new();
    };
    list.iter()
        .take(100)
        .filter_map(|i| {
            let id = i.get("id")?.as_str()?.to_string();
            let description = i
                .get("description")
                .and_then(|d| d.as_str())
                .map(|d| d.chars().take(80).collect());
            let password = i.get("password").and_then(|p| p.as_bool()) == Some(true);
            Some(VsInput {
                id,
                description,
                password,
            })
        })
        .collect()
}

/// The environment variable suggested in place of `${input:id}`: the id in upper case, other
/// characters than letters, digits and `_` as `_`.
pub fn input_env_name(id: &str) -> String {
    let mut name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "INPUT_");
    }
    name
}

fn input_problem(id: &str, declared: Option<&VsInput>) -> String {
    let shown: String = crate::shown::Shown(id)
        .to_string()
        .chars()
        .take(64)
        .collect();
    let what = match declared {
        Some(d) => {
            let kind = if d.password {
                "a password prompt"
            } else {
                "a prompt"
            };
            match &d.description {
                Some(text) => format!("{kind} (\"{}\")", crate::shown::Shown(text)),
                None => kind.to_string(),
            }
        }
        None => "a prompt (not declared in the file's \"inputs\")".to_string(),
    };
    let env = input_env_name(id);
    format!(
        "${{input:{shown}}} is {what} that VS Code shows and answers from its own secret storage, \
         which the bridge does not read; write \"${{env:{env}}}\" in its place (VS Code reads that form too) \
         and set {env} in the environment the bridge starts in"
    )
}

/// What expansion may read: the environment, the home folder and the workspace folder.
pub struct Expander<'a> {
    syntax: Syntax,
    env: &'a dyn Fn(&str) -> Option<String>,
    home: Option<&'a Path>,
    workspace: Option<&'a Path>,
    /// VS Code's `inputs` of the file, for the message about `${input:ID}`.
    inputs: Vec<VsInput>,
    /// Values substituted from the environment, kept for redaction.
    pub secrets: Vec<String>,
}

impl<'a> Expander<'a> {
    /// An expander for `syntax`, reading variables through `env`.
    pub fn new(
        syntax: Syntax,
        env: &'a dyn Fn(&str) -> Option<String>,
        home: Option<&'a Path>,
        workspace: Option<&'a Path>,
    ) -> Self {
        Expander {
            syntax,
            env,
            home,
            workspace,
            inputs: Vec::new(),
            secrets: Vec::new(),
        }
    }

    /// The same expander, knowing the file's VS Code `inputs`.
    pub fn with_inputs(mut self, inputs: Vec<VsInput>) -> Self {
        self.inputs = inputs;
        self
    }

    /// `text` with every variable of this syntax replaced.
    ///
    /// # Errors
    /// An unset variable without a default, an unsupported form, or an unterminated `${`.
    pub fn expand(&mut self, text: &str) -> Result<String, ExpandError> {
        if self.syntax == Syntax::Literal || !text.contains("${") {
            return Ok(text.to_string());
        }
        let mut out = String::with_capacity(text.len());
        for piece in pieces(text) {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Var { body, raw } => match self.resolve(body)? {
                    Some(value) => out.push_str(&value),
                    // Not a variable of this syntax: kept as written, as the client keeps it.
                    None => out.push_str(raw),
                },
                Piece::Unterminated => {
                    return Err(ExpandError::Unterminated(text.chars().take(60).collect()))
                }
            }
        }
        Ok(out)
    }

    /// The value of one `${body}`; `None` when the form is not this syntax's.
    fn resolve(&mut self, body: &str) -> Result<Option<String>, ExpandError> {
        match self.syntax {
            Syntax::Literal => Ok(None),
            Syntax::ClaudeCode => {
                let (name, default) = match body.split_once(":-") {
                    Some((n, d)) => (n, Some(d)),
                    None => (body, None),
                };
                if !is_var_name(name) {
                    return Ok(None);
                }
                match (self.env_value(name), default) {
                    (Some(v), _) if !v.is_empty() || default.is_none() => Ok(Some(v)),
                    (_, Some(d)) => Ok(Some(d.to_string())),
                    (None, None) => Err(ExpandError::Unset(name.to_string())),
                    (Some(v), None) => Ok(Some(v)),
                }
            }
            Syntax::Windsurf => match body.strip_prefix("env:") {
                Some(name) => self.required_env(name).map(Some),
                None if body.starts_with("file:") => {
                    Err(ExpandError::Unsupported(format!("${{{body}}}")))
                }
                None => Ok(None),
            },
            Syntax::Cursor | Syntax::VsCode => {
                if let Some(name) = body.strip_prefix("env:") {
                    return self.required_env(name).map(Some);
                }
                if let Some(id) = body.strip_prefix("input:") {
                    if self.syntax == Syntax::VsCode {
                        let declared = self.inputs.iter().find(|i| i.id == id).cloned();
                        return Err(ExpandError::Input {
                            id: id.to_string(),
                            declared,
                        });
                    }
                }
                let path = |p: Option<&Path>, what: &str| {
                    p.map(|p| p.display().to_string())
                        .ok_or_else(|| ExpandError::Unset(what.to_string()))
                };
                match body {
                    "userHome" => path(self.home, "userHome").map(Some),
                    "workspaceFolder" => path(self.workspace, "workspaceFolder").map(Some),
                    "workspaceFolderBasename" => self
                        .workspace
                        .and_then(|w| w.file_name())
                        .map(|n| Some(n.to_string_lossy().into_owned()))
                        .ok_or_else(|| ExpandError::Unset("workspaceFolderBasename".into())),
                    "pathSeparator" | "/" => Ok(Some(std::path::MAIN_SEPARATOR.to_string())),
                    "cwd" if self.syntax == Syntax::VsCode => path(self.workspace, "cwd").map(Some),
                    _ if self.syntax == Syntax::VsCode => {
                        Err(ExpandError::Unsupported(format!("${{{body}}}")))
                    }
                    _ => Ok(None),
                }
            }
        }
    }

    fn required_env(&mut self, name: &str) -> Result<String, ExpandError> {
        self.env_value(name)
            .ok_or_else(|| ExpandError::Unset(name.to_string()))
    }

    fn env_value(&mut self, name: &str) -> Option<String> {
        let v = (self.env)(name)?;
        if v.len() >= 4 && !self.secrets.contains(&v) {
            self.secrets.push(v.clone());
        }
        Some(v)
    }
}

/// The `${...}` forms in `text` that `syntax` expands or refuses, as written (an unterminated
/// `${` included); literal text and forms the client keeps as they are are left out.
pub fn variable_forms(syntax: Syntax, text: &str) -> Vec<String> {
    if syntax == Syntax::Literal {
        return Vec::new();
    }
    let any = |_: &str| Some(String::new());
    let root = Path::new("/");
    let mut x = Expander::new(syntax, &any, Some(root), Some(root));
    let mut forms = Vec::new();
    for piece in pieces(text) {
        match piece {
            Piece::Text(_) => {}
            Piece::Var { body, raw } => {
                if !matches!(x.resolve(body), Ok(None)) {
                    forms.push(raw.to_string());
                }
            }
            Piece::Unterminated => forms.push(text.chars().take(60).collect()),
        }
    }
    forms
}

/// A part of a value: plain text, one `${body}`, or a `${` left open (the rest of the value).
enum Piece<'t> {
    Text(&'t str),
    Var { body: &'t str, raw: &'t str },
    Unterminated,
}

/// `text` cut into [`Piece`]s, in order.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push(Piece::Unterminated);
            return out;
        };
        out.push(Piece::Var {
            body: &after[..end],
            raw: &rest[start..start + 3 + end],
        });
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret-token".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn run(syntax: Syntax, text: &str) -> Result<String, ExpandError> {
        let home = Path::new("/home/u");
        let ws = Path::new("/work/proj");
        Expander::new(syntax, &env, Some(home), Some(ws)).expand(text)
    }

    #[test]
    fn claude_code_forms() {
        let cc = Syntax::ClaudeCode;
        assert_eq!(
            run(cc, "Bearer ${TOKEN}").expect("test"),
            "Bearer s3cret-token"
        );
        assert_eq!(run(cc, "${MISSING:-dflt}/x").expect("test"), "dflt/x");
        assert_eq!(run(cc, "${EMPTY:-dflt}").expect("test"), "dflt");
        assert_eq!(run(cc, "${EMPTY}").expect("test"), "");
        assert_eq!(
            run(cc, "$TOKEN and ${env:TOKEN}").expect("test"),
            "$TOKEN and ${env:TOKEN}"
        );
        assert_eq!(
            run(cc, "${MISSING}"),
            Err(ExpandError::Unset("MISSING".into()))
        );
        assert!(matches!(
            run(cc, "${TOKEN"),
            Err(ExpandError::Unterminated(_))
        ));
    }

    #[test]
    fn cursor_vscode_and_windsurf_forms() {
        for s in [Syntax::Cursor, Syntax::VsCode] {
            assert_eq!(
                run(
                    s,
                    "${userHome}/x:${workspaceFolder}:${workspaceFolderBasename}${/}"
                )
                .expect("test"),
                "/home/u/x:/work/proj:proj/"
            );
            assert_eq!(run(s, "${env:TOKEN}").expect("test"), "s3cret-token");
            assert_eq!(
                run(s, "${env:NOPE}"),
                Err(ExpandError::Unset("NOPE".into()))
            );
        }
        assert_eq!(run(Syntax::Cursor, "${TOKEN}").expect("test"), "${TOKEN}");
        assert_eq!(
            run(Syntax::VsCode, "${input:api-key}"),
            Err(ExpandError::Input {
                id: "api-key".into(),
                declared: None
            })
        );
        assert_eq!(
            run(Syntax::Windsurf, "${env:TOKEN}").expect("test"),
            "s3cret-token"
        );
        assert_eq!(
            run(Syntax::Windsurf, "${userHome}").expect("test"),
            "${userHome}"
        );
        assert_eq!(run(Syntax::Literal, "${TOKEN}").expect("test"), "${TOKEN}");
    }

    #[test]
    fn variable_forms_are_those_the_client_would_expand_or_refuse() {
        let text = "${A} ${B:-d} ${env:C} ${userHome} ${input:key} $D ${file:x}";
        assert_eq!(
            variable_forms(Syntax::ClaudeCode, text),
            ["${A}", "${B:-d}", "${userHome}"],
            "${{env:C}} is not Claude Code's: it keeps it as written; userHome is a variable name"
        );
        assert_eq!(
            variable_forms(Syntax::Cursor, text),
            ["${env:C}", "${userHome}"]
        );
        assert_eq!(
            variable_forms(Syntax::VsCode, text),
            [
                "${A}",
                "${B:-d}",
                "${env:C}",
                "${userHome}",
                "${input:key}",
                "${file:x}"
            ],
            "VS Code refuses the forms it does not know"
        );
        assert_eq!(
            variable_forms(Syntax::Windsurf, text),
            ["${env:C}", "${file:x}"]
        );
        assert!(variable_forms(Syntax::Literal, text).is_empty());
        assert_eq!(variable_forms(Syntax::ClaudeCode, "a ${OPEN"), ["a ${OPEN"]);
        assert!(variable_forms(Syntax::ClaudeCode, "plain").is_empty());
    }

    #[test]
    fn an_input_is_named_by_its_declaration_and_gets_an_env_name() {
        let inputs = vs_inputs(
            serde_json::json!({"inputs": [
                {"type": "promptString", "id": "gh-pat", "description": "GitHub PAT", "password": true},
                {"type": "promptString", "id": "9lives"},
                {"type": "pickString"},
                "junk"
            ]})
            .as_object()
            .expect("object"),
        );
        assert_eq!(inputs.len(), 2, "{inputs:?}");
        let no_env = |_: &str| None;
        let mut x = Expander::new(Syntax::VsCode, &no_env, None, None).with_inputs(inputs);
        let err = x.expand("Bearer ${input:gh-pat}").expect_err("a prompt");
        assert_eq!(
            err.to_string(),
            "${input:gh-pat} is a password prompt (\"GitHub PAT\") that VS Code shows and answers \
             from its own secret storage, which the bridge does not read; write \"${env:GH_PAT}\" in \
             its place (VS Code reads that form too) and set GH_PAT in the environment the bridge starts in"
        );
        assert!(x
            .expand("${input:9lives}")
            .expect_err("a prompt")
            .to_string()
            .contains("is a prompt that VS Code shows"));
        assert_eq!(input_env_name("9lives"), "INPUT_9LIVES");
        assert_eq!(input_env_name(""), "INPUT_");
        // Cursor keeps the text as written, as Cursor does.
        let mut c = Expander::new(Syntax::Cursor, &no_env, None, None);
        assert_eq!(c.expand("${input:x}").expect("kept"), "${input:x}");
    }

    #[test]
    fn values_from_the_environment_are_kept_for_redaction() {
        let mut e = Expander::new(Syntax::ClaudeCode, &env, None, None);
        e.expand("${TOKEN} ${TOKEN} ${X:-plain}").expect("test");
        assert_eq!(e.secrets, ["s3cret-token"]);
    }
}
