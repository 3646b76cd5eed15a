//! [`Injected`]: rmcp's client transport with a second source of server messages, so messages
//! the HTTP lane reads on its own responses (a server's question or notification sent on a
//! `tools/call`'s event stream) reach rmcp's service as if its worker had read them.

use std::future::Future;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

/// Server messages waiting for rmcp at most (the lane waits when they are not taken).
pub const INJECTED_MAX: usize = 64;

/// A client transport whose `receive` also yields what the lane hands over.
pub struct Injected<T> {
    inner: T,
    from_lane: mpsc::Receiver<ServerJsonRpcMessage>,
}

impl<T> Injected<T> {
    /// `inner`, with a channel for the lane: the sender goes to the lane.
    pub fn new(inner: T) -> (Self, mpsc::Sender<ServerJsonRpcMessage>) {
        let (tx, from_lane) = mpsc::channel(INJECTED_MAX);
        (Injected { inner, from_lane }, tx)
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Injected<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        // Both sides are channel reads, so the one not chosen loses nothing. The transport's
        // end is the connection's end, whatever the lane still holds.
        tokio::select! {
            biased;
            from_server = self.inner.receive() => from_server,
            Some(from_lane) = self.from_lane.recv() => Some(from_lane),
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}
