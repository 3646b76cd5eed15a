//! Which bridge owns a container, and removal of containers whose bridge is gone.
//!
//! Every sandbox carries labels naming its bridge process (host name, pid and the pid's start
//! time, so a recycled pid is not mistaken for a live bridge). At start a bridge removes the
//! labelled containers of dead bridges on the same host and never touches anything else.

use std::collections::BTreeMap;

use super::{ContainerRuntime, RuntimeError};

/// Label present on every container this project creates.
pub const LABEL_MANAGED: &str = "mcp-code-bridge";
/// Label: host name of the owning bridge.
pub const LABEL_HOST: &str = "mcp-code-bridge.host";
/// Label: pid of the owning bridge.
pub const LABEL_PID: &str = "mcp-code-bridge.pid";
/// Label: start time of the owning bridge's pid (clock ticks since boot, Linux), or empty.
pub const LABEL_STARTED: &str = "mcp-code-bridge.pid-start";
/// Label: which of the bridge's client sandboxes this is (`serve --http`); absent under `run`.
pub const LABEL_SLOT: &str = "mcp-code-bridge.slot";

/// The identity of a bridge process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Process start time, when the OS tells it.
    pub started: Option<u64>,
    /// The client sandbox within the bridge (`serve --http` runs many); `None`: the bridge's
    /// one sandbox.
    pub slot: Option<String>,
}

impl Owner {
    /// The identity of this process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Owner {
            host: host_name(),
            pid,
            started: process_start(pid),
            slot: None,
        }
    }

    /// This identity, for the client sandbox `slot`.
    pub fn with_slot(mut self, slot: Option<&str>) -> Self {
        self.slot = slot.map(str::to_string);
        self
    }

    /// The labels that mark a container as owned by this bridge.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            (LABEL_MANAGED.to_string(), "1".to_string()),
            (LABEL_HOST.to_string(), self.host.clone()),
            (LABEL_PID.to_string(), self.pid.to_string()),
            (
                LABEL_STARTED.to_string(),
                self.started.map(|s| s.to_string()).unwrap_or_default(),
            ),
        ]);
        if let Some(slot) = &self.slot {
            labels.insert(LABEL_SLOT.to_string(), slot.clone());
        }
        labels
    }

    /// True when the labels name this very process (host, pid and start time) and, for a
    /// client sandbox's identity, that sandbox (one client's sweep never takes another's).
    pub fn is_mine(&self, labels: &std::collections::HashMap<String, String>) -> bool {
        (self.slot.is_none() || labels.get(LABEL_SLOT) == self.slot.as_ref())
            && labels.get(LABEL_HOST) == Some(&self.host)
            && labels.get(LABEL_PID) == Some(&self.pid.to_string())
            && labels.get(LABEL_STARTED).map(String::as_str)
                == Some(&self.started.map(|s| s.to_string()).unwrap_or_default())
    }

    /// True when the labels name a bridge on this host that is no longer running.
    pub fn is_dead_owner(&self, labels: &std::collections::HashMap<String, String>) -> bool {
        if labels.get(LABEL_HOST) != Some(&self.host) {
            return false; // another machine's bridge: not ours to judge
        }
        let Some(pid) = labels.get(LABEL_PID).and_then(|p| p.parse::<u32>().ok()) else {
            return false;
        };
        if pid == self.pid {
            // Our own pid: ours unless the start time says it was an earlier process.
            return labels.get(LABEL_STARTED).and_then(|s| s.parse().ok()) != self.started
                && self.started.is_some();
        }
        match process_stat(pid) {
            // A killed bridge stays a zombie until its parent reaps it: it is gone all the same.
            Some((state, _)) if state == 'Z' || state == 'X' => true,
            Some((_, now)) => labels
                .get(LABEL_STARTED)
                .and_then(|s| s.parse::<u64>().ok())
                .is_some_and(|then| then != now),
            None => !process_exists(pid),
        }
    }
}

/// How long one leftover removal may take (a container stuck in the engine must not block).
pub const REMOVE_TIMEOUT_SECS: u64 = 15;

/// Removes containers left by bridges that died on this host, concurrently, each bounded by
/// `REMOVE_TIMEOUT_SECS`. Returns how many were removed.
///
/// # Errors
/// Only listing failures; a container that fails to be removed is logged and skipped.
pub async fn remove_leftovers(
    runtime: &dyn ContainerRuntime,
    me: &Owner,
) -> Result<usize, RuntimeError> {
    let dead = list_where(runtime, |labels| me.is_dead_owner(labels)).await?;
    Ok(remove_each(runtime, &dead, "a bridge that is gone").await)
}

