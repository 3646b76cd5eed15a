//! Untrusted text made safe to print on a terminal or in a log line.
//!
//! Names, commands, arguments, environment keys and URLs come from files a repository controls;
//! file names, server names and messages come from a sandbox that may be hostile. Printed raw, a
//! carriage return, an ANSI escape or a bidirectional override (U+202E) can erase or forge the
//! lines a user reads before approving something. [`Shown`] prints such text with every control
//! character (C0, DEL, C1), every bidirectional or invisible character (Unicode's default
//! ignorables: tags, Hangul fillers, variation selectors, ...) and every line or paragraph
//! separator escaped as `\u{..}` (a backslash is doubled, so an escape can't be
//! forged either). Leaf: no dependency on the rest of the crate.

use std::borrow::Cow;
use std::fmt;

/// Whether `c` must not reach a terminal as it is: a control character (C0, DEL, C1), a line
/// or paragraph separator, an interlinear annotation character, or any of Unicode's
/// `Default_Ignorable_Code_Point`s ([`is_invisible`]). The one definition every name filter
/// of the bridge uses (outbox file names, the names a host request carries, server names in
/// configs, the terminal and log escapes).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || is_invisible(c)
        || matches!(
            c,
            '\u{2028}' | '\u{2029}'     // line and paragraph separators
            | '\u{FFF9}'..='\u{FFFB}' // interlinear annotation
        )
}

/// Whether `c` is one of Unicode's `Default_Ignorable_Code_Point`s (DerivedCoreProperties,
/// Unicode 16): characters a renderer shows as nothing, so a name holding one looks like
/// another. Bidirectional formatting characters are among them.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}'                     // soft hyphen
        | '\u{034F}'                   // combining grapheme joiner
        | '\u{061C}'                   // Arabic letter mark
        | '\u{115F}'..='\u{1160}'     // Hangul choseong and jungseong fillers
        | '\u{17B4}'..='\u{17B5}'     // Khmer inherent vowels
        | '\u{180B}'..='\u{180F}'     // Mongolian variation selectors and vowel separator
        | '\u{200B}'..='\u{200F}'     // zero-width chars, LRM, RLM
        | '\u{202A}'..='\u{202E}'     // bidi embeddings and overrides
        | '\u{2060}'..='\u{206F}'     // word joiner, invisible operators, bidi isolates
        | '\u{3164}'                   // Hangul filler
        | '\u{FE00}'..='\u{FE0F}'     // variation selectors
        | '\u{FEFF}'                   // zero-width no-break space (BOM)
        | '\u{FFA0}'                   // halfwidth Hangul filler
        | '\u{FFF0}'..='\u{FFF8}'     // unassigned specials
        | '\u{1BCA0}'..='\u{1BCA3}'   // shorthand format controls
        | '\u{1D173}'..='\u{1D17A}'   // musical symbol formatting
        | '\u{E0000}'..='\u{E0FFF}'   // tag characters, variation selectors supplement
    )
}

/// `text` with every unsafe character escaped; borrowed when nothing needed escaping.
pub fn escaped(text: &str) -> Cow<'_, str> {
    escape(text, &[], true)
}

/// `text` with every unsafe character not in `keep` escaped as `\u{..}` (`\n`, `\r`, `\t` by
/// their names); a backslash doubled when `double_backslash`, else left as it is (for text whose
/// untrusted pieces were escaped already: `crate::cli::safe_line`).
pub fn escape<'a>(text: &'a str, keep: &[char], double_backslash: bool) -> Cow<'a, str> {
    let bad = |c: char| (is_unsafe(c) && !keep.contains(&c)) || (double_backslash && c == '\\');
    if !text.chars().any(bad) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !bad(c) => out.push(c),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// Displays untrusted text with unsafe characters escaped (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escaped(self.0))
    }
}

/// Displays an untrusted path: its lossy UTF-8 text, escaped.
#[derive(Debug, Clone, Copy)]
pub struct ShownPath<'a>(pub &'a std::path::Path);

impl fmt::Display for ShownPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escaped(&self.0.to_string_lossy()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_and_unchanged() {
        assert!(matches!(
            escaped("npx -y @scope/server --port=3"),
            Cow::Borrowed(_)
        ));
        assert_eq!(escaped("héllo wörld ✓"), "héllo wörld ✓");
    }

    #[test]
    fn controls_bidi_and_invisibles_are_escaped() {
        assert_eq!(escaped("a\rb\x1b[2Kc"), "a\\rb\\u{1b}[2Kc");
        assert_eq!(escaped("evil\u{202E}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(
            escaped("x\u{2066}y\u{2069}\u{200B}"),
            "x\\u{2066}y\\u{2069}\\u{200b}"
        );
        assert_eq!(escaped("\u{85}\u{7f}\u{feff}"), "\\u{85}\\u{7f}\\u{feff}");
        assert_eq!(escaped("line\nnext\u{2028}"), "line\\nnext\\u{2028}");
    }

    #[test]
    fn every_default_ignorable_character_is_escaped() {
        // Tags, Hangul fillers, the grapheme joiner, variation selectors (both blocks).
        for c in [
            '\u{E0000}',
            '\u{E0041}',
            '\u{E007F}',
            '\u{3164}',
            '\u{115F}',
            '\u{1160}',
            '\u{FFA0}',
            '\u{034F}',
            '\u{FE00}',
            '\u{FE0F}',
            '\u{E0100}',
            '\u{E01EF}',
            '\u{180B}',
            '\u{1D173}',
        ] {
            assert!(is_unsafe(c), "U+{:04X}", c as u32);
            let text = format!("a{c}b");
            assert_eq!(escaped(&text), format!("a\\u{{{:x}}}b", c as u32));
        }
        // Visible neighbours stay.
        for c in [
            '\u{3163}',
            '\u{3165}',
            '\u{FE10}',
            '\u{E1000}',
            '\u{1100}',
            'é',
            '한',
        ] {
            assert!(!is_unsafe(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn a_backslash_cannot_forge_an_escape() {
        assert_eq!(escaped("\\u{202e}"), "\\\\u{202e}");
        assert_eq!(Shown("a\\b").to_string(), "a\\\\b");
    }

    #[test]
    fn shown_path_escapes_lossy_text() {
        let p = std::path::Path::new("/tmp/re\u{202E}port.png");
        assert_eq!(ShownPath(p).to_string(), "/tmp/re\\u{202e}port.png");
    }
}
