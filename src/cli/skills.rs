//! `mcp-code-bridge skills [--approve NAME [--yes]] [--remove NAME] [--export DIR]`: the kept
//! skills listed
//! (name, 12 hex of the digest, state, owner, description); one shown in full and approved in
//! that exact text (asked on a terminal, or `--yes`); one removed; the approved ones exported. Every stored field is
//! escaped before the terminal. Skills of every owner (`serve`'s tokens) are the operator's to
//! approve: a name several owners saved is shown and approved one owner at a time.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use crate::cli::safe_line::{safe_line, safe_text};
use crate::config::Settings;
use crate::shown::Shown;
use crate::skills::{Skill, SkillState, SkillStore};

/// What `skills` was asked.
#[derive(Debug, Clone, Default)]
pub struct SkillsArgs {
    /// Show and approve this skill.
    pub approve: Option<String>,
    /// Approve without asking.
    pub yes: bool,
    /// Remove this skill.
    pub remove: Option<String>,
    /// Write the approved skills as SKILL.md folders here.
    pub export: Option<std::path::PathBuf>,
}

/// Runs `skills`: exit 0 done, 1 not found, declined, not asked (no terminal) or a store error.
pub fn skills(settings: &Settings, args: &SkillsArgs) -> ExitCode {
    let store = SkillStore::new(&settings.state_dir);
    let done = match (&args.approve, &args.remove) {
        (Some(name), _) => approve(&store, name, args.yes, &mut ask_terminal),
        (None, Some(name)) => remove(&store, name),
        (None, None) if args.export.is_some() => {
            let dir = args.export.as_deref().unwrap_or(std::path::Path::new("."));
            export(&store, dir)
        }
        (None, None) => list(&store),
    };
    match done {
        Ok(text) => {
            say(&text);
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("mcp-code-bridge: {}", safe_line(&message));
            ExitCode::FAILURE
        }
    }
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{}", safe_text(text));
    let _ = out.flush();
}

fn owner_of(s: &Skill) -> String {
    s.owner
        .as_deref()
        .map_or_else(|| "-".to_string(), |o| Shown(o).to_string())
}

/// The listing: one line per skill.
fn list(store: &SkillStore) -> Result<String, String> {
    let all = store.all().map_err(|e| e.to_string())?;
    if all.is_empty() {
        return Ok(format!(
            "no skills are kept ({})\n",
            crate::shown::ShownPath(&store.path())
        ));
    }
    let mut out = format!(
        "{:<24} {:<12} {:<8} {:<12} DESCRIPTION\n",
        "NAME", "DIGEST", "STATE", "OWNER"
    );
    for s in &all {
        out.push_str(&format!(
            "{:<24} {:<12} {:<8} {:<12} {}\n",
            Shown(&s.name),
            s.short_digest(),
            s.state().as_str(),
            owner_of(s),
            Shown(&s.description)
        ));
    }
    Ok(out)
}

/// Asks on the terminal; true for `y` or `yes`; `None` when stdin is not a terminal.
fn ask_terminal(name: &str) -> Option<bool> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    eprint!("Approve skill '{}' in this text? [y/N] ", Shown(name));
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return Some(false);
    }
    Some(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Shows each owner's skill `name` and approves the text shown.
fn approve(
    store: &SkillStore,
    name: &str,
    yes: bool,
    ask: &mut dyn FnMut(&str) -> Option<bool>,
) -> Result<String, String> {
    let found: Vec<Skill> = store
        .all()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|s| s.name == name)
        .collect();
    if found.is_empty() {
        return Err(format!(
            "no skill named '{}' is kept (`mcp-code-bridge skills` lists them)",
            Shown(name)
        ));
    }
    let mut out = String::new();
    for s in found {
        let who = owner_of(&s);
        if s.state() == SkillState::Approved {
            out.push_str(&format!(
                "skill '{}' (owner {who}) is approved already in this text ({})\n",
                Shown(name),
                s.short_digest()
            ));
            continue;
        }
        say(&format!(
            "skill '{}' (owner {who}, {}), SHA-256 {}:\n{}\n{}\n{}\n",
            Shown(name),
            s.state().as_str(),
            s.digest,
            "-".repeat(60),
            s.source.trim_end(),
            "-".repeat(60)
        ));
        if !yes {
            match ask(name) {
                None => {
                    return Err(format!(
                        "'{}' was not approved: standard input is not a terminal to ask on; \
                         read the text above and run again with --yes to approve it",
                        Shown(name)
                    ))
                }
                Some(false) => return Err(format!("'{}' was not approved", Shown(name))),
                Some(true) => {}
            }
        }
        store
            .approve(s.owner.as_deref(), name, &s.digest)
            .map_err(|e| e.to_string())?;
        out.push_str(&format!(
            "approved skill '{}' (owner {who}) in this text only ({}); a changed text needs \
             approval again\n",
            Shown(name),
            s.short_digest()
        ));
    }
    Ok(out)
}

