//! The build state machine with a fake builder: waiting, failure and retry, cancel, the lock.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

use super::*;
use crate::bridge::Progress;

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
