//! A run's wait for the sandbox image build (`image/provision/`), in the caller's task, so the
//! sandbox actor goes on serving while the image is built: progress to the run's sink, and a
//! report when the run ends here (the build failed, still builds after the wait limit, or the
//! client cancelled).

use tokio::time::Instant;

use super::RunRequest;
use crate::config::Settings;
use crate::image::{Provisioner, Waited};
use crate::report::{RunReport, RunStatus};

/// Waits for the image build with progress; `Some` report when the run ends here. The wait is
/// not counted against the run's timeout.
pub(super) async fn await_image(
    provisioner: &Provisioner,
    settings: &Settings,
    req: &mut RunRequest,
) -> Option<RunReport> {
    let progress = req.progress.clone();
    let waited = provisioner
        .wait(
            settings.image_build_wait,
            &move |m| progress.report(m),
            &req.cancel,
        )
        .await;
    let image = &settings.image;
    match waited {
        Waited::Ready => {
            req.arrived = Instant::now();
            None
        }
        Waited::Failed(error) => Some(RunReport::failed(
            RunStatus::SandboxError,
            format!("the sandbox image '{image}' is missing and building it failed: {error}"),
        )),
        Waited::StillBuilding { status } => Some(RunReport::failed(
            RunStatus::SandboxError,
            format!(
                "the sandbox image '{image}' is still being built ({status}); try again in a \
                 moment. The code did not run. (A run waits up to \
                 MCP_BRIDGE_IMAGE_BUILD_WAIT={} s for a build.)",
                settings.image_build_wait.as_secs()
            ),
        )),
        Waited::Cancelled => Some(RunReport::failed(
            RunStatus::Cancelled,
            "cancelled by the client while the sandbox image was being built; the build goes on",
        )),
    }
}
