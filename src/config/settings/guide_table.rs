//! The settings table as GUIDE.md shows it ("Environment variables"): one Markdown row per
//! setting, rendered from [`ROWS`]. A test holds GUIDE's table equal to it, and another fails
//! when the code names an `MCP_BRIDGE_*` variable the table lacks.

use super::rows::ROWS;

/// The header of GUIDE's table.
const HEADER: &str = "| variable | default | allowed | meaning |\n|---|---|---|---|\n";

/// GUIDE's "Environment variables" table, rendered from the settings table.
pub fn guide_table() -> String {
    let mut out = HEADER.to_string();
    for row in ROWS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            row.name(),
            row.default_text(),
            row.allowed_text(),
            row.doc()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    /// Variables the bridge sets for the sandbox's entrypoint and never reads itself.
    const SET_FOR_THE_SANDBOX: &[&str] = &[
        "MCP_BRIDGE_OUTBOX",
        "MCP_BRIDGE_SHARED",
        "MCP_BRIDGE_PACKAGES",
    ];

    /// GUIDE.md's table: the lines from its header to the first line that is not a row.
    fn guide_lines() -> Vec<String> {
        let guide = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("GUIDE.md"))
            .expect("GUIDE.md");
        let start = guide
            .find("## Environment variables\n")
            .expect("GUIDE.md has an \"Environment variables\" section");
        guide[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with('|'))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn guides_settings_table_is_the_settings_table() {
        let expected = guide_table();
        let expected: Vec<&str> = expected.lines().collect();
        let found = guide_lines();
        let missing: Vec<&&str> = expected
            .iter()
            .filter(|l| !found.contains(&l.to_string()))
            .collect();
        let extra: Vec<&String> = found
            .iter()
            .filter(|l| !expected.contains(&l.as_str()))
            .collect();
        assert!(
            missing.is_empty() && extra.is_empty() && found == expected,
            "GUIDE.md's \"Environment variables\" table differs from the settings table \
             (src/config/rows.rs).\nrows GUIDE lacks or shows differently:\n{}\n\
             rows only GUIDE has:\n{}\nthe table, as GUIDE should hold it:\n{}",
            missing
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            extra
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            expected.join("\n")
        );
    }

    #[test]
    fn every_row_is_one_table_cell_per_column() {
        let mut names = BTreeSet::new();
        for row in ROWS {
            assert!(names.insert(row.name()), "{} is listed twice", row.name());
            for cell in [
                row.doc().to_string(),
                row.default_text(),
                row.allowed_text(),
            ] {
                assert!(
                    !cell.is_empty() && !cell.contains(['|', '\n']),
                    "{}: {cell:?}",
                    row.name()
                );
            }
        }
    }

    /// Every `MCP_BRIDGE_...` name in `text` (names ending in `_`, like `MCP_BRIDGE_IMAGE_*`
    /// in prose, are prefixes, not names).
    fn names_in(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("MCP_BRIDGE_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            if !tail[..end].ends_with('_') {
                out.push(tail[..end].to_string());
            }
            rest = &tail[end..];
        }
        out
    }

    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src/") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn every_variable_the_code_names_is_in_the_table() {
        let mut files = Vec::new();
        rust_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let known: BTreeSet<&str> = ROWS.iter().map(|r| r.name()).collect();
        let mut unknown = BTreeSet::new();
        for file in &files {
            let text = std::fs::read_to_string(file).expect("read");
            for name in names_in(&text) {
                if !known.contains(name.as_str()) && !SET_FOR_THE_SANDBOX.contains(&name.as_str()) {
                    unknown.insert(format!("{name} ({})", file.display()));
                }
            }
        }
        assert!(
            unknown.is_empty(),
            "variables named in src/ but missing from the settings table (src/config/rows.rs): {unknown:?}"
        );
        assert!(names_in("`MCP_BRIDGE_IMAGE_*` and MCP_BRIDGE_MAX_FRAME.").len() == 1);
    }
}
