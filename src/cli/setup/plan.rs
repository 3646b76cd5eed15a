//! What `setup` would do, decided before anything is written: per client file, the bridge's
//! registration (or why not), and the copies for the user's folder; each change as the file's
//! whole new text, so that what is shown is exactly what is written.

use std::path::{Path, PathBuf};

use super::document::Document;
use super::error::SetupError;
use super::import;
use super::register::{register, Registration};
use super::shape::Launch;
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
}

/// Decides everything `req` asks for, reading the files but writing nothing.
pub fn plan(req: &Request<'_>) -> Plan {
    let mut plan = Plan::default();
    let mut sources = Vec::new();
    for file in &req.found.files {
        let label = format!("{} ({})", file.client.label(), file.path.display());
        let doc = match Document::read(file.client, &file.path) {
            Ok(doc) => doc,
            Err(e) => {
                plan.lines
                    .push(format!("{label}: left untouched (see the problem below)"));
                plan.problems.push(e);
                continue;
            }
        };
        let source = import::Source {
            client: doc.client,
            path: doc.path.clone(),
            servers: doc.servers(),
        };
        let original = doc.original.clone();
        match register(doc, req.name, req.launch) {
            Ok(Registration::Present(name)) => plan
                .lines
                .push(format!("{label}: already registered as '{name}'")),
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
                plan.changes.push(Change {
                    path: file.path.clone(),
                    original,
                    text,
                    client: Some(file.client),
                });
            }
            Err(e) => {
                plan.lines
                    .push(format!("{label}: left untouched (see the problem below)"));
                plan.problems.push(e);
            }
        }
        sources.push(source);
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
    if let Some(dir) = req.import_into {
        let copies = import::plan(&sources, dir);
        for f in &copies.files {
            plan.lines.push(format!(
                "copy {} from {} ({}) to {}",
                f.servers.join(", "),
                f.client.label(),
                f.from.display(),
                f.path.display()
            ));
            plan.changes.push(Change {
                path: f.path.clone(),
                original: None,
                text: f.text.clone(),
                client: None,
            });
        }
        for s in &copies.skipped {
            plan.lines.push(format!(
                "not copied: '{}' ({}): {}",
                s.name,
                s.client.label(),
                s.reason
            ));
        }
    }
    plan
}
