//! The bridge's own OAuth token store: `<state>/oauth/tokens.json`, mode 0600 in the checked
//! private folder `<state>/oauth` (`checked_dir`), one record per server name, each bound to
//! the server's canonical resource URL (an edited URL makes the record void). Written whole to
//! an exclusive temporary file, then renamed over the old one, under an advisory lock
//! (`tokens.lock`), so two logins racing lose neither record. Never read from another
//! program's store. rmcp's `CredentialStore` for one server over it is `server_tokens.rs`.
//!
//! Under `serve --http` each caller (a token of the tokens file) has records of its own beside
//! the operator's, under `callers`, keyed by an identity key ([`caller_key`]) that changes with
//! the token's secret and does not reveal it. [`TokenFile::for_caller`] is the store scoped to
//! one caller: its reads and writes see only that caller's records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::transport::auth::StoredCredentials;
use serde::{Deserialize, Serialize};

use crate::checked_dir::private_file::{parse_json, PrivateFile, PrivateFileError};
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};

/// The folder under the state folder.
const DIR: &str = "oauth";
/// The file.
const FILE: &str = "tokens.json";
/// The lock file held while the file is read and replaced.
const LOCK: &str = "tokens.lock";
/// The lock file held across a refresh (its request and its save), so bridges sharing a
/// server's tokens refresh one at a time, each starting from what the last one stored.
const REFRESH_LOCK: &str = "refresh.lock";
/// The largest token file read (a bigger one is refused, not parsed).
const MAX_FILE: u64 = 4 << 20;
/// The most records kept, the operator's and every caller's together.
const MAX_RECORDS: usize = 4096;
/// The most callers with records of their own (the tokens file's bound).
const MAX_CALLERS: usize = 10_000;
/// The domain prefix of a caller's identity key.
const CALLER_KEY_DOMAIN: &[u8] = b"mcp-code-bridge upstream identity v1\0";

/// Why the token store could not be read or written. Never holds a token.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The folder is refused (another user could reach it) or cannot be made.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// Reading or writing failed.
    #[error("the token store {path}: {what}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what the bridge writes (where, never what).
    #[error("the token store {path} is damaged ({at}); remove it and sign in again")]
    Damaged {
        /// The file.
        path: String,
        /// Line and column, or the size.
        at: String,
    },
    /// More records, or callers, than the store keeps.
    #[error("the token store holds {MAX_RECORDS} records (or {MAX_CALLERS} callers) already")]
    Full,
}

/// One server's record. `Debug` shows no secret.
#[derive(Clone, Serialize, Deserialize)]
pub struct Record {
    /// The canonical resource URL the tokens were issued for.
    pub resource: String,
    /// rmcp's credentials (client id, token response, granted scopes, issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<StoredCredentials>,
    /// A client secret from dynamic registration (a pre-registered one stays in the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The redirect URI the client was registered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// The scopes a 403 `insufficient_scope` asked for (with those granted before): the next
    /// sign-in asks for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_up: Option<String>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("resource", &self.resource)
            .field("credentials", &self.credentials)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("redirect_uri", &self.redirect_uri)
            .field("step_up", &self.step_up)
            .finish()
    }
}

#[derive(Default, Serialize, Deserialize)]
struct Contents {
    /// The operator's records (from `login`, or a run with no caller).
    #[serde(default)]
    servers: BTreeMap<String, Record>,
    /// Each `serve` caller's own records, by identity key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    callers: BTreeMap<String, CallerRecords>,
}

/// One caller's records.
#[derive(Default, Serialize, Deserialize)]
struct CallerRecords {
    /// The token's name (for people reading the file; the key is what counts).
    #[serde(default)]
    name: String,
    #[serde(default)]
    servers: BTreeMap<String, Record>,
}

impl Contents {
    fn count(&self) -> usize {
        self.servers.len()
            + self
                .callers
                .values()
                .map(|c| c.servers.len())
                .sum::<usize>()
    }
}

/// The identity key of the `serve` token whose SHA-256 digest is `token_digest`: hex SHA-256
/// of a fixed prefix and the digest. Another secret under the same name is another key; the
/// key does not reveal the secret (nor the digest the tokens file check uses).
pub fn caller_key(token_digest: &[u8; 32]) -> String {
    let mut bytes = CALLER_KEY_DOMAIN.to_vec();
    bytes.extend_from_slice(token_digest);
    crate::ids::sha256_hex(&bytes)
}

/// A caller whose records a scoped [`TokenFile`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Scope {
    key: String,
    name: String,
}

/// What [`TokenFile::forget_callers`] removed: a caller's name and its records.
pub type Forgotten = Vec<(String, BTreeMap<String, Record>)>;

