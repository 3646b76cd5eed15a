//! One client config file as `setup` reads it: the text as it is on disk, its syntax tree (which
//! keeps every comment, comma, blank and key in place for editing) and its value.

use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstNode, CstRootNode};
use serde_json::{Map, Value};

use super::error::SetupError;
use super::shape::empty_file;
use crate::config::Client;

/// A parsed client config file.
pub struct Document {
    /// The client that owns it.
    pub client: Client,
    /// Where it is.
    pub path: PathBuf,
    /// The text on disk; `None` when the file does not exist yet.
    pub original: Option<String>,
    /// The editable syntax tree (of the original, or of an empty file when there is none).
    pub root: CstRootNode,
    /// The file's top-level object.
    pub value: Map<String, Value>,
}

/// One server entry of a client file.
#[derive(Debug, Clone)]
pub struct Server {
    /// Its name.
    pub name: String,
    /// The entry's value.
    pub entry: Value,
    /// The entry as written (keys in file order, numbers as written), for copying.
    pub written: Option<CstInputValue>,
}

impl Document {
    /// Reads and parses `path`; a missing file is an empty one.
    ///
    /// # Errors
    /// [`SetupError::Read`] when it cannot be read, [`SetupError::Malformed`] when it is not a
    /// JSON object in the client's syntax.
    pub fn read(client: Client, path: &Path) -> Result<Document, SetupError> {
        let original = match crate::config::read_text(path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(SetupError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Document::parse(client, path, original)
    }

    /// Parses `original` (the text of `path`, `None` for a file not written yet).
    ///
    /// # Errors
    /// [`SetupError::Malformed`] when it is not a JSON object in the client's syntax.
    pub fn parse(
        client: Client,
        path: &Path,
        original: Option<String>,
    ) -> Result<Document, SetupError> {
        let text = match original.as_deref() {
            // An empty file holds nothing to keep: it is written as a new one.
            Some(t) if !t.trim().is_empty() => t,
            _ => empty_file(client),
        };
        let (root, value) = parse_text(client, text).map_err(|message| SetupError::Malformed {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(Document {
            client,
            path: path.to_path_buf(),
            original,
            root,
            value,
        })
    }

    /// The value of `text` read as this client reads its file (the check of an edit).
    ///
    /// # Errors
    /// The parser's message.
    pub fn value_of(client: Client, text: &str) -> Result<Map<String, Value>, String> {
        match client.jsonc_options() {
            Some(_) => parse_text(client, text).map(|(_, v)| v),
            None => object(serde_json::from_str(text).map_err(|e| e.to_string())?),
        }
    }

    /// Every server entry in the file's tables (`mcpServers` and `servers`), in file order.
    pub fn servers(&self) -> Vec<Server> {
        let mut out = Vec::new();
        for key in ["mcpServers", "servers"] {
            let Some(table) = self.root.object_value().and_then(|o| o.object_value(key)) else {
                continue;
            };
            for prop in table.properties() {
                let Some(name) = prop.decoded_name() else {
                    continue;
                };
                let Some(entry) = self.value.get(key).and_then(|t| t.get(&name)) else {
                    continue;
                };
                out.push(Server {
                    entry: entry.clone(),
                    written: prop.value().as_ref().and_then(input_of),
                    name,
                });
            }
        }
        out
    }
}

/// The tree and value of `text`: plain JSON (checked strictly, as the client's own parser
/// reads it) or VS Code's JSONC.
fn parse_text(client: Client, text: &str) -> Result<(CstRootNode, Map<String, Value>), String> {
    let options = client.jsonc_options();
    // Plain JSON: anything else is broken for the client already.
    let strict = match options {
        None => Some(object(
            serde_json::from_str(text).map_err(|e| e.to_string())?,
        )?),
        Some(_) => None,
    };
    let root = CstRootNode::parse(text, &options.unwrap_or_default()).map_err(|e| e.to_string())?;
    let value = match strict {
        Some(v) => v,
        None => object(root.to_serde_value().unwrap_or(Value::Null))?,
    };
    Ok((root, value))
}

fn object(v: Value) -> Result<Map<String, Value>, String> {
    match v {
        Value::Object(map) => Ok(map),
        _ => Err("the file is not a JSON object".into()),
    }
}

/// A syntax tree value as an input for another tree, order and number text kept.
pub fn input_of(node: &CstNode) -> Option<CstInputValue> {
    if let Some(object) = node.as_object() {
        let props = object
            .properties()
            .into_iter()
            .map(|p| Some((p.decoded_name()?, input_of(&p.value()?)?)))
            .collect::<Option<Vec<_>>>()?;
        return Some(CstInputValue::Object(props));
    }
    if let Some(array) = node.as_array() {
        let items = array
            .elements()
            .iter()
            .map(input_of)
            .collect::<Option<_>>()?;
        return Some(CstInputValue::Array(items));
    }
    if let Some(s) = node.as_string_lit() {
        return s.decoded_value().ok().map(CstInputValue::String);
    }
    if let Some(n) = node.as_number_lit() {
        return Some(CstInputValue::Number(n.to_string()));
    }
    if let Some(b) = node.as_boolean_lit() {
        return Some(CstInputValue::Bool(b.value()));
    }
    node.as_null_keyword().map(|_| CstInputValue::Null)
}
