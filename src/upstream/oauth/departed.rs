//! Forgetting the upstream sign-ins of `serve` callers whose token left the tokens file (or
//! got another secret): at `serve` start (a token removed while the bridge was down) and on
//! each SIGHUP reload. Their records leave the token store at once ([`forget_departed`]); their
//! tokens are then revoked ([`revoke_departed`], in the background: RFC 7009, as `logout` does)
//! where the server's metadata names a revocation endpoint, at most [`MAX_REVOKED`] per pass,
//! each within the OAuth HTTP timeout.

use std::collections::HashSet;

use super::logout::{revoke_record, Revoked};
use super::store::{Forgotten, StoreError, TokenFile};
use crate::config::Servers;
use crate::shown::Shown;

/// Revocations tried at most per pass (the rest are only forgotten).
pub const MAX_REVOKED: usize = 64;

/// Removes from `tokens` the records of every caller whose identity key is not in `keep`;
/// returns what was removed (to revoke).
///
/// # Errors
/// The token store cannot be read or written (nothing was removed).
pub async fn forget_departed(
    tokens: &TokenFile,
    keep: HashSet<String>,
) -> Result<Forgotten, StoreError> {
    let file = tokens.clone();
    let gone = tokio::task::spawn_blocking(move || file.forget_callers(|k| keep.contains(k)))
        .await
        .unwrap_or_else(|e| {
            Err(StoreError::Io {
                path: String::new(),
                what: "forgetting departed callers",
                source: std::io::Error::other(e.to_string()),
            })
        })?;
    Ok(gone)
}

/// Revokes the tokens of `gone` where their server (in `servers`) offers revocation, at most
/// [`MAX_REVOKED`]; a failure is logged (the records are forgotten anyway).
pub async fn revoke_departed(gone: Forgotten, servers: &Servers) {
    let mut tried = 0;
    for (name, records) in gone {
        for (server, record) in records {
            let Some(spec) = servers.specs.iter().find(|s| s.name == server) else {
                continue;
            };
            if tried >= MAX_REVOKED {
                break;
            }
            tried += 1;
            let outcome = revoke_record(spec, &record).await;
            if let Revoked::Failed(why) = outcome {
                tracing::info!(token = %Shown(&name), server = %Shown(&server), "could not revoke a departed caller's tokens (forgotten anyway): {}", Shown(&why));
            }
        }
    }
}
