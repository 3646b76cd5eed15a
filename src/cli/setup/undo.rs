//! `setup --undo`: the plan that puts the entries `setup --move` took out back into their client
//! files and takes back the copies it made in `~/MCPs`, from the record (`moves.rs`). A client
//! file the move left untouched since gets its text from before the move back, byte for byte;
//! otherwise each entry goes back at its place unless the file has an entry of that name now
//! (the client's or the user's: left alone, and said). A copy is removed only when unchanged
//! since the move (same SHA-256); otherwise it is left, and said.

use std::path::{Path, PathBuf};

use super::document::Document;
use super::error::SetupError;
use super::moves::{sha256, FileMove, Record};
use super::plan::{Change, Plan};
use super::take::put_back;
use crate::config::{client_config_files, Client, Scope};

/// The undo plan, and which parts of the record each change belongs to.
#[derive(Debug, Default)]
pub struct UndoPlan {
    /// What to say and write.
    pub plan: Plan,
    /// Per part of the record (same order): the files its changes write; `None` when the part
    /// cannot be undone now and stays in the record.
    pub parts: Vec<Option<Vec<PathBuf>>>,
}

/// Plans undoing `record` for the user whose home is `home`, for the clients `only` (every
/// client when empty); `import_dir` is the user's folder (copies elsewhere are never removed).
pub fn plan(
    record: &Record,
    only: &[Client],
    home: &Path,
    claude_dir: Option<&Path>,
    import_dir: Option<&Path>,
) -> UndoPlan {
    let known: Vec<_> = client_config_files(Some(home), None, claude_dir)
        .into_iter()
        .filter(|f| f.scope == Scope::User)
        .collect();
    let mut out = UndoPlan::default();
    for part in &record.files {
        if !only.is_empty() && !part.client().is_some_and(|c| only.contains(&c)) {
            out.parts.push(None);
            continue;
        }
        let mut written = Vec::new();
        let done = one(part, &known, import_dir, &mut out.plan, &mut written);
        out.parts.push(done.then_some(written));
    }
    out
}

/// Plans one part; false when it stays in the record.
fn one(
    part: &FileMove,
    known: &[crate::config::ClientFile],
    import_dir: Option<&Path>,
    plan: &mut Plan,
    written: &mut Vec<PathBuf>,
) -> bool {
    let Some(client) = part
        .client()
        .filter(|c| known.iter().any(|f| f.client == *c && f.path == part.path))
    else {
        plan.lines.push(format!(
            "{}: not a client file setup edits here; left in the record",
            part.path.display()
        ));
        return false;
    };
    let label = format!("{} ({})", client.label(), part.path.display());
    let names: Vec<String> = part
        .entries
        .iter()
        .map(|e| format!("'{}'", e.name))
        .collect();
    let doc = match Document::read(client, &part.path) {
        Ok(doc) => doc,
        Err(e) => {
            plan.lines
                .push(format!("{label}: left as it is (see the problem below)"));
            plan.problems.push(e);
            return false;
        }
    };
    let original = doc.original.clone();
    let untouched = original
        .as_deref()
        .is_some_and(|t| sha256(t.as_bytes()) == part.after_sha256);
    let text = match (&part.before, untouched) {
        (Some(before), true) => {
            plan.lines.push(format!(
                "{label}: put back {} (the file is as the move left it: its text from before)",
                names.join(", ")
            ));
            before.clone()
        }
        _ => {
            let mut doc = doc;
            match put_back(&mut doc, &part.entries) {
                Ok(left) => {
                    let back: Vec<&String> = names
                        .iter()
                        .filter(|n| !left.iter().any(|l| **n == format!("'{l}'")))
                        .collect();
                    if !back.is_empty() {
                        let back: Vec<&str> = back.iter().map(|s| s.as_str()).collect();
                        plan.lines
                            .push(format!("{label}: put back {}", back.join(", ")));
                    }
                    for name in left {
                        plan.lines.push(format!(
                            "{label}: left alone: '{name}' is there again, written since the move"
                        ));
                    }
                    doc.root.to_string()
                }
                Err(e) => {
                    plan.lines
                        .push(format!("{label}: left as it is (see the problem below)"));
                    plan.problems.push(e);
                    return false;
                }
            }
        }
    };
    if original.as_deref() != Some(text.as_str()) {
        written.push(part.path.clone());
        plan.changes.push(Change {
            path: part.path.clone(),
            original,
            text,
            client: Some(client),
            delete: false,
        });
    }
    if let Some(copy) = &part.copy {
        let shown = copy.path.display();
        let inside = import_dir.is_some_and(|d| copy.path.parent() == Some(d));
        match std::fs::read_to_string(&copy.path) {
            _ if !inside => plan.lines.push(format!(
                "{shown}: not in the folder servers are copied to; left as it is"
            )),
            Ok(now) if sha256(now.as_bytes()) == copy.sha256 => {
                plan.lines.push(format!("remove the copy {shown}"));
                written.push(copy.path.clone());
                plan.changes.push(Change {
                    path: copy.path.clone(),
                    original: Some(now),
                    text: String::new(),
                    client: None,
                    delete: true,
                });
            }
            Ok(_) => plan.lines.push(format!(
                "{shown}: changed since the move; left as it is (remove it yourself if you want)"
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                plan.lines.push(format!("{shown}: already gone"));
            }
            Err(source) => {
                plan.problems.push(SetupError::Read {
                    path: copy.path.clone(),
                    source,
                });
                return false;
            }
        }
    }
    true
}
