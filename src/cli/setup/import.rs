//! Copies of the clients' servers for the user's own folder (`~/MCPs`, `MCP_BRIDGE_CONFIG_DIR`):
//! one new file per client file, `from-<client>.json`, holding the entries as written (secrets
//! included, nothing expanded) under `mcpServers`, with an `importedFrom` note naming the client
//! and the file. An entry that would not mean the same there is not copied, and says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::Value;

use super::document::Server;
use crate::config::{portability, Client, Portability};

/// A file to create in the user's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Where (never an existing file).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// The servers it holds, in order.
    pub servers: Vec<String>,
    /// The client the servers came from.
    pub client: Client,
    /// The client file they came from.
    pub from: PathBuf,
}

/// A client's server that is not copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The server's name.
    pub name: String,
    /// Its client.
    pub client: Client,
    /// Why.
    pub reason: String,
}

/// Everything an import would do.
#[derive(Debug, Default)]
pub struct ImportPlan {
    /// New files, one per client file with servers to copy.
    pub files: Vec<NewFile>,
    /// Servers left where they are.
    pub skipped: Vec<Skipped>,
}

/// The servers of one client file, read before anything changes it.
pub struct Source {
    /// The client.
    pub client: Client,
    /// The file.
    pub path: PathBuf,
    /// Its servers, in file order.
    pub servers: Vec<Server>,
}

/// Plans copying the servers of `sources` (in order: the first definition of a name wins) into
/// `dir`, leaving out every name `dir` already defines.
pub fn plan(sources: &[Source], dir: &Path) -> ImportPlan {
    let mut taken: BTreeMap<String, String> = defined_in(dir)
        .into_iter()
        .map(|n| (n, format!("{} already defines it", dir.display())))
        .collect();
    let mut out = ImportPlan::default();
    for source in sources {
        let label = source.client.label();
        let mut copies = Vec::new();
        for server in &source.servers {
            let name = &server.name;
            let skip = |reason: String| Skipped {
                name: name.clone(),
                client: source.client,
                reason,
            };
            if let Some(why) = taken.get(name) {
                out.skipped.push(skip(why.clone()));
                continue;
            }
            let reason = match portability(source.client, name, &server.entry) {
                Portability::Portable => None,
                // The bridge's own entry is no server to copy.
                Portability::Bridge => continue,
                Portability::Unreadable(why) => {
                    Some(format!("the bridge would not read it: {why}"))
                }
                Portability::MoreThere(why) => Some(why),
                Portability::Variables(forms) => Some(format!(
                    "uses {}: {label} expands it, the bridge's own files do not (copy it by hand with the value in place, or keep it in {label} and set MCP_BRIDGE_IMPORT_CLIENT_CONFIGS=1)",
                    forms.join(", "),
                )),
            };
            match (reason, &server.written) {
                (Some(reason), _) => out.skipped.push(skip(reason)),
                (None, None) => out
                    .skipped
                    .push(skip("its text could not be copied".into())),
                (None, Some(written)) => {
                    taken.insert(name.clone(), format!("copied from {label} already"));
                    copies.push((name.clone(), written.clone()));
                }
            }
        }
        if copies.is_empty() {
            continue;
        }
        let path = free_name(dir, source.client, &out.files);
        out.files.push(NewFile {
            text: file_text(source, &copies),
            servers: copies.into_iter().map(|(n, _)| n).collect(),
            client: source.client,
            from: source.path.clone(),
            path,
        });
    }
    out
}

/// The text of a new `~/MCPs` file holding `copies` of `source`'s entries.
fn file_text(source: &Source, copies: &[(String, CstInputValue)]) -> String {
    let root =
        CstRootNode::parse("{\n}\n", &Default::default()).expect("a constant, valid JSON text");
    let object = root.object_value_or_set();
    object.append(
        "importedFrom",
        CstInputValue::Object(vec![
            ("client".into(), source.client.label().into()),
            ("file".into(), source.path.display().to_string().into()),
        ]),
    );
    object.append("mcpServers", CstInputValue::Object(copies.to_vec()));
    root.to_string()
}

/// `dir/from-<client>.json`, or with `-2`, `-3`, ... when that file exists or is planned.
fn free_name(dir: &Path, client: Client, planned: &[NewFile]) -> PathBuf {
    (1..)
        .map(|n| match n {
            1 => dir.join(format!("from-{}.json", client.id())),
            n => dir.join(format!("from-{}-{n}.json", client.id())),
        })
        .find(|p| !p.exists() && !planned.iter().any(|f| &f.path == p))
        .expect("an unbounded range has a free name")
}

/// The server names the `*.json` files of `dir` define (files that do not parse define none
/// here; `servers` reports them).
fn defined_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(Value::Object(root)) = crate::config::read_text(&path)
            .map_err(|_| ())
            .and_then(|t| serde_json::from_str(&t).map_err(|_| ()))
        else {
            continue;
        };
        for key in ["mcpServers", "servers"] {
            if let Some(Value::Object(table)) = root.get(key) {
                names.extend(table.keys().cloned());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_folder_defines_are_not_copied() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            d.path().join("notes.json"),
            r#"{"mcpServers": {"notes": {"command": "mine"}}}"#,
        )
        .expect("write");
        assert_eq!(defined_in(d.path()), ["notes"]);
    }
}
