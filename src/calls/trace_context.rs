//! [`TraceContext`]: the W3C Trace Context a `run_python` request carried in its `_meta`
//! (`traceparent`, and `tracestate` and `baggage` with it; MCP's SEP-414 names the keys),
//! checked and passed on in the `_meta` of every tool call the run makes downstream, so a
//! tracing backend joins the downstream servers' spans to the client's trace. A malformed or
//! oversized value is dropped, never passed on. A leaf.

use serde_json::{Map, Value};

/// The longest `tracestate` or `baggage` passed on (the W3C limits are 512 and 8192 bytes).
const MAX_STATE: usize = 512;
/// The longest `baggage` passed on.
const MAX_BAGGAGE: usize = 8192;

/// A request's trace context, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
    baggage: Option<String>,
}

impl TraceContext {
    /// The context in a request's `_meta`; `None` without a well-formed `traceparent`
    /// (`version-traceid-parentid-flags`, lower-case hex, ids not all zero, version not `ff`).
    pub fn from_meta(meta: &Map<String, Value>) -> Option<TraceContext> {
        let traceparent = meta.get("traceparent")?.as_str()?;
        if !well_formed(traceparent) {
            return None;
        }
        let text = |key: &str, max: usize| {
            meta.get(key)
                .and_then(Value::as_str)
                .filter(|s| s.len() <= max && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
                .map(str::to_string)
        };
        Some(TraceContext {
            traceparent: traceparent.to_string(),
            tracestate: text("tracestate", MAX_STATE),
            baggage: text("baggage", MAX_BAGGAGE),
        })
    }

    /// The `_meta` entries to send downstream.
    pub fn to_meta(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("traceparent".into(), self.traceparent.clone().into());
        if let Some(s) = &self.tracestate {
            m.insert("tracestate".into(), s.clone().into());
        }
        if let Some(b) = &self.baggage {
            m.insert("baggage".into(), b.clone().into());
        }
        m
    }
}

/// `00-<32 hex>-<16 hex>-<2 hex>` (any version but `ff`; a later version may append fields,
/// which are not passed on then: only the four).
fn well_formed(tp: &str) -> bool {
    let parts: Vec<&str> = tp.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    parts.len() == 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && parts[1].bytes().any(|b| b != b'0')
        && hex(parts[2], 16)
        && parts[2].bytes().any(|b| b != b'0')
        && hex(parts[3], 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("object")
    }

    #[test]
    fn a_well_formed_context_is_passed_on_whole() {
        let c = TraceContext::from_meta(&meta(json!({
            "traceparent": TP, "tracestate": "vendor=x", "baggage": "user=1", "progressToken": 3
        })))
        .expect("well formed");
        assert_eq!(
            Value::Object(c.to_meta()),
            json!({"traceparent": TP, "tracestate": "vendor=x", "baggage": "user=1"})
        );
    }

    #[test]
    fn malformed_values_are_dropped() {
        for bad in [
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "x",
        ] {
            assert!(
                TraceContext::from_meta(&meta(json!({ "traceparent": bad }))).is_none(),
                "{bad}"
            );
        }
        let long = "a".repeat(MAX_STATE + 1);
        let c = TraceContext::from_meta(&meta(
            json!({"traceparent": TP, "tracestate": long, "baggage": "a\nb"}),
        ))
        .expect("the traceparent stands");
        assert_eq!(Value::Object(c.to_meta()), json!({ "traceparent": TP }));
    }
}
