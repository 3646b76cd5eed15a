//! [`LoadedTools`]: what a run's load hands the sandbox layer, the tools of the servers it
//! named, already serialized as the exec frame carries them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::value::RawValue;

/// The tools of the servers loaded for a run, by server name: for each, a JSON array of tool
/// entries (a name, or `{"name", "doc", "params", "returns"}` for the proxy's signature), shared
/// while the server's tool list is unchanged, so a session can tell what it already sent. The
/// map itself is shared too: a backend may hand the very same one to runs that name the same
/// servers while nothing changed, and a session that sent it last sends none of it again.
pub type LoadedTools = Arc<BTreeMap<String, Arc<RawValue>>>;
