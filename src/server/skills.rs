//! The approved skills served through MCP's Skills extension (SEP-2640, `io.modelcontextprotocol/skills`,
//! as rmcp 3.9 models it): `skills/list` and `skills/get` give each skill's manifest
//! (`skill://<name>/SKILL.md` and its module `skill://<name>/<name>.py`, each with its SHA-256 digest
//! and size), and `resources/read` serves those files. Only approved skills whose current text is the
//! approved one are served, and only the asker's: the operator's own (stdio `run`, a loopback
//! caller without tokens) or, under `serve`, those the caller's token saved.

use rmcp::model::{ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources};

use crate::skills::{skill_md, Skill as Kept, SkillState, SkillStore};

/// The URI scheme of skill files.
const SCHEME: &str = "skill://";

/// The files of one served skill: (URI, bytes).
fn files(skill: &Kept) -> [(String, String); 2] {
    [
        (format!("{SCHEME}{}/SKILL.md", skill.name), skill_md(skill)),
        (
            format!("{SCHEME}{0}/{0}.py", skill.name),
            skill.source.clone(),
        ),
    ]
}

/// The approved skills `owner` sees (`None`: the operator's). A store that cannot be read
/// serves none (the reason is logged).
fn served(store: &SkillStore, owner: Option<&str>) -> Vec<Kept> {
    match store.list(owner) {
        Ok(all) => all
            .into_iter()
            .filter(|s| s.state() == SkillState::Approved)
            .collect(),
        Err(e) => {
            tracing::warn!("the skills store cannot be read: {e}");
            Vec::new()
        }
    }
}

/// A skill's SEP-2640 manifest.
fn manifest(skill: &Kept) -> Skill {
    let [md, module] = files(skill);
    let resources = [&md, &module]
        .iter()
        .map(|(uri, text)| SkillResource::from_bytes(uri.clone(), text.as_bytes()))
        .collect();
    let description = if skill.description.is_empty() {
        format!("The mcp-code-bridge skill {}.", skill.name)
    } else {
        skill.description.clone()
    };
    Skill::new(
        md.0,
        SkillFrontmatter::new(&skill.name, description),
        SkillResources::Files(resources),
    )
}

/// `skills/list`: the manifests of the skills `owner` sees.
pub fn list(store: &SkillStore, owner: Option<&str>) -> Vec<Skill> {
    served(store, owner).iter().map(manifest).collect()
}

/// `skills/get`: the manifest whose `SKILL.md` is at `uri`, if `owner` sees such a skill.
pub fn get(store: &SkillStore, owner: Option<&str>, uri: &str) -> Option<Skill> {
    served(store, owner)
        .iter()
        .find(|s| files(s)[0].0 == uri)
        .map(manifest)
}

/// `resources/read` of a skill file at `uri`, if `owner` sees its skill; `None` for a URI that
/// is not a skill file's.
pub fn read(store: &SkillStore, owner: Option<&str>, uri: &str) -> Option<ResourceContents> {
    if !uri.starts_with(SCHEME) {
        return None;
    }
    served(store, owner).iter().find_map(|s| {
        files(s)
            .into_iter()
            .find(|(u, _)| u == uri)
            .map(|(u, text)| {
                let mime = if u.ends_with(".md") {
                    "text/markdown"
                } else {
                    "text/x-python"
                };
                ResourceContents::text(text, u).with_mime_type(mime)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(approved: bool) -> (tempfile::TempDir, SkillStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SkillStore::new(dir.path());
        let skill = Kept::new(
            "shout",
            "def shout(x):\n    \"\"\"Loud.\"\"\"\n    return x.upper()\n".to_string(),
            false,
            "Loud.",
            None,
        )
        .expect("a skill");
        let digest = skill.digest.clone();
        store.save(skill).expect("saved");
        if approved {
            store.approve(None, "shout", &digest).expect("approved");
        }
        (dir, store)
    }

    #[test]
    fn an_approved_skill_is_served_with_digests_that_match_its_files() {
        let (_dir, store) = store_with(true);
        let listed = list(&store, None);
        assert_eq!(listed.len(), 1);
        let m = &listed[0];
        assert_eq!(m.uri, "skill://shout/SKILL.md");
        assert_eq!(m.frontmatter.name, "shout");
        rmcp::model::validate_skills(&listed).expect("a valid manifest");
        let SkillResources::Files(files) = &m.resources else {
            panic!("files")
        };
        for f in files {
            let read = read(&store, None, &f.uri).expect("served");
            let ResourceContents::TextResourceContents { text, .. } = read else {
                panic!("text")
            };
            f.verify(text.as_bytes()).expect("digest and size match");
        }
        assert!(get(&store, None, "skill://shout/SKILL.md").is_some());
        // Another token sees none of the operator's.
        assert!(list(&store, Some("bob")).is_empty());
        assert!(read(&store, Some("bob"), "skill://shout/shout.py").is_none());
    }

    #[test]
    fn an_unapproved_skill_is_not_served() {
        let (_dir, store) = store_with(false);
        assert!(list(&store, None).is_empty());
        assert!(get(&store, None, "skill://shout/SKILL.md").is_none());
        assert!(read(&store, None, "skill://shout/shout.py").is_none());
        assert!(read(&store, None, "file:///etc/passwd").is_none());
    }
}
