//! Frames to the sandbox: [`Outbound`], each written as one JSON line, and the parts of the
//! `boot` and `exec` frames (the socket channel offered, the loaded servers' tools).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::calls::{ErrorKind, LoadedTools};

/// A frame to the sandbox.
#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Outbound<'a> {
    /// First frame: the entrypoint's sources.
    Boot {
        /// Protocol version.
        v: u32,
        /// Package name to install the files under.
        package: &'a str,
        /// File name → source.
        files: &'a BTreeMap<&'static str, &'static str>,
        /// The socket frame channel to switch to, if offered.
        #[serde(skip_serializing_if = "Option::is_none")]
        channel: Option<ChannelOffer<'a>>,
    },
    /// Run code.
    Exec {
        /// Exec id.
        id: u64,
        /// Python source.
        code: &'a str,
        /// Servers loaded for this exec, or `true`: the same list as the last exec frame.
        servers: ExecServers<'a>,
        /// The tool entries of the loaded servers whose tool list this sandbox has not been
        /// sent yet (new, or changed since); the others keep what they were last sent.
        tools: &'a BTreeMap<&'a str, ExecTools<'a>>,
        /// Characters kept per output stream.
        output_limit: usize,
        /// The code's language when it is not Python (`typescript`); absent for Python.
        #[serde(skip_serializing_if = "Option::is_none")]
        language: Option<&'static str>,
    },
    /// Interrupt exec `id` if it still runs.
    Interrupt {
        /// Exec id.
        id: u64,
    },
    /// Asks for exec `id`'s output so far (answered with `output`).
    Progress {
        /// Exec id.
        id: u64,
        /// Characters of each stream's end to send.
        tail: usize,
    },
    /// Asks for a snapshot of the namespace (answered with `snapshot` chunks, then `saved`).
    SaveNamespace {
        /// The save's id.
        id: u64,
        /// Bytes the snapshot may have.
        limit: usize,
        /// Bytes per `snapshot` frame.
        chunk: usize,
    },
    /// A chunk of a snapshot to restore; the last frame has `done` (answered with `restored`).
    RestoreNamespace {
        /// The restore's id.
        id: u64,
        /// Base64 of the chunk's bytes.
        data: &'a str,
        /// True on the last frame.
        done: bool,
    },
    /// Import these modules ahead, between execs, before the next one (answered with
    /// `preloaded`); sent only to a sandbox started ahead of any run (`MCP_BRIDGE_PRELOAD`).
    Preload {
        /// Module names, each a dotted Python identifier.
        modules: &'a [String],
    },
    /// Answer to a `call`.
    Reply {
        /// The call's id.
        id: u64,
        /// Whether the call succeeded.
        ok: bool,
        /// The result (null on error).
        value: Value,
        /// The error message when `ok` is false.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The error class when `ok` is false.
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<ErrorKind>,
    },
    /// Exit cleanly.
    Shutdown,
}

impl Outbound<'_> {
    /// Serializes the frame as one `\n`-terminated JSON line.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line =
            serde_json::to_vec(self).expect("frames always serialize: plain data, string keys");
        line.push(b'\n');
        line
    }
}

/// A loaded server's tools in an exec frame.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ExecTools<'a> {
    /// The tool entries (a JSON array, see `calls::LoadedTools`).
    Listed(&'a RawValue),
}

/// An exec frame's `servers`: the list, or `true` for the same list as the last exec frame
/// (the entrypoint keeps it), so a run naming the servers of the run before sends no name.
#[derive(Debug)]
pub enum ExecServers<'a> {
    /// The servers, as the run named them.
    Listed(&'a [String]),
    /// The same list as the last exec frame's.
    Same,
}

impl Serialize for ExecServers<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ExecServers::Listed(list) => list.serialize(s),
            ExecServers::Same => s.serialize_bool(true),
        }
    }
}

impl<'a> ExecServers<'a> {
    /// The exec frame's `servers` for `servers`: [`ExecServers::Same`] when `sent` (this
    /// sandbox's, updated here) holds the very list of its last exec frame.
    pub fn for_exec(sent: &mut SentTools, servers: &'a Arc<[String]>) -> Self {
        if sent.servers.as_deref() == Some(&**servers) {
            return ExecServers::Same;
        }
        sent.servers = Some(servers.clone());
        ExecServers::Listed(servers)
    }
}

/// What a sandbox was sent of the loaded servers' tools so far, and its last exec frame's
/// servers (one per session; a new sandbox starts with none).
#[derive(Debug, Default)]
pub struct SentTools {
    /// Per server, the entries last sent.
    by_server: HashMap<String, Arc<RawValue>>,
    /// The whole `LoadedTools` of the last exec: the same one again has nothing new.
    last: Option<LoadedTools>,
    /// The `servers` of the last exec frame.
    servers: Option<Arc<[String]>>,
}

impl<'a> ExecTools<'a> {
    /// The exec frame's `tools` for `loaded`: the entries of each server whose tool list `sent`
    /// (what this sandbox was sent so far, updated here) does not hold yet. A server it holds
    /// is left out, so an exec naming many servers costs what one naming few does; the
    /// sandbox keeps what it was sent. The very `LoadedTools` of the last exec (the backend
    /// hands it again while nothing changed) is not looked through at all. A new sandbox
    /// starts with an empty `sent`, so it gets every entry.
    pub fn for_exec(
        sent: &mut SentTools,
        loaded: &'a LoadedTools,
    ) -> BTreeMap<&'a str, ExecTools<'a>> {
        if sent.last.as_ref().is_some_and(|l| Arc::ptr_eq(l, loaded)) {
            return BTreeMap::new();
        }
        sent.last = Some(loaded.clone());
        loaded
            .iter()
            .filter(|(server, entries)| {
                let same = sent
                    .by_server
                    .get(*server)
                    .is_some_and(|s| Arc::ptr_eq(s, entries));
                if !same {
                    sent.by_server.insert((*server).clone(), (*entries).clone());
                }
                !same
            })
            .map(|(server, entries)| (server.as_str(), ExecTools::Listed(entries)))
            .collect()
    }
}

