//! `skills --export DIR`: each approved skill of the operator (no owner) as a folder
//! `DIR/<name>/` holding `SKILL.md` (front matter with its name and description, how to call it)
//! and the module `<name>.py` beside it. Written through checked folders (`DIR` made 0700 when
//! missing, never through a link), each file aside then renamed.

use std::io::Write;
use std::path::Path;

use super::error::SkillError;
use super::record::{Skill, SkillState};
use crate::checked_dir::{Access, CheckedDir};

/// The fix for a refused export folder.
const FIX_EXPORT: &str = "export into a folder that only you can write to";

/// The `SKILL.md` of `skill`.
pub fn skill_md(skill: &Skill) -> String {
    let description = if skill.description.is_empty() {
        format!("The mcp-code-bridge skill {}.", skill.name)
    } else {
        skill.description.clone()
    };
    // JSON strings are YAML double-quoted scalars: nothing in a description can end them.
    let quoted = serde_json::to_string(&description).expect("a string serializes");
    let (wait, def) = if skill.is_async {
        ("await ", "async def")
    } else {
        ("", "def")
    };
    format!(
        "---\nname: {name}\ndescription: {quoted}\n---\n\n# {name}\n\n{description}\n\n\
         A function kept with mcp-code-bridge's `runtime.save_skill` ({def}, SHA-256 `{digest}`), \
         approved with `mcp-code-bridge skills --approve {name}`. Call it in a `run_python` cell, \
         loading the MCP servers it uses with `servers=[...]`:\n\n```python\nimport skills\n\
         result = {wait}skills.{name}(...)\n```\n\nIts module is `{name}.py`, beside this file.\n",
        name = skill.name,
        digest = skill.digest,
    )
}

/// Writes each approved, ownerless skill of `skills` under `dir`; returns the names written.
///
/// # Errors
/// The folder is refused, or a file cannot be written.
pub fn export(skills: &[Skill], dir: &Path) -> Result<Vec<String>, SkillError> {
    let root = CheckedDir::open(dir, Access::Shared, FIX_EXPORT)?;
    let mut written = Vec::new();
    for skill in skills
        .iter()
        .filter(|s| s.owner.is_none() && s.state() == SkillState::Approved)
    {
        let folder = root.sub(&skill.name, Access::Shared, FIX_EXPORT)?;
        for (file, text) in [
            ("SKILL.md".to_string(), skill_md(skill)),
            (format!("{}.py", skill.name), skill.source.clone()),
        ] {
            let io = |what| {
                let path = crate::shown::ShownPath(&folder.join(&file)).to_string();
                move |source| SkillError::Io { path, what, source }
            };
            let mut new = folder.new_file(&file).map_err(io("creating"))?;
            new.file()
                .write_all(text.as_bytes())
                .map_err(io("writing"))?;
            new.commit(0o644).map_err(|e| io("writing")(e.into_io()))?;
        }
        written.push(skill.name.clone());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approved_operator_skills_are_written_as_skill_folders() {
        let mut a = Skill::new(
            "shout",
            "async def shout(t):\n    return t\n".into(),
            true,
            "Says \"it\"\n---\nname: evil",
            None,
        )
        .expect("skill");
        a.approved = Some(a.digest.clone());
        let pending =
            Skill::new("later", "def later():\n    pass\n".into(), false, "", None).expect("skill");
        let mut theirs = a.clone();
        theirs.name = "theirs".into();
        theirs.owner = Some("alice".into());
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("export");
        let written = export(&[a.clone(), pending, theirs], &out).expect("exported");
        assert_eq!(written, ["shout"]);
        let md = std::fs::read_to_string(out.join("shout/SKILL.md")).expect("SKILL.md");
        assert!(
            md.starts_with("---\nname: shout\ndescription: \"Says \\\"it\\\"\"\n---\n"),
            "{md}"
        );
        assert!(md.contains("result = await skills.shout(...)"), "{md}");
        assert_eq!(
            std::fs::read_to_string(out.join("shout/shout.py")).expect("py"),
            a.source
        );
        assert!(!out.join("later").exists() && !out.join("theirs").exists());
        // Again: the files are replaced, not refused.
        export(&[a], &out).expect("exported again");
    }
}
