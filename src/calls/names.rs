//! Names a request must not carry: ones holding characters that must not reach a terminal, or
//! longer than any configured name. Checked before a request is parsed or routed.

use serde_json::Value;

use super::error::CallError;
use crate::log_limit::{clipped, LogLimit};
use crate::shown::is_unsafe;

/// Log lines about refused requests, rate-limited across sessions.
static REFUSED_LOG: LogLimit = LogLimit::new();

/// Longest server, tool or method name a request may carry, in bytes.
const NAME_MAX: usize = 256;

/// Refuses a request whose method or server, tool or name parameter holds a character that
/// must not reach a terminal (`crate::shown::is_unsafe`) or is over [`NAME_MAX`] bytes: no
/// configured name is like that, and such a name would otherwise be echoed into messages
/// and logs. The refusal shows the names escaped and cut.
pub(super) fn unsafe_names(method: &str, params: &Value) -> Result<(), CallError> {
    let named = ["server", "tool", "name"]
        .into_iter()
        .filter_map(|key| Some((key, params.get(key)?.as_str()?)));
    let bad = std::iter::once(("method", method))
        .chain(named)
        .find(|(_, v)| v.len() > NAME_MAX || v.chars().any(is_unsafe));
    let Some((key, value)) = bad else {
        return Ok(());
    };
    let shown = clipped(value);
    crate::limited!(REFUSED_LOG, tracing::Level::INFO,
        "refused a host request whose {key} has control or invisible characters or is too long: \"{shown}\""
    );
    Err(CallError::bad_request(format!(
        "the {key} \"{shown}\" has control, bidirectional or invisible characters, or is longer \
         than {NAME_MAX} bytes: no server, tool or host method is named like that"
    )))
}
