//! Server entries taken out of a client file (`setup --move`) and put back (`setup --undo`),
//! as edits of the file's syntax tree: everything else (comments, order, indentation, the
//! other entries) stays as it is, and each edit is checked by reading the new text back.

use jsonc_parser::cst::{CstNode, CstRootNode};
use serde_json::{Map, Value};

use super::document::{input_of, Document};
use super::error::SetupError;
use super::moves::Entry;
use super::register::value_of;

/// Takes the entries `names` out of `doc` (its tree and value); returns them as written, in
/// file order. A name that is not in the file is left out.
///
/// # Errors
/// [`SetupError::Unsafe`] when the edited text would differ in more than those entries.
pub fn take_out(doc: &mut Document, names: &[String]) -> Result<Vec<Entry>, SetupError> {
    let mut taken = Vec::new();
    let mut expected = doc.value.clone();
    for key in ["mcpServers", "servers"] {
        let Some(table) = doc.root.object_value().and_then(|o| o.object_value(key)) else {
            continue;
        };
        let props = table.properties();
        for (index, prop) in props.into_iter().enumerate() {
            let Some(name) = prop.decoded_name().filter(|n| names.contains(n)) else {
                continue;
            };
            let Some(text) = prop.value().map(|v| v.to_string()) else {
                continue;
            };
            if let Some(Value::Object(t)) = expected.get_mut(key) {
                t.remove(&name);
            }
            for node in comments_above(&prop) {
                node.remove();
            }
            prop.remove();
            taken.push(Entry {
                name,
                key: key.to_string(),
                index,
                text,
            });
        }
    }
    check(doc, expected)?;
    Ok(taken)
}

/// The comments on their own lines just above `prop` (they are about it), with the line
/// breaks and indentation between them and it.
fn comments_above(prop: &jsonc_parser::cst::CstObjectProp) -> Vec<CstNode> {
    let before: Vec<CstNode> = prop.previous_siblings().collect();
    let skip_blanks = |mut at: usize| {
        while before.get(at).is_some_and(CstNode::is_whitespace) {
            at += 1;
        }
        at
    };
    let mut out = Vec::new();
    let mut from = 0;
    while from < before.len() {
        let at = skip_blanks(from);
        if !before.get(at).is_some_and(CstNode::is_newline) {
            break;
        }
        let comment = skip_blanks(at + 1);
        if !before.get(comment).is_some_and(CstNode::is_comment) {
            break;
        }
        // A comment after something else on its line is about that, not this entry.
        let above = skip_blanks(comment + 1);
        if before.get(above).is_some_and(|n| !n.is_newline()) {
            break;
        }
        // The comment, its indentation and the line break above it go (the one below stays,
        // for what follows); a line comment's own removal takes those along.
        out.push(before[comment].clone());
        if !before[comment]
            .as_comment()
            .is_some_and(|c| c.is_line_comment())
        {
            out.extend(
                before[comment + 1..=above.min(before.len() - 1)]
                    .iter()
                    .cloned(),
            );
        }
        from = above;
    }
    out
}

/// Puts `entries` back into `doc` where no entry of that name is now; returns the names left
/// alone because one is.
///
/// # Errors
/// [`SetupError::Malformed`] when an entry's text no longer parses, [`SetupError::NotATable`]
/// when its table is not an object, [`SetupError::Unsafe`] when the edited text would differ in
/// more than those entries.
pub fn put_back(doc: &mut Document, entries: &[Entry]) -> Result<Vec<String>, SetupError> {
    let mut left = Vec::new();
    let mut expected = doc.value.clone();
    let mut order: Vec<&Entry> = entries.iter().collect();
    order.sort_by_key(|e| e.index);
    for entry in order {
        let key: &'static str = if entry.key == "servers" {
            "servers"
        } else {
            "mcpServers"
        };
        let slot = expected
            .entry(key)
            .or_insert_with(|| Value::Object(Map::new()));
        if slot.is_null() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(table_value) = slot else {
            return Err(SetupError::NotATable {
                path: doc.path.clone(),
                key,
            });
        };
        if table_value.contains_key(&entry.name) {
            left.push(entry.name.clone());
            continue;
        }
        let malformed = |message: String| SetupError::Malformed {
            path: doc.path.clone(),
            message: format!("the recorded entry '{}' {message}", entry.name),
        };
        let options = doc.client.jsonc_options().unwrap_or_default();
        let parsed = CstRootNode::parse(&entry.text, &options)
            .map_err(|_| malformed("does not parse".into()))?;
        let written = parsed.value().ok_or_else(|| malformed("is empty".into()))?;
        let input = input_of(&written).ok_or_else(|| malformed("cannot be copied".into()))?;
        table_value.insert(entry.name.clone(), value_of(&input));
        let table = doc.root.object_value_or_set().object_value_or_set(key);
        let at = entry.index.min(table.properties().len());
        let prop = table.insert(at, &entry.name, input);
        if let Some(value) = prop.value() {
            follow_layout(&written, &value);
        }
    }
    check(doc, expected)?;
    Ok(left)
}