/// Writes the operator's approved skills as SKILL.md folders under `dir`.
fn export(store: &SkillStore, dir: &std::path::Path) -> Result<String, String> {
    let all = store.all().map_err(|e| e.to_string())?;
    let written = crate::skills::export(&all, dir).map_err(|e| e.to_string())?;
    Ok(format!(
        "exported {} approved skill(s) to {}: {}\n",
        written.len(),
        crate::shown::ShownPath(dir),
        written.join(", ")
    ))
}

/// Removes every owner's skill `name`.
fn remove(store: &SkillStore, name: &str) -> Result<String, String> {
    let owners: Vec<Option<String>> = store
        .all()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|s| s.name == name)
        .map(|s| s.owner)
        .collect();
    if owners.is_empty() {
        return Err(format!("no skill named '{}' is kept", Shown(name)));
    }
    for owner in &owners {
        store
            .remove(owner.as_deref(), name)
            .map_err(|e| e.to_string())?;
    }
    Ok(format!("removed skill '{}'\n", Shown(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(store: &SkillStore, name: &str, text: &str, owner: Option<&str>) {
        let source = format!("def {name}():\n    return {text:?}\n");
        let skill = Skill::new(
            name,
            source,
            false,
            "A \u{1b}[31mred\u{1b}[0m doc.",
            owner.map(String::from),
        )
        .expect("skill");
        store.save(skill).expect("saved");
    }

    #[test]
    fn listed_approved_after_asking_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SkillStore::new(dir.path());
        assert!(list(&store)
            .expect("empty")
            .starts_with("no skills are kept"));
        kept(&store, "f", "\u{202e}x", None);
        kept(&store, "f", "y", Some("alice"));
        let listing = list(&store).expect("listed");
        assert!(
            listing.contains("pending") && listing.contains("alice"),
            "{listing}"
        );
        assert!(!listing.contains('\u{1b}'), "escaped: {listing}");
        // Declined, then no terminal: nothing approved.
        let no = approve(&store, "f", false, &mut |_| Some(false)).expect_err("declined");
        assert!(no.contains("not approved"), "{no}");
        let none = approve(&store, "f", false, &mut |_| None).expect_err("no terminal");
        assert!(none.contains("--yes"), "{none}");
        assert!(store
            .all()
            .expect("all")
            .iter()
            .all(|s| s.state() == SkillState::Pending));
        let asked = std::cell::Cell::new(0);
        let done = approve(&store, "f", false, &mut |_| {
            asked.set(asked.get() + 1);
            Some(true)
        })
        .expect("approved");
        assert_eq!(asked.get(), 2, "each owner's text asked for: {done}");
        assert!(store.load(None, "f").is_ok() && store.load(Some("alice"), "f").is_ok());
        assert!(approve(&store, "f", true, &mut |_| None)
            .expect("again")
            .contains("approved already"));
        assert!(approve(&store, "g", true, &mut |_| None).is_err());
        remove(&store, "f").expect("removed");
        assert!(store.all().expect("all").is_empty());
        assert!(remove(&store, "f").is_err());
    }
}
