//! A downstream server's question (`elicitation/create`) and the user's answer, both checked as
//! hostile input: the question's message, its `requestedSchema` (the spec's restricted schema:
//! an object of primitive properties) or its link, each bounded; the answer's content against
//! that schema. Pure.

use rmcp::model::ElicitRequestParams;
use serde_json::{Map, Value};

use crate::calls::{QuestionKind, ServerQuestion};

/// Longest message relayed, in bytes.
pub const MAX_MESSAGE: usize = 8 << 10;
/// Largest `requestedSchema`, as JSON text.
pub const MAX_SCHEMA: usize = 16 << 10;
/// Most properties a form may ask for.
pub const MAX_FIELDS: usize = 32;
/// Longest property name.
pub const MAX_FIELD_NAME: usize = 64;
/// Most choices a property's `enum` (or `oneOf`/`anyOf`) may list.
pub const MAX_CHOICES: usize = 128;
/// Longest link relayed, in bytes.
pub const MAX_URL: usize = 2048;
/// Largest answer content relayed back, as JSON text.
pub const MAX_ANSWER: usize = 64 << 10;

/// Why a question or an answer was refused. Its words name no value the other side sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionError {
    /// The message is too long.
    #[error("the question's message is over {MAX_MESSAGE} bytes")]
    MessageTooLong,
    /// The schema is too large or has too many fields.
    #[error("the question's form is too large (at most {MAX_FIELDS} fields, {MAX_SCHEMA} bytes)")]
    SchemaTooLarge,
    /// The schema is not the spec's restricted form schema.
    #[error("the question's form is not a flat object of primitive fields: {0}")]
    SchemaShape(&'static str),
    /// The link is not an `http`/`https` URL of bounded length.
    #[error("the question's link is not an http or https URL of at most {MAX_URL} bytes")]
    BadUrl,
    /// The answer does not fit the form.
    #[error("the answer does not fit the form: {0}")]
    Answer(String),
}

/// `params` from server `server`, checked, as the run's asker gets it.
///
/// # Errors
/// [`QuestionError`] saying what is wrong (the message, the schema or the link).
pub fn read(server: &str, params: ElicitRequestParams) -> Result<ServerQuestion, QuestionError> {
    let (message, kind) = match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let schema = serde_json::to_value(&requested_schema)
                .map_err(|_| QuestionError::SchemaShape("not JSON"))?;
            let Value::Object(schema) = schema else {
                return Err(QuestionError::SchemaShape("not an object"));
            };
            check_schema(&schema)?;
            (message, QuestionKind::Form { schema })
        }
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } => {
            check_url(&url)?;
            if elicitation_id.len() > 256 || elicitation_id.chars().any(char::is_control) {
                return Err(QuestionError::BadUrl);
            }
            (
                message,
                QuestionKind::Url {
                    url,
                    id: elicitation_id,
                },
            )
        }
        _ => return Err(QuestionError::SchemaShape("an unknown mode")),
    };
    if message.len() > MAX_MESSAGE {
        return Err(QuestionError::MessageTooLong);
    }
    Ok(ServerQuestion {
        server: server.to_string(),
        message,
        kind,
    })
}

/// A link the user may be shown: `https://` or `http://`, a host, no control characters or
/// spaces, at most [`MAX_URL`] bytes.
fn check_url(url: &str) -> Result<(), QuestionError> {
    if url.len() > MAX_URL || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(QuestionError::BadUrl);
    }
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .ok_or(QuestionError::BadUrl)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.starts_with('@') || host.starts_with(':') {
        return Err(QuestionError::BadUrl);
    }
    Ok(())
}

