//! The policy's cost (issue 24, point 5): per proxied call, with no policy, with a 100-rule
//! policy, and with the audit log on.
//!
//! Two measurements:
//! - in process: the dispatcher's `handle` for one `call_tool` request, against a backend that
//!   answers at once, with no hook, with the policy hook and no rules, and with the policy hook
//!   and 100 rules (50 `allowedTools`, 50 `disabledTools`; the tool matches the last allowed
//!   pattern, so every rule is tried): the hook's own cost, without the noise of a container;
//! - end to end: three bridges (no policy; 100 rules plus limits set high enough never to
//!   refuse; the audit log on) each run blocks of sequential proxied echo calls, alternating, so
//!   all three see the same phases of a noisy machine.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};
use tokio::time::Instant as TokioInstant;

use mcp_code_bridge::calls::{
    BackendCall, CallContext, CallError, Dispatcher, HostCalls, LoadError, LoadedTools, RunScope,
    ToolFacts,
};
use mcp_code_bridge::config::{Pattern, PolicySettings, ServerPolicy, ToolRules};
use mcp_code_bridge::policy::Policy;

use crate::client::{Bridge, Workdir, STUB_BIN};
use crate::stats::{summarize, Table};

/// The 100 rules: 50 allowed patterns (`echo` last), 50 disabled ones matching nothing called.
fn rules() -> (Vec<String>, Vec<String>) {
    let mut allowed: Vec<String> = (0..49).map(|i| format!("get_{i}_*")).collect();
    allowed.push("ec*o".into());
    let disabled = (0..50).map(|i| format!("*_secret_{i}*")).collect();
    (allowed, disabled)
}

/// A backend answering every call at once, knowing the stub's policy.
struct Instant0 {
    policy: Option<Arc<ServerPolicy>>,
}

#[async_trait::async_trait]
impl HostCalls for Instant0 {
    async fn load(
        &self,
        _: &[String],
        _: &RunScope,
        _: TokioInstant,
    ) -> Result<LoadedTools, LoadError> {
        Ok(LoadedTools::default())
    }

    async fn call(&self, _: &CallContext, _: BackendCall) -> Result<Value, CallError> {
        Ok(json!({"content": [{"type": "text", "text": "x"}]}))
    }

    fn facts(
        &self,
        _server: &str,
        _tool: &str,
        _caller: Option<&mcp_code_bridge::calls::Caller>,
    ) -> ToolFacts {
        ToolFacts {
            policy: self.policy.clone(),
            file: Arc::from("/bench/servers.json"),
            destructive: false,
            read_only: false,
            hints_known: true,
            sign_in: None,
            changed: None,
            creds: None,
        }
    }
}

async fn per_call_ns(d: &Dispatcher, n: usize) -> Vec<f64> {
    let ctx = CallContext {
        servers: Arc::from(vec!["stub".to_string()]),
        deadline: TokioInstant::now() + std::time::Duration::from_secs(3600),
        run: RunScope::plain("bench"),
    };
    let params = json!({"server": "stub", "tool": "echo", "args": {"text": "x"}});
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let p = params.clone();
        let s = Instant::now();
        let r = d.handle(&ctx, "call_tool", p).await;
        out.push(s.elapsed().as_nanos() as f64);
        assert!(r.is_ok(), "{r:?}");
    }
    out
}