/// The canonical form of a server's URL, as tokens are bound to it (RFC 8707: scheme and host
/// in lower case, no default port, no fragment).
///
/// # Errors
/// The URL does not parse.
pub fn canonical_resource(url: &str) -> Result<String, url::ParseError> {
    let mut u = url::Url::parse(url)?;
    u.set_fragment(None);
    Ok(u.to_string())
}

/// The token file of one state folder: the operator's records, or one caller's
/// ([`TokenFile::for_caller`]).
#[derive(Debug, Clone)]
pub struct TokenFile {
    state_dir: PathBuf,
    scope: Option<Arc<Scope>>,
}

impl TokenFile {
    /// The store under `state_dir`, the operator's records (nothing is read or made yet).
    pub fn new(state_dir: &Path) -> Self {
        TokenFile {
            state_dir: state_dir.to_path_buf(),
            scope: None,
        }
    }

    /// The same file scoped to the caller whose identity key is `key` (token name `name`):
    /// its reads and writes see that caller's records only, never the operator's.
    pub fn for_caller(&self, key: &str, name: &str) -> Self {
        TokenFile {
            state_dir: self.state_dir.clone(),
            scope: Some(Arc::new(Scope {
                key: key.to_string(),
                name: name.to_string(),
            })),
        }
    }

    /// The caller's token name, for a scoped file; `None` for the operator's.
    pub fn caller_name(&self) -> Option<&str> {
        self.scope.as_ref().map(|s| s.name.as_str())
    }