/// Spreads the arrays and objects of `new` over several lines where `old` (the same value as
/// written before) had them so.
fn follow_layout(old: &CstNode, new: &CstNode) {
    if let (Some(o), Some(n)) = (old.as_array(), new.as_array()) {
        if o.to_string().contains('\n') {
            n.ensure_multiline();
        }
        for (o, n) in o.elements().iter().zip(n.elements().iter()) {
            follow_layout(o, n);
        }
    }
    if let (Some(o), Some(n)) = (old.as_object(), new.as_object()) {
        if o.to_string().contains('\n') {
            n.ensure_multiline();
        }
        for (o, n) in o.properties().iter().zip(n.properties().iter()) {
            if let (Some(o), Some(n)) = (o.value(), n.value()) {
                follow_layout(&o, &n);
            }
        }
    }
}

/// Checks that `doc`'s text now reads as `expected`, and takes that as its value.
fn check(doc: &mut Document, expected: Map<String, Value>) -> Result<(), SetupError> {
    let text = doc.root.to_string();
    if Document::value_of(doc.client, &text).ok() != Some(expected.clone()) {
        return Err(SetupError::Unsafe {
            path: doc.path.clone(),
        });
    }
    doc.value = expected;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Client;
    use std::path::Path;

    fn doc(client: Client, text: &str) -> Document {
        Document::parse(client, Path::new("/x/mcp.json"), Some(text.into())).expect("parses")
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    /// Each client's file shape: taking entries out removes exactly them (comments, the other
    /// entries and keys kept); putting them back into the untouched result gives the original.
    #[test]
    fn each_shape_loses_exactly_the_moved_entries_and_gets_them_back() {
        let claude_code = "{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    \"github\": {\n      \"type\": \"stdio\",\n      \"command\": \"npx\",\n      \"args\": [\n        \"-y\",\n        \"@modelcontextprotocol/server-github\"\n      ],\n      \"env\": {}\n    },\n    \"code\": {\n      \"type\": \"stdio\",\n      \"command\": \"/opt/mcp-code-bridge\",\n      \"args\": [\n        \"run\"\n      ],\n      \"env\": {},\n      \"alwaysLoad\": true\n    },\n    \"docs\": {\n      \"type\": \"http\",\n      \"url\": \"https://docs.example.test/mcp\"\n    }\n  },\n  \"projects\": {\n    \"/w\": {\n      \"mcpServers\": {\n        \"github\": {\n          \"command\": \"gh\"\n        }\n      },\n      \"disabledMcpjsonServers\": []\n    }\n  }\n}\n";
        let claude_code_after = "{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    \"code\": {\n      \"type\": \"stdio\",\n      \"command\": \"/opt/mcp-code-bridge\",\n      \"args\": [\n        \"run\"\n      ],\n      \"env\": {},\n      \"alwaysLoad\": true\n    }\n  },\n  \"projects\": {\n    \"/w\": {\n      \"mcpServers\": {\n        \"github\": {\n          \"command\": \"gh\"\n        }\n      },\n      \"disabledMcpjsonServers\": []\n    }\n  }\n}\n";
        let vscode = "// Servers for every workspace.\n{\n\t\"servers\": {\n\t\t// Knowledge graph memory\n\t\t\"memory\": {\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"npx\",\n\t\t\t\"args\": [\n\t\t\t\t\"-y\",\n\t\t\t\t\"@modelcontextprotocol/server-memory\"\n\t\t\t],\n\t\t},\n\t\t\"github-remote\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://api.githubcopilot.test/mcp/\"\n\t\t}\n\t},\n\t\"inputs\": []\n}\n";
        let vscode_after = "// Servers for every workspace.\n{\n\t\"servers\": {\n\t\t\"github-remote\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://api.githubcopilot.test/mcp/\"\n\t\t}\n\t},\n\t\"inputs\": []\n}\n";
        let cursor = "{\n  \"mcpServers\": {\n    \"linear\": {\n      \"url\": \"https://mcp.linear.test/mcp\",\n      \"headers\": {\"Authorization\": \"Bearer ${env:LINEAR_API_KEY}\"}\n    },\n    \"sqlite\": {\n      \"command\": \"uvx\",\n      \"args\": [\"mcp-server-sqlite\", \"--db-path\", \"/d/app.db\"]\n    }\n  }\n}\n";
        let cursor_after = "{\n  \"mcpServers\": {\n    \"linear\": {\n      \"url\": \"https://mcp.linear.test/mcp\",\n      \"headers\": {\"Authorization\": \"Bearer ${env:LINEAR_API_KEY}\"}\n    }\n  }\n}\n";
        let desktop = "{\n  \"mcpServers\": {\n    \"filesystem\": {\n      \"command\": \"npx\",\n      \"args\": [\n        \"-y\",\n        \"@modelcontextprotocol/server-filesystem\",\n        \"/home/u/Documents\"\n      ]\n    }\n  },\n  \"preferences\": {\n    \"sidebarMode\": \"chat\"\n  }\n}\n";
        let desktop_after = "{\n  \"mcpServers\": {},\n  \"preferences\": {\n    \"sidebarMode\": \"chat\"\n  }\n}\n";
        let windsurf = "{\n  \"mcpServers\": {\n    \"context7\": {\n      \"serverUrl\": \"https://mcp.context7.test/mcp\"\n    },\n    \"git\": {\n      \"command\": \"uvx\",\n      \"args\": [\n        \"mcp-server-git\"\n      ],\n      \"disabled\": false,\n      \"disabledTools\": [\n        \"git_reset\"\n      ]\n    }\n  }\n}\n";
        let windsurf_after = "{\n  \"mcpServers\": {\n    \"context7\": {\n      \"serverUrl\": \"https://mcp.context7.test/mcp\"\n    }\n  }\n}\n";
        for (client, before, moved, after) in [
            (
                Client::ClaudeCode,
                claude_code,
                &["github", "docs"][..],
                claude_code_after,
            ),
            (Client::VsCode, vscode, &["memory"], vscode_after),
            (Client::Cursor, cursor, &["sqlite"], cursor_after),
            (
                Client::ClaudeDesktop,
                desktop,
                &["filesystem"],
                desktop_after,
            ),
            (Client::Windsurf, windsurf, &["git"], windsurf_after),
        ] {
            let mut d = doc(client, before);
            let taken = take_out(&mut d, &names(moved)).expect("taken out");
            assert_eq!(
                taken.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
                moved,
                "{client:?}"
            );
            let text = d.root.to_string();
            assert_eq!(text, after, "{client:?}");
            let mut back = doc(client, &text);
            let left = put_back(&mut back, &taken).expect("put back");
            assert!(left.is_empty(), "{client:?}");
            let restored = back.root.to_string();
            let value = |t: &str| Document::value_of(client, t).expect("parses");
            assert_eq!(value(&restored), value(before), "{client:?}:\n{restored}");
            if client != Client::VsCode {
                // The comment above VS Code's entry went with it; the rest is byte for byte.
                assert_eq!(restored, before, "{client:?}");
            }
        }
    }

    #[test]
    fn an_entry_written_again_since_is_left_alone() {
        let before = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"},\n    \"b\": {\"command\": \"y\"}\n  }\n}\n";
        let mut d = doc(Client::Cursor, before);
        let taken = take_out(&mut d, &names(&["a", "b"])).expect("taken");
        let mut later = doc(
            Client::Cursor,
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"mine\"}\n  }\n}\n",
        );
        let left = put_back(&mut later, &taken).expect("put back");
        assert_eq!(left, ["a"]);
        let v = Document::value_of(Client::Cursor, &later.root.to_string()).expect("json");
        assert_eq!(v["mcpServers"]["a"]["command"], "mine");
        assert_eq!(v["mcpServers"]["b"]["command"], "y");
    }
}