/// The socket channel named in the boot frame.
#[derive(Debug, Serialize)]
pub struct ChannelOffer<'a> {
    /// Socket path inside the sandbox.
    pub path: &'a str,
    /// Secret to send in the hello frame.
    pub token: &'a str,
    /// The egress socket (`MCP_BRIDGE_NETWORK_ALLOW`), when the sandbox has a way out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressOffer<'a>>,
}

/// The egress socket named in the boot frame: the relay connects to it before confinement.
#[derive(Debug, Serialize)]
pub struct EgressOffer<'a> {
    /// Socket path inside the sandbox.
    pub path: &'a str,
    /// Secret the relay sends first.
    pub token: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_servers_tools_are_sent_once_then_left_out_while_unchanged() {
        let entries: Arc<RawValue> =
            Arc::from(RawValue::from_string(r#"[{"name":"echo"}]"#.to_string()).expect("json"));
        let loaded: LoadedTools = Arc::new([("gh".to_string(), entries.clone())].into());
        let mut sent = SentTools::default();
        fn line(tools: &BTreeMap<&str, ExecTools<'_>>) -> Value {
            let frame = Outbound::Exec {
                id: 1,
                code: "",
                servers: ExecServers::Listed(&[]),
                tools,
                output_limit: 1,
                language: None,
            };
            let v: Value = serde_json::from_slice(&frame.to_line()).expect("json");
            v["tools"]["gh"].clone()
        }
        assert_eq!(
            line(&ExecTools::for_exec(&mut sent, &loaded)),
            json!([{"name": "echo"}])
        );
        assert_eq!(line(&ExecTools::for_exec(&mut sent, &loaded)), Value::Null);
        // A sandbox after a restart (an empty `sent`) gets the entries again.
        assert_eq!(
            line(&ExecTools::for_exec(&mut SentTools::default(), &loaded)),
            json!([{"name": "echo"}])
        );
        // A new tool list (another Arc) is sent again.
        let changed: LoadedTools = Arc::new(
            [(
                "gh".to_string(),
                Arc::from(RawValue::from_string(r#"[{"name":"echo"}]"#.to_string()).expect("json")),
            )]
            .into(),
        );
        assert_eq!(
            line(&ExecTools::for_exec(&mut sent, &changed)),
            json!([{"name": "echo"}])
        );
    }

    #[test]
    fn the_servers_of_the_last_exec_frame_are_sent_as_true() {
        let mut sent = SentTools::default();
        let tools = BTreeMap::new();
        let mut line = |servers: &[&str]| {
            let servers: Arc<[String]> = servers.iter().map(|s| s.to_string()).collect();
            let frame = Outbound::Exec {
                id: 1,
                code: "",
                servers: ExecServers::for_exec(&mut sent, &servers),
                tools: &tools,
                output_limit: 1,
                language: None,
            };
            let v: Value = serde_json::from_slice(&frame.to_line()).expect("json");
            v["servers"].clone()
        };
        assert_eq!(line(&["a", "b"]), json!(["a", "b"]));
        assert_eq!(line(&["a", "b"]), json!(true));
        assert_eq!(line(&["b", "a"]), json!(["b", "a"]));
        assert_eq!(line(&[]), json!([]));
        assert_eq!(line(&[]), json!(true));
        assert_eq!(line(&["a", "b"]), json!(["a", "b"]));
        // A new sandbox gets the list.
        let servers: Arc<[String]> = Arc::from(vec!["a".to_string(), "b".to_string()]);
        assert!(matches!(
            ExecServers::for_exec(&mut SentTools::default(), &servers),
            ExecServers::Listed(_)
        ));
    }

    #[test]
    fn outbound_lines_are_single_json_lines() {
        let tools = std::collections::BTreeMap::new();
        let line = Outbound::Exec {
            id: 1,
            code: "print('a\\nb')\nx=1",
            servers: ExecServers::Listed(&[]),
            tools: &tools,
            output_limit: 10,
            language: None,
        }
        .to_line();
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        assert!(line.ends_with(b"\n"));
        let v: Value = serde_json::from_slice(&line).expect("valid json");
        assert_eq!(v["t"], "exec");
        assert!(
            v.get("language").is_none(),
            "python frames carry no language"
        );
        let ts = Outbound::Exec {
            id: 2,
            code: "console.log(1)",
            servers: ExecServers::Same,
            tools: &tools,
            output_limit: 10,
            language: Some("typescript"),
        }
        .to_line();
        let ts: Value = serde_json::from_slice(&ts).expect("valid json");
        assert_eq!(ts["language"], "typescript");
        let reply = Outbound::Reply {
            id: 2,
            ok: false,
            value: Value::Null,
            error: Some("no".into()),
            kind: Some(ErrorKind::Tool),
        }
        .to_line();
        let v: Value = serde_json::from_slice(&reply).expect("valid json");
        assert_eq!(v["error"], "no");
        assert_eq!(v["kind"], "tool");
        assert_eq!(
            String::from_utf8_lossy(&Outbound::Shutdown.to_line()),
            "{\"t\":\"shutdown\"}\n"
        );
        let modules = ["pandas".to_string(), "matplotlib.pyplot".to_string()];
        assert_eq!(
            String::from_utf8_lossy(&Outbound::Preload { modules: &modules }.to_line()),
            "{\"t\":\"preload\",\"modules\":[\"pandas\",\"matplotlib.pyplot\"]}\n"
        );
    }
}
