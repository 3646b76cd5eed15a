//! [`Provisioner`]: the sandbox image's build, one per bridge, in the background. The sandbox
//! actor asks for a build when it finds the image missing ([`Provisioner::request`]) and goes on
//! serving; a run that arrives meanwhile waits for it with progress ([`Provisioner::wait`]), up
//! to `MCP_BRIDGE_IMAGE_BUILD_WAIT`, and is then told to try again.
//!
//! - Cancel: a run's cancel ends only its wait; the build goes on. The bridge exiting stops it.
//! - Failure: the error (cause and fix) is kept and given at once to every run for
//!   [`RETRY_AFTER_SECS`]; the next run after that starts one new build. No rebuild loop.
//! - Concurrency: builds take the per-user lock file (`lock.rs`); a bridge finding it held waits,
//!   then checks the engine again before building: the other bridge may have built it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::build::{BuildError, Report, Reporter};
use super::lock::{self, Attempt};
use super::recipe::Source;

/// How long a failed build's error is given to runs before a run may start another build.
pub const RETRY_AFTER_SECS: u64 = 600;
/// How often a bridge waiting for another's build tries the lock.
const LOCK_POLL_MS: u64 = 500;
/// How often a waiting run reports progress.
const PROGRESS_EVERY_MS: u64 = 1000;

/// The "how" of a build, behind a trait so the state machine is tested with fakes.
#[async_trait::async_trait]
pub trait ImageBuild: Send + Sync + 'static {
    /// Whether the image is on the engine now.
    async fn present(&self) -> Result<bool, BuildError>;
    /// Builds the image, reporting phases; stops when `ct` is cancelled.
    async fn build(
        &self,
        report: &Reporter<'_>,
        ct: &CancellationToken,
    ) -> Result<Source, BuildError>;
}

/// Where the build stands.
#[derive(Debug, Clone)]
pub enum BuildState {
    /// No build asked for.
    Idle,
    /// A build runs (or waits for another bridge's).
    Building {
        /// When it began.
        since: Instant,
        /// What it does now.
        phase: String,
        /// The latest detail of that phase.
        detail: String,
    },
    /// The image was built (or found built by another bridge).
    Ready,
    /// The last build failed.
    Failed {
        /// When.
        at: Instant,
        /// Why, and what to do.
        error: Arc<BuildError>,
    },
}

/// The answer to [`Provisioner::request`].
#[derive(Debug, Clone)]
pub enum Requested {
    /// A build runs: wait for it.
    Building,
    /// The last build failed less than [`RETRY_AFTER_SECS`] ago: report this.
    Failed(Arc<BuildError>),
    /// Automatic builds are off (`MCP_BRIDGE_IMAGE_BUILD=off`).
    Off,
}

/// How a run's wait ended.
#[derive(Debug, Clone)]
pub enum Waited {
    /// The image is there (or no build runs): go on.
    Ready,
    /// The build failed.
    Failed(Arc<BuildError>),
    /// The wait limit passed first; the build goes on.
    StillBuilding {
        /// What the build does now, with its elapsed time.
        status: String,
    },
    /// The run was cancelled; the build goes on.
    Cancelled,
}

/// Handle to the bridge's image build; cheap to clone.
#[derive(Clone)]
pub struct Provisioner {
    inner: Arc<Inner>,
}

struct Inner {
    state: watch::Sender<BuildState>,
    builder: Option<Arc<dyn ImageBuild>>,
    lock_path: std::path::PathBuf,
    retry_after: Duration,
    tracker: TaskTracker,
    ct: CancellationToken,
}

impl Provisioner {
    /// A provisioner building with `builder` (`None`: automatic builds are off), taking the
    /// lock at `lock_path`; builds run on `tracker` and stop when `ct` is cancelled.
    pub fn new(
        builder: Option<Arc<dyn ImageBuild>>,
        lock_path: std::path::PathBuf,
        tracker: TaskTracker,
        ct: CancellationToken,
    ) -> Self {
        Provisioner {
            inner: Arc::new(Inner {
                state: watch::Sender::new(BuildState::Idle),
                builder,
                lock_path,
                retry_after: Duration::from_secs(RETRY_AFTER_SECS),
                tracker,
                ct,
            }),
        }
    }