    /// This scope's records in `contents` (`None`: a caller with none yet).
    fn mine<'a>(&self, contents: &'a Contents) -> Option<&'a BTreeMap<String, Record>> {
        match &self.scope {
            None => Some(&contents.servers),
            Some(scope) => contents.callers.get(&scope.key).map(|c| &c.servers),
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.state_dir.join(DIR).join(FILE)
    }

    fn dir(&self) -> Result<CheckedDir, DirError> {
        CheckedDir::open(&self.state_dir, Access::Shared, FIX_STATE)?.sub(
            DIR,
            Access::Private,
            FIX_STATE,
        )
    }

    fn io(&self, what: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            path: crate::shown::ShownPath(&self.path()).to_string(),
            what,
            source,
        }
    }

    /// `name`'s record when it is bound to `resource`; `None` when there is none, or it was
    /// issued for another URL.
    ///
    /// # Errors
    /// The file is refused or damaged.
    pub fn get(&self, name: &str, resource: &str) -> Result<Option<Record>, StoreError> {
        if !self.path().exists() {
            return Ok(None);
        }
        let contents = self.read(&self.dir()?)?;
        Ok(self
            .mine(&contents)
            .and_then(|servers| servers.get(name))
            .filter(|r| r.resource == resource)
            .cloned())
    }

    /// Every record of this scope, by server name.
    ///
    /// # Errors
    /// The file is refused or damaged.
    pub fn all(&self) -> Result<BTreeMap<String, Record>, StoreError> {
        if !self.path().exists() {
            return Ok(BTreeMap::new());
        }
        let contents = self.read(&self.dir()?)?;
        Ok(self.mine(&contents).cloned().unwrap_or_default())
    }

    /// The identity keys of the callers with records.
    ///
    /// # Errors
    /// The file is refused or damaged.
    pub fn callers(&self) -> Result<Vec<String>, StoreError> {
        if !self.path().exists() {
            return Ok(Vec::new());
        }
        Ok(self.read(&self.dir()?)?.callers.into_keys().collect())
    }

    /// The identity keys of the `serve` callers whose token is named `token_name` (more than one
    /// when its secret changed and the old key's records are still kept).
    ///
    /// # Errors
    /// The file is refused or damaged.
    pub fn callers_named(&self, token_name: &str) -> Result<Vec<String>, StoreError> {
        if !self.path().exists() {
            return Ok(Vec::new());
        }
        Ok(self
            .read(&self.dir()?)?
            .callers
            .into_iter()
            .filter(|(_, c)| c.name == token_name)
            .map(|(key, _)| key)
            .collect())
    }

    /// The token names of the `serve` callers holding tokens for server `name` issued for
    /// `resource`, sorted (the operator's own record is not among them).
    ///
    /// # Errors
    /// The file is refused or damaged.
    pub fn callers_signed_in(&self, name: &str, resource: &str) -> Result<Vec<String>, StoreError> {
        if !self.path().exists() {
            return Ok(Vec::new());
        }
        let mut names: Vec<String> = self
            .read(&self.dir()?)?
            .callers
            .into_values()
            .filter(|c| {
                c.servers.get(name).is_some_and(|r| {
                    r.resource == resource
                        && r.credentials
                            .as_ref()
                            .is_some_and(|c| c.token_response.is_some())
                })
            })
            .map(|c| c.name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// Removes the records of every caller whose identity key `keep` refuses (its token left
    /// the tokens file, or got another secret); returns what was removed (names and records,
    /// for revocation). The operator's records stay.
    ///
    /// # Errors
    /// The folder or file is refused, damaged, or cannot be written.
    pub fn forget_callers(&self, keep: impl Fn(&str) -> bool) -> Result<Forgotten, StoreError> {
        if !self.path().exists() {
            return Ok(Vec::new());
        }
        self.locked(|contents| {
            let gone: Vec<String> = contents
                .callers
                .keys()
                .filter(|k| !keep(k))
                .cloned()
                .collect();
            let removed: Forgotten = gone
                .iter()
                .filter_map(|k| contents.callers.remove(k))
                .map(|c| (c.name, c.servers))
                .collect();
            Ok((!removed.is_empty(), removed))
        })
    }

    /// Runs `change` on the contents under the lock; writes them when it says so.
    fn locked<T>(
        &self,
        change: impl FnOnce(&mut Contents) -> Result<(bool, T), StoreError>,
    ) -> Result<T, StoreError> {
        let dir = self.dir()?;
        self.file(&dir).changed(self.fail(), |bytes| {
            let mut contents = self.parse(bytes)?;
            let (write, out) = change(&mut contents)?;
            let text =
                write.then(|| serde_json::to_vec_pretty(&contents).expect("records serialize"));
            Ok((text, out))
        })
    }

    /// Changes `name`'s record under the lock: `change` gets it (`None` when absent or bound
    /// to another URL) and returns the new one (`None` removes it).
    ///
    /// # Errors
    /// The folder or file is refused, damaged, or cannot be written.
    pub fn update(
        &self,
        name: &str,
        resource: &str,
        change: impl FnOnce(Option<Record>) -> Option<Record>,
    ) -> Result<(), StoreError> {
        self.locked(|contents| {
            let new_caller = self
                .scope
                .as_ref()
                .is_some_and(|s| !contents.callers.contains_key(&s.key));
            let servers = match &self.scope {
                None => &mut contents.servers,
                Some(scope) => {
                    &mut contents
                        .callers
                        .entry(scope.key.clone())
                        .or_insert_with(|| CallerRecords {
                            name: scope.name.clone(),
                            servers: BTreeMap::new(),
                        })
                        .servers
                }
            };
            let old = servers.remove(name).filter(|r| r.resource == resource);
            if let Some(new) = change(old) {
                servers.insert(name.to_string(), new);
            }
            if let Some(scope) = &self.scope {
                if contents
                    .callers
                    .get(&scope.key)
                    .is_some_and(|c| c.servers.is_empty())
                {
                    contents.callers.remove(&scope.key);
                }
            }
            if contents.count() > MAX_RECORDS
                || (new_caller && contents.callers.len() > MAX_CALLERS)
            {
                return Err(StoreError::Full);
            }
            Ok((true, ()))
        })
    }

    /// Takes the refresh lock (blocking until no other refresh holds it).
    ///
    /// # Errors
    /// The folder or the lock file is refused, or locking fails.
    pub fn lock_refresh(&self) -> Result<std::fs::File, StoreError> {
        let dir = self.dir()?;
        PrivateFile::new(&dir, FILE, REFRESH_LOCK, MAX_FILE)
            .lock()
            .map_err(self.fail())
    }

    /// The store's file in `dir`, changed under [`LOCK`].
    fn file<'a>(&self, dir: &'a CheckedDir) -> PrivateFile<'a> {
        PrivateFile::new(dir, FILE, LOCK, MAX_FILE)
    }

    /// A failure of the store's file as the store says it.
    fn fail(&self) -> impl Fn(PrivateFileError) -> StoreError + '_ {
        move |e| e.said(|what, source| self.io(what)(source), |at| self.damaged(at))
    }

    fn damaged(&self, at: String) -> StoreError {
        StoreError::Damaged {
            path: crate::shown::ShownPath(&self.path()).to_string(),
            at,
        }
    }

    fn read(&self, dir: &CheckedDir) -> Result<Contents, StoreError> {
        self.parse(self.file(dir).read().map_err(self.fail())?)
    }

    /// The records in the file's bytes (none without a file, or in an empty one).
    fn parse(&self, bytes: Option<Vec<u8>>) -> Result<Contents, StoreError> {
        let Some(text) = bytes.filter(|t| !t.iter().all(u8::is_ascii_whitespace)) else {
            return Ok(Contents::default());
        };
        parse_json(&text).map_err(|at| self.damaged(at))
    }
}

/// Credentials holding the access token `token` (tests of the store and its users).
#[cfg(test)]
pub(super) fn test_credentials(token: &str) -> StoredCredentials {
    let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
        serde_json::json!({"access_token": token, "token_type": "Bearer", "expires_in": 60}),
    )
    .expect("a token response");
    StoredCredentials::new("client".into(), Some(response), vec![], Some(1))
}

#[cfg(test)]
mod tests;
