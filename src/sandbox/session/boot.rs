//! Booting a started container: the session's tasks spawned (in the caller's span), the boot
//! frame sent, the channel choice (socket when the entrypoint connects to it, else stdio), the
//! `ready` handshake and the posture check.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use super::calls::{CallRoute, Calls};
use super::engine_loss;
use super::inbound::FrameSink;
use super::limits::{SessionLimits, BOOT_TIMEOUT_SECS, WRITE_QUEUE};
use super::reader::{read_loop, socket_read_loop};
use super::state::{Death, Shared};
use super::waiter::wait_loop;
use super::writer::{write_line, write_loop, Outgoing};
use crate::container::ContainerRuntime;
use crate::egress::{self, EgressListener, RunBudget};
use crate::outbox::Outbox;
use crate::sandbox::channel::{ChannelListener, SOCKET_NAME};
use crate::sandbox::entrypoint;
use crate::sandbox::error::BridgeError;
use crate::sandbox::posture::{self, Expected};
use crate::sandbox::protocol::{ChannelOffer, EgressOffer};

/// A booted sandbox: what the session handle keeps.
pub(super) struct Booted {
    pub(super) writer: mpsc::Sender<Outgoing>,
    pub(super) shared: Arc<Shared>,
    pub(super) death: watch::Receiver<Option<Death>>,
    /// The container's stdin, held open while frames use the socket channel.
    pub(super) stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    pub(super) tasks: Vec<AbortOnDropHandle<()>>,
    /// Ends the session's request tasks when dropped.
    pub(super) calls_end: DropGuard,
    /// The network budget of the sandbox's runs, when it has a way out.
    pub(super) egress: Option<Arc<RunBudget>>,
}

