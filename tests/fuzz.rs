//! Property tests ("fuzzing" with proptest, bounded: `PROPTEST_CASES`, default 256 per test) of
//! everything that parses bytes from the sandbox: the frame decoder, the inbound frame parser and
//! the request dispatcher with its host methods. None may panic, grow without bound, or lose a frame.

use std::sync::Arc;
use std::time::Duration;

use mcp_code_bridge::calls::{CallContext, Dispatcher};
use mcp_code_bridge::config::Servers;
use mcp_code_bridge::lines::{FrameEvent, LineAssembler};
use mcp_code_bridge::sandbox::json_cost;
use mcp_code_bridge::sandbox::parse_inbound;
use mcp_code_bridge::upstream::{UpstreamHostCalls, UpstreamPool};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Splits `data` at `cuts` (offsets, any order, any value) into chunks.
fn chunks(data: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    at.push(0);
    at.push(data.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| data[w[0]..w[1]].to_vec()).collect()
}

/// What the assembler must produce: every `\n`-terminated line, too-long ones as `TooLong`
/// (reported as soon as they pass the limit, so an unterminated too-long tail is reported too).
fn reference(data: &[u8], max: usize) -> Vec<Result<Vec<u8>, ()>> {
    let mut out = Vec::new();
    let mut parts: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    let tail = parts.pop().unwrap_or_default(); // unterminated: not a frame (yet)
    for line in parts {
        out.push(if line.len() <= max {
            Ok(line.to_vec())
        } else {
            Err(())
        });
    }
    if tail.len() > max {
        out.push(Err(()));
    }
    out
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,8}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Frames shaped like the real ones, with arbitrary field values.
fn frame_like() -> impl Strategy<Value = Value> {
    let t = prop_oneof![
        Just("ready".to_string()),
        Just("started".to_string()),
        Just("result".to_string()),
        Just("call".to_string()),
        Just("file".to_string()),
        Just("output".to_string()),
        Just("snapshot".to_string()),
        Just("saved".to_string()),
        Just("restored".to_string()),
        Just("preloaded".to_string()),
        Just("exec".to_string()),
        Just("reply".to_string()),
        ".{0,6}"
    ];
    (
        t,
        prop::collection::btree_map("[a-z_]{1,12}", json_value(), 0..8),
    )
        .prop_map(|(t, fields)| {
            let mut m: serde_json::Map<String, Value> = fields.into_iter().collect();
            m.insert("t".into(), json!(t));
            Value::Object(m)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_frame_decoder_matches_the_reference_for_any_chunking(
        data in prop::collection::vec(prop_oneof![1 => Just(b'\n'), 12 => any::<u8>()], 0..2000),
        cuts in prop::collection::vec(any::<usize>(), 0..20),
        max in 1usize..300,
    ) {
        let mut asm = LineAssembler::new(max);
        let mut got = Vec::new();
        let mut events = Vec::new();
        for chunk in chunks(&data, &cuts) {
            asm.push(&chunk, &mut events);
            // Memory stays bounded by the limit whatever arrives.
            prop_assert!(asm.pending() <= max + 1, "pending {} > max {}", asm.pending(), max);
            for ev in events.drain(..) {
                got.push(match ev {
                    FrameEvent::Line(l) => Ok(l.to_vec()),
                    FrameEvent::TooLong { .. } => Err(()),
                });
            }
        }
        prop_assert_eq!(got, reference(&data, max));
    }

    #[test]
    fn the_json_cost_scan_takes_any_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let c = json_cost::scan(&data);
        prop_assert_eq!(c.text, data.len());
        prop_assert!(c.held() >= c.parsed() && c.parsed() >= data.len());
    }

    /// The scan counts exactly the items, entries, containers and strings a value has.
    #[test]
    fn the_json_cost_scan_counts_what_a_value_holds(value in json_value(), pretty in any::<bool>()) {
        fn count(v: &Value, c: &mut json_cost::JsonCost) {
            match v {
                Value::String(_) => c.strings += 1,
                Value::Array(items) => {
                    c.arrays += usize::from(!items.is_empty());
                    c.elements += items.len();
                    items.iter().for_each(|i| count(i, c));
                }
                Value::Object(map) => {
                    c.objects += usize::from(!map.is_empty());
                    c.entries += map.len();
                    c.strings += map.len();
                    map.values().for_each(|i| count(i, c));
                }
                _ => {}
            }
        }
        let text = if pretty {
            serde_json::to_vec_pretty(&value).expect("json")
        } else {
            serde_json::to_vec(&value).expect("json")
        };
        let mut want = json_cost::JsonCost { text: text.len(), ..Default::default() };
        count(&value, &mut want);
        let got = json_cost::scan(&text);
        prop_assert_eq!(json_cost::JsonCost { escaped: 0, ..got }, want);
    }

    #[test]
    fn the_inbound_parser_never_panics_on_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_inbound(&data);
    }

    #[test]
    fn the_inbound_parser_never_panics_on_frame_like_json(frame in frame_like()) {
        let line = serde_json::to_vec(&frame).expect("json");
        let _ = parse_inbound(&line);
    }

    /// A malformed frame's message goes to logs and the client: bounded and escaped whatever the
    /// frame holds (serde quotes a wrong-typed string or an unknown tag whole).
    #[test]
    fn a_malformed_frame_message_is_short_and_escaped(
        frame in frame_like(),
        junk in "[\\x00-\\x1f\u{202e}\u{200b}a-z]{0,64}",
        repeat in 1usize..5000,
    ) {
        let mut frame = frame;
        frame["t"] = json!(junk.repeat(repeat));
        let line = serde_json::to_vec(&frame).expect("json");
        if let Err(err) = parse_inbound(&line) {
            let msg = err.to_string();
            prop_assert!(msg.len() < 2000, "{} bytes", msg.len());
            prop_assert!(!msg.chars().any(mcp_code_bridge::shown::is_unsafe), "{msg:?}");
        }
    }
}

fn dispatcher() -> (Dispatcher, tempfile::TempDir) {
    let d = tempfile::tempdir().expect("tempdir");
    let servers = Arc::new(Servers::default());
    let pool = Arc::new(UpstreamPool::new(servers, d.path()));
    (Dispatcher::new(Arc::new(UpstreamHostCalls::new(pool))), d)
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_dispatcher_answers_any_request_with_a_value_or_an_error(
        method in prop_oneof![
            Just("ping".to_string()), Just("call_tool".to_string()), Just("list_servers".to_string()), Just("discovered_servers".to_string()),
            Just("list_tools".to_string()), Just("query_tool_docs".to_string()), Just("search_tool_docs".to_string()),
            Just("describe_server".to_string()), Just("list_loaded_server_metadata".to_string()),
            Just("capability_summary".to_string()), ".{0,12}"
        ],
        params in json_value(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let (d, _dir) = dispatcher();
        let ctx = CallContext {
            servers: Arc::from(vec!["ghost".to_string()]),
            deadline: tokio::time::Instant::now() + Duration::from_secs(5),
            run: mcp_code_bridge::calls::RunScope::plain("fuzz"),
        };
        let outcome = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), d.handle(&ctx, &method, params)).await
        });
        let outcome = outcome.expect("answered in time");
        if let Err(e) = outcome {
            prop_assert!(!e.message.is_empty());
            prop_assert!(!e.kind.as_str().is_empty());
        }
    }
}