/// The spec's restricted schema: `type: object`, at most [`MAX_FIELDS`] properties, each a
/// string, number, integer, boolean or enum (single or multiple choice), `required` naming
/// only its properties.
fn check_schema(schema: &Map<String, Value>) -> Result<(), QuestionError> {
    let size = serde_json::to_string(schema).map_or(usize::MAX, |s| s.len());
    if size > MAX_SCHEMA {
        return Err(QuestionError::SchemaTooLarge);
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(QuestionError::SchemaShape("its type is not object"));
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Err(QuestionError::SchemaShape("no properties object"));
    };
    if props.len() > MAX_FIELDS {
        return Err(QuestionError::SchemaTooLarge);
    }
    for (name, prop) in props {
        if name.is_empty() || name.len() > MAX_FIELD_NAME || name.chars().any(|c| c.is_control()) {
            return Err(QuestionError::SchemaShape(
                "a field name is empty, long or unprintable",
            ));
        }
        let Some(prop) = prop.as_object() else {
            return Err(QuestionError::SchemaShape("a field is not an object"));
        };
        match prop.get("type").and_then(Value::as_str) {
            Some("string" | "number" | "integer" | "boolean") => {}
            Some("array") => {
                let items = prop.get("items").and_then(Value::as_object);
                if items.is_none_or(|i| choices(i).is_none()) {
                    return Err(QuestionError::SchemaShape(
                        "an array field is not a multiple choice",
                    ));
                }
            }
            _ => {
                return Err(QuestionError::SchemaShape(
                    "a field's type is not primitive",
                ))
            }
        }
        if choices(prop).is_some_and(|c| c.len() > MAX_CHOICES)
            || prop
                .get("items")
                .and_then(Value::as_object)
                .and_then(choices)
                .is_some_and(|c| c.len() > MAX_CHOICES)
        {
            return Err(QuestionError::SchemaTooLarge);
        }
    }
    if let Some(required) = schema.get("required") {
        let names = required
            .as_array()
            .ok_or(QuestionError::SchemaShape("required is not a list"))?;
        if names.len() > MAX_FIELDS
            || names
                .iter()
                .any(|n| n.as_str().is_none_or(|n| !props.contains_key(n)))
        {
            return Err(QuestionError::SchemaShape(
                "required names a field it lacks",
            ));
        }
    }
    Ok(())
}

/// A property's allowed values: its `enum`, or the `const` of each `oneOf` / `anyOf` entry.
fn choices(prop: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(e) = prop.get("enum").and_then(Value::as_array) {
        return Some(e.iter().collect());
    }
    let list = prop
        .get("oneOf")
        .or_else(|| prop.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(list.iter().filter_map(|o| o.get("const")).collect())
}

/// Checks an accepted form's `content` against `schema` (already checked by [`read`]): only its
/// fields, each of its type (an integer for `integer`, within `minimum`/`maximum`, a string
/// within `minLength`/`maxLength`, one of its choices), every required one present, at most
/// [`MAX_ANSWER`] bytes.
///
/// # Errors
/// [`QuestionError::Answer`] naming the first field that does not fit.
pub fn check_answer(
    schema: &Map<String, Value>,
    content: &Map<String, Value>,
) -> Result<(), QuestionError> {
    let bad = |m: String| Err(QuestionError::Answer(m));
    if serde_json::to_string(content).map_or(usize::MAX, |s| s.len()) > MAX_ANSWER {
        return bad(format!("it is over {MAX_ANSWER} bytes"));
    }
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, value) in content {
        let Some(prop) = props.get(name).and_then(Value::as_object) else {
            return bad(format!(
                "field {} is not in the form",
                crate::shown::escaped(&cut(name))
            ));
        };
        let name = crate::shown::escaped(name);
        let fits = match prop.get("type").and_then(Value::as_str) {
            Some("string") => value.as_str().is_some_and(|s| {
                let n = s.chars().count() as u64;
                let min = prop.get("minLength").and_then(Value::as_u64).unwrap_or(0);
                let max = prop.get("maxLength").and_then(Value::as_u64);
                n >= min && max.is_none_or(|m| n <= m)
            }),
            Some("boolean") => value.is_boolean(),
            Some(t @ ("number" | "integer")) => value.as_f64().is_some_and(|x| {
                let whole = t == "number" || value.is_i64() || value.is_u64();
                let min = prop.get("minimum").and_then(Value::as_f64);
                let max = prop.get("maximum").and_then(Value::as_f64);
                whole && min.is_none_or(|m| x >= m) && max.is_none_or(|m| x <= m)
            }),
            Some("array") => value.as_array().is_some_and(|items| {
                let allowed = prop
                    .get("items")
                    .and_then(Value::as_object)
                    .and_then(choices)
                    .unwrap_or_default();
                let min = prop.get("minItems").and_then(Value::as_u64).unwrap_or(0);
                let max = prop.get("maxItems").and_then(Value::as_u64);
                let n = items.len() as u64;
                n >= min && max.is_none_or(|m| n <= m) && items.iter().all(|i| allowed.contains(&i))
            }),
            _ => false,
        };
        if !fits {
            return bad(format!(
                "field {name} does not have the form's type or range"
            ));
        }
        if let Some(allowed) = choices(prop) {
            if !allowed.contains(&value) {
                return bad(format!("field {name} is not one of the form's choices"));
            }
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !content.contains_key(name) {
                return bad(format!(
                    "required field {} is missing",
                    crate::shown::escaped(name)
                ));
            }
        }
    }
    Ok(())
}

