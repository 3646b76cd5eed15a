//! [`Tokens`]: the bearer tokens `serve --http` admits, read from the operator's tokens file
//! (`--token-file`): one `TOKEN [NAME]` per line, `#` comments, blank lines skipped. The file
//! holds secrets, so it must be a regular file of this user that no one else can read or write
//! (0600 or 0400), and it is opened without following a link. Tokens are kept as SHA-256
//! digests and a presented token is compared with every one in constant time.

use std::collections::HashSet;
use std::io::Read;

use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::checked_dir::own_file::{self, FileError, Keep};
use crate::shown::ShownPath;

/// Largest tokens file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Tokens a file may hold at most.
pub const MAX_TOKENS: usize = 10_000;
/// Shortest token accepted (a guessable token is refused, not warned about).
pub const MIN_TOKEN_CHARS: usize = 16;
/// Longest token accepted.
pub const MAX_TOKEN_CHARS: usize = 512;
/// Longest token name.
pub const MAX_NAME_CHARS: usize = 64;

/// Why a tokens file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// It could not be opened or read (a link is refused here too).
    #[error("cannot read the tokens file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file.
    #[error("the tokens file {0} is not a regular file")]
    NotRegular(String),
    /// The path is a symbolic link (the file is never read through one).
    #[error("the tokens file {0} is a symbolic link: name the file itself")]
    Link(String),
    /// Another user's file.
    #[error("the tokens file {path} belongs to uid {uid}, not to this user")]
    NotOwn {
        /// The file.
        path: String,
        /// Its owner.
        uid: u32,
    },
    /// Group or others may read or write it.
    #[error(
        "the tokens file {path} has mode {mode:o}: others could read the tokens (chmod 600 it)"
    )]
    Exposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// Larger than [`MAX_FILE_BYTES`].
    #[error("the tokens file {0} is larger than 1 MiB")]
    TooBig(String),
    /// A line is not `TOKEN [NAME]`, or repeats a token or a name.
    #[error("the tokens file {path}, line {line}: {reason}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// No token at all.
    #[error("the tokens file {0} holds no token")]
    Empty(String),
}

/// The admitted tokens.
#[derive(Debug, Clone)]
pub struct Tokens {
    entries: Vec<([u8; 32], Arc<str>)>,
}

