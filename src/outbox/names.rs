//! File names for the host, decided by the host: whatever name the sandbox sends becomes one
//! plain, bounded file name (no separators, no `..`, no hidden or absolute names), and its
//! MIME type by extension. Pure.

use crate::shown::is_unsafe;

/// The longest file name kept, in bytes (the extension is kept when a name is cut).
pub const MAX_NAME_BYTES: usize = 100;

/// The longest extension kept, in bytes (a longer "extension" is just part of the name).
const MAX_EXT_BYTES: usize = 16;

/// `wanted` (untrusted) as a plain file name: path separators and characters that are
/// awkward in file names become `_`, control, bidirectional and invisible characters
/// (`crate::shown::is_unsafe`: `\x1b`, U+202E, U+200B, ...) are dropped, leading and trailing dots
/// and spaces go (no `.`, `..` or hidden names), and the name is cut to [`MAX_NAME_BYTES`]
/// keeping its extension. Never empty: `file` when nothing is left.
pub fn sanitize(wanted: &str) -> String {
    let cleaned: String = wanted
        .chars()
        .filter(|c| !is_unsafe(*c))
        .map(|c| match c {
            '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' => '_',
            c => c,
        })
        .collect();
    let trimmed = cleaned.trim_matches(|c: char| c == '.' || c.is_whitespace());
    let name = if trimmed.is_empty() { "file" } else { trimmed };
    cut(name)
}

/// `name` cut to [`MAX_NAME_BYTES`] at a character boundary, keeping a short extension.
fn cut(name: &str) -> String {
    if name.len() <= MAX_NAME_BYTES {
        return name.to_string();
    }
    let (stem, ext) = split_ext(name);
    let room = MAX_NAME_BYTES - ext.len();
    let mut end = room.min(stem.len());
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ext}", &stem[..end])
}

/// `(stem, ".ext")`, the extension empty when there is none or it is too long to be one.
fn split_ext(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) if i > 0 && name.len() - i <= MAX_EXT_BYTES => name.split_at(i),
        _ => (name, ""),
    }
}

/// The `n`th (from 2) alternative of a taken `name`: `plot.png` → `plot-2.png`, within
/// [`MAX_NAME_BYTES`].
pub fn numbered(name: &str, n: usize) -> String {
    let (stem, ext) = split_ext(name);
    let suffix = format!("-{n}{ext}");
    let mut end = stem.len().min(MAX_NAME_BYTES.saturating_sub(suffix.len()));
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", &stem[..end])
}

/// The MIME type of a file by its extension; `application/octet-stream` when unknown.
pub fn mime_for(name: &str) -> &'static str {
    let ext = split_ext(name)
        .1
        .trim_start_matches('.')
        .to_ascii_lowercase();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "parquet" => "application/vnd.apache.parquet",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        _ => "application/octet-stream",
    }
}

/// True for MIME types `resources/read` serves as text (when the bytes are UTF-8).
pub fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "application/yaml" | "image/svg+xml"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_leave_the_folder() {
        for (wanted, want) in [
            ("plot.png", "plot.png"),
            ("../../etc/passwd", "_.._etc_passwd"),
            ("/etc/passwd", "_etc_passwd"),
            ("..", "file"),
            (".", "file"),
            ("", "file"),
            (" .hidden ", "hidden"),
            ("sub/dir/x.csv", "sub_dir_x.csv"),
            ("a\\b", "a_b"),
            ("c:\\x", "c__x"),
            ("new\nline\u{0}.txt", "newline.txt"),
            ("tricky..", "tricky"),
            ("report\u{202E}gnp.exe", "reportgnp.exe"),
            ("\x1b[2Kclean\u{200B}.txt", "[2Kclean.txt"),
            ("\u{2066}\u{feff}", "file"),
            // Tags, Hangul fillers, the grapheme joiner and variation selectors: invisible.
            ("re\u{E0041}\u{E007F}port.txt", "report.txt"),
            ("\u{3164}\u{115F}.png", "png"),
            ("a\u{034F}b\u{FE0F}c\u{E0100}.csv", "abc.csv"),
        ] {
            let got = sanitize(wanted);
            assert_eq!(got, want, "{wanted:?}");
            assert!(!got.contains('/') && got != "." && got != ".." && !got.starts_with('.'));
            assert!(!got.chars().any(is_unsafe), "{got:?}");
        }
    }

    #[test]
    fn long_names_are_cut_keeping_the_extension() {
        let long = format!("{}.csv", "é".repeat(300));
        let got = sanitize(&long);
        assert!(got.len() <= MAX_NAME_BYTES, "{}", got.len());
        assert!(got.ends_with(".csv"), "{got}");
        let no_ext = "x".repeat(5000);
        assert_eq!(sanitize(&no_ext).len(), MAX_NAME_BYTES);
        let n = numbered(&got, 12);
        assert!(n.len() <= MAX_NAME_BYTES && n.ends_with("-12.csv"), "{n}");
        assert_eq!(numbered("plot.png", 2), "plot-2.png");
        assert_eq!(numbered("README", 3), "README-3");
    }

    #[test]
    fn mime_by_extension() {
        assert_eq!(mime_for("a.PNG"), "image/png");
        assert_eq!(mime_for("data.csv"), "text/csv");
        assert_eq!(mime_for("x.pkl"), "application/octet-stream");
        assert_eq!(mime_for("noext"), "application/octet-stream");
        assert!(is_text("text/csv") && is_text("application/json"));
        assert!(!is_text("image/png"));
    }
}
