//! Which argument keys name a secret, for the audit log's redaction: a key is split into words
//! (on `_`, `-`, `.`, spaces and camelCase boundaries: `sessionId` → `session`, `id`;
//! `HTTPCookie` → `http`, `cookie`) and matched by word, so `auth_token`, `X-Auth` and
//! `sessionId` are secret while `author` is not; [`redacted`] replaces their values at any depth.
//! Pure.

use serde_json::{Map, Value};

/// Words that make a key secret wherever they stand in it, also inside a longer word
/// (`githubtoken`): long enough not to hide in ordinary words.
const SECRET_WORDS: [&str; 11] = [
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "authorization",
    "credential",
    "cookie",
    "session",
    "bearer",
];

/// Words that make a key secret only as a whole word (`auth` is secret, `author` is not).
const SECRET_WHOLE_WORDS: [&str; 4] = ["auth", "pwd", "privatekey", "jwt"];

/// Two words in a row that make a key secret (`api_key`, `privateKey`).
const SECRET_PAIRS: [(&str, &str); 3] = [("api", "key"), ("private", "key"), ("access", "key")];

/// Keys longer than this are judged by their first this many characters (they come from the
/// sandbox).
const MAX_KEY_CHARS: usize = 256;

/// Whether the argument key `key` names a secret (see the module doc).
pub fn is_secret_key(key: &str) -> bool {
    let words = words(key);
    let any_word = words.iter().any(|w| {
        SECRET_WORDS.iter().any(|s| w.contains(s)) || SECRET_WHOLE_WORDS.contains(&w.as_str())
    });
    any_word
        || words
            .windows(2)
            .any(|p| SECRET_PAIRS.contains(&(p[0].as_str(), p[1].as_str())))
}

/// `key`'s words, lowercase: split on every character that is not a letter or digit, and
/// where a lowercase letter or digit meets an uppercase one (`sessionId`) or an uppercase run
/// meets a capitalized word (`HTTPCookie`).
fn words(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().take(MAX_KEY_CHARS).collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_numeric()
                    || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// `arguments` with the values of secret-looking keys (at any depth) replaced.
pub fn redacted(arguments: &Map<String, Value>) -> Map<String, Value> {
    fn walk(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(redacted(m)),
            Value::Array(items) => Value::Array(items.iter().map(walk).collect()),
            other => other.clone(),
        }
    }
    arguments
        .iter()
        .map(|(k, v)| {
            if is_secret_key(k) {
                (k.clone(), Value::String("[redacted]".into()))
            } else {
                (k.clone(), walk(v))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_words_on_separators_and_camel_case() {
        assert_eq!(words("sessionId"), ["session", "id"]);
        assert_eq!(words("X-Auth"), ["x", "auth"]);
        assert_eq!(words("HTTPCookie"), ["http", "cookie"]);
        assert_eq!(words("private_key.v2"), ["private", "key", "v2"]);
        assert_eq!(words("apiKey"), ["api", "key"]);
        assert_eq!(words("__"), Vec::<String>::new());
    }

    #[test]
    fn secret_keys_are_matched_by_word() {
        for key in [
            "token",
            "GitHub_Token",
            "auth_token",
            "sessionId",
            "session",
            "X-Auth",
            "auth",
            "Cookie",
            "set-cookie",
            "private_key",
            "privateKey",
            "bearer",
            "pwd",
            "db.pwd",
            "apiKey",
            "x-api-key",
            "api_key",
            "Authorization",
            "client_secret",
            "passwd",
            "credentials",
        ] {
            assert!(is_secret_key(key), "{key} should be redacted");
        }
        for key in [
            "author", "authors", "query", "name", "keyword", "private", "key", "path", "pwdx_not",
        ] {
            assert!(!is_secret_key(key), "{key} should be kept");
        }
    }

    #[test]
    fn secret_looking_keys_are_redacted_at_any_depth() {
        let args = serde_json::json!({
            "query": "x",
            "GitHub_Token": "ghp_1",
            "author": "me",
            "nested": {"password": "p", "list": [{"apiKey": "k", "ok": 1}]},
            "headers": {"Cookie": "c", "X-Auth": "a", "sessionId": "s", "private_key": "pk"}
        });
        let Value::Object(args) = args else { panic!() };
        let out = Value::Object(redacted(&args));
        assert_eq!(
            out,
            serde_json::json!({
                "query": "x",
                "GitHub_Token": "[redacted]",
                "author": "me",
                "nested": {"password": "[redacted]", "list": [{"apiKey": "[redacted]", "ok": 1}]},
                "headers": {
                    "Cookie": "[redacted]",
                    "X-Auth": "[redacted]",
                    "sessionId": "[redacted]",
                    "private_key": "[redacted]"
                }
            })
        );
    }
}