async fn in_process(t: &mut Table, quick: bool) {
    {
        let n = if quick { 20_000 } else { 200_000 };
        let (allowed, disabled) = rules();
        let hundred = ServerPolicy {
            tools: ToolRules {
                allowed: Some(allowed.iter().map(Pattern::new).collect()),
                disabled: disabled.iter().map(Pattern::new).collect(),
                ..ToolRules::default()
            },
            ..ServerPolicy::default()
        };
        let settings = PolicySettings::from_lookup(&|_| None).expect("defaults");
        let plain: Arc<dyn HostCalls> = Arc::new(Instant0 { policy: None });
        let empty: Arc<dyn HostCalls> = Arc::new(Instant0 {
            policy: Some(Arc::default()),
        });
        let full: Arc<dyn HostCalls> = Arc::new(Instant0 {
            policy: Some(Arc::new(hundred)),
        });
        let variants = [
            ("no hook", Dispatcher::new(plain.clone())),
            (
                "policy hook, no rules",
                Dispatcher::new(empty.clone())
                    .with_hook(Arc::new(Policy::new(&settings, empty, None))),
            ),
            (
                "policy hook, 100 rules",
                Dispatcher::new(full.clone())
                    .with_hook(Arc::new(Policy::new(&settings, full, None))),
            ),
        ];
        // Warm up, then interleave the variants in blocks.
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
        for (_, d) in &variants {
            per_call_ns(d, 2000).await;
        }
        for _ in 0..10 {
            for (i, (_, d)) in variants.iter().enumerate() {
                samples[i].extend(per_call_ns(d, n / 10).await);
            }
        }
        let base = summarize(&samples[0]).median;
        for ((name, _), s) in variants.iter().zip(&samples) {
            let s = summarize(s);
            let note = format!("+{:.0} ns over no hook", s.median - base);
            t.add(
                &format!("in process: dispatcher call_tool, {name}"),
                "ns",
                s,
                note,
            );
        }
        let cost = (summarize(&samples[2]).median - base) / 1e3;
        t.single(
            "in process: 100-rule policy's cost per call",
            "µs",
            cost,
            "target < 5 µs",
        );
    }
}

const SEQ: &str = r#"
import json, time
seq = []
for _ in range(__N__):
    t = time.perf_counter_ns(); await mcp_stub.echo(text='x'); seq.append(time.perf_counter_ns() - t)
print('BENCH ' + json.dumps({'seq_ns': seq}))
"#;

/// The policy scenario: in process, then end to end.
pub async fn policy(t: &mut Table, quick: bool) {
    in_process(t, quick).await;
    let (allowed, disabled) = rules();
    let plain = {
        let mut m = Map::new();
        m.insert("stub".into(), json!({"command": STUB_BIN}));
        Workdir::with_servers(m)
    };
    let ruled = {
        let mut m = Map::new();
        m.insert(
            "stub".into(),
            json!({
                "command": STUB_BIN,
                "allowedTools": allowed,
                "disabledTools": disabled,
                "callsPerMinute": 1_000_000,
                "maxCallsPerRun": 1_000_000_000u64,
            }),
        );
        Workdir::with_servers(m)
    };
    let audit_path = plain.path().join("audit.jsonl");
    let audit = audit_path.display().to_string();
    let bridges = [
        ("no policy", Bridge::start(&plain, &[]).await),
        ("100-rule policy", Bridge::start(&ruled, &[]).await),
        (
            "audit log on",
            Bridge::start(&plain, &[("MCP_BRIDGE_AUDIT_LOG", audit.as_str())]).await,
        ),
    ];
    let (n, blocks) = if quick { (600, 6) } else { (3000, 10) };
    let block = SEQ.replace("__N__", &(n / blocks).to_string());
    for (_, b) in &bridges {
        b.measure(&SEQ.replace("__N__", "100"), &["stub"]).await;
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); bridges.len()];
    for round in 0..blocks {
        for k in 0..bridges.len() {
            // Rotate who goes first, so no bridge always follows the same one.
            let i = (k + round) % bridges.len();
            let m = bridges[i].1.measure(&block, &["stub"]).await;
            let us = m["seq_ns"]
                .as_array()
                .expect("array")
                .iter()
                .map(|x| x.as_f64().unwrap_or(0.0) / 1e3);
            samples[i].extend(us);
        }
    }
    let base = summarize(&samples[0]).median;
    for ((name, _), s) in bridges.iter().zip(&samples) {
        let s = summarize(s);
        let note = format!("{:+.1} µs vs no policy", s.median - base);
        t.add(
            &format!("proxied echo, sequential, {name}"),
            "µs/call",
            s,
            note,
        );
    }
    let lines = std::fs::read_to_string(&audit_path)
        .map(|s| s.lines().count())
        .unwrap_or(0);
    t.single("audit lines written", "lines", lines as f64, "");
    for (_, b) in bridges {
        b.stop().await;
    }
}