impl Tokens {
    /// Reads and checks the tokens file at `path`.
    ///
    /// # Errors
    /// [`TokenFileError`] saying what is wrong with the file or which line.
    pub fn load(path: &Path) -> Result<Tokens, TokenFileError> {
        let shown = ShownPath(path).to_string();
        let read = |source| TokenFileError::Read {
            path: shown.clone(),
            source,
        };
        let file = match own_file::open(path, libc::O_RDONLY, Keep::Private) {
            Ok(file) => file,
            Err(FileError::Io(e)) => return Err(read(e)),
            Err(FileError::Link) => return Err(TokenFileError::Link(shown)),
            Err(FileError::NotRegular(_)) => return Err(TokenFileError::NotRegular(shown)),
            Err(FileError::NotOwn { uid, .. }) => {
                return Err(TokenFileError::NotOwn { path: shown, uid })
            }
            Err(FileError::Exposed { mode, .. }) => {
                return Err(TokenFileError::Exposed { path: shown, mode })
            }
        };
        let mut text = String::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read)?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(TokenFileError::TooBig(shown));
        }
        Tokens::parse(&text)
            .map_err(|(line, reason)| TokenFileError::Line {
                path: shown.clone(),
                line,
                reason,
            })?
            .ok_or(TokenFileError::Empty(shown))
    }

    /// The tokens of a file's `text`; `Ok(None)` when it has none; `Err((line, reason))`.
    fn parse(text: &str) -> Result<Option<Tokens>, (usize, String)> {
        let mut entries = Vec::new();
        let mut names = HashSet::new();
        let mut digests = HashSet::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let token = fields.next().unwrap_or_default();
            let name = fields
                .next()
                .map_or_else(|| format!("token-{n}"), str::to_string);
            if fields.next().is_some() {
                return Err((n, "expected `TOKEN [NAME]`".into()));
            }
            let chars = token.chars().count();
            if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&chars)
                || !token.chars().all(|c| c.is_ascii_graphic())
            {
                return Err((
                    n,
                    format!(
                        "a token is {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} printable ASCII \
                         characters (e.g. `openssl rand -hex 32`)"
                    ),
                ));
            }
            let name_ok = name.len() <= MAX_NAME_CHARS
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !name_ok {
                return Err((
                    n,
                    format!("a name is up to {MAX_NAME_CHARS} of A-Z a-z 0-9 . _ -"),
                ));
            }
            let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            if !digests.insert(digest) {
                return Err((n, "this token is on an earlier line too".into()));
            }
            if !names.insert(name.clone()) {
                return Err((n, format!("the name {name} is on an earlier line too")));
            }
            if entries.len() == MAX_TOKENS {
                return Err((n, format!("more than {MAX_TOKENS} tokens")));
            }
            entries.push((digest, Arc::from(name)));
        }
        Ok((!entries.is_empty()).then_some(Tokens { entries }))
    }

    /// The name of the token `presented`, if it is one. Every stored token is compared, each
    /// in constant time, whatever matched.
    pub fn check(&self, presented: &str) -> Option<Arc<str>> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (stored, name) in &self.entries {
            if bool::from(stored.ct_eq(&digest)) {
                found = Some(name.clone());
            }
        }
        found
    }

    /// The name and the upstream identity key
    /// ([`caller_key`](crate::upstream::oauth::store::caller_key)) of the token `presented`,
    /// if it is one; compared as [`Tokens::check`] compares.
    pub fn admit(&self, presented: &str) -> Option<(Arc<str>, Arc<str>)> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (stored, name) in &self.entries {
            if bool::from(stored.ct_eq(&digest)) {
                found = Some(name.clone());
            }
        }
        let key = crate::upstream::oauth::store::caller_key(&digest);
        found.map(|name| (name, Arc::from(key)))
    }

    /// The upstream identity keys of these tokens (records of other keys are forgotten).
    pub fn identity_keys(&self) -> HashSet<String> {
        self.entries
            .iter()
            .map(|(d, _)| crate::upstream::oauth::store::caller_key(d))
            .collect()
    }

    /// The names of the tokens.
    pub fn names(&self) -> HashSet<Arc<str>> {
        self.entries.iter().map(|(_, n)| n.clone()).collect()
    }

    /// The names of these tokens that `next` no longer admits with the same secret: removed,
    /// or given another secret under the same name. What they created is ended on a reload.
    pub fn ended_by(&self, next: &Tokens) -> HashSet<Arc<str>> {
        let kept: HashSet<(&[u8; 32], &str)> =
            next.entries.iter().map(|(d, n)| (d, &**n)).collect();
        self.entries
            .iter()
            .filter(|(d, n)| !kept.contains(&(d, &**n)))
            .map(|(_, n)| n.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const A: &str = "0123456789abcdef0123";
    const B: &str = "fedcba9876543210fedc";

    #[test]
    fn tokens_and_names() {
        let t = Tokens::parse(&format!("# ops\n{A} alice\n\n{B}\n"))
            .expect("valid")
            .expect("some");
        assert_eq!(t.check(A).as_deref(), Some("alice"));
        assert_eq!(t.check(B).as_deref(), Some("token-4"));
        assert_eq!(t.check("0123456789abcdef012"), None);
        assert_eq!(t.check(""), None);
        assert_eq!(
            Tokens::parse("# nothing\n").expect("valid").map(|_| ()),
            None
        );
    }

    #[test]
    fn a_token_admitted_carries_an_identity_key_that_changes_with_its_secret() {
        let t = Tokens::parse(&format!("{A} alice\n{B} bob\n"))
            .expect("valid")
            .expect("some");
        let (name, key) = t.admit(A).expect("admitted");
        assert_eq!(&*name, "alice");
        assert_eq!(t.admit(A).expect("again").1, key, "stable for one secret");
        assert_ne!(t.admit(B).expect("bob").1, key);
        assert!(t.admit("0123456789abcdef012").is_none());
        assert!(!key.contains(A) && key.len() == 64);
        let keys = t.identity_keys();
        assert!(keys.contains(&*key) && keys.len() == 2);
        // The same name with another secret is another caller.
        let rotated = Tokens::parse(&format!("{A}x alice\n"))
            .expect("valid")
            .expect("some");
        assert_ne!(rotated.admit(&format!("{A}x")).expect("admitted").1, key);
        assert!(!rotated.identity_keys().contains(&*key));
    }

    #[test]
    fn a_reload_ends_removed_and_rotated_tokens() {
        const C: &str = "aaaabbbbccccdddd0000";
        let old = Tokens::parse(&format!("{A} alice\n{B} bob\n{C} carol\n"))
            .expect("valid")
            .expect("some");
        // bob gets a new secret, carol is removed, dave is new, alice is unchanged.
        let next = Tokens::parse(&format!("{A} alice\n{C}x bob\n{B} dave\n"))
            .expect("valid")
            .expect("some");
        let mut ended: Vec<String> = old.ended_by(&next).iter().map(|n| n.to_string()).collect();
        ended.sort();
        assert_eq!(ended, ["bob", "carol"]);
        assert!(old.ended_by(&old).is_empty());
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        for (text, line, needle) in [
            ("short x".to_string(), 1, "16 to"),
            (format!("{A} a b"), 1, "TOKEN [NAME]"),
            (format!("{A} a\n{A} b"), 2, "earlier line"),
            (format!("{A} a\n{B} a"), 2, "name a"),
            (format!("{A} bad/name"), 1, "a name is"),
            (format!("{A}é x"), 1, "printable"),
        ] {
            let (n, reason) = Tokens::parse(&text).expect_err(&text);
            assert_eq!(n, line, "{text}");
            assert!(reason.contains(needle), "{reason}");
        }
    }

    #[test]
    fn the_file_must_be_private_and_not_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("{A} alice\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(
            Tokens::load(&path),
            Err(TokenFileError::Exposed { mode: 0o644, .. })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(Tokens::load(&path).is_ok());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).expect("link");
        assert!(matches!(Tokens::load(&link), Err(TokenFileError::Link(_))));
        assert!(matches!(
            Tokens::load(dir.path()),
            Err(TokenFileError::NotRegular(_)) | Err(TokenFileError::Read { .. })
        ));
        std::fs::write(&path, "# none\n").expect("write");
        assert!(matches!(Tokens::load(&path), Err(TokenFileError::Empty(_))));
    }
}