/// `name` cut to [`MAX_FIELD_NAME`] characters for an error text.
fn cut(name: &str) -> String {
    name.chars().take(MAX_FIELD_NAME).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> Result<ServerQuestion, QuestionError> {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "hi", "requestedSchema": schema
        }))
        .map_err(|_| QuestionError::SchemaShape("rmcp refused it"))?;
        read("s", params)
    }

    fn url(u: &str) -> Result<ServerQuestion, QuestionError> {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "open", "url": u, "elicitationId": "e1"
        }))
        .expect("url params");
        read("s", params)
    }

    fn schema_of(q: ServerQuestion) -> Map<String, Value> {
        match q.kind {
            QuestionKind::Form { schema } => schema,
            k => panic!("not a form: {k:?}"),
        }
    }

    #[test]
    fn a_plain_form_is_taken_as_sent() {
        let q = form(json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "x"},
            "age": {"type": "integer", "minimum": 0},
            "ok": {"type": "boolean"},
            "color": {"type": "string", "enum": ["red", "blue"]},
        }, "required": ["name"]}))
        .expect("a good form");
        assert_eq!(q.server, "s");
        assert_eq!(q.message, "hi");
        assert_eq!(schema_of(q)["required"], json!(["name"]));
    }

    #[test]
    fn bad_or_huge_forms_and_messages_are_refused() {
        let many: Map<String, Value> = (0..=MAX_FIELDS)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        assert_eq!(
            form(json!({"type": "object", "properties": many})),
            Err(QuestionError::SchemaTooLarge)
        );
        let big = "x".repeat(MAX_SCHEMA);
        assert_eq!(
            form(
                json!({"type": "object", "properties": {"a": {"type": "string", "description": big}}})
            ),
            Err(QuestionError::SchemaTooLarge)
        );
        assert!(form(json!({"type": "object", "properties": {"a": {"type": "object"}}})).is_err());
        assert!(form(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})
        )
        .is_err());
        let long = json!({"mode": "form", "message": "m".repeat(MAX_MESSAGE + 1),
            "requestedSchema": {"type": "object", "properties": {}}});
        let params: ElicitRequestParams = serde_json::from_value(long).expect("params");
        assert_eq!(read("s", params), Err(QuestionError::MessageTooLong));
    }

    #[test]
    fn only_http_and_https_links_are_relayed() {
        assert!(url("https://example.com/auth?x=1").is_ok());
        assert!(url("http://127.0.0.1:8080/cb").is_ok());
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://",
            "https://exa mple.com",
            "https://example.com/\u{1b}[2J",
            "ftp://example.com",
        ] {
            assert_eq!(url(bad), Err(QuestionError::BadUrl), "{bad}");
        }
        assert_eq!(
            url(&format!("https://e.com/{}", "a".repeat(MAX_URL))),
            Err(QuestionError::BadUrl)
        );
    }

    #[test]
    fn an_answer_must_fit_the_form() {
        let schema = schema_of(
            form(json!({"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 5},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "ok": {"type": "boolean"},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            }, "required": ["name"]}))
            .expect("form"),
        );
        let check = |c: Value| check_answer(&schema, c.as_object().expect("object"));
        assert!(
            check(json!({"name": "bo", "age": 3, "ok": true, "color": "red", "tags": ["a"]}))
                .is_ok()
        );
        for bad in [
            json!({}),
            json!({"name": "toolong"}),
            json!({"name": "a", "age": 1.5}),
            json!({"name": "a", "age": -1}),
            json!({"name": "a", "ok": "yes"}),
            json!({"name": "a", "color": "green"}),
            json!({"name": "a", "tags": ["c"]}),
            json!({"name": "a", "extra": 1}),
        ] {
            assert!(check(bad.clone()).is_err(), "{bad}");
        }
    }
}
