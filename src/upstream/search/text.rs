//! Text into search terms: word tokens, stop words, English stems (Snowball, `rust-stemmers`).
//!
//! Pure and allocation-light; knows nothing about tools or scoring.

use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Splits text into lowercase word tokens (snake, kebab, camel case and punctuation).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Words that carry no meaning for finding a tool ("what time is it in Tokyo" → time, tokyo).
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "by", "can", "could",
    "do", "does", "for", "from", "has", "have", "how", "i", "in", "into", "is", "it", "its", "me",
    "my", "of", "on", "or", "our", "please", "should", "so", "some", "that", "the", "their",
    "them", "these", "this", "those", "to", "us", "use", "using", "want", "was", "we", "what",
    "when", "where", "which", "will", "with", "would", "you", "your",
];

/// True for a word that is dropped from queries and texts.
pub fn is_stop_word(token: &str) -> bool {
    STOP_WORDS.binary_search(&token).is_ok()
}

/// The English stem of a lowercase token ("issues" → "issu", "changes" → "chang").
pub fn stem(token: &str) -> String {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER
        .get_or_init(|| Stemmer::create(Algorithm::English))
        .stem(token)
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizes_all_cases() {
        assert_eq!(tokens("createIssue"), ["create", "issue"]);
        assert_eq!(
            tokens("list-calendar_events v2"),
            ["list", "calendar", "events", "v2"]
        );
        assert_eq!(tokens("HTTPServer"), ["httpserver"]);
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_stop_word("the") && !is_stop_word("time"));
    }

    #[test]
    fn stems_plurals_and_verb_forms() {
        assert_eq!(stem("issues"), stem("issue"));
        assert_eq!(stem("changes"), stem("changed"));
    }
}
