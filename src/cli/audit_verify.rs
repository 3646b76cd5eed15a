//! `mcp-code-bridge audit --verify [--file PATH]`: checks the audit log's chain of MACs under
//! the key in the state folder and says, in one line, either that it holds (lines and files
//! checked, lines from before the chain) or which line is the first that does not (file, line
//! number, why). Paths are printed through [`crate::shown`].

use std::path::Path;
use std::process::ExitCode;

use crate::audit::key;
use crate::audit::verify::{verify as check, Held, Verdict};
use crate::cli::safe_line::safe_line;
use crate::shown::ShownPath;

/// Exit code of a chain that does not hold.
pub const EXIT_BROKEN: u8 = 1;

/// Exit code when the chain cannot be checked (no log named or found, no key, unreadable).
pub const EXIT_CANNOT: u8 = 2;

/// Runs `audit --verify` on `file`, else the configured log, with the key of `state_dir`.
pub fn verify(configured: Option<&Path>, file: Option<&Path>, state_dir: &Path) -> ExitCode {
    let Some(path) = file.or(configured) else {
        eprintln!(
            "mcp-code-bridge audit --verify: no audit log: set MCP_BRIDGE_AUDIT_LOG (as the \
             bridge has it) or pass --file PATH"
        );
        return ExitCode::from(EXIT_CANNOT);
    };
    let cannot = |why: String| {
        eprintln!("mcp-code-bridge audit --verify: {}", safe_line(&why));
        ExitCode::from(EXIT_CANNOT)
    };
    let key = match key::load(state_dir) {
        Ok(Some(key)) => key,
        Ok(None) => {
            return cannot(
                key::KeyError::Missing {
                    path: key::key_path(state_dir),
                }
                .to_string(),
            )
        }
        Err(e) => return cannot(e.to_string()),
    };
    let marks = match crate::audit::head::load(state_dir, path) {
        Ok(marks) => marks,
        Err(e) => return cannot(e.to_string()),
    };
    match check(path, &key, marks) {
        Err(e) => cannot(format!("cannot read the audit log: {e}")),
        Ok(Verdict::Holds(held)) => {
            println!("{}", safe_line(&summary(&held)));
            ExitCode::SUCCESS
        }
        Ok(Verdict::NoChain(held)) => {
            println!(
                "the audit log does not hold: none of its {} lines carries a MAC",
                held.unchained
            );
            ExitCode::from(EXIT_BROKEN)
        }
        Ok(Verdict::Broken(b)) => {
            let line = format!(
                "the audit log does not hold: {} line {}: {}",
                ShownPath(&b.file),
                b.line,
                b.reason.explain()
            );
            println!("{}", safe_line(&line));
            ExitCode::from(EXIT_BROKEN)
        }
    }
}

/// The one line said of a chain that holds.
pub fn summary(held: &Held) -> String {
    let names: Vec<String> = held
        .files
        .iter()
        .map(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let mut line = format!(
        "the audit log holds: {} lines checked in {} files ({})",
        held.lines,
        held.files.len(),
        names.join(", ")
    );
    if held.unchained > 0 {
        line.push_str(&format!(
            "; {} lines before the chain began carry no MAC and are not covered",
            held.unchained
        ));
    }
    if held.partial {
        line.push_str("; the last line is still being written (not judged)");
    }
    line
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_summary_counts_lines_files_and_what_is_not_covered() {
        let held = Held {
            lines: 12,
            files: vec![
                PathBuf::from("/l/audit.log.1"),
                PathBuf::from("/l/audit.log"),
            ],
            unchained: 0,
            partial: false,
        };
        assert_eq!(
            summary(&held),
            "the audit log holds: 12 lines checked in 2 files (audit.log.1, audit.log)"
        );
        let held = Held {
            unchained: 3,
            partial: true,
            ..held
        };
        let line = summary(&held);
        assert!(line.contains("; 3 lines before the chain began"), "{line}");
        assert!(line.ends_with("(not judged)"), "{line}");
    }
}
