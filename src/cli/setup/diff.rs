//! The unified diff shown for each file before it changes.

use std::path::Path;

use similar::TextDiff;

/// The unified diff (3 lines of context) from `old` (`None`: no file yet, `/dev/null`) to `new`.
pub fn unified(path: &Path, old: Option<&str>, new: &str) -> String {
    let shown = path.display().to_string();
    let from = if old.is_some() {
        shown.as_str()
    } else {
        "/dev/null"
    };
    TextDiff::from_lines(old.unwrap_or_default(), new)
        .unified_diff()
        .context_radius(3)
        .header(from, &shown)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_changed_lines_with_context_and_new_files_from_dev_null() {
        let d = unified(
            Path::new("/h/a.json"),
            Some("{\n  \"a\": 1\n}\n"),
            "{\n  \"a\": 1,\n  \"b\": 2\n}\n",
        );
        assert_eq!(
            d,
            "--- /h/a.json\n+++ /h/a.json\n@@ -1,3 +1,4 @@\n {\n-  \"a\": 1\n+  \"a\": 1,\n+  \"b\": 2\n }\n"
        );
        let d = unified(Path::new("/h/b.json"), None, "{}\n");
        assert_eq!(d, "--- /dev/null\n+++ /h/b.json\n@@ -0,0 +1 @@\n+{}\n");
    }
}
