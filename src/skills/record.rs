//! One kept skill ([`Skill`]): its name rules, its digest and its approval state. Pure.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::SkillError;

/// Longest skill name, in bytes.
pub const MAX_NAME: usize = 64;
/// Largest skill source, in bytes.
pub const MAX_SOURCE: usize = 64 * 1024;
/// Longest description kept, in characters (longer ones are cut).
pub const MAX_DESCRIPTION: usize = 200;

/// Python's keywords (and soft keywords that would confuse `from skills import NAME`).
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "match", "case", "type",
];

/// A kept skill, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    /// Its name: an ASCII Python identifier ([`check_name`]).
    pub name: String,
    /// The module text: the imports it uses and the function.
    pub source: String,
    /// The hex SHA-256 of `source`.
    pub digest: String,
    /// Whether the function is `async def`.
    pub is_async: bool,
    /// The first line of its docstring (bounded), or empty.
    pub description: String,
    /// The client token that saved it under `serve`; `None` for the operator's own runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The digest the user approved, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<String>,
}

/// Whether a skill may run: its current text approved, never approved, or changed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillState {
    /// The current digest is the approved one.
    Approved,
    /// Never approved.
    Pending,
    /// Approved once, and saved again with other text since.
    Changed,
}

impl SkillState {
    /// The state's name as listed (`approved`, `pending`, `changed`).
    pub fn as_str(self) -> &'static str {
        match self {
            SkillState::Approved => "approved",
            SkillState::Pending => "pending",
            SkillState::Changed => "changed",
        }
    }
}

/// The hex SHA-256 of `source`.
pub fn digest(source: &str) -> String {
    Sha256::digest(source.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks a skill name: an ASCII Python identifier of at most [`MAX_NAME`] bytes, not a
/// keyword and not starting with `_` (a module attribute such as `__path__` is never a skill).
/// Such a name has no character `calls/names.rs` refuses.
///
/// # Errors
/// [`SkillError::BadName`] saying which rule it breaks.
pub fn check_name(name: &str) -> Result<(), SkillError> {
    let bad = |why| {
        Err(SkillError::BadName {
            shown: format!("\"{}\"", crate::log_limit::clipped(name)),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME {
        return bad("it is longer than 64 bytes");
    }
    let mut chars = name.chars();
    let first = chars.next().unwrap_or('0');
    if !(first.is_ascii_alphabetic() || first == '_')
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return bad(
            "a skill name is an ASCII Python identifier (letters, digits, _; not a digit first)",
        );
    }
    if first == '_' {
        return bad("a skill name does not start with _");
    }
    if KEYWORDS.contains(&name) {
        return bad("it is a Python keyword");
    }
    Ok(())
}

impl Skill {
    /// A new (unapproved) skill; the description is cut to its first line and
    /// [`MAX_DESCRIPTION`] characters.
    ///
    /// # Errors
    /// A bad name or a source over [`MAX_SOURCE`] bytes.
    pub fn new(
        name: &str,
        source: String,
        is_async: bool,
        description: &str,
        owner: Option<String>,
    ) -> Result<Skill, SkillError> {
        check_name(name)?;
        if source.len() > MAX_SOURCE {
            return Err(SkillError::TooLarge {
                name: name.to_string(),
                size: source.len(),
                max: MAX_SOURCE,
            });
        }
        let description: String = description
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .chars()
            .filter(|c| !crate::shown::is_unsafe(*c))
            .take(MAX_DESCRIPTION)
            .collect();
        Ok(Skill {
            name: name.to_string(),
            digest: digest(&source),
            source,
            is_async,
            description,
            owner,
            approved: None,
        })
    }

    /// Its approval state.
    pub fn state(&self) -> SkillState {
        match &self.approved {
            Some(d) if *d == self.digest => SkillState::Approved,
            Some(_) => SkillState::Changed,
            None => SkillState::Pending,
        }
    }

    /// The first 12 hex digits of its digest.
    pub fn short_digest(&self) -> &str {
        &self.digest[..self.digest.len().min(12)]
    }

    /// Whether the stored record is one the bridge could have written (name, size, digest).
    pub(super) fn is_sound(&self) -> bool {
        check_name(&self.name).is_ok()
            && self.source.len() <= MAX_SOURCE
            && self.digest == digest(&self.source)
            && self.description.chars().count() <= MAX_DESCRIPTION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_python_identifiers() {
        for good in ["join_data", "f", "A1", &"x".repeat(MAX_NAME)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "1st",
            "a-b",
            "a b",
            "_private",
            "__path__",
            "class",
            "é",
            "a\u{202e}b",
            "a\nb",
            &"x".repeat(MAX_NAME + 1),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        let shown = check_name("a\u{1b}[31m").expect_err("refused").to_string();
        assert!(!shown.contains('\u{1b}'), "{shown}");
    }

    #[test]
    fn a_skill_is_bounded_digested_and_pending_until_approved() {
        let s = Skill::new(
            "f",
            "def f():\n    pass\n".into(),
            false,
            "\n  Does it.\nMore",
            None,
        )
        .expect("kept");
        assert_eq!(s.description, "Does it.");
        assert_eq!(s.digest, digest("def f():\n    pass\n"));
        assert_eq!(s.digest.len(), 64);
        assert_eq!(s.short_digest().len(), 12);
        assert_eq!(s.state(), SkillState::Pending);
        let mut a = s.clone();
        a.approved = Some(a.digest.clone());
        assert_eq!(a.state(), SkillState::Approved);
        a.approved = Some(digest("other"));
        assert_eq!(a.state(), SkillState::Changed);
        assert!(s.is_sound());
        let big = "#".repeat(MAX_SOURCE + 1);
        assert!(matches!(
            Skill::new("f", big, false, "", None),
            Err(SkillError::TooLarge { .. })
        ));
        let long = Skill::new("f", String::new(), true, &"d".repeat(1000), None).expect("kept");
        assert_eq!(long.description.chars().count(), MAX_DESCRIPTION);
        let mut forged = s.clone();
        forged.source.push('x');
        assert!(!forged.is_sound(), "a digest that is not the text's");
    }
}
