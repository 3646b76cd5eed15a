//! The definitions a project's files hold, as written, parsed or not, with their consent: what
//! `servers --allow` shows and approves. One name may be defined in several project files
//! (`.mcp.json` and `.cursor/mcp.json`); each definition is approved on its own.

use std::path::{Path, PathBuf};

use super::read::read_all;
use super::spec::{ProjectEntry, Sources};

/// Every entry of the project's files (`.mcp.json`, `.cursor/mcp.json`, `.vscode/mcp.json`)
/// with its consent, before precedence is applied: a definition shadowed, unapproved or
/// broken is here too.
pub fn project_definitions(
    sources: &Sources,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<ProjectEntry> {
    read_all(sources, env).pending
}

/// Why no definition could be picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickError {
    /// No project file defines the name.
    NotDefined,
    /// `--from FILE` names a file that does not define it; the files that do.
    NotInFile(Vec<PathBuf>),
}

/// The definition of `name` that `servers` shows (one that may start first, then one usable as
/// it is now, then the clients' precedence, then file order), or the one in `from`; and the
/// other definitions of that name.
///
/// # Errors
/// [`PickError`] when no project file (or not `from`) defines `name`.
pub fn pick<'a>(
    entries: &'a [ProjectEntry],
    name: &str,
    from: Option<&Path>,
) -> Result<(&'a ProjectEntry, Vec<&'a ProjectEntry>), PickError> {
    let mut defs: Vec<&ProjectEntry> = entries.iter().filter(|e| e.name == name).collect();
    if defs.is_empty() {
        return Err(PickError::NotDefined);
    }
    defs.sort_by_key(|e| (!e.consent.permits(), e.problem.is_some(), e.origin.rank()));
    let at = match from {
        None => 0,
        Some(file) => defs
            .iter()
            .position(|e| same_file(&e.source, file))
            .ok_or_else(|| PickError::NotInFile(defs.iter().map(|e| e.source.clone()).collect()))?,
    };
    let chosen = defs.remove(at);
    Ok((chosen, defs))
}

/// Whether two paths name one file (by their canonical forms when both exist).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::servers::clients::{Client, Origin, Scope};
    use crate::config::servers::consent::Consent;
    use serde_json::Value;

    fn entry(name: &str, client: Client, source: &str, consent: Consent) -> ProjectEntry {
        ProjectEntry {
            name: name.into(),
            source: source.into(),
            origin: Origin::Client(client, Scope::Project),
            entry: Value::Null,
            sha256: String::new(),
            problem: None,
            consent,
        }
    }

    #[test]
    fn picks_what_servers_shows_or_the_named_file() {
        let all = [
            entry(
                "docs",
                Client::Cursor,
                "/r/.cursor/mcp.json",
                Consent::Needed,
            ),
            entry("docs", Client::ClaudeCode, "/r/.mcp.json", Consent::Needed),
            entry("other", Client::ClaudeCode, "/r/.mcp.json", Consent::Needed),
        ];
        let (chosen, others) = pick(&all, "docs", None).expect("docs");
        assert_eq!(chosen.source, Path::new("/r/.mcp.json"));
        assert_eq!(others.len(), 1);
        let (chosen, _) = pick(&all, "docs", Some(Path::new("/r/.cursor/mcp.json"))).expect("from");
        assert_eq!(chosen.source, Path::new("/r/.cursor/mcp.json"));
        assert!(matches!(
            pick(&all, "docs", Some(Path::new("/r/x.json"))),
            Err(PickError::NotInFile(files)) if files.len() == 2
        ));
        assert_eq!(pick(&all, "nope", None), Err(PickError::NotDefined));
        // One already approved is the one `servers` shows.
        let mut all = all.to_vec();
        all[0].consent = Consent::Allowed("x".into());
        let (chosen, _) = pick(&all, "docs", None).expect("docs");
        assert_eq!(chosen.source, Path::new("/r/.cursor/mcp.json"));
    }
}
