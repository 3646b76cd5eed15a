//! What `setup` would do, decided before anything is written: per client file, the bridge's
//! registration (or why not), and the copies for the user's folder; each change as the file's
//! whole new text, so that what is shown is exactly what is written.

use std::path::{Path, PathBuf};

use super::document::Document;
use super::error::SetupError;
use super::import;
use super::moves::{sha256, Copy, Entry, FileMove, MAX_KEPT_TEXT};
use super::register::{register, Registration};
use super::shape::Launch;
use super::take::take_out;
use super::targets::Found;
use crate::config::Client;

/// One file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The file.
    pub path: PathBuf,
    /// Its text now (`None`: it does not exist and is created).
    pub original: Option<String>,
    /// Its text after.
    pub text: String,
    /// The client whose file it is, `None` for a copy in the user's folder.
    pub client: Option<Client>,
    /// Whether the file is removed (a copy `setup --undo` takes back) rather than written.
    pub delete: bool,
}

/// Entries to take out of a client file, recorded once written.
#[derive(Debug)]
pub struct PendingMove {
    /// What the record will say.
    pub record: FileMove,
    /// The file's text without the move (the bridge registered only); `None`: leave the file.
    pub without: Option<String>,
}

/// The whole plan: what to say, what to write, what went wrong.
#[derive(Debug, Default)]
pub struct Plan {
    /// One line per decision, in order.
    pub lines: Vec<String>,
    /// The files to write.
    pub changes: Vec<Change>,
    /// Files left untouched because of a problem.
    pub problems: Vec<SetupError>,
    /// The entries moved out of client files (`--move`).
    pub moves: Vec<PendingMove>,
}

/// What to register and where to copy servers.
pub struct Request<'a> {
    /// The client files found.
    pub found: &'a Found,
    /// Whether the clients were named (`--client`): a missing one is then a problem.
    pub named: bool,
    /// The server name for the bridge.
    pub name: &'a str,
    /// How clients start the bridge.
    pub launch: &'a Launch,
    /// The user's folder to copy the clients' servers into (`--import-servers`).
    pub import_into: Option<&'a Path>,
    /// Take the copied servers out of the clients' files (`--move`).
    pub move_servers: bool,
}

/// Decides everything `req` asks for, reading the files but writing nothing.
pub fn plan(req: &Request<'_>) -> Plan {
    let mut plan = Plan::default();
    let mut sources = Vec::new();
    let mut docs = Vec::new();
    for file in &req.found.files {
        let label = format!("{} ({})", file.client.label(), file.path.display());
        match Document::read(file.client, &file.path) {
            Ok(doc) => {
                sources.push(import::Source {
                    client: doc.client,
                    path: doc.path.clone(),
                    servers: doc.servers(),
                });
                docs.push((file, label, doc));
            }
            Err(e) => {
                plan.lines
                    .push(format!("{label}: left untouched (see the problem below)"));
                plan.problems.push(e);
            }
        }
    }
    let copies = req.import_into.map(|dir| import::plan(&sources, dir));
    let mut client_changes = Vec::new();
    for (file, label, doc) in docs {
        let original = doc.original.clone();
        let registered = match register(doc, req.name, req.launch) {
            Ok(Registration::Present(name)) => {
                plan.lines
                    .push(format!("{label}: already registered as '{name}'"));
                None
            }
            Ok(Registration::Add { name, text }) => {
                let verb = if original.is_some() {
                    "add"
                } else {
                    "create the file with"
                };
                plan.lines.push(format!(
                    "{label}: {verb} server '{name}': {}",
                    req.launch.display()
                ));
                Some(text)
            }
            Err(e) => {
                plan.lines
                    .push(format!("{label}: left untouched (see the problem below)"));
                plan.problems.push(e);
                continue;
            }
        };
        let mut text = registered.clone();
        let copy = copies
            .as_ref()
            .filter(|_| req.move_servers)
            .and_then(|c| c.files.iter().find(|f| f.from == file.path));
        if let Some(copy) = copy {
            let current = registered.clone().or_else(|| original.clone());
            match move_out(file.client, &file.path, current.clone(), &copy.servers) {
                Ok((entries, moved)) if !entries.is_empty() => {
                    let names: Vec<String> =
                        entries.iter().map(|e| format!("'{}'", e.name)).collect();
                    plan.lines.push(format!(
                        "{label}: take {} out (copied to {})",
                        names.join(", "),
                        copy.path.display()
                    ));
                    plan.moves.push(PendingMove {
                        record: FileMove {
                            client: file.client.id().to_string(),
                            path: file.path.clone(),
                            entries,
                            before: current.filter(|t| t.len() <= MAX_KEPT_TEXT),
                            after_sha256: sha256(moved.as_bytes()),
                            copy: Some(Copy {
                                path: copy.path.clone(),
                                sha256: sha256(copy.text.as_bytes()),
                            }),
                        },
                        without: registered.clone(),
                    });
                    text = Some(moved);
                }
                Ok(_) => {}
                Err(e) => {
                    plan.lines.push(format!(
                        "{label}: the copied servers stay in it (see the problem below)"
                    ));
                    plan.problems.push(e);
                }
            }
        }
        if let Some(text) = text {
            client_changes.push(Change {
                path: file.path.clone(),
                original,
                text,
                client: Some(file.client),
                delete: false,
            });
        }
    }
    if !req.found.missing.is_empty() {
        let labels: Vec<&str> = req.found.missing.iter().map(|c| c.label()).collect();
        plan.lines
            .push(format!("not found on this machine: {}", labels.join(", ")));
    }
    if req.named {
        for client in &req.found.missing {
            plan.problems.push(SetupError::NotFound {
                client: client.label(),
            });
        }
    }
    let mut copy_changes = Vec::new();
    if let Some(copies) = copies {
        for f in &copies.files {
            plan.lines.push(format!(
                "copy {} from {} ({}) to {}",
                f.servers.join(", "),
                f.client.label(),
                f.from.display(),
                f.path.display()
            ));
            copy_changes.push(Change {
                path: f.path.clone(),
                original: None,
                text: f.text.clone(),
                client: None,
                delete: false,
            });
        }
        for s in &copies.skipped {
            let stays = if req.move_servers {
                "; it stays in the client"
            } else {
                ""
            };
            plan.lines.push(format!(
                "not copied: '{}' ({}): {}{stays}",
                s.name,
                s.client.label(),
                s.reason
            ));
        }
    }
    // A move writes the copies first: a client file loses its entries only once they are copied.
    if plan.moves.is_empty() {
        plan.changes = client_changes;
        plan.changes.extend(copy_changes);
    } else {
        plan.changes = copy_changes;
        plan.changes.extend(client_changes);
    }
    plan
}

/// The entries `names` taken out of `text` (the file's text with the bridge registered); the
/// entries and the new text.
fn move_out(
    client: Client,
    path: &Path,
    text: Option<String>,
    names: &[String],
) -> Result<(Vec<Entry>, String), SetupError> {
    let mut doc = Document::parse(client, path, text)?;
    let entries = take_out(&mut doc, names)?;
    Ok((entries, doc.root.to_string()))
}
