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
//!
//! A live connection's token refused mid-call (a 401 rmcp's one refresh could not fix: a
//! revoked token, a refused refresh; or a 403 `insufficient_scope`, a step-up) signs in the same
//! way, and the call is made once more ([`Upstream::signed_in_again`]); a second refusal is the
//! call's `AuthRequired`, and after [`MAX_SIGN_INS_REFUSED`] such sign-ins in a row whose retry
//! was refused again, a refusal is not signed in again until a retried call goes through.

use std::sync::atomic::Ordering;

use rmcp::model::{CallToolResult, JsonObject};
use tokio::time::Instant;

use super::client::Upstream;
use super::oauth::{browser, login};
use super::UpstreamError;
use crate::calls::{QuestionKind, Reply, RunScope, ServerQuestion, SignInWay};
use crate::shown::Shown;

/// Sign-ins after a refused call, in a row, whose retry was refused again, after which a refusal
/// is not signed in again: rmcp's own bound on scope step-ups
/// (`ScopeUpgradeConfig::default().max_upgrade_attempts`).
pub const MAX_SIGN_INS_REFUSED: u32 = 3;

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

    /// [`Upstream::call_in`] for `run`, which can sign in: a refusal of the live connection's
    /// token is signed in past and the call made once more ([`Upstream::signed_in_again`]).
    ///
    /// # Errors
    /// As [`Upstream::call_in`] and [`Upstream::signed_in_again`].
    pub(super) async fn call_signing_in(
        &self,
        run: &RunScope,
        tool: &str,
        args: JsonObject,
        deadline: Instant,
    ) -> Result<CallToolResult, UpstreamError> {
        let again = args.clone();
        match self.call_in(tool, args, deadline, Some(run)).await {
            Err(UpstreamError::AuthRequired { .. }) => {
                self.signed_in_again(run, tool, again, deadline).await
            }
            r => r,
        }
    }

    /// After [`Upstream::call_in`] met the server refusing the live connection's token (it
    /// marked the store, with a step-up's scope, and closed the connection): signs in for `run`
    /// as a first call does, then calls `tool` once more.
    ///
    /// Retrying is safe only because of how the call failed: a 401 or 403 answers the HTTP
    /// request itself, before the server's MCP layer reads it, so the tool did not run. A call
    /// that failed any other way (a timeout, a dropped connection) may have had effects
    /// upstream and is never retried.
    ///
    /// # Errors
    /// [`UpstreamError::AuthRequired`] when no sign-in happened, when the retry is refused
    /// again (no loop), or after [`MAX_SIGN_INS_REFUSED`]; else the retried call's error.
    pub(super) async fn signed_in_again(
        &self,
        run: &RunScope,
        tool: &str,
        args: JsonObject,
        deadline: Instant,
    ) -> Result<CallToolResult, UpstreamError> {
        if self.signing.refused_again.load(Ordering::Acquire) >= MAX_SIGN_INS_REFUSED {
            tracing::info!(server = %Shown(&self.spec.name), "the server refused the token again after {MAX_SIGN_INS_REFUSED} sign-ins in a row: not signing in again");
            return Err(self.sign_in_refusal());
        }
        self.sign_in_for(run).await?;
        let r = self.call_in(tool, args, deadline, Some(run)).await;
        match &r {
            Err(UpstreamError::AuthRequired { .. }) => {
                self.signing.refused_again.fetch_add(1, Ordering::AcqRel);
            }
            _ => self.signing.refused_again.store(0, Ordering::Release),
        }
        r
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
