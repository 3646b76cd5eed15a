//! The bridge's entry added to one client file: found already there (by the test the config
//! reader uses to skip the bridge's own entry, or by the very command being registered), refused
//! over a name clash, or the file's new text with only that entry added.

use jsonc_parser::cst::{CstInputValue, CstNode, CstRootNode};
use serde_json::{Map, Value};

use super::document::Document;
use super::error::SetupError;
use super::shape::{bridge_entry, table_key, Launch};
use crate::config::launches_bridge;

/// What registering the bridge in one file comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// An entry that launches the bridge is there already, under this name.
    Present(String),
    /// The file's new text: the bridge added as `name`, everything else as it was.
    Add {
        /// The server name used.
        name: String,
        /// The whole new text.
        text: String,
    },
}

/// Registers `launch` as server `name` in `doc`, whose tree then holds the new entry.
///
/// # Errors
/// [`SetupError::NotATable`] or [`SetupError::NameTaken`] when the entry cannot go in;
/// [`SetupError::Unsafe`] when the edited text would differ in more than that entry.
pub fn register(doc: Document, name: &str, launch: &Launch) -> Result<Registration, SetupError> {
    let present = ["mcpServers", "servers"]
        .iter()
        .filter_map(|key| doc.value.get(*key).and_then(Value::as_object))
        .flatten()
        .find(|(_, e)| launches_bridge(e) || same_launch(e, launch));
    if let Some((present, _)) = present {
        return Ok(Registration::Present(present.clone()));
    }
    let key = table_key(doc.client);
    let table = match doc.value.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Object(t)) => Some(t),
        Some(_) => {
            return Err(SetupError::NotATable {
                path: doc.path.clone(),
                key,
            })
        }
    };
    if table.is_some_and(|t| t.contains_key(name)) {
        return Err(SetupError::NameTaken {
            path: doc.path.clone(),
            name: name.to_string(),
        });
    }
    let entry = bridge_entry(doc.client, launch);
    let multiline = arrays_multiline(&doc.root);
    let added = doc
        .root
        .object_value_or_set()
        .object_value_or_set(key)
        .append(name, entry.clone());
    if let Some(args) = added.object_value().and_then(|o| o.array_value("args")) {
        if multiline {
            args.ensure_multiline();
        }
    }
    let text = doc.root.to_string();
    let mut expected = doc.value;
    let slot = expected
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    if let Value::Object(t) = slot {
        t.insert(name.to_string(), value_of(&entry));
    }
    if Document::value_of(doc.client, &text).ok() != Some(expected) {
        return Err(SetupError::Unsafe { path: doc.path });
    }
    Ok(Registration::Add {
        name: name.to_string(),
        text,
    })
}

/// Whether the file writes arrays over several lines, as `JSON.stringify(value, null, 2)` does
/// (Claude Code, Claude Desktop): judged by its first array with elements; yes when it has none.
fn arrays_multiline(root: &CstRootNode) -> bool {
    fn first(node: CstNode) -> Option<bool> {
        if let Some(array) = node.as_array() {
            if !array.elements().is_empty() {
                return Some(array.to_string().contains('\n'));
            }
        }
        node.children().into_iter().find_map(first)
    }
    root.value().and_then(first).unwrap_or(true)
}

