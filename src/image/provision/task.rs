//! The background build a [`Provisioner`](super::Provisioner) starts: take the per-user lock
//! (waiting while another bridge builds), build unless the image is there by then, and record
//! the outcome; the build itself is an [`ImageBuild`], so the state machine is tested with fakes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::state::BuildState;
use crate::image::build::{BuildError, Report, Reporter};
use crate::image::lock::{self, Attempt};
use crate::image::recipe::Source;

/// How often a bridge waiting for another's build tries the lock.
const LOCK_POLL_MS: u64 = 500;

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

/// What a [`Provisioner`](super::Provisioner) and its build task share.
pub(super) struct Inner {
    pub(super) state: watch::Sender<BuildState>,
    pub(super) builder: Option<Arc<dyn ImageBuild>>,
    pub(super) lock_path: std::path::PathBuf,
    pub(super) retry_after: Duration,
    pub(super) tracker: TaskTracker,
    pub(super) ct: CancellationToken,
}

pub(super) async fn build_task(inner: Arc<Inner>, builder: Arc<dyn ImageBuild>) {
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
