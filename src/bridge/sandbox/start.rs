//! Starting a sandbox on a connected engine: its name and spec, the socket frame channel (with
//! stdio as the fallback when the engine refuses the mount), and the session's limits.

use super::*;

impl Actor {
    /// Starts a session on the connected engine (`self.conn` must be set).
    pub(super) async fn start_session(&mut self) -> Result<(), BridgeError> {
        let runtime = self
            .conn
            .as_ref()
            .map(|c| c.runtime.clone())
            .expect("start_session is called with a connection");
        self.generation += 1;
        let name = format!(
            "mcp-code-bridge-{}-{}-{}",
            self.owner.pid,
            self.generation,
            nonce()
        );
        let mut spec = SandboxSpec::new(
            &self.settings,
            name,
            entrypoint::command(),
            self.owner.labels(),
        );
        let channel = self.channel_for(runtime.as_ref());
        spec.channel_dir = channel
            .as_ref()
            .map(|(l, inside)| (l.host_dir().to_path_buf(), inside.clone()));
        let expected = (runtime.isolates() && !self.settings.allow_weak_sandbox)
            .then(|| Expected::from_settings(&self.settings));
        let limits = SessionLimits {
            max_frame: self.settings.max_frame,
            memory_bytes: self.settings.memory_bytes,
            max_pending_results: self.settings.max_pending_results,
        };
        let mut started = Session::start(
            runtime.clone(),
            &spec,
            self.dispatcher.clone(),
            limits,
            channel.map(|(l, _)| l),
            expected.as_ref(),
        )
        .await;
        if spec.channel_dir.is_some()
            && matches!(
                started,
                Err(BridgeError::Runtime(RuntimeError::Engine { .. }))
            )
        {
            // E.g. an engine that cannot see this machine's files: go on without the socket.
            tracing::info!("the engine refused the frame-channel mount; frames use stdio");
            self.channel_refused = true;
            spec.channel_dir = None;
            started = Session::start(
                runtime,
                &spec,
                self.dispatcher.clone(),
                limits,
                None,
                expected.as_ref(),
            )
            .await;
        }
        match started {
            Ok(s) => {
                tracing::info!(container = %s.id(), "sandbox started");
                self.session = Some(s);
                Ok(())
            }
            Err(err) => {
                if matches!(&err, BridgeError::Runtime(e) if e.is_transport())
                    || matches!(err, BridgeError::EngineLost { .. })
                {
                    // The engine connection itself may be broken: reconnect next time.
                    self.drop_conn().await;
                }
                Err(err)
            }
        }
    }

    /// A socket channel for the next sandbox and where it appears inside, when the settings
    /// and the engine allow one.
    fn channel_for(&self, runtime: &dyn ContainerRuntime) -> Option<(ChannelListener, String)> {
        if self.settings.channel == ChannelMode::Stdio || self.channel_refused {
            return None;
        }
        let base = private_dir(&self.settings);
        ChannelListener::remove_stale(&base);
        // Unique per process, even with several bridges in one process (tests).
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("ch-{}-{n}", self.owner.pid);
        match ChannelListener::bind(&base, &name) {
            Ok(listener) => {
                let inside = runtime.channel_target(listener.host_dir())?;
                Some((listener, inside))
            }
            Err(err) => {
                tracing::warn!(cause = %err, dir = %base.display(), "no frame channel socket; frames use stdio");
                None
            }
        }
    }
}

fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{t:08x}")
}
