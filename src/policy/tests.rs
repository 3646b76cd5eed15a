//! Tests of `policy`.

use serde_json::Map;

use super::*;
use crate::calls::{Caller, HostMethod, NoHostCalls};

#[tokio::test]
async fn call_and_run_lines_carry_the_token_of_a_run_with_a_caller_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("logs").join("audit.log");
    let settings = PolicySettings {
        audit_log: Some(path.clone()),
        ..PolicySettings::from_lookup(&|_| None).expect("defaults")
    };
    let audit = AuditLog::open(&settings, dir.path())
        .expect("open")
        .expect("a log");
    let policy = Policy::new(&settings, Arc::new(NoHostCalls), Some(audit.clone()));
    let caller = Caller {
        token: "ci-bot".into(),
        sandbox: "sb1".into(),
        identity: None,
    };
    let with = RunScope::new("1", None, None).with_caller(Some(Arc::new(caller)));
    for scope in [Arc::new(with), RunScope::plain("2")] {
        let ctx = CallContext {
            servers: Arc::from(vec!["s".to_string()]),
            deadline: tokio::time::Instant::now() + Duration::from_secs(60),
            run: scope.clone(),
        };
        let request = HostRequest::Backend(BackendCall::CallTool(ToolCall {
            server: "s".into(),
            tool: "t".into(),
            arguments: Map::new(),
        }));
        let admission = policy.before(&ctx, &request).await;
        let outcome = Ok(Value::Null);
        let answered = Answered {
            method: HostMethod::CallTool,
            outcome: &outcome,
            elapsed: Duration::from_millis(1),
            measured: None,
        };
        policy.after(&ctx, admission, &answered);
        policy.run_ended(
            &scope,
            &RunReport::failed(crate::report::RunStatus::Error, "x"),
        );
    }
    audit.close(Duration::from_secs(5)).await;
    let text = std::fs::read_to_string(&path).expect("the log");
    let tokens: Vec<Option<String>> = text
        .lines()
        .map(|l| serde_json::from_str::<crate::audit::Record>(l).expect("a line"))
        .map(|r| match r {
            crate::audit::Record::Call(c) => c.token,
            crate::audit::Record::Run(r) => r.token,
            crate::audit::Record::Rotated(_) | crate::audit::Record::Net(_) => None,
        })
        .collect();
    let ci = Some("ci-bot".to_string());
    assert_eq!(tokens, [ci.clone(), ci, None, None], "{text}");
}

#[tokio::test]
async fn refusals_past_the_bound_stop_the_run_and_repeats_fold_into_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    let settings = PolicySettings {
        audit_log: Some(path.clone()),
        run_max_refusals: 5,
        ..PolicySettings::from_lookup(&|_| None).expect("defaults")
    };
    let audit = AuditLog::open(&settings, dir.path())
        .expect("open")
        .expect("a log");
    let policy = Policy::new(&settings, Arc::new(NoHostCalls), Some(audit.clone()));
    let narrowing = crate::calls::Narrowing::parse(&["s.echo".into()]).expect("valid");
    let scope = Arc::new(RunScope::new("flood", Some(narrowing), None));
    let ctx = CallContext {
        servers: Arc::from(vec!["s".to_string()]),
        deadline: tokio::time::Instant::now() + Duration::from_secs(60),
        run: scope.clone(),
    };
    let mut messages = Vec::new();
    for _ in 0..10 {
        let request = HostRequest::Backend(BackendCall::CallTool(ToolCall {
            server: "s".into(),
            tool: "add".into(),
            arguments: Map::new(),
        }));
        let admission = policy.before(&ctx, &request).await;
        let error = admission.refusal.clone().expect("refused");
        messages.push(error.message.clone());
        let outcome = Err(error);
        let answered = Answered {
            method: HostMethod::CallTool,
            outcome: &outcome,
            elapsed: Duration::from_millis(1),
            measured: None,
        };
        policy.after(&ctx, admission, &answered);
        assert_eq!(scope.stopped.is_cancelled(), messages.len() > 5);
    }
    assert!(!messages[4].contains("stopped"), "{}", messages[4]);
    assert!(
        messages[5].contains("this run is stopped") && messages[5].contains("RUN_MAX_REFUSALS"),
        "{}",
        messages[5]
    );
    assert!(messages[6].contains("being stopped"), "{}", messages[6]);
    let reason = scope.stop_reason().expect("a reason");
    assert!(reason.contains("MCP_BRIDGE_RUN_MAX_REFUSALS=5"), "{reason}");
    policy.run_ended(
        &scope,
        &RunReport::failed(crate::report::RunStatus::Error, "x"),
    );
    audit.close(Duration::from_secs(5)).await;
    let text = std::fs::read_to_string(&path).expect("the log");
    let lines: Vec<crate::audit::Record> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a line"))
        .collect();
    let calls: Vec<(String, u64)> = lines
        .iter()
        .filter_map(|r| match r {
            crate::audit::Record::Call(c) => Some((c.decision.clone(), c.count)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [("deny".to_string(), 6), ("limit".to_string(), 4)],
        "{text}"
    );
    assert!(
        matches!(lines.last(), Some(crate::audit::Record::Run(r)) if r.refused == 10),
        "{text}"
    );
}
