//! Skills: functions sandbox code saved (`runtime.save_skill`), kept in the state folder and
//! run again in later runs only once the user approved their exact text.
//!
//! `record.rs` is one skill (name rules, digest, approval state), `store.rs` the file they live
//! in, `export.rs` the SKILL.md folders `skills --export` writes, `error.rs` what can go wrong. Depends only on `checked_dir` and `shown`.

mod error;
mod export;
mod record;
mod store;

pub use error::SkillError;
pub use export::{export, skill_md};
pub use record::{check_name, digest, Skill, SkillState, MAX_DESCRIPTION, MAX_NAME, MAX_SOURCE};
pub use store::{SkillStore, MAX_SKILLS};