/// Ids of every container this very bridge process owns (orphans, once it has no session).
///
/// # Errors
/// When the engine cannot list containers.
pub async fn list_own(
    runtime: &dyn ContainerRuntime,
    me: &Owner,
) -> Result<Vec<String>, RuntimeError> {
    list_where(runtime, |labels| me.is_mine(labels)).await
}

/// Removes the containers `ids`, concurrently, each bounded by `REMOVE_TIMEOUT_SECS`; `whose`
/// names their owner in the log. Returns how many were removed.
///
/// A removal that failed is checked against the engine's list: a container already gone
/// (another bridge removing the same leftovers won the race) is no failure and is logged at
/// debug level; a warning means the container is really left (or the engine cannot tell).
pub async fn remove_each(runtime: &dyn ContainerRuntime, ids: &[String], whose: &str) -> usize {
    let removals = ids.iter().map(|id| async move {
        let limit = std::time::Duration::from_secs(REMOVE_TIMEOUT_SECS);
        let failure = match tokio::time::timeout(limit, runtime.remove(id)).await {
            Ok(Ok(())) => {
                tracing::info!(container = %id, "removed a sandbox left by {whose}");
                return None;
            }
            // Another bridge's removal of the same container is under way (docker: "removal
            // ... is already in progress"): it is being removed, nothing to warn of.
            Ok(Err(RuntimeError::Engine { status: 409, .. })) => {
                tracing::debug!(container = %id, "a sandbox left by {whose} is being removed by another bridge");
                return None;
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("no answer within {REMOVE_TIMEOUT_SECS} s"),
        };
        Some((id, failure))
    });
    let failed: Vec<(&String, String)> = futures::future::join_all(removals)
        .await
        .into_iter()
        .flatten()
        .collect();
    if !failed.is_empty() {
        let limit = std::time::Duration::from_secs(REMOVE_TIMEOUT_SECS);
        let present = match tokio::time::timeout(limit, runtime.list_managed()).await {
            Ok(Ok(list)) => Some(list.into_iter().map(|c| c.id).collect::<Vec<_>>()),
            _ => None,
        };
        for (id, cause) in &failed {
            if present.as_ref().is_some_and(|p| !p.contains(id)) {
                tracing::debug!(container = %id, %cause, "a sandbox left by {whose} was removed meanwhile (by another bridge)");
            } else {
                tracing::warn!(container = %id, %cause, "could not remove a sandbox left by {whose}");
            }
        }
    }
    ids.len() - failed.len()
}

async fn list_where(
    runtime: &dyn ContainerRuntime,
    pick: impl Fn(&std::collections::HashMap<String, String>) -> bool,
) -> Result<Vec<String>, RuntimeError> {
    Ok(runtime
        .list_managed()
        .await?
        .into_iter()
        .filter(|c| pick(&c.labels))
        .map(|c| c.id)
        .collect())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Start time of `pid` in clock ticks since boot (field 22 of `/proc/PID/stat`), Linux only.
fn process_start(pid: u32) -> Option<u64> {
    process_stat(pid).map(|(_, start)| start)
}

/// State letter (field 3) and start time (field 22) of `pid` from `/proc/PID/stat`.
fn process_stat(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

fn process_exists(pid: u32) -> bool {
    if std::path::Path::new("/proc/self").exists() {
        return std::path::Path::new(&format!("/proc/{pid}")).exists();
    }
    // Without /proc (macOS), ask `kill -0`; if we cannot tell, assume alive: never remove
    // a container whose owner might still be running.
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn labels(o: &Owner) -> HashMap<String, String> {
        o.labels().into_iter().collect()
    }

    #[test]
    fn live_and_dead_owners() {
        let me = Owner::current();
        assert!(me.started.is_some(), "Linux exposes process start times");
        assert!(!me.is_dead_owner(&labels(&me)), "we are alive");
        assert!(me.is_mine(&labels(&me)));
        let mut gone = me.clone();
        gone.pid = u32::MAX - 7; // no such pid
        assert!(me.is_dead_owner(&labels(&gone)));
        let mut recycled = me.clone();
        recycled.pid = 1; // pid 1 exists, but started at another time
        recycled.started = Some(u64::MAX);
        assert!(me.is_dead_owner(&labels(&recycled)));
        assert!(!me.is_mine(&labels(&recycled)) && !me.is_mine(&labels(&gone)));
        let mut elsewhere = gone.clone();
        elsewhere.host = "another-host".into();
        assert!(
            !me.is_dead_owner(&labels(&elsewhere)),
            "never judge other hosts"
        );
        assert!(
            !me.is_dead_owner(&HashMap::new()),
            "unlabelled is never ours"
        );
    }

    #[test]
    fn a_client_sandbox_sweeps_only_its_own() {
        let me = Owner::current();
        let a = me.clone().with_slot(Some("a"));
        let b = me.clone().with_slot(Some("b"));
        assert!(a.is_mine(&labels(&a)) && !a.is_mine(&labels(&b)));
        assert!(
            !a.is_mine(&labels(&me)),
            "the bridge's own sandbox is not a's"
        );
        assert!(
            me.is_mine(&labels(&a)),
            "the bridge's exit sweep takes them all"
        );
        assert!(
            !a.is_dead_owner(&labels(&b)),
            "a live bridge's sandboxes stay"
        );
    }

    /// An engine whose removals all fail (another bridge is removing the same containers, or
    /// the connection broke) and which still lists `listed`.
    struct Racing {
        listed: Vec<String>,
    }

    #[async_trait::async_trait]
    impl ContainerRuntime for Racing {
        fn engine(&self) -> &str {
            "racing"
        }
        async fn image_present(&self, _: &str) -> Result<bool, RuntimeError> {
            Ok(true)
        }
        async fn create(
            &self,
            _: &crate::container::spec::SandboxSpec,
        ) -> Result<String, RuntimeError> {
            unimplemented!("not used")
        }
        async fn attach(
            &self,
            _: &str,
        ) -> Result<crate::container::runtime::Attached, RuntimeError> {
            unimplemented!("not used")
        }
        async fn start(&self, _: &str) -> Result<(), RuntimeError> {
            unimplemented!("not used")
        }
        async fn wait(&self, _: &str) -> Result<i64, RuntimeError> {
            unimplemented!("not used")
        }
        async fn remove(&self, id: &str) -> Result<(), RuntimeError> {
            if id == "busy" {
                // docker, while another bridge removes the same container.
                return Err(RuntimeError::Engine {
                    engine: "docker".into(),
                    action: "remove the sandbox",
                    status: 409,
                    message: format!("removal of container {id} is already in progress"),
                });
            }
            Err(RuntimeError::NotFound(format!(
                "{id}: client error (Connect)"
            )))
        }
        async fn list_managed(
            &self,
        ) -> Result<Vec<crate::container::runtime::ManagedContainer>, RuntimeError> {
            Ok(self
                .listed
                .iter()
                .map(|id| crate::container::runtime::ManagedContainer {
                    id: id.clone(),
                    labels: HashMap::new(),
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn a_failed_removal_is_a_warning_only_when_the_container_is_still_there() {
        let (log, _guard) = crate::test_support::capture_logs();
        let engine = Racing {
            listed: vec!["left".into(), "busy".into()],
        };
        let ids = ["gone".to_string(), "left".to_string(), "busy".to_string()];
        assert_eq!(remove_each(&engine, &ids, "a bridge that is gone").await, 1);
        let text = log.text();
        let lines = |level: &str, id: &str| {
            text.lines()
                .filter(|l| l.contains(level) && l.contains(&format!("container={id}")))
                .count()
        };
        assert_eq!(lines("WARN", "left"), 1, "{text}");
        assert_eq!(lines("WARN", "gone"), 0, "removed meanwhile: {text}");
        assert_eq!(lines("DEBUG", "gone"), 1, "{text}");
        assert_eq!(
            lines("WARN", "busy"),
            0,
            "another bridge removes it: {text}"
        );
        assert_eq!(lines("DEBUG", "busy"), 1, "{text}");
    }

    #[test]
    fn a_zombie_bridge_is_dead() {
        let me = Owner::current();
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        // Not reaped yet: it stays a zombie until wait().
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while process_stat(pid).map(|(s, _)| s) != Some('Z') && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let zombie = Owner {
            pid,
            started: process_start(pid),
            ..me.clone()
        };
        assert!(
            me.is_dead_owner(&labels(&zombie)),
            "a zombie is not a live bridge"
        );
        child.wait().expect("reap");
    }
}
