//! Signing in inside a run: the first call to a server that needs sign-in signs in and goes
//! on. Under `exec` ([`SignInWay::Open`]) the link is opened as `login` opens it, when
//! it can be (`$BROWSER`, a desktop opener); under `run`/`serve` the run's client is asked
//! (the link as a URL-mode question where the client declared it, else in a form's message:
//! the relay's [`Asker::relay`](crate::calls::Asker::relay)), and the loopback callback is
//! awaited meanwhile. The wait is bounded by `MCP_BRIDGE_LOGIN_TIMEOUT` and does not count
//! against the run's timeout (`PersonWaits`). Calls racing to sign in to one server share
//! one sign-in and its outcome. Nobody to ask, a declined or dismissed question, a timeout,
//! a failed sign-in: [`UpstreamError::AuthRequired`] (naming `login`); the reason is logged
//! (redacted, never a secret), nothing is stored.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::client::Upstream;
use super::oauth::{browser, login};
use super::UpstreamError;
use crate::calls::{QuestionKind, Reply, RunScope, ServerQuestion, SignInWay};
use crate::shown::Shown;

/// Why a sign-in inside a run did not happen (logged; the call gets `AuthRequired`).
#[derive(Debug, thiserror::Error)]
enum NotSignedIn {
    #[error(
        "nobody can be asked to sign in (no client that can be asked, or no way to open a link)"
    )]
    NobodyToAsk,
    #[error("the server's sign-in is the operator's (\"sharedCredentials\": true): only `mcp-code-bridge login` signs in to it")]
    OperatorOnly,
    #[error("the sign-in question was declined")]
    Declined,
    #[error("the sign-in question was dismissed")]
    Cancelled,
    #[error("the sign-in question could not be asked: {0}")]
    Unavailable(String),
    #[error("no sign-in within {0} s (MCP_BRIDGE_LOGIN_TIMEOUT)")]
    TimedOut(u64),
    #[error("the run ended")]
    RunEnded,
    #[error("{0}")]
    OAuth(#[from] super::oauth::OAuthError),
}

impl Upstream {
    /// Signs in to this server for `run`'s call (see the module's doc), sharing a sign-in
    /// already under way.
    ///
    /// # Errors
    /// [`UpstreamError::AuthRequired`] whenever no sign-in happened.
    pub(super) async fn sign_in_for(&self, run: &RunScope) -> Result<(), UpstreamError> {
        let refused = || self.sign_in_refusal();
        let seen = self.signing.finished.load(Ordering::Acquire);
        let _waiting = run.waits.begin();
        let _one = tokio::select! {
            one = self.signing.one.lock() => one,
            _ = run.finished.cancelled() => return Err(refused()),
            _ = run.stopped.cancelled() => return Err(refused()),
        };
        // Another call's sign-in ended while this one waited: its outcome is this one's.
        if self.signing.finished.load(Ordering::Acquire) != seen {
            return match self.signing.last_ok.load(Ordering::Acquire) {
                true => Ok(()),
                false => Err(refused()),
            };
        }
        let outcome = tokio::select! {
            r = self.sign_in_once(run) => r,
            _ = run.finished.cancelled() => Err(NotSignedIn::RunEnded),
            _ = run.stopped.cancelled() => Err(NotSignedIn::RunEnded),
        };
        self.signing
            .last_ok
            .store(outcome.is_ok(), Ordering::Release);
        self.signing.finished.fetch_add(1, Ordering::AcqRel);
        match outcome {
            Ok(()) => {
                tracing::info!(server = %Shown(&self.spec.name), "signed in during a run");
                Ok(())
            }
            Err(why) => {
                let why = self.spec.redact(&why.to_string());
                tracing::info!(server = %Shown(&self.spec.name), "no sign-in during the run: {}", Shown(&why));
                Err(refused())
            }
        }
    }

    /// The error of a call that needs sign-in and got none: `AuthRequired` naming `login`, or,
    /// for a `serve` caller's own handle (its own sign-in, which `login` does not give),
    /// `CallerSignIn`.
    pub(super) fn sign_in_refusal(&self) -> UpstreamError {
        let server = self.spec.name.clone();
        match self.tasks.tokens.as_ref().and_then(|t| t.caller_name()) {
            Some(_) => UpstreamError::CallerSignIn { server },
            None => UpstreamError::AuthRequired { server },
        }
    }

    async fn sign_in_once(&self, run: &RunScope) -> Result<(), NotSignedIn> {
        let Some(tokens) = &self.tasks.tokens else {
            return Err(NotSignedIn::NobodyToAsk);
        };
        let opts = &self.tasks.login;
        let secs = opts.timeout.as_secs();
        if run.sign_in == SignInWay::Nobody {
            return Err(NotSignedIn::NobodyToAsk);
        }
        // A `serve` caller with an identity of its own never signs in to the operator's
        // records (a `"sharedCredentials"` server's): only the operator does, with `login`.
        let a_caller = run.caller.as_ref().is_some_and(|c| c.identity.is_some());
        if a_caller && tokens.caller_name().is_none() {
            return Err(NotSignedIn::OperatorOnly);
        }
        if run.sign_in == SignInWay::Open {
            if !browser::can_open() {
                return Err(NotSignedIn::NobodyToAsk);
            }
            // The person reads these on the terminal (stdout stays the run's report).
            let mut tell = |line: &str| eprintln!("{}", Shown(line));
            login::login(&self.spec, tokens, opts, &mut tell).await?;
            return Ok(());
        }
        let Some(asker) = run.asker.clone() else {
            return Err(NotSignedIn::NobodyToAsk);
        };
        let deadline = Instant::now() + opts.timeout;
        let pending = login::begin(&self.spec, tokens, opts).await?;
        let link_id = crate::ids::random_id();
        let question = ServerQuestion {
            server: self.spec.name.clone(),
            message: format!(
                "The MCP server '{}' needs you to sign in. Open the link to sign in; the call goes on once you have.",
                self.spec.name
            ),
            kind: QuestionKind::Url {
                url: pending.url.clone(),
                id: link_id.clone(),
            },
        };
        let mut done = Box::pin(pending.finish(deadline, secs));
        let asking = async {
            let Ok(turn) = tokio::time::timeout_at(deadline, run.questions.turn()).await else {
                return Reply::TimedOut;
            };
            let Some(_turn) = turn else {
                return Reply::Unavailable(format!(
                    "this run already asked {} questions",
                    crate::calls::MAX_QUESTIONS_PER_RUN
                ));
            };
            asker.relay(question, deadline).await
        };
        // The callback may come before the client's answer does.
        let reply = tokio::select! {
            r = &mut done => {
                asker.completed(&link_id).await;
                return r.map(|_| ()).map_err(NotSignedIn::from);
            }
            reply = asking => reply,
        };
        match reply {
            Reply::Accept(_) => {
                let signed_in = done.await;
                // The client may show the link as pending until told it is done.
                asker.completed(&link_id).await;
                signed_in.map(|_| ()).map_err(NotSignedIn::from)
            }
            Reply::Decline => Err(NotSignedIn::Declined),
            Reply::Cancel => Err(NotSignedIn::Cancelled),
            Reply::Unavailable(why) => Err(NotSignedIn::Unavailable(why)),
            Reply::TimedOut => Err(NotSignedIn::TimedOut(secs)),
        }
    }
}
