//! [`SkillStore`]: the skills kept in `$MCP_BRIDGE_STATE_DIR/skills/skills.json` (a private
//! checked folder, the file 0600, written aside and renamed through `CheckedDir::new_file`,
//! changed under a `flock` so bridges and the `skills` command never lose each other's
//! changes). A file the bridge could not have written is refused as damaged and left alone.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::SkillError;
use super::record::{Skill, SkillState, MAX_SOURCE};
use crate::checked_dir::private_file::{judge_records, parse_json, PrivateFile, PrivateFileError};
use crate::checked_dir::{Access, CheckedDir, FIX_STATE};

/// Skills kept at most (all owners together).
pub const MAX_SKILLS: usize = 256;
/// The folder in the state folder.
const DIR: &str = "skills";
/// The file.
const FILE: &str = "skills.json";
/// The lock taken while the file changes.
const LOCK: &str = "skills.lock";
/// The file is refused when larger: every skill at its bound, each byte escaped as `\u00XX`.
const MAX_FILE: u64 = (MAX_SKILLS * (MAX_SOURCE * 6 + 4096)) as u64;
/// The file's format.
const VERSION: u32 = 1;

/// The file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Contents {
    version: u32,
    skills: Vec<Skill>,
}

/// The skills of one state folder.
#[derive(Debug, Clone)]
pub struct SkillStore {
    state_dir: PathBuf,
}

/// Whether `skill` is `owner`'s `name`.
fn is(skill: &Skill, owner: Option<&str>, name: &str) -> bool {
    skill.name == name && skill.owner.as_deref() == owner
}

