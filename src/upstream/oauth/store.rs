//! The bridge's own OAuth token store: `<state>/oauth/tokens.json`, mode 0600 in the checked
//! private folder `<state>/oauth` (`checked_dir`), one record per server name, each bound to
//! the server's canonical resource URL (an edited URL makes the record void). Written whole to
//! an exclusive temporary file, then renamed over the old one, under an advisory lock
//! (`tokens.lock`), so two logins racing lose neither record. Never read from another
//! program's store. rmcp's `CredentialStore` for one server over it is `server_tokens.rs`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use rmcp::transport::auth::StoredCredentials;
use serde::{Deserialize, Serialize};

use crate::checked_dir::own_file::{self, Keep};
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
/// The most servers kept.
const MAX_RECORDS: usize = 1024;

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
    /// More servers than the store keeps.
    #[error("the token store holds tokens for {MAX_RECORDS} servers already")]
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
    #[serde(default)]
    servers: BTreeMap<String, Record>,
}

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

/// The token file of one state folder.
#[derive(Debug, Clone)]
pub struct TokenFile {
    state_dir: PathBuf,
}

impl TokenFile {
    /// The store under `state_dir` (nothing is read or made yet).
    pub fn new(state_dir: &Path) -> Self {
        TokenFile {
            state_dir: state_dir.to_path_buf(),
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
        Ok(contents
            .servers
            .get(name)
            .filter(|r| r.resource == resource)
            .cloned())
    }

    /// Every record, by server name.
    ///
    /// # Errors
    /// The file is refused or damaged.
    pub fn all(&self) -> Result<BTreeMap<String, Record>, StoreError> {
        if !self.path().exists() {
            return Ok(BTreeMap::new());
        }
        Ok(self.read(&self.dir()?)?.servers)
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
        let dir = self.dir()?;
        let lock = dir
            .open_file(LOCK, libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC, 0o600)
            .map_err(self.io("opening its lock"))?;
        // SAFETY: flock on a descriptor this function owns; released when `lock` is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(self.io("locking")(std::io::Error::last_os_error()));
        }
        let mut contents = self.read(&dir)?;
        let old = contents
            .servers
            .remove(name)
            .filter(|r| r.resource == resource);
        if let Some(new) = change(old) {
            if contents.servers.len() >= MAX_RECORDS {
                return Err(StoreError::Full);
            }
            contents.servers.insert(name.to_string(), new);
        }
        self.write(&dir, &contents)
    }

    /// Takes the refresh lock (blocking until no other refresh holds it).
    ///
    /// # Errors
    /// The folder or the lock file is refused, or locking fails.
    pub fn lock_refresh(&self) -> Result<std::fs::File, StoreError> {
        let dir = self.dir()?;
        let lock = dir
            .open_file(
                REFRESH_LOCK,
                libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                0o600,
            )
            .map_err(self.io("opening the refresh lock"))?;
        // SAFETY: flock on a descriptor this function owns; released when it is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(self.io("locking for a refresh")(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(lock)
    }

    fn read(&self, dir: &CheckedDir) -> Result<Contents, StoreError> {
        let mut file = match dir.open_file(FILE, libc::O_RDONLY | libc::O_CLOEXEC, 0) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Contents::default()),
            Err(e) => return Err(self.io("opening")(e)),
        };
        use std::os::fd::AsFd;
        own_file::check(file.as_fd(), Keep::Private)
            .map_err(|e| self.io("checking")(e.into_io()))?;
        let mut text = Vec::new();
        (&mut file)
            .take(MAX_FILE + 1)
            .read_to_end(&mut text)
            .map_err(self.io("reading"))?;
        let path = crate::shown::ShownPath(&self.path()).to_string();
        if text.len() as u64 > MAX_FILE {
            return Err(StoreError::Damaged {
                path,
                at: format!("larger than {MAX_FILE} bytes"),
            });
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(Contents::default());
        }
        // The parser's position only: its message could quote a token.
        serde_json::from_slice(&text).map_err(|e| StoreError::Damaged {
            path,
            at: format!("line {} column {}", e.line(), e.column()),
        })
    }

    fn write(&self, dir: &CheckedDir, contents: &Contents) -> Result<(), StoreError> {
        let text = serde_json::to_vec_pretty(contents).expect("records serialize");
        let mut new = dir
            .new_file(FILE)
            .map_err(self.io("creating a temporary file"))?;
        new.file().write_all(&text).map_err(self.io("writing"))?;
        new.commit(0o600)
            .map_err(|e| self.io("writing")(e.into_io()))
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
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use super::test_credentials as creds;

    fn record(resource: &str, token: &str) -> Record {
        Record {
            resource: resource.into(),
            credentials: Some(creds(token)),
            client_secret: Some("dcr-secret".into()),
            redirect_uri: None,
            step_up: None,
        }
    }

    #[test]
    fn records_are_private_bound_to_their_url_and_never_shown() {
        let state = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::new(state.path());
        assert!(file.get("s", "https://a/mcp").expect("empty").is_none());
        file.update("s", "https://a/mcp", |_| {
            Some(record("https://a/mcp", "tok-1"))
        })
        .expect("written");
        let mode = std::fs::metadata(file.path())
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(file.path().parent().expect("dir"))
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o077, 0, "{dir_mode:o}");
        let got = file.get("s", "https://a/mcp").expect("read").expect("kept");
        assert!(!format!("{got:?}").contains("tok-1"));
        assert!(!format!("{got:?}").contains("dcr-secret"));
        // An edited URL: the record is void, and the next write replaces it.
        assert!(file.get("s", "https://b/mcp").expect("read").is_none());
        file.update("s", "https://b/mcp", |old| {
            assert!(old.is_none(), "another URL's tokens are not handed over");
            None
        })
        .expect("written");
        assert!(file.all().expect("read").is_empty());
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(file.path().parent().expect("dir"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(
            left.iter().all(|n| !n.to_string_lossy().contains("tmp")),
            "{left:?}"
        );
    }

    #[test]
    fn a_damaged_or_exposed_file_is_refused_without_quoting_it() {
        let state = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::new(state.path());
        file.update("s", "https://a/mcp", |_| {
            Some(record("https://a/mcp", "tok"))
        })
        .expect("written");
        std::fs::write(file.path(), "{\"servers\": {\"s\": \"secret-looking-text\"").expect("w");
        let err = file.all().expect_err("damaged").to_string();
        assert!(err.contains("damaged"), "{err}");
        assert!(!err.contains("secret-looking-text"), "{err}");
        std::fs::write(file.path(), "{}").expect("w");
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        assert!(file.all().is_err(), "a file others can read is refused");
    }

    #[test]
    fn racing_writers_lose_no_record() {
        let state = tempfile::tempdir().expect("tempdir");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let file = TokenFile::new(state.path());
                std::thread::spawn(move || {
                    let url = format!("https://s{i}/mcp");
                    file.update(&format!("s{i}"), &url, |_| Some(record(&url, "t")))
                        .expect("written");
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(TokenFile::new(state.path()).all().expect("read").len(), 8);
    }

    #[test]
    fn the_canonical_resource_drops_what_does_not_name_the_server() {
        assert_eq!(
            canonical_resource("HTTPS://Example.COM:443/mcp#x").expect("url"),
            "https://example.com/mcp"
        );
        assert_eq!(
            canonical_resource("http://127.0.0.1:8080/mcp").expect("url"),
            "http://127.0.0.1:8080/mcp"
        );
    }
}