    /// The same, with another retry delay (tests).
    #[cfg(test)]
    pub(crate) fn with_retry_after(mut self, retry_after: Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.retry_after = retry_after;
        }
        self
    }

    /// Where the build stands now.
    pub fn state(&self) -> BuildState {
        self.inner.state.borrow().clone()
    }

    /// Whether a build runs now.
    pub fn is_building(&self) -> bool {
        matches!(*self.inner.state.borrow(), BuildState::Building { .. })
    }

    /// The image is missing: starts a build unless one runs, or the last one failed less than
    /// the retry delay ago.
    pub fn request(&self) -> Requested {
        let Some(builder) = self.inner.builder.clone() else {
            return Requested::Off;
        };
        let mut start = false;
        let mut answer = Requested::Building;
        self.inner.state.send_if_modified(|state| match state {
            BuildState::Building { .. } => false,
            BuildState::Failed { at, error } if at.elapsed() < self.inner.retry_after => {
                answer = Requested::Failed(error.clone());
                false
            }
            _ => {
                *state = BuildState::Building {
                    since: Instant::now(),
                    phase: "starting".into(),
                    detail: String::new(),
                };
                start = true;
                true
            }
        });
        if start {
            tracing::info!("the sandbox image is missing; building it in the background");
            self.inner
                .tracker
                .spawn(build_task(self.inner.clone(), builder));
        }
        answer
    }

    /// Waits for a running build, up to `limit`, reporting progress to `progress` every second.
    ///
    /// # Cancel safety
    /// Dropping or cancelling the wait leaves the build running.
    pub async fn wait(
        &self,
        limit: Duration,
        progress: &(dyn Fn(String) + Send + Sync + '_),
        cancel: &CancellationToken,
    ) -> Waited {
        let mut rx = self.inner.state.subscribe();
        let deadline = Instant::now() + limit;
        let mut tick = tokio::time::interval(Duration::from_millis(PROGRESS_EVERY_MS));
        loop {
            let status = match &*rx.borrow_and_update() {
                BuildState::Idle | BuildState::Ready => return Waited::Ready,
                BuildState::Failed { error, .. } => return Waited::Failed(error.clone()),
                building => describe(building),
            };
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return Waited::Ready },
                _ = tick.tick() => progress(status.clone()),
                _ = tokio::time::sleep_until(deadline) => return Waited::StillBuilding { status },
                _ = cancel.cancelled() => return Waited::Cancelled,
            }
        }
    }
}

/// "building the sandbox image: PHASE: DETAIL (2m10s)".
pub fn describe(state: &BuildState) -> String {
    match state {
        BuildState::Building {
            since,
            phase,
            detail,
        } => {
            let secs = since.elapsed().as_secs();
            let took = if secs >= 60 {
                format!("{}m{:02}s", secs / 60, secs % 60)
            } else {
                format!("{secs}s")
            };
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            };
            format!("building the sandbox image: {phase}{detail} ({took})")
        }
        BuildState::Idle => "no build asked for".into(),
        BuildState::Ready => "the sandbox image is ready".into(),
        BuildState::Failed { error, .. } => format!("the sandbox image build failed: {error}"),
    }
}

async fn build_task(inner: Arc<Inner>, builder: Arc<dyn ImageBuild>) {
    let began = Instant::now();
    let result = build_locked(&inner, builder.as_ref()).await;
    inner.state.send_replace(match result {
        Ok(how) => {
            tracing::info!(
                secs = began.elapsed().as_secs(),
                how,
                "the sandbox image is ready"
            );
            BuildState::Ready
        }
        Err(error) => {
            tracing::error!(cause = %error, "building the sandbox image failed");
            BuildState::Failed {
                at: Instant::now(),
                error: Arc::new(error),
            }
        }
    });
}

fn set_phase(inner: &Inner, new_phase: Option<&str>, new_detail: &str) {
    inner.state.send_modify(|state| {
        if let BuildState::Building { phase, detail, .. } = state {
            if let Some(p) = new_phase {
                *phase = p.to_string();
            }
            *detail = new_detail.chars().take(200).collect();
        }
    });
}

/// Takes the lock (waiting for another bridge's build), then builds unless the image is there.
async fn build_locked(inner: &Inner, builder: &dyn ImageBuild) -> Result<&'static str, BuildError> {
    let held = loop {
        match lock::try_lock(&inner.lock_path) {
            Ok(Attempt::Held(held)) => break Some(held),
            Ok(Attempt::Busy(note)) => {
                set_phase(inner, Some("waiting for another build to finish"), &note)
            }
            Err(err) => {
                tracing::warn!(lock = %inner.lock_path.display(), cause = %err, "cannot take the image build lock; building without it");
                break None;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(LOCK_POLL_MS)) => {}
            _ = inner.ct.cancelled() => return Err(BuildError::Stopped),
        }
    };
    if builder.present().await? {
        return Ok("built by another bridge");
    }
    let held = Mutex::new(held);
    let report = |r: Report<'_>| match r {
        Report::Phase(p) => {
            tracing::info!(phase = p, "building the sandbox image");
            if let Some(l) = held.lock().expect("lock note mutex").as_mut() {
                l.note(p);
            }
            set_phase(inner, Some(p), "");
        }
        Report::Detail(d) => {
            tracing::debug!(detail = d, "building the sandbox image");
            set_phase(inner, None, d);
        }
    };
    let source = builder.build(&report, &inner.ct).await?;
    Ok(source.label())
}

#[cfg(test)]
#[path = "provision_tests.rs"]
mod tests;