impl SkillStore {
    /// The store under `state_dir` (nothing is read or made yet).
    pub fn new(state_dir: &Path) -> Self {
        SkillStore {
            state_dir: state_dir.to_path_buf(),
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.state_dir.join(DIR).join(FILE)
    }

    fn dir(&self) -> Result<CheckedDir, SkillError> {
        Ok(
            CheckedDir::open(&self.state_dir, Access::Shared, FIX_STATE)?.sub(
                DIR,
                Access::Private,
                FIX_STATE,
            )?,
        )
    }

    fn io(&self, what: &'static str) -> impl FnOnce(std::io::Error) -> SkillError + '_ {
        move |source| SkillError::Io {
            path: crate::shown::ShownPath(&self.path()).to_string(),
            what,
            source,
        }
    }

    /// Keeps `skill` (its owner's skill of that name replaced): the same text keeps its
    /// approval; other text keeps the old approved digest, so it reads `changed` until approved
    /// again. Returns its state.
    ///
    /// # Errors
    /// The store is full, damaged, refused, or cannot be written.
    pub fn save(&self, mut skill: Skill) -> Result<SkillState, SkillError> {
        self.locked(|c| {
            let owner = skill.owner.clone();
            let full = c.skills.len() >= MAX_SKILLS;
            match c
                .skills
                .iter_mut()
                .find(|s| is(s, owner.as_deref(), &skill.name))
            {
                Some(old) => {
                    skill.approved = old.approved.take();
                    *old = skill.clone();
                }
                None if full => return Err(SkillError::Full { max: MAX_SKILLS }),
                None => c.skills.push(skill.clone()),
            }
            Ok((true, skill.state()))
        })
    }

    /// `owner`'s skills, by name.
    ///
    /// # Errors
    /// The store is damaged or refused.
    pub fn list(&self, owner: Option<&str>) -> Result<Vec<Skill>, SkillError> {
        let mut mine: Vec<Skill> = self
            .all()?
            .into_iter()
            .filter(|s| s.owner.as_deref() == owner)
            .collect();
        mine.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(mine)
    }

    /// Every skill, all owners, by name then owner.
    ///
    /// # Errors
    /// The store is damaged or refused.
    pub fn all(&self) -> Result<Vec<Skill>, SkillError> {
        if !self.path().exists() {
            return Ok(Vec::new());
        }
        let mut all = self.read(&self.dir()?)?.skills;
        all.sort_by(|a, b| (&a.name, &a.owner).cmp(&(&b.name, &b.owner)));
        Ok(all)
    }

    /// `owner`'s skill `name`, when its current text is approved.
    ///
    /// # Errors
    /// [`SkillError::Unknown`], [`SkillError::NotApproved`] (naming the command that approves
    /// it), or a damaged or refused store.
    pub fn load(&self, owner: Option<&str>, name: &str) -> Result<Skill, SkillError> {
        let skill = self
            .list(owner)?
            .into_iter()
            .find(|s| s.name == name)
            .ok_or_else(|| SkillError::Unknown {
                name: name.to_string(),
            })?;
        match skill.state() {
            SkillState::Approved => Ok(skill),
            state => Err(SkillError::NotApproved {
                name: skill.name.clone(),
                state: state.as_str(),
                short: skill.short_digest().to_string(),
            }),
        }
    }

    /// Approves `owner`'s skill `name` in the text whose digest is `digest` (the text the user
    /// was shown); refused when it changed since.
    ///
    /// # Errors
    /// Unknown, changed since it was shown, or a damaged, refused or unwritable store.
    pub fn approve(&self, owner: Option<&str>, name: &str, digest: &str) -> Result<(), SkillError> {
        self.locked(|c| {
            let Some(skill) = c.skills.iter_mut().find(|s| is(s, owner, name)) else {
                return Err(SkillError::Unknown {
                    name: name.to_string(),
                });
            };
            if skill.digest != digest {
                return Err(SkillError::NotApproved {
                    name: name.to_string(),
                    state: "changed while it was shown",
                    short: skill.short_digest().to_string(),
                });
            }
            skill.approved = Some(skill.digest.clone());
            Ok((true, ()))
        })
    }

    /// Removes `owner`'s skill `name`.
    ///
    /// # Errors
    /// Unknown, or a damaged, refused or unwritable store.
    pub fn remove(&self, owner: Option<&str>, name: &str) -> Result<(), SkillError> {
        if !self.path().exists() {
            return Err(SkillError::Unknown {
                name: name.to_string(),
            });
        }
        self.locked(|c| {
            let before = c.skills.len();
            c.skills.retain(|s| !is(s, owner, name));
            if c.skills.len() == before {
                return Err(SkillError::Unknown {
                    name: name.to_string(),
                });
            }
            Ok((true, ()))
        })
    }

    /// Runs `change` on the contents under the lock; writes them when it says so.
    fn locked<T>(
        &self,
        change: impl FnOnce(&mut Contents) -> Result<(bool, T), SkillError>,
    ) -> Result<T, SkillError> {
        let dir = self.dir()?;
        self.file(&dir).changed(self.fail(), |bytes| {
            let mut contents = self.parse(bytes)?;
            let (write, out) = change(&mut contents)?;
            let text = write.then(|| {
                let contents = Contents {
                    version: VERSION,
                    skills: std::mem::take(&mut contents.skills),
                };
                serde_json::to_vec_pretty(&contents).expect("skills serialize")
            });
            Ok((text, out))
        })
    }

    /// The store's file in `dir`, changed under [`LOCK`].
    fn file<'a>(&self, dir: &'a CheckedDir) -> PrivateFile<'a> {
        PrivateFile::new(dir, FILE, LOCK, MAX_FILE)
    }

