//! [`StateSeal`]: the `requestState` of an input-required result, sealed with HMAC (rmcp's
//! `RequestStateCodec`) under a key drawn once per process. It names the run and the question
//! (readable, not secret), is bound by associated data to the caller (under `serve --http`:
//! the client's token name and session; the sandbox handle is among the arguments) and to the
//! SHA-256 of the `run_python` arguments, and expires with the question's wait. A value that does not open is refused
//! whatever the reason (forged, altered, other arguments, expired): one answer for all, as
//! rmcp asks; the detail goes to the log.

use std::time::Duration;

use rmcp::model::{JsonObject, RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};

use crate::ids::{fill_random, sha256_hex};

/// Longest `requestState` opened; anything longer is refused unread.
const MAX_STATE_CHARS: usize = 1024;

/// What a sealed state says.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ticket {
    /// The run's id.
    pub run: String,
    /// The question's id.
    pub question: String,
}

/// Seals and opens `requestState` values.
pub struct StateSeal {
    codec: RequestStateCodec,
}

impl StateSeal {
    /// A seal with a fresh random key.
    pub fn new() -> Self {
        let mut key = vec![0u8; RequestStateCodec::MIN_KEY_LENGTH];
        fill_random(&mut key);
        let codec = RequestStateCodec::try_new(key).expect("a key of the minimum length");
        StateSeal { codec }
    }

    /// `ticket` sealed for a retry by `caller` with `arguments`, valid for `ttl`.
    pub fn seal(
        &self,
        ticket: &Ticket,
        caller: &str,
        arguments: Option<&JsonObject>,
        ttl: Duration,
    ) -> String {
        let bound = binding(caller, arguments);
        let options = SealOptions::new()
            .associated_data(bound.as_bytes())
            .ttl(ttl);
        self.codec
            .seal_json_with(ticket, &options)
            .expect("a ticket serializes")
    }

    /// The ticket in `state`, when it opens for `caller` and `arguments` and has not expired.
    pub fn open(
        &self,
        state: &str,
        caller: &str,
        arguments: Option<&JsonObject>,
    ) -> Option<Ticket> {
        if state.len() > MAX_STATE_CHARS {
            return None;
        }
        let bound = binding(caller, arguments);
        match self.codec.open_json_with(state, bound.as_bytes()) {
            Ok(ticket) => Some(ticket),
            Err(e) => {
                tracing::info!(error = %e, "a requestState did not open");
                None
            }
        }
    }
}

/// The associated data: what the state is for, the SHA-256 of the caller, and the SHA-256 of
/// the call's arguments (each a fixed length: no caller and arguments run into each other).
fn binding(caller: &str, arguments: Option<&JsonObject>) -> String {
    let text = arguments
        .map(|a| serde_json::to_string(a).unwrap_or_default())
        .unwrap_or_default();
    format!(
        "mcp-code-bridge run_python approval\0{}\0{}",
        sha256_hex(caller.as_bytes()),
        sha256_hex(text.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(code: &str) -> JsonObject {
        let serde_json::Value::Object(o) = serde_json::json!({"code": code}) else {
            unreachable!()
        };
        o
    }

    #[test]
    fn a_state_opens_only_unaltered_for_the_same_arguments_and_key() {
        let seal = StateSeal::new();
        let ticket = Ticket {
            run: "r".into(),
            question: "q".into(),
        };
        let a = args("x");
        let s = seal.seal(&ticket, "alice", Some(&a), Duration::from_secs(60));
        assert_eq!(seal.open(&s, "alice", Some(&a)), Some(ticket));
        assert_eq!(
            seal.open(&s, "alice", Some(&args("y"))),
            None,
            "other arguments"
        );
        assert_eq!(seal.open(&s, "alice", None), None);
        assert_eq!(seal.open(&s, "bob", Some(&a)), None, "another caller");
        let mut altered = s.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            seal.open(
                &String::from_utf8(altered).expect("ascii"),
                "alice",
                Some(&a)
            ),
            None
        );
        assert_eq!(
            StateSeal::new().open(&s, "alice", Some(&a)),
            None,
            "another process's key"
        );
        assert_eq!(
            seal.open(&"x".repeat(MAX_STATE_CHARS + 1), "alice", Some(&a)),
            None
        );
        let expired = seal.seal(
            &Ticket {
                run: "r".into(),
                question: "q".into(),
            },
            "alice",
            Some(&a),
            Duration::ZERO,
        );
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(seal.open(&expired, "alice", Some(&a)), None, "expired");
    }
}
