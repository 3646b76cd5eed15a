//! [`run`]: the bridge's end of the relay's one unix connection. The relay in the sandbox
//! carries many TCP connections over it in frames of `kind: u8, stream: u32 BE, len: u32 BE`
//! then `len` bytes: `OPEN` (a new connection), `DATA`, `EOF` (that side will send no more)
//! and `CLOSE` (that side is done). Each stream is served by [`proxy::serve`] over an in-memory
//! pipe. The relay is sandbox code's to rewrite: frames are bounded, live streams are bounded,
//! and a malformed frame ends the whole connection (and so the network of that sandbox).

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::mpsc;

use super::budget::RunBudget;
use super::proxy;
use super::EgressPolicy;

/// A new stream (sandbox to bridge; no payload).
pub const OPEN: u8 = 1;
/// Bytes of a stream.
pub const DATA: u8 = 2;
/// The sender will send no more on the stream (no payload).
pub const EOF: u8 = 3;
/// The sender is done with the stream (no payload).
pub const CLOSE: u8 = 4;
/// The largest payload of one frame.
pub const MAX_PAYLOAD: usize = 32 * 1024;
/// Streams alive at once per sandbox; an `OPEN` past it is answered with `CLOSE`.
pub const MAX_STREAMS: usize = 64;
/// Bytes buffered per stream between the mux and its proxy connection.
const STREAM_BUFFER: usize = 64 * 1024;
/// Frames queued for the relay.
const OUT_QUEUE: usize = 64;

type Frame = (u8, u32, Vec<u8>);

/// One live stream: where the relay's bytes for it go (`None` once the relay closed it).
struct Stream {
    to_proxy: Option<WriteHalf<DuplexStream>>,
}

/// Serves the relay's connection `conn` until it ends or breaks the framing.
pub async fn run<T>(conn: T, policy: Arc<EgressPolicy>, budget: Arc<RunBudget>)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (rd, wr) = tokio::io::split(conn);
    let (out_tx, out_rx) = mpsc::channel::<Frame>(OUT_QUEUE);
    let (in_tx, mut in_rx) = mpsc::channel::<Frame>(1);
    let (done_tx, mut done_rx) = mpsc::channel::<u32>(MAX_STREAMS);
    let writer = tokio::spawn(write_frames(wr, out_rx));
    let reader = tokio::spawn(read_frames(rd, in_tx));
    let mut streams: HashMap<u32, Stream> = HashMap::new();
    loop {
        tokio::select! {
            Some(id) = done_rx.recv() => {
                streams.remove(&id);
            }
            frame = in_rx.recv() => {
                let Some((kind, id, payload)) = frame else { break };
                match kind {
                    OPEN if streams.contains_key(&id) || streams.len() >= MAX_STREAMS => {
                        let _ = out_tx.send((CLOSE, id, Vec::new())).await;
                    }
                    OPEN => {
                        let to_proxy = open(id, &policy, &budget, out_tx.clone(), done_tx.clone());
                        streams.insert(id, Stream { to_proxy: Some(to_proxy) });
                    }
                    DATA => {
                        if let Some(s) = streams.get_mut(&id) {
                            let failed = match &mut s.to_proxy {
                                Some(w) => w.write_all(&payload).await.is_err(),
                                None => false,
                            };
                            if failed {
                                s.to_proxy = None;
                            }
                        }
                    }
                    EOF | CLOSE => {
                        if let Some(s) = streams.get_mut(&id) {
                            if let Some(mut w) = s.to_proxy.take() {
                                let _ = w.shutdown().await;
                            }
                        }
                    }
                    _ => break,
                }
            }
        }
    }
    // The relay is gone: the proxies see their clients end and finish on their own.
    drop(streams);
    reader.abort();
    drop(out_tx);
    let _ = writer.await;
}

/// Starts stream `id`'s proxy connection; returns where the relay's bytes for it go.
fn open(
    id: u32,
    policy: &Arc<EgressPolicy>,
    budget: &Arc<RunBudget>,
    out: mpsc::Sender<Frame>,
    done: mpsc::Sender<u32>,
) -> WriteHalf<DuplexStream> {
    let (ours, theirs) = tokio::io::duplex(STREAM_BUFFER);
    let (mut from_proxy, to_proxy) = tokio::io::split(ours);
    let (policy, budget) = (policy.clone(), budget.clone());
    tokio::spawn(async move {
        let serve = proxy::serve(theirs, policy, budget);
        let back = async {
            let mut buf = vec![0u8; MAX_PAYLOAD];
            loop {
                match from_proxy.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = out.send((EOF, id, Vec::new())).await;
                        break;
                    }
                    Ok(n) => {
                        if out.send((DATA, id, buf[..n].to_vec())).await.is_err() {
                            break;
                        }
                    }
                }
            }
        };
        tokio::join!(serve, back);
        let _ = out.send((CLOSE, id, Vec::new())).await;
        let _ = done.send(id).await;
    });
    to_proxy
}

/// Reads frames into `to` until the connection ends or a frame is malformed.
async fn read_frames<R: AsyncRead + Unpin>(mut rd: R, to: mpsc::Sender<Frame>) {
    let mut head = [0u8; 9];
    while rd.read_exact(&mut head).await.is_ok() {
        let kind = head[0];
        let id = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
        let well_formed = match kind {
            DATA => (1..=MAX_PAYLOAD).contains(&len),
            OPEN | EOF | CLOSE => len == 0,
            _ => false,
        };
        if !well_formed {
            tracing::warn!(
                kind,
                len,
                "the sandbox's egress relay sent a malformed frame; its network is closed"
            );
            return;
        }
        let mut payload = vec![0u8; len];
        if rd.read_exact(&mut payload).await.is_err() || to.send((kind, id, payload)).await.is_err()
        {
            return;
        }
    }
}

/// Writes queued frames until every sender is gone or the connection fails.
async fn write_frames<W: AsyncWrite + Unpin>(mut wr: W, mut from: mpsc::Receiver<Frame>) {
    while let Some((kind, id, payload)) = from.recv().await {
        let mut frame = Vec::with_capacity(9 + payload.len());
        frame.push(kind);
        frame.extend_from_slice(&id.to_be_bytes());
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(&payload);
        if wr.write_all(&frame).await.is_err() {
            return;
        }
    }
    let _ = wr.shutdown().await;
}