    /// A failure of the store's file as the store says it.
    fn fail(&self) -> impl Fn(PrivateFileError) -> SkillError + '_ {
        move |e| e.said(|what, source| self.io(what)(source), |at| self.damaged(at))
    }

    fn damaged(&self, at: String) -> SkillError {
        SkillError::Damaged {
            path: crate::shown::ShownPath(&self.path()).to_string(),
            at,
        }
    }

    fn read(&self, dir: &CheckedDir) -> Result<Contents, SkillError> {
        self.parse(self.file(dir).read().map_err(self.fail())?)
    }

    /// The skills in the file's bytes (none without a file), judged: the format, the count,
    /// each record's name, size and digest.
    fn parse(&self, bytes: Option<Vec<u8>>) -> Result<Contents, SkillError> {
        let Some(text) = bytes else {
            return Ok(Contents {
                version: VERSION,
                skills: Vec::new(),
            });
        };
        let contents: Contents = parse_json(&text).map_err(|at| self.damaged(at))?;
        let (v, skills) = (contents.version, &contents.skills);
        judge_records(v, VERSION, skills, MAX_SKILLS, "skill", Skill::is_sound)
            .map_err(|at| self.damaged(at))?;
        Ok(contents)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn skill(name: &str, text: &str) -> Skill {
        Skill::new(
            name,
            format!("def {name}():\n    return {text:?}\n"),
            false,
            "Doc.",
            None,
        )
        .expect("kept")
    }

    fn store() -> (tempfile::TempDir, SkillStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SkillStore::new(&dir.path().join("state"));
        (dir, store)
    }

    #[test]
    fn saved_refused_approved_changed_refused_again_removed() {
        let (_d, store) = store();
        assert!(store.list(None).expect("empty").is_empty());
        assert_eq!(
            store.save(skill("f", "a")).expect("saved"),
            SkillState::Pending
        );
        let refused = store.load(None, "f").expect_err("pending").to_string();
        assert!(
            refused.contains("mcp-code-bridge skills --approve f"),
            "{refused}"
        );
        let kept = &store.list(None).expect("listed")[0];
        store.approve(None, "f", &kept.digest).expect("approved");
        assert_eq!(store.load(None, "f").expect("loads").source, kept.source);
        // The same text again keeps its approval.
        assert_eq!(
            store.save(skill("f", "a")).expect("saved"),
            SkillState::Approved
        );
        // Other text is refused until approved again.
        assert_eq!(
            store.save(skill("f", "b")).expect("saved"),
            SkillState::Changed
        );
        let refused = store.load(None, "f").expect_err("changed").to_string();
        assert!(
            refused.contains("changed") && refused.contains("--approve f"),
            "{refused}"
        );
        // Approving the old digest (a text no longer there) is refused.
        assert!(store.approve(None, "f", &kept.digest).is_err());
        store.remove(None, "f").expect("removed");
        assert!(matches!(
            store.load(None, "f"),
            Err(SkillError::Unknown { .. })
        ));
        assert!(matches!(
            store.remove(None, "f"),
            Err(SkillError::Unknown { .. })
        ));
        let mode = std::fs::metadata(store.path())
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(store.path().parent().expect("dir"))
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o077, 0);
    }

    #[test]
    fn skills_belong_to_their_owner() {
        let (_d, store) = store();
        let mut theirs = skill("f", "t");
        theirs.owner = Some("alice".into());
        store.save(theirs).expect("saved");
        store.save(skill("f", "o")).expect("saved");
        assert_eq!(store.list(Some("alice")).expect("listed").len(), 1);
        assert_eq!(store.list(Some("bob")).expect("listed").len(), 0);
        assert_eq!(store.all().expect("all").len(), 2);
        let d = store.list(None).expect("listed")[0].digest.clone();
        store.approve(None, "f", &d).expect("approved");
        assert!(
            store.load(Some("alice"), "f").is_err(),
            "another owner's approval"
        );
        assert!(matches!(
            store.load(Some("bob"), "f"),
            Err(SkillError::Unknown { .. })
        ));
    }

    #[test]
    fn the_count_is_bounded() {
        let (_d, store) = store();
        for i in 0..MAX_SKILLS {
            store.save(skill(&format!("f{i}"), "")).expect("saved");
        }
        assert!(matches!(
            store.save(skill("one_more", "")),
            Err(SkillError::Full { .. })
        ));
        // Replacing one is not adding one.
        store.save(skill("f0", "again")).expect("replaced");
        assert_eq!(store.all().expect("all").len(), MAX_SKILLS);
    }

    #[test]
    fn a_damaged_store_is_a_clear_error_and_left_alone() {
        let (_d, store) = store();
        store.save(skill("f", "a")).expect("saved");
        let path = store.path();
        for damage in [
            "{not json".to_string(),
            std::fs::read_to_string(&path)
                .expect("text")
                .replace("def f", "def g"),
            r#"{"version": 9, "skills": []}"#.to_string(),
        ] {
            std::fs::write(&path, &damage).expect("damaged");
            let err = store.list(None).expect_err("damaged").to_string();
            assert!(
                err.contains("damaged") && err.contains("skills.json"),
                "{err}"
            );
            assert!(!err.contains("def "), "quotes no text: {err}");
            assert!(store.save(skill("h", "")).is_err());
            assert_eq!(
                std::fs::read_to_string(&path).expect("kept"),
                damage,
                "nothing lost"
            );
        }
    }
}
