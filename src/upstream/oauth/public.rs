//! [`PublicCallback`]: the sign-in callback `serve --http` serves at `<public URL>/oauth/callback`
//! (`MCP_BRIDGE_PUBLIC_URL`) for callers whose browser is not on the gateway's machine. A
//! caller's sign-in registers its `state` here ([`PublicCallback::expect`]) and waits; the
//! HTTP front hands each request's query to [`PublicCallback::deliver`], which answers only a
//! pending sign-in's `state` (anything else: nothing waits, and nothing is revealed). Pending
//! sign-ins are bounded in count ([`MAX_PENDING`]) and each is removed once used or once its
//! wait ends (the [`Awaited`] is dropped); queries are bounded in size ([`MAX_QUERY`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::callback::{judge_query, CallbackError, Returned};

/// The path of the public callback.
pub const PUBLIC_PATH: &str = "/oauth/callback";
/// Sign-ins waiting at the public callback at most.
pub const MAX_PENDING: usize = 64;
/// The longest callback query looked at, in bytes.
pub const MAX_QUERY: usize = 4096;
/// The longest `state` looked up.
const MAX_STATE: usize = 256;

/// The gateway's public sign-in callback: the sign-ins waiting at it, by `state`.
#[derive(Clone)]
pub struct PublicCallback {
    desk: Arc<Desk>,
}

struct Desk {
    /// `<public URL>/oauth/callback`.
    redirect: String,
    waiting: Mutex<HashMap<String, oneshot::Sender<String>>>,
}

impl std::fmt::Debug for PublicCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicCallback")
            .field("redirect", &self.desk.redirect)
            .finish_non_exhaustive()
    }
}

/// Why a request to the public callback was not handed to a sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undelivered {
    /// The query is longer than [`MAX_QUERY`].
    TooLong,
    /// No sign-in waits for its `state` (unknown, expired, already used, or none given).
    NoneWaits,
}

impl PublicCallback {
    /// The callback of the gateway at `public_url` (`https://gw.example` or with a path
    /// prefix; a trailing `/` is dropped).
    pub fn new(public_url: &str) -> Self {
        PublicCallback {
            desk: Arc::new(Desk {
                redirect: format!("{}{PUBLIC_PATH}", public_url.trim_end_matches('/')),
                waiting: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The redirect URI a caller's sign-in registers and sends.
    pub fn redirect_uri(&self) -> &str {
        &self.desk.redirect
    }

    /// Sign-ins waiting now.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<String>>> {
        self.desk.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers the sign-in whose state is `state`; its callback is awaited with
    /// [`Awaited::wait`]; dropping the [`Awaited`] removes it.
    ///
    /// # Errors
    /// [`CallbackError::Busy`] when [`MAX_PENDING`] sign-ins wait already.
    pub fn expect(&self, state: &str) -> Result<Awaited, CallbackError> {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.lock();
        if waiting.len() >= MAX_PENDING {
            return Err(CallbackError::Busy(MAX_PENDING));
        }
        waiting.insert(state.to_string(), tx);
        Ok(Awaited {
            rx,
            state: state.to_string(),
            owner: self.clone(),
        })
    }

    /// Hands a callback request's `query` to the sign-in waiting for its `state`, which is
    /// removed (a replay finds nothing).
    ///
    /// # Errors
    /// [`Undelivered`]: the query is too long, or no sign-in waits for its state.
    pub fn deliver(&self, query: &str) -> Result<(), Undelivered> {
        if query.len() > MAX_QUERY {
            return Err(Undelivered::TooLong);
        }
        let state = url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "state")
            .map(|(_, v)| v.into_owned())
            .filter(|s| !s.is_empty() && s.len() <= MAX_STATE)
            .ok_or(Undelivered::NoneWaits)?;
        let waiter = self.lock().remove(&state).ok_or(Undelivered::NoneWaits)?;
        waiter
            .send(query.to_string())
            .map_err(|_| Undelivered::NoneWaits)
    }
}

/// A sign-in waiting at the public callback; removed from it when dropped.
pub struct Awaited {
    rx: oneshot::Receiver<String>,
    state: String,
    owner: PublicCallback,
}

impl Awaited {
    /// Waits until `deadline` (`secs` long, for the error's words) for the callback.
    ///
    /// # Errors
    /// [`CallbackError`]: timeout, a refusal, no code.
    pub async fn wait(&mut self, deadline: Instant, secs: u64) -> Result<Returned, CallbackError> {
        match tokio::time::timeout_at(deadline, &mut self.rx).await {
            Ok(Ok(query)) => judge_query(&query, &self.state),
            _ => Err(CallbackError::Timeout(secs)),
        }
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        self.owner.lock().remove(&self.state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn only_a_pending_state_is_answered_once_and_a_wait_ended_is_removed() {
        let desk = PublicCallback::new("https://gw.example/base/");
        assert_eq!(
            desk.redirect_uri(),
            "https://gw.example/base/oauth/callback"
        );
        assert_eq!(
            desk.deliver("code=c&state=forged"),
            Err(Undelivered::NoneWaits)
        );
        assert_eq!(desk.deliver("code=c"), Err(Undelivered::NoneWaits));
        let mut waiting = desk.expect("st4te").expect("room");
        assert_eq!(desk.pending(), 1);
        desk.deliver("code=the-code&state=st4te")
            .expect("delivered");
        assert_eq!(desk.pending(), 0, "used: removed");
        assert_eq!(
            desk.deliver("code=again&state=st4te"),
            Err(Undelivered::NoneWaits),
            "a replay finds nothing"
        );
        let got = waiting.wait(soon(), 5).await.expect("a code");
        assert_eq!(got.code, "the-code");
        // A wait that ends (timeout, run over) leaves nothing behind.
        let mut late = desk.expect("other").expect("room");
        let past = Instant::now();
        assert!(matches!(
            late.wait(past, 1).await,
            Err(CallbackError::Timeout(1))
        ));
        drop(late);
        assert_eq!(desk.pending(), 0);
        assert_eq!(
            desk.deliver("code=c&state=other"),
            Err(Undelivered::NoneWaits)
        );
    }

    #[test]
    fn pending_sign_ins_and_queries_are_bounded() {
        let desk = PublicCallback::new("https://gw.example");
        let held: Vec<Awaited> = (0..MAX_PENDING)
            .map(|i| desk.expect(&format!("s{i}")).expect("room"))
            .collect();
        assert!(matches!(
            desk.expect("one-more"),
            Err(CallbackError::Busy(MAX_PENDING))
        ));
        drop(held);
        assert_eq!(desk.pending(), 0);
        let _w = desk.expect("s").expect("room again");
        let long = format!("state=s&code={}", "x".repeat(MAX_QUERY));
        assert_eq!(desk.deliver(&long), Err(Undelivered::TooLong));
        assert_eq!(desk.pending(), 1, "a refused request takes nothing");
    }
}
