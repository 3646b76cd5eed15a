//! The request headers of a remote server's connection, from one place: the entry's `headers`,
//! plus an `Authorization` value asked of an [`Authorizer`] on every request (the seam sign-in
//! plugs into; none is set by default). Secrets in them never reach a log line or an error text.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

/// Supplies the `Authorization` value of a signed-in server, fresh for each request.
#[async_trait::async_trait]
pub trait Authorizer: Send + Sync {
    /// The value to send now (`Bearer ...`), or none when the server needs no sign-in.
    async fn authorization(&self) -> Result<Option<HeaderValue>, AuthorizeError>;
}

/// Why no `Authorization` value could be had; its text never holds a secret.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuthorizeError(pub String);

/// An entry's header that is not a valid HTTP header.
#[derive(Debug, thiserror::Error)]
#[error("header {name:?}: {err}")]
pub struct HeaderError {
    /// The header's name as configured.
    pub name: String,
    /// What is wrong with its name or value.
    #[source]
    pub err: Box<dyn std::error::Error + Send + Sync>,
}

/// The headers every request to one remote server carries.
#[derive(Clone, Default)]
pub struct RemoteHeaders {
    fixed: Arc<HeaderMap>,
    auth: Option<Arc<dyn Authorizer>>,
}

impl std::fmt::Debug for RemoteHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the values may be credentials.
        f.debug_struct("RemoteHeaders")
            .field("names", &self.fixed.keys().collect::<Vec<_>>())
            .field("authorizer", &self.auth.is_some())
            .finish()
    }
}

impl RemoteHeaders {
    /// The entry's `headers`, checked.
    ///
    /// # Errors
    /// The first header whose name or value is not valid HTTP (the value is not named).
    pub fn from_entry(headers: &BTreeMap<String, String>) -> Result<Self, HeaderError> {
        let mut fixed = HeaderMap::new();
        for (k, v) in headers {
            let header = |err: Box<dyn std::error::Error + Send + Sync>| HeaderError {
                name: k.clone(),
                err,
            };
            let name = HeaderName::try_from(k.as_str()).map_err(|e| header(e.into()))?;
            let mut value = HeaderValue::try_from(v.as_str()).map_err(|e| header(e.into()))?;
            value.set_sensitive(true);
            fixed.append(name, value);
        }
        Ok(RemoteHeaders {
            fixed: Arc::new(fixed),
            auth: None,
        })
    }

    /// The same headers, with `Authorization` from `auth` on every request.
    #[allow(dead_code)] // the seam sign-in (issue 32, OAuth) plugs into
    pub fn with_authorizer(mut self, auth: Arc<dyn Authorizer>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// The entry's own headers (without sign-in).
    pub fn fixed(&self) -> &HeaderMap {
        &self.fixed
    }

    /// The headers for a request made now: the entry's, then the authorizer's `Authorization`
    /// (which replaces one the entry set).
    ///
    /// # Errors
    /// The authorizer's.
    pub async fn current(&self) -> Result<HeaderMap, AuthorizeError> {
        let mut headers = HeaderMap::clone(&self.fixed);
        if let Some(auth) = &self.auth {
            if let Some(mut value) = auth.authorization().await? {
                value.set_sensitive(true);
                headers.insert(http::header::AUTHORIZATION, value);
            }
        }
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str);

    #[async_trait::async_trait]
    impl Authorizer for Fixed {
        async fn authorization(&self) -> Result<Option<HeaderValue>, AuthorizeError> {
            Ok(Some(HeaderValue::from_static(self.0)))
        }
    }

    #[tokio::test]
    async fn entry_headers_then_the_authorizers_value_and_no_values_in_debug() {
        let entry = BTreeMap::from([
            ("X-Key".to_string(), "secret-1".to_string()),
            ("Authorization".to_string(), "Bearer old".to_string()),
        ]);
        let h = RemoteHeaders::from_entry(&entry).expect("valid");
        assert_eq!(
            h.current().await.expect("headers")["authorization"],
            "Bearer old"
        );
        let h = h.with_authorizer(Arc::new(Fixed("Bearer new")));
        let now = h.current().await.expect("headers");
        assert_eq!(now["authorization"], "Bearer new");
        assert_eq!(now["x-key"], "secret-1");
        assert!(!format!("{h:?}").contains("secret"), "{h:?}");
        let bad = BTreeMap::from([("X-Key".to_string(), "a\nb".to_string())]);
        let err = RemoteHeaders::from_entry(&bad).expect_err("a newline");
        assert_eq!(err.name, "X-Key");
        assert!(!err.to_string().contains("a\nb"));
    }
}
