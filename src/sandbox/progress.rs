//! [`Progress`]: where a run says it is alive (waiting for the sandbox image, output so far).
//!
//! The bridge layer only reports; the MCP layer (`server/progress.rs`) turns reports into
//! `notifications/progress` for the request's progress token, at a bounded rate. Reporting never
//! blocks and never fails: when the forwarder lags, reports are dropped, and a run without a
//! progress token gets a sink that drops everything.

use tokio::sync::mpsc;

/// How many reports may wait for the forwarder before new ones are dropped.
const QUEUE: usize = 64;

/// A cheap, cloneable, lossy sink for one run's progress messages.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    tx: Option<mpsc::Sender<String>>,
}

impl Progress {
    /// A sink that drops every report (no progress token was sent).
    pub fn none() -> Self {
        Progress { tx: None }
    }

    /// A sink and the receiver its reports arrive on.
    pub fn channel() -> (Self, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Progress { tx: Some(tx) }, rx)
    }

    /// Whether anyone listens (a client sent a progress token).
    pub fn is_wanted(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Reports `message`; dropped when nobody listens or the forwarder lags.
    pub fn report(&self, message: impl Into<String>) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(message.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reports_arrive_in_order_and_a_full_queue_drops_instead_of_blocking() {
        let (p, mut rx) = Progress::channel();
        assert!(p.is_wanted());
        for i in 0..QUEUE + 10 {
            p.report(format!("m{i}"));
        }
        let mut got = Vec::new();
        while let Ok(m) = rx.try_recv() {
            got.push(m);
        }
        assert_eq!(got.len(), QUEUE);
        assert_eq!(got[0], "m0");
        drop(rx);
        assert!(!p.is_wanted());
        p.report("after close");
    }

    #[test]
    fn none_wants_nothing() {
        let p = Progress::none();
        assert!(!p.is_wanted());
        p.report("dropped");
    }
}
