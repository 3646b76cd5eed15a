//! [`ServerTokens`]: rmcp's `CredentialStore` for one server over the token file: the record is
//! read from the file once and kept in memory, so a call pays nothing for its token; saved to
//! (and cleared from) the file as rmcp refreshes or drops it, one refresh at a time across
//! bridges.

use std::sync::Arc;

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};

use super::store::{Record, StoreError, TokenFile};

/// rmcp's credential store for one server: its record's credentials, read once and kept in
/// memory; saved to (and cleared from) the file as rmcp refreshes or drops them.
#[derive(Clone)]
pub struct ServerTokens {
    file: TokenFile,
    name: String,
    resource: String,
    memory: Arc<tokio::sync::RwLock<Option<StoredCredentials>>>,
}

impl ServerTokens {
    /// The store of server `name` at `resource`, holding `credentials` now.
    pub fn new(
        file: TokenFile,
        name: &str,
        resource: &str,
        credentials: Option<StoredCredentials>,
    ) -> Self {
        ServerTokens {
            file,
            name: name.to_string(),
            resource: resource.to_string(),
            memory: Arc::new(tokio::sync::RwLock::new(credentials)),
        }
    }

    async fn persist(&self, credentials: Option<StoredCredentials>) -> Result<(), AuthError> {
        let (file, name, resource) = (self.file.clone(), self.name.clone(), self.resource.clone());
        let done = tokio::task::spawn_blocking(move || {
            file.update(&name, &resource.clone(), |old| {
                let mut r = old.unwrap_or(Record {
                    resource,
                    credentials: None,
                    client_secret: None,
                    redirect_uri: None,
                    step_up: None,
                });
                r.credentials = credentials;
                Some(r)
            })
        })
        .await
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        done.map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }
}

#[async_trait::async_trait]
impl CredentialStore for ServerTokens {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.memory.read().await.clone())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        *self.memory.write().await = Some(credentials.clone());
        self.persist(Some(credentials)).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        *self.memory.write().await = None;
        self.persist(None).await
    }

    /// Refreshes one at a time across bridges: under the lock, what another bridge stored since
    /// (a rotated refresh token) replaces what this one holds, so the refresh starts from it.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let (file, name, resource) = (self.file.clone(), self.name.clone(), self.resource.clone());
        let locked = tokio::task::spawn_blocking(move || {
            let lock = file.lock_refresh()?;
            let record = file.get(&name, &resource)?;
            Ok::<_, StoreError>((lock, record))
        })
        .await
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        let (lock, record) = locked;
        if let Some(credentials) = record.and_then(|r| r.credentials) {
            *self.memory.write().await = Some(credentials);
        }
        Ok(Some(CredentialRefreshGuard::new(lock)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::upstream::oauth::store::test_credentials as creds;

    #[tokio::test]
    async fn a_refresh_starts_from_what_another_bridge_stored_and_waits_for_its_refresh() {
        let state = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::new(state.path());
        let mine = ServerTokens::new(file.clone(), "s", "https://a/mcp", Some(creds("old")));
        let other = ServerTokens::new(file.clone(), "s", "https://a/mcp", None);
        other.save(creds("rotated")).await.expect("save");
        let guard = mine.acquire_refresh_guard().await.expect("guard");
        let held = mine.load().await.expect("load").expect("some");
        let token = held.token_response.expect("a token");
        assert_eq!(
            oauth2::TokenResponse::access_token(&token).secret(),
            "rotated"
        );
        // A second refresh waits for the first.
        let waiting = tokio::spawn(async move { other.acquire_refresh_guard().await.map(|_| ()) });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!waiting.is_finished(), "the lock is held");
        drop(guard);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("released")
            .expect("task")
            .expect("guard");
    }

    #[tokio::test]
    async fn the_credential_store_serves_from_memory_and_persists_changes() {
        let state = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::new(state.path());
        let store = ServerTokens::new(file.clone(), "s", "https://a/mcp", None);
        assert!(store.load().await.expect("load").is_none());
        store.save(creds("tok-2")).await.expect("save");
        let rec = file
            .get("s", "https://a/mcp")
            .expect("read")
            .expect("saved");
        assert!(rec.credentials.is_some());
        // Served from memory: the file going away costs a call nothing.
        std::fs::remove_file(file.path()).expect("rm");
        assert!(store.load().await.expect("load").is_some());
        store.clear().await.expect("clear");
        assert!(store.load().await.expect("load").is_none());
        let rec = file.get("s", "https://a/mcp").expect("read").expect("kept");
        assert!(rec.credentials.is_none());
    }
}
