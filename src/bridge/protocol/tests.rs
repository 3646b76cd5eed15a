//! Tests of `protocol.rs`: frames read and written as the entrypoint does.
use super::*;
use serde_json::json;

#[test]
fn parses_known_frames() {
    assert_eq!(
        parse_inbound(br#"{"t":"ready","v":1,"python":"3.11.2"}"#),
        Ok(Inbound::Ready(ReadyFrame {
            v: 1,
            python: Some("3.11.2".into()),
            ..Default::default()
        }))
    );
    let r = parse_inbound(br#"{"t":"result","id":7,"ok":false,"error":"Traceback","stdout":"x"}"#);
    assert_eq!(
        r,
        Ok(Inbound::Result(ResultFrame {
            id: 7,
            ok: false,
            error: Some("Traceback".into()),
            stdout: "x".into(),
            ..Default::default()
        }))
    );
    let r = parse_inbound(
        br#"{"t":"result","id":8,"ok":false,"error":"SystemExit: x","exit_code":1,"exit_message":"x"}"#,
    );
    assert_eq!(
        r,
        Ok(Inbound::Result(ResultFrame {
            id: 8,
            error: Some("SystemExit: x".into()),
            exit_code: Some(1),
            exit_message: Some("x".into()),
            ..Default::default()
        }))
    );
    assert_eq!(
        parse_inbound(br#"{"t":"started","id":4}"#),
        Ok(Inbound::Started { id: 4 })
    );
    assert_eq!(
        parse_inbound(br#"{"t":"file","exec":7,"n":1,"name":"a.csv","data":"eA==","end":true}"#),
        Ok(Inbound::File(FileChunk {
            exec: 7,
            n: 1,
            name: "a.csv".into(),
            data: "eA==".into(),
            end: true,
            ..Default::default()
        }))
    );
    let c = parse_inbound(br#"{"t":"call","id":3,"exec":7,"method":"ping","params":{"a":1}}"#);
    assert!(matches!(
        c,
        Ok(Inbound::Call(CallFrame { id: 3, exec: 7, .. }))
    ));
}

#[test]
fn the_tag_is_found_wherever_it_is() {
    for line in [
        &br#"{"t":"started","id":4}"#[..],
        br#"{"id":4,"t":"started"}"#,
        br#"{ "t" : "started", "id": 4 }"#,
        br#"{"t":"start\u0065d","id":4}"#,
        br#"{"t":"started","id":4,"extra":[1,{"t":"call"}]}"#,
    ] {
        assert_eq!(
            parse_inbound(line),
            Ok(Inbound::Started { id: 4 }),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    assert_eq!(canonical_tag(br#"{"t":"call","id":1}"#), Some("call"));
    assert_eq!(canonical_tag(br#"{"id":1,"t":"call"}"#), None);
    assert_eq!(canonical_tag(br#"{"t":"c\"all"}"#), None);
}

#[test]
fn rejects_malformed_frames() {
    for bad in [
        &b"not json"[..],
        br#"{"t":"nuke","id":1}"#,
        br#"{"id":1,"t":"nuke"}"#,
        br#"{"t":"call","id":1,"exec":1}"#,
        br#"{"t":"started","id":1"#,
        br#"{"t":"started"#,
        br#"{"t":"result","id":"seven","ok":true}"#,
        br#"{"t":"call","id":-1,"exec":1,"method":"x"}"#,
        b"{\"t\":\"ready\",\"v\":1,\"python\":\"\xff\xfe\"}",
        br#"{"id":1}"#,
        b"",
    ] {
        let err = parse_inbound(bad).expect_err("must be rejected");
        assert!(err.starts_with("malformed frame"), "{err}");
    }
}

#[test]
fn a_servers_tools_are_sent_once_then_left_out_while_unchanged() {
    let entries: Arc<RawValue> =
        Arc::from(RawValue::from_string(r#"[{"name":"echo"}]"#.to_string()).expect("json"));
    let loaded: LoadedTools = [("gh".to_string(), entries.clone())].into();
    let mut sent = HashMap::new();
    fn line(tools: &BTreeMap<&str, ExecTools<'_>>) -> Value {
        let frame = Outbound::Exec {
            id: 1,
            code: "",
            servers: &[],
            tools,
            output_limit: 1,
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
        line(&ExecTools::for_exec(&mut HashMap::new(), &loaded)),
        json!([{"name": "echo"}])
    );
    // A new tool list (another Arc) is sent again.
    let changed: LoadedTools = [(
        "gh".to_string(),
        Arc::from(RawValue::from_string(r#"[{"name":"echo"}]"#.to_string()).expect("json")),
    )]
    .into();
    assert_eq!(
        line(&ExecTools::for_exec(&mut sent, &changed)),
        json!([{"name": "echo"}])
    );
}

/// The quoted names in `HOST_METHODS = (...)` of `entrypoint/runtime.py`.
#[test]
fn outbound_lines_are_single_json_lines() {
    let tools = std::collections::BTreeMap::new();
    let line = Outbound::Exec {
        id: 1,
        code: "print('a\\nb')\nx=1",
        servers: &[],
        tools: &tools,
        output_limit: 10,
    }
    .to_line();
    assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
    assert!(line.ends_with(b"\n"));
    let v: Value = serde_json::from_slice(&line).expect("valid json");
    assert_eq!(v["t"], "exec");
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
}

#[test]
fn a_call_is_known_by_its_tag_and_its_id_read_alone() {
    for line in [
        &br#"{"t":"call","id":3,"exec":7,"method":"ping","params":[[0],[0]]}"#[..],
        br#"{"id":3,"params":{"t":"x"},"t":"call"}"#,
        br#"{"t":"c\u0061ll","id":3}"#,
    ] {
        assert!(is_call(line), "{}", String::from_utf8_lossy(line));
        assert_eq!(call_id(line), Some(3));
    }
    for line in [
        &br#"{"t":"result","id":3,"ok":true}"#[..],
        br#"{"params":{"t":"call"},"t":"ready"}"#,
        b"not json",
    ] {
        assert!(!is_call(line), "{}", String::from_utf8_lossy(line));
    }
    assert_eq!(call_id(br#"{"t":"call","id":"x"}"#), None);
    assert!(parse_call(br#"{"t":"started","id":1}"#).is_err());
}
