//! Where the image build stands ([`BuildState`]), what a run is told when it asks for a build
//! ([`Requested`]) or waits for one ([`Waited`]), and the state as a person reads it.

use std::sync::Arc;

use tokio::time::Instant;

use crate::image::build::BuildError;

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

/// The answer to [`Provisioner::request`](super::Provisioner::request).
#[derive(Debug, Clone)]
pub enum Requested {
    /// A build runs: wait for it.
    Building,
    /// The last build failed less than [`RETRY_AFTER_SECS`](super::RETRY_AFTER_SECS) ago: report this.
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
