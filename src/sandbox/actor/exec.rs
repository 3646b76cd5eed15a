//! The actor running one exec on the live session: the exec frame, its deadline, interrupt then
//! kill, progress polls, and what a sandbox death means for the call (retry or report).

use std::time::Duration;

use tokio::time::Instant;

use super::output::shape_result;
use super::{Actor, Retry, RunRequest, INTERRUPT_GRACE_MS, PROGRESS_TAIL};
use crate::report::{RunReport, RunStatus};
use crate::sandbox::error::{BridgeError, ProtocolError};
use crate::sandbox::session::ExecTarget;

impl Actor {
    pub(super) async fn exec(&mut self, req: &RunRequest, deadline: Instant) -> Retry {
        let secs = req.timeout.as_secs();
        let id = self.ids.next();
        let limit = self.settings.max_output;
        let servers = req.servers.clone();
        let tools = match self
            .dispatcher
            .load(&req.servers, &req.scope, deadline)
            .await
        {
            Ok(t) => t,
            Err(err) => return Retry::No(RunReport::failed(RunStatus::Error, err.to_string())),
        };
        let session = self.session.as_ref().expect("ensure_session succeeded");
        let mut rx = match session
            .exec(
                id,
                &req.code,
                &tools,
                ExecTarget {
                    servers,
                    deadline: ExecTarget::calls_deadline(deadline),
                    scope: req.scope.clone(),
                },
                limit,
            )
            .await
        {
            Ok(rx) => rx,
            Err(err) => return self.died_or_retry(err),
        };
        // Progress: only for a client that asked, and only once the cell has run for an
        // interval (a short cell costs nothing): then its output is polled every interval.
        let mut poll = req.progress.is_wanted().then(|| {
            session.report_output(id, req.progress.clone());
            let every = self.settings.progress_interval;
            let mut poll = tokio::time::interval_at(Instant::now() + every, every);
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            poll
        });
        let time_up = tokio::time::sleep_until(deadline);
        tokio::pin!(time_up);
        let why = loop {
            tokio::select! {
                r = &mut rx => return match r {
                    Ok(Ok(frame)) => Retry::No(shape_result(frame, limit)),
                    Ok(Err(err)) => self.died_or_retry(err),
                    Err(_) => Retry::No(self.sandbox_died(ProtocolError::SessionEnded.into())),
                },
                _ = &mut time_up => {
                    // A wait for a person (a server's question) does not count.
                    let later = req.scope.waits.extended(deadline);
                    if later <= Instant::now() {
                        break RunStatus::Timeout;
                    }
                    time_up.as_mut().reset(later);
                }
                _ = req.cancel.cancelled() => break RunStatus::Cancelled,
                _ = req.scope.stopped.cancelled() => break RunStatus::Error,
                _ = self.ct.cancelled() => {
                    if let Some(s) = self.session.take() {
                        if let Some(cause) = s.engine_lost() { self.engine.note_lost(cause); }
                        s.kill().await;
                    }
                    return Retry::No(RunReport::failed(RunStatus::SandboxError, "the bridge is shutting down"));
                }
                _ = tick(&mut poll) => session.poll_output(id, PROGRESS_TAIL),
            }
        };
        let what = match why {
            RunStatus::Timeout => format!("Timed out after {secs} s"),
            RunStatus::Error => format!(
                "Stopped by the bridge's policy: {}",
                req.scope.stop_reason().unwrap_or("no reason given")
            ),
            _ => "Cancelled by the client".to_string(),
        };
        session.interrupt(id).await;
        Retry::No(
            match tokio::time::timeout(Duration::from_millis(INTERRUPT_GRACE_MS), &mut rx).await {
                Ok(Ok(Ok(frame))) => {
                    let mut report = shape_result(frame, limit);
                    let interrupted = report.status == RunStatus::Error;
                    report.status = why;
                    let msg = if interrupted {
                        format!("{what}: the code was interrupted (KeyboardInterrupt). The sandbox and its state are kept.")
                    } else {
                        format!("{what}, but the code finished as it was being interrupted. The sandbox and its state are kept.")
                    };
                    report.error = Some(match report.error.take() {
                        Some(tb) => format!("{msg}\n{tb}"),
                        None => msg,
                    });
                    report
                }
                Ok(Ok(Err(err))) => self.sandbox_died(err),
                _ => {
                    if let Some(s) = self.session.take() {
                        s.kill().await;
                    }
                    self.respawn_due = true;
                    self.notice = Some("The sandbox was restarted after a timeout".into());
                    RunReport::failed(
                    why,
                    format!(
                        "{what}: the code did not stop within {INTERRUPT_GRACE_MS} ms of an interrupt, so the sandbox was killed. \
                         Its state is lost; the next call starts a fresh sandbox."
                    ),
                )
                }
            },
        )
    }

    /// A death before the entrypoint acknowledged the exec means the code never ran: retry.
    pub(super) fn died_or_retry(&mut self, err: BridgeError) -> Retry {
        if let BridgeError::Died {
            before_start: true, ..
        } = err
        {
            if let Some(s) = self.session.take() {
                self.tracker.spawn(s.kill());
            }
            return Retry::OnFreshSandbox(err);
        }
        Retry::No(self.sandbox_died(err))
    }

    pub(super) fn sandbox_died(&mut self, err: BridgeError) -> RunReport {
        if let BridgeError::EngineLost { cause, .. } = &err {
            self.engine.note_lost(cause.clone());
        }
        if let Some(s) = self.session.take() {
            self.tracker.spawn(s.kill());
        }
        self.respawn_due = true;
        self.notice = Some("The sandbox was restarted after it died".into());
        RunReport::failed(
            RunStatus::SandboxError,
            format!("{err}\nThe sandbox's state is lost; the next call starts a fresh sandbox."),
        )
    }
}

/// The next tick of `poll`, or never without one.
async fn tick(poll: &mut Option<tokio::time::Interval>) {
    match poll {
        Some(p) => {
            p.tick().await;
        }
        None => std::future::pending().await,
    }
}
