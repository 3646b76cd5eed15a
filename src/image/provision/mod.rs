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
//!
//! `state.rs` holds the states and answers, `task.rs` the build task and the [`ImageBuild`]
//! trait behind which the real build sits.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod state;
mod task;

pub use state::{describe, BuildState, Requested, Waited};
pub use task::ImageBuild;
use task::{build_task, Inner};

/// How long a failed build's error is given to runs before a run may start another build.
pub const RETRY_AFTER_SECS: u64 = 600;
/// How often a waiting run reports progress.
const PROGRESS_EVERY_MS: u64 = 1000;

/// Handle to the bridge's image build; cheap to clone.
#[derive(Clone)]
pub struct Provisioner {
    inner: Arc<Inner>,
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

#[cfg(test)]
mod tests {
    //! The build state machine with a fake builder: waiting, failure and retry, cancel, the lock.

    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use tokio::sync::Notify;

    use super::*;
    use crate::image::build::{BuildError, Report, Reporter};
    use crate::image::lock;
    use crate::image::recipe::Source;
    use crate::sandbox::Progress;

    fn quiet(_: String) {}

    /// A builder whose builds end when the test says, counting them; "the engine" is a flag shared
    /// by the builders of several bridges.
    struct Fake {
        builds: AtomicUsize,
        present: Arc<AtomicBool>,
        finish: Notify,
        fail: AtomicBool,
    }

    impl Fake {
        fn new(present: Arc<AtomicBool>) -> Arc<Fake> {
            Arc::new(Fake {
                builds: AtomicUsize::new(0),
                present,
                finish: Notify::new(),
                fail: AtomicBool::new(false),
            })
        }
    }

    #[async_trait::async_trait]
    impl ImageBuild for Fake {
        async fn present(&self) -> Result<bool, BuildError> {
            Ok(self.present.load(Ordering::SeqCst))
        }
        async fn build(
            &self,
            report: &Reporter<'_>,
            _ct: &CancellationToken,
        ) -> Result<Source, BuildError> {
            self.builds.fetch_add(1, Ordering::SeqCst);
            report(Report::Phase("installing the Python stack"));
            report(Report::Detail("setting up python3-pandas"));
            self.finish.notified().await;
            if self.fail.load(Ordering::SeqCst) {
                return Err(BuildError::OfflineUnavailable("no debootstrap".into()));
            }
            self.present.store(true, Ordering::SeqCst);
            Ok(Source::Debian)
        }
    }

    fn provisioner(fake: &Arc<Fake>, dir: &std::path::Path) -> Provisioner {
        Provisioner::new(
            Some(fake.clone() as Arc<dyn ImageBuild>),
            lock::path(dir),
            TaskTracker::new(),
            CancellationToken::new(),
        )
    }

