//! [`SkillError`]: why a skill could not be saved, found, loaded or changed.

/// Why a skill operation failed. Messages never quote a stored file's text.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The name is not one a skill may have.
    #[error("the skill name {shown} is refused: {why}")]
    BadName {
        /// The name, escaped and cut.
        shown: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The source is over the size bound.
    #[error("the skill '{name}' is {size} bytes; a skill is at most {max} bytes")]
    TooLarge {
        /// The skill.
        name: String,
        /// Its size.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// The store holds as many skills as it may.
    #[error(
        "{max} skills are kept already; remove one first (`mcp-code-bridge skills --remove NAME`)"
    )]
    Full {
        /// The bound.
        max: usize,
    },
    /// No skill of that name (for this owner).
    #[error("no skill named '{name}' is kept; runtime.list_skills() lists them")]
    Unknown {
        /// The skill.
        name: String,
    },
    /// The skill's current text was never approved.
    #[error("the skill '{name}' ({state}, digest {short}) has not been approved in this text; ask the user to review it and run `mcp-code-bridge skills --approve {name}`")]
    NotApproved {
        /// The skill.
        name: String,
        /// `pending` or `changed`.
        state: &'static str,
        /// The first 12 hex digits of its digest.
        short: String,
    },
    /// The store's file is not what the bridge wrote (nothing is changed or lost).
    #[error("the skills store {path} is damaged ({at}); it was left as it is: move it aside to start afresh")]
    Damaged {
        /// The file, as shown.
        path: String,
        /// Where or how.
        at: String,
    },
    /// The folder is refused.
    #[error(transparent)]
    Folder(#[from] crate::checked_dir::DirError),
    /// Reading or writing the file failed.
    #[error("{what} the skills store {path}: {source}")]
    Io {
        /// The file, as shown.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
