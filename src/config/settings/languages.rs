//! `MCP_BRIDGE_LANGUAGES`: which languages the bridge offers a tool for. Python's
//! `run_python` is always there; `typescript` adds `run_typescript`.

use super::table::Text;

/// Names `MCP_BRIDGE_LANGUAGES` may list at most (a guard against a huge value).
const MAX_NAMES: usize = 8;

/// `MCP_BRIDGE_LANGUAGES`.
pub const LANGUAGES: Text = Text {
    name: "MCP_BRIDGE_LANGUAGES",
    default: "python",
    allowed: "`python`, `typescript`, comma separated",
    doc: "the languages offered: `python,typescript` adds the tool `run_typescript` (TypeScript and JavaScript cells, run by node in the same sandbox); `run_python` is always there",
};

/// The languages offered besides Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Languages {
    /// `run_typescript` is offered.
    pub typescript: bool,
}

/// `python,typescript` and the like: each name `python` or `typescript` (any case, spaces
/// around names ignored, `javascript`/`ts`/`js` not accepted: one word per language).
pub fn parse_languages(v: &str) -> Result<Languages, String> {
    let mut languages = Languages::default();
    for (i, name) in v.split(',').enumerate() {
        if i >= MAX_NAMES {
            return Err(format!("more than {MAX_NAMES} names"));
        }
        match name.trim().to_ascii_lowercase().as_str() {
            "python" => {}
            "typescript" => languages.typescript = true,
            "" => return Err("an empty name; expected python or typescript".into()),
            other => {
                let shown: String = other.chars().take(32).collect();
                return Err(format!(
                    "unknown language '{shown}'; expected python or typescript"
                ));
            }
        }
    }
    Ok(languages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(!parse_languages("python").expect("ok").typescript);
        assert!(parse_languages("python,typescript").expect("ok").typescript);
        assert!(parse_languages(" TypeScript ").expect("ok").typescript);
        for bad in ["ruby", "python,", "", "python,js", &"python,".repeat(20)] {
            assert!(parse_languages(bad).is_err(), "{bad}");
        }
        assert!(parse_languages("python,ruby")
            .expect_err("unknown")
            .contains("unknown language 'ruby'"));
    }
}