/// Attaches to and starts container `id`, boots the entrypoint (offering `channel`, the
/// listener and the directory it is mounted at inside) and waits for `ready`. The tasks are
/// spawned in the current span; they end when the returned value (or the error) is dropped,
/// and so do the tasks answering the sandbox's requests (spawned on `route`'s tracker).
/// Files the execs deliver go to `outbox`.
///
/// # Errors
/// [`BridgeError::Runtime`] when the engine refuses, [`BridgeError::Boot`] when the entrypoint
/// does not answer, [`BridgeError::Weak`] when `expected` posture is not met.
pub(super) async fn boot(
    runtime: &Arc<dyn ContainerRuntime>,
    id: &str,
    route: CallRoute,
    limits: SessionLimits,
    channel: Option<(ChannelListener, String)>,
    expected: Option<&Expected>,
    outbox: Arc<Outbox>,
) -> Result<Booted, BridgeError> {
    let began = tokio::time::Instant::now();
    let attached = runtime.attach(id).await?;
    runtime.start(id).await?;
    tracing::debug!(
        ms = began.elapsed().as_millis() as u64,
        "sandbox attached and started"
    );
    let (death_tx, death) = watch::channel(None);
    let (ready_tx, mut ready_rx) = oneshot::channel();
    let shared = Shared::new(limits.memory_bytes, ready_tx, death_tx, outbox);
    let (writer, write_rx) = mpsc::channel(WRITE_QUEUE);
    let (exit_tx, exit_rx) = watch::channel(None);
    let calls_end = CancellationToken::new();
    let egress_policy = route.dispatcher.egress().cloned();
    let calls = Calls::new(writer.clone(), route, limits, calls_end.clone());
    let calls_end = calls_end.drop_guard();
    let sink = FrameSink::new(shared.clone(), calls, limits);
    let mut tasks = vec![
        spawn(wait_loop(
            runtime.clone(),
            id.to_string(),
            exit_tx,
            shared.clone(),
        )),
        spawn(read_loop(
            engine_loss::hold_output(attached.output, shared.engine.clone()),
            sink.clone(),
            exit_rx,
        )),
    ];
    let boot_err = |reason: String| BridgeError::Boot {
        reason,
        stderr_tail: shared.tail(),
    };
    let mut stdin = attached.input;
    // The way out (MCP_BRIDGE_NETWORK_ALLOW): a second socket in the channel's folder, which
    // the entrypoint connects to first (the folder goes once the frame socket is taken).
    let way_out = match (&channel, egress_policy) {
        (Some((listener, dir)), Some(policy)) => match EgressListener::bind(listener.host_dir()) {
            Ok(l) => Some((
                l,
                format!("{dir}/{}", egress::listener::SOCKET_NAME),
                policy,
            )),
            Err(err) => return Err(BridgeError::Network(format!("its socket: {err}"))),
        },
        _ => None,
    };
    let offer = channel
        .as_ref()
        .map(|(listener, dir)| (listener, format!("{dir}/{SOCKET_NAME}")));
    let frame = entrypoint::boot_frame(offer.as_ref().map(|(l, path)| ChannelOffer {
        path,
        token: l.token(),
        egress: way_out.as_ref().map(|(l, path, _)| EgressOffer {
            path,
            token: l.token(),
        }),
    }));
    let egress_budget = way_out
        .as_ref()
        .map(|(_, _, policy)| Arc::new(policy.budget()));
    if let (Some((listener, _, policy)), Some(budget)) = (way_out, &egress_budget) {
        let budget = budget.clone();
        tasks.push(spawn(async move {
            let deadline = Duration::from_secs(BOOT_TIMEOUT_SECS);
            match tokio::time::timeout(deadline, listener.accept()).await {
                Ok(Ok(stream)) => {
                    drop(listener);
                    egress::mux::run(stream, policy, budget).await;
                }
                Ok(Err(err)) => tracing::warn!(cause = %err, "the egress socket failed"),
                Err(_) => {
                    tracing::warn!("the sandbox's relay did not connect to the egress socket")
                }
            }
        }));
    }
    if let Err(err) = write_line(&mut stdin, &frame).await {
        return Err(boot_err(format!("could not send the boot frame: {err}")));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(BOOT_TIMEOUT_SECS);
    // The entrypoint either connects to the channel and sends `ready` there, or gives up
    // and sends `ready` on stdout.
    let mut early_ready = None;
    let mut socket = None;
    if let Some((listener, _)) = &channel {
        tokio::select! {
            r = &mut ready_rx => early_ready = Some(r),
            r = tokio::time::timeout_at(deadline, listener.accept()) => match r {
                Ok(Ok(stream)) => socket = Some(stream),
                Ok(Err(err)) => tracing::warn!(cause = %err, "the frame channel failed; using stdio"),
                Err(_) => {}
            },
        }
    }
    drop(channel); // the socket file and its directory are no longer needed
    let (output, keep_stdin): (Pin<Box<dyn AsyncWrite + Send>>, _) = match socket {
        Some(stream) => {
            shared.engine.set_on_socket();
            let (rd, wr) = stream.into_split();
            tasks.push(spawn(socket_read_loop(rd, sink)));
            (Box::pin(wr), Some(stdin))
        }
        None => (stdin, None),
    };
    tasks.push(spawn(write_loop(output, write_rx)));
    let ready = match early_ready {
        Some(r) => Ok(r),
        None => tokio::time::timeout_at(deadline, ready_rx).await,
    };
    let booted = Booted {
        writer,
        shared: shared.clone(),
        death,
        stdin: keep_stdin,
        tasks,
        calls_end,
        egress: egress_budget,
    };
    tracing::debug!(
        ms = began.elapsed().as_millis() as u64,
        "boot frame answered"
    );
    match ready {
        Ok(Ok(Ok(posture))) => {
            let checks = posture::evaluate(&posture, expected.unwrap_or(&Expected::default()));
            match (expected, posture::failures(&checks)) {
                (Some(_), Some(weak)) => Err(BridgeError::Weak(weak)),
                (None, Some(weak)) => {
                    tracing::debug!("sandbox posture not enforced: {weak}");
                    Ok(booted)
                }
                (_, None) => Ok(booted),
            }
        }
        Ok(Ok(Err(reason))) => Err(boot_err(reason)),
        Ok(Err(_)) => Err(boot_err("the session ended during boot".into())),
        Err(_) => Err(boot_err(format!(
            "no ready frame within {BOOT_TIMEOUT_SECS} s"
        ))),
    }
}

/// Spawns one of the session's tasks in the current span, aborted when dropped.
fn spawn(task: impl Future<Output = ()> + Send + 'static) -> AbortOnDropHandle<()> {
    AbortOnDropHandle::new(tokio::spawn(task.in_current_span()))
}
