//! [`Language`]: which language a run's code is in (`run_python` or `run_typescript`). The
//! sandbox's exec frame, the audit log's run line and the MCP face all speak it.

/// The language of a run's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Language {
    /// Python, in the sandbox's interpreter (`run_python`).
    #[default]
    Python,
    /// TypeScript or JavaScript, in the sandbox's node child (`run_typescript`).
    TypeScript,
}

impl Language {
    /// The name the exec frame, the audit log and `MCP_BRIDGE_LANGUAGES` use.
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::TypeScript => "typescript",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_settings_words() {
        assert_eq!(Language::default(), Language::Python);
        assert_eq!(Language::Python.name(), "python");
        assert_eq!(Language::TypeScript.name(), "typescript");
    }
}