/// Whether `entry` runs exactly `launch` (a `--command` the reader's test may not know).
fn same_launch(entry: &Value, launch: &Launch) -> bool {
    let args = entry.get("args").and_then(Value::as_array).map(|a| {
        a.iter()
            .map(|v| v.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
    });
    entry.get("command").and_then(Value::as_str) == Some(launch.command.as_str())
        && args.unwrap_or_default() == launch.args
}

/// The JSON value of an input for the tree.
pub fn value_of(input: &CstInputValue) -> Value {
    match input {
        CstInputValue::Null => Value::Null,
        CstInputValue::Bool(b) => Value::Bool(*b),
        CstInputValue::Number(n) => serde_json::from_str(n).unwrap_or(Value::Null),
        CstInputValue::String(s) => Value::String(s.clone()),
        CstInputValue::Array(a) => Value::Array(a.iter().map(value_of).collect()),
        CstInputValue::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), value_of(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Client;
    use std::path::Path;

    fn launch() -> Launch {
        Launch {
            command: "/opt/bin/mcp-code-bridge".into(),
            args: vec!["run".into()],
        }
    }

    fn doc(client: Client, text: &str) -> Document {
        Document::parse(client, Path::new("/x/mcp.json"), Some(text.into())).expect("parses")
    }

    #[test]
    fn the_entry_is_appended_in_the_files_own_style() {
        let vscode = "// mine\n{\n\t\"servers\": {\n\t\t\"a\": {\"type\": \"stdio\", \"command\": \"x\", \"args\": [\"y\"]},\n\t},\n}\n";
        let Registration::Add { text, .. } =
            register(doc(Client::VsCode, vscode), "code", &launch()).expect("ok")
        else {
            panic!("added")
        };
        assert_eq!(
            text,
            "// mine\n{\n\t\"servers\": {\n\t\t\"a\": {\"type\": \"stdio\", \"command\": \"x\", \"args\": [\"y\"]},\n\t\t\"code\": {\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"/opt/bin/mcp-code-bridge\",\n\t\t\t\"args\": [\"run\"],\n\t\t},\n\t},\n}\n"
        );
        let Registration::Add { text, .. } =
            register(doc(Client::Cursor, ""), "code", &launch()).expect("ok")
        else {
            panic!("added")
        };
        assert_eq!(
            text,
            "{\n  \"mcpServers\": {\n    \"code\": {\n      \"command\": \"/opt/bin/mcp-code-bridge\",\n      \"args\": [\n        \"run\"\n      ]\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn an_existing_bridge_entry_or_name_is_respected() {
        let uvx =
            r#"{"mcpServers": {"bridge": {"command": "uvx", "args": ["mcp-code-bridge", "run"]}}}"#;
        assert_eq!(
            register(doc(Client::Cursor, uvx), "code", &launch()).expect("ok"),
            Registration::Present("bridge".into())
        );
        let wrapper = r#"{"mcpServers": {"mine": {"command": "/opt/wrap.sh", "args": []}}}"#;
        let own = Launch {
            command: "/opt/wrap.sh".into(),
            args: vec![],
        };
        assert_eq!(
            register(doc(Client::Cursor, wrapper), "code", &own).expect("ok"),
            Registration::Present("mine".into()),
            "an entry running the very command given is the bridge too"
        );
        let taken = r#"{"mcpServers": {"code": {"command": "code-server"}}}"#;
        assert!(matches!(
            register(doc(Client::Cursor, taken), "code", &launch()),
            Err(SetupError::NameTaken { .. })
        ));
        let bad = r#"{"mcpServers": []}"#;
        assert!(matches!(
            register(doc(Client::Cursor, bad), "code", &launch()),
            Err(SetupError::NotATable { .. })
        ));
        let null = r#"{"mcpServers": null}"#;
        assert!(matches!(
            register(doc(Client::ClaudeDesktop, null), "code", &launch()),
            Ok(Registration::Add { .. })
        ));
    }

    #[test]
    fn a_file_that_is_not_its_clients_syntax_is_refused() {
        for (client, text) in [
            (Client::Cursor, "{\"mcpServers\": {},}"),
            (Client::ClaudeCode, "// note\n{}"),
            (Client::VsCode, "{servers: {}}"),
            (Client::VsCode, "[]"),
        ] {
            let r = Document::parse(client, Path::new("/x"), Some(text.into()));
            assert!(
                matches!(r, Err(SetupError::Malformed { .. })),
                "{client:?} {text}"
            );
        }
    }
}
