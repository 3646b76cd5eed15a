//! The change a server's tool list holds against its pins, as a unified diff of the pinned and
//! the new definition text per tool (a new tool from `/dev/null`), bounded in lines and line
//! length. Escaping for a terminal is the caller's (`servers` escapes every line). Pure.

use similar::TextDiff;

/// Diff lines shown at most per server; the rest are counted.
pub const MAX_LINES: usize = 400;
/// Characters of one diff line shown at most; the rest are counted.
pub const MAX_LINE_CHARS: usize = 400;

/// One tool's change: its name, the pinned text (`None`: new tool) and the new text.
pub struct Change<'a> {
    /// The tool.
    pub tool: &'a str,
    /// Its pinned text; `None` for a tool that was not there when the server was pinned.
    pub pinned: Option<&'a str>,
    /// The text it lists now.
    pub listed: &'a str,
}

/// The unified diffs (3 lines of context) of `changes`, one after another, headed
/// `--- pinned SERVER.TOOL` / `+++ listed SERVER.TOOL`; at most [`MAX_LINES`] lines of at most
/// [`MAX_LINE_CHARS`] characters, then a line counting what was left out.
pub fn unified(server: &str, changes: &[Change<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    let mut left_out = 0usize;
    for c in changes {
        let from = match c.pinned {
            Some(_) => format!("pinned {server}.{}", c.tool),
            None => "/dev/null".to_string(),
        };
        let to = format!("listed {server}.{}", c.tool);
        let diff = TextDiff::from_lines(c.pinned.unwrap_or_default(), c.listed)
            .unified_diff()
            .context_radius(3)
            .header(&from, &to)
            .to_string();
        for line in diff.lines() {
            if out.len() < MAX_LINES {
                out.push(cut(line));
            } else {
                left_out += 1;
            }
        }
    }
    if left_out > 0 {
        out.push(format!("[{left_out} more diff lines not shown]"));
    }
    out
}

/// `line`, cut at [`MAX_LINE_CHARS`] characters with the rest counted.
fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None => line.to_string(),
        Some((at, _)) => format!(
            "{} [{} more characters]",
            &line[..at],
            line[at..].chars().count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_tool_shows_its_changed_line_and_a_new_tool_comes_from_dev_null() {
        let lines = unified(
            "s",
            &[
                Change {
                    tool: "t",
                    pinned: Some("{\n  \"description\": \"old\",\n  \"name\": \"t\"\n}\n"),
                    listed: "{\n  \"description\": \"new\",\n  \"name\": \"t\"\n}\n",
                },
                Change {
                    tool: "n",
                    pinned: None,
                    listed: "{\n  \"name\": \"n\"\n}\n",
                },
            ],
        );
        let text = lines.join("\n");
        assert!(
            text.starts_with("--- pinned s.t\n+++ listed s.t\n@@"),
            "{text}"
        );
        assert!(
            text.contains("\n-  \"description\": \"old\",\n+  \"description\": \"new\",\n"),
            "{text}"
        );
        assert!(text.contains("--- /dev/null\n+++ listed s.n\n"), "{text}");
        assert!(text.contains("\n+  \"name\": \"n\""), "{text}");
    }

    #[test]
    fn output_is_bounded_in_lines_and_line_length() {
        let long = format!("{}\n", "x".repeat(10_000));
        let many: String = (0..2 * MAX_LINES).map(|i| format!("{i}\n")).collect();
        let lines = unified(
            "s",
            &[
                Change {
                    tool: "long",
                    pinned: None,
                    listed: &long,
                },
                Change {
                    tool: "many",
                    pinned: None,
                    listed: &many,
                },
            ],
        );
        assert_eq!(lines.len(), MAX_LINES + 1);
        assert!(lines
            .iter()
            .all(|l| l.chars().count() < MAX_LINE_CHARS + 40));
        assert!(
            lines[3].ends_with(&format!("[{} more characters]", 10_001 - MAX_LINE_CHARS)),
            "{}",
            lines[3]
        );
        assert!(
            lines[MAX_LINES].starts_with('[')
                && lines[MAX_LINES].ends_with("more diff lines not shown]")
        );
    }
}