    async fn until_building_phase(p: &Provisioner, want: &str) {
        for _ in 0..200 {
            if let BuildState::Building { phase, .. } = p.state() {
                if phase.contains(want) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("never reached phase {want:?}: {:?}", p.state());
    }

    #[tokio::test]
    async fn one_build_for_many_requests_and_waiters_get_progress_then_ready() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = Fake::new(Arc::default());
        let p = provisioner(&fake, dir.path());
        assert!(matches!(p.request(), Requested::Building));
        assert!(matches!(p.request(), Requested::Building));
        until_building_phase(&p, "installing").await;
        let (progress, mut reports) = Progress::channel();
        let waiter = {
            let p = p.clone();
            tokio::spawn(async move {
                p.wait(
                    Duration::from_secs(60),
                    &|m| progress.report(m),
                    &CancellationToken::new(),
                )
                .await
            })
        };
        let first = reports.recv().await.expect("a progress report");
        assert!(
            first.starts_with(
                "building the sandbox image: installing the Python stack: setting up python3-pandas ("
            ),
            "{first}"
        );
        fake.finish.notify_one();
        assert!(matches!(waiter.await.expect("waiter"), Waited::Ready));
        assert!(matches!(p.state(), BuildState::Ready));
        assert_eq!(fake.builds.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_wait_past_its_limit_or_cancelled_leaves_the_build_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = Fake::new(Arc::default());
        let p = provisioner(&fake, dir.path());
        p.request();
        until_building_phase(&p, "installing").await;
        let waited = p
            .wait(Duration::from_millis(50), &quiet, &CancellationToken::new())
            .await;
        match waited {
            Waited::StillBuilding { status } => assert!(status.contains("installing"), "{status}"),
            other => panic!("expected StillBuilding, got {other:?}"),
        }
        let cancel = CancellationToken::new();
        cancel.cancel();
        let waited = p.wait(Duration::from_secs(60), &quiet, &cancel).await;
        assert!(matches!(waited, Waited::Cancelled), "{waited:?}");
        assert!(p.is_building(), "the build goes on");
        fake.finish.notify_one();
        let waited = p
            .wait(Duration::from_secs(60), &quiet, &CancellationToken::new())
            .await;
        assert!(matches!(waited, Waited::Ready), "{waited:?}");
    }

    #[tokio::test]
    async fn a_failed_build_is_reported_at_once_and_retried_only_after_the_delay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = Fake::new(Arc::default());
        fake.fail.store(true, Ordering::SeqCst);
        let p = provisioner(&fake, dir.path()).with_retry_after(Duration::from_millis(300));
        p.request();
        until_building_phase(&p, "installing").await;
        fake.finish.notify_one();
        let waited = p
            .wait(Duration::from_secs(60), &quiet, &CancellationToken::new())
            .await;
        let Waited::Failed(err) = waited else {
            panic!("expected Failed, got {waited:?}");
        };
        assert!(err.to_string().contains("no debootstrap"), "{err}");
        for _ in 0..5 {
            assert!(
                matches!(p.request(), Requested::Failed(_)),
                "no rebuild loop"
            );
        }
        assert_eq!(fake.builds.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(350)).await;
        fake.fail.store(false, Ordering::SeqCst);
        assert!(
            matches!(p.request(), Requested::Building),
            "retried after the delay"
        );
        until_building_phase(&p, "installing").await;
        fake.finish.notify_one();
        let waited = p
            .wait(Duration::from_secs(60), &quiet, &CancellationToken::new())
            .await;
        assert!(matches!(waited, Waited::Ready), "{waited:?}");
        assert_eq!(fake.builds.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn bridges_sharing_the_lock_build_once_and_the_others_wait_for_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Arc::new(AtomicBool::new(false));
        let (a, b) = (Fake::new(engine.clone()), Fake::new(engine.clone()));
        let (pa, pb) = (provisioner(&a, dir.path()), provisioner(&b, dir.path()));
        pa.request();
        until_building_phase(&pa, "installing").await;
        pb.request();
        until_building_phase(&pb, "waiting for another build").await;
        match pb.state() {
            BuildState::Building { detail, .. } => {
                assert!(
                    detail.contains(&format!("pid {}", std::process::id())),
                    "{detail}"
                );
                assert!(detail.contains("installing the Python stack"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        a.finish.notify_one();
        let none = CancellationToken::new();
        let (wa, wb) = tokio::join!(
            pa.wait(Duration::from_secs(60), &quiet, &none),
            pb.wait(Duration::from_secs(60), &quiet, &none)
        );
        assert!(
            matches!(wa, Waited::Ready) && matches!(wb, Waited::Ready),
            "{wa:?} {wb:?}"
        );
        assert_eq!(a.builds.load(Ordering::SeqCst), 1);
        assert_eq!(
            b.builds.load(Ordering::SeqCst),
            0,
            "the second bridge found it built"
        );
    }

    #[tokio::test]
    async fn off_builds_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = Provisioner::new(
            None,
            lock::path(dir.path()),
            TaskTracker::new(),
            CancellationToken::new(),
        );
        assert!(matches!(p.request(), Requested::Off));
        assert!(matches!(p.state(), BuildState::Idle));
    }
}
