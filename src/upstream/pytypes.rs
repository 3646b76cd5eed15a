//! Python type annotations from JSON Schema, as typed stubs, `help()` and the docs' signature
//! show them: [`Typer`] names one tool's types (enums as `Literal`, objects with properties as
//! `TypedDict` classes named after the tool) and keeps the class text they need; [`repr`] is
//! Python's `repr` of a JSON value. Pure; every count a server's schema can drive is bounded.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Nesting followed at most; deeper values are `Any`.
const MAX_DEPTH: usize = 4;
/// Enum values shown as a `Literal` at most; a longer enum is its base type.
const MAX_LITERALS: usize = 32;
/// `TypedDict` classes one tool may need at most; past it objects are `dict[str, Any]`.
const MAX_CLASSES: usize = 32;
/// Fields a class shows at most.
const MAX_FIELDS: usize = 64;
/// Alternatives a union shows at most; past it the union is `Any`.
const MAX_UNION: usize = 8;
/// The longest field comment kept (one line).
const MAX_COMMENT: usize = 120;

/// Python's keywords: never a parameter or a class field name.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The Python identifier for a server or tool name: every character outside `[A-Za-z0-9_]`
/// becomes `_`, and a leading `_` is added when it starts with a digit (`my-server.v2` →
/// `my_server_v2`). The entrypoint's `proxies.alias` is the same function.
pub fn alias(name: &str) -> String {
    let mut a: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if a.starts_with(|c: char| c.is_ascii_digit()) {
        a.insert(0, '_');
    }
    a
}

/// Whether `name` can be a Python parameter or attribute name (ASCII, not a keyword).
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
}

/// `name` in PascalCase, for class names: `get-structured-content` → `GetStructuredContent`.
pub fn pascal(name: &str) -> String {
    let mut out = String::new();
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut cs = part.chars();
        if let Some(first) = cs.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(cs);
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

/// Python's `repr` of a JSON value (`'text'`, `True`, `None`, `[1, 2]`, `{'a': 1}`).
pub fn repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => str_repr(s),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", str_repr(k), repr(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// Python's `repr` of a string: single quotes unless it holds `'` and no `"`; control
/// characters escaped.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => push_printable(&mut out, c),
        }
    }
    out.push(quote);
    out
}

/// `c`, or its Python escape when it is a control or format character.
pub(crate) fn push_printable(out: &mut String, c: char) {
    let code = c as u32;
    let hidden = c.is_control()
        || matches!(code, 0x200b..=0x200f | 0x2028..=0x202e | 0x2060..=0x2064 | 0xfeff);
    if !hidden {
        out.push(c);
    } else if code <= 0xff {
        out.push_str(&format!("\\x{code:02x}"));
    } else {
        out.push_str(&format!("\\u{code:04x}"));
    }
}

/// One tool's Python types: names each `TypedDict` after the tool (`<Tool><Field>`), and keeps
/// the class text in the order a module must define them (a class after those it uses).
pub struct Typer {
    prefix: String,
    classes: Vec<String>,
    names: BTreeSet<String>,
}

impl Typer {
    /// Types for the tool whose Python name is `tool_alias`.
    pub fn new(tool_alias: &str) -> Self {
        Typer {
            prefix: pascal(tool_alias),
            classes: Vec::new(),
            names: BTreeSet::new(),
        }
    }

    /// The class text collected so far, each a complete definition.
    pub fn classes(self) -> Vec<String> {
        self.classes
    }

    /// The annotation of `schema`; `hint` names a class it may need (`Result`, a field name).
    pub fn ty(&mut self, schema: &Value, hint: &str) -> String {
        self.at(schema, hint, 0)
    }

    fn at(&mut self, schema: &Value, hint: &str, depth: usize) -> String {
        let Some(s) = schema.as_object() else {
            return "Any".into();
        };
        if depth > MAX_DEPTH {
            return "Any".into();
        }
        if let Some(c) = s.get("const").filter(|c| scalar(c)) {
            return format!("Literal[{}]", repr(c));
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array) {
            if !e.is_empty() && e.len() <= MAX_LITERALS && e.iter().all(scalar) {
                let lits: Vec<String> = e.iter().map(repr).collect();
                return format!("Literal[{}]", lits.join(", "));
            }
        }
        match s.get("type") {
            Some(Value::String(t)) => self.one(t, s, hint, depth),
            Some(Value::Array(ts)) => {
                let parts: Vec<String> = ts
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.one(t, s, hint, depth))
                    .collect();
                union(parts)
            }
            _ => {
                for key in ["anyOf", "oneOf"] {
                    if let Some(alts) = s.get(key).and_then(Value::as_array) {
                        if alts.len() > MAX_UNION {
                            return "Any".into();
                        }
                        let parts = alts.iter().map(|a| self.at(a, hint, depth + 1)).collect();
                        return union(parts);
                    }
                }
                match s.get("allOf").and_then(Value::as_array) {
                    Some(all) if all.len() == 1 => self.at(&all[0], hint, depth + 1),
                    _ if s.contains_key("properties") => self.object(s, hint, depth),
                    _ => "Any".into(),
                }
            }
        }
    }

    fn one(&mut self, t: &str, s: &Map<String, Value>, hint: &str, depth: usize) -> String {
        match t {
            "string" => "str".into(),
            "integer" => "int".into(),
            "number" => "float".into(),
            "boolean" => "bool".into(),
            "null" => "None".into(),
            "array" => match s.get("items").filter(|i| i.is_object()) {
                Some(items) => format!(
                    "list[{}]",
                    self.at(items, &format!("{hint}Item"), depth + 1)
                ),
                None => "list[Any]".into(),
            },
            "object" => self.object(s, hint, depth),
            _ => "Any".into(),
        }
    }

    /// A `TypedDict` for an object with properties; `dict[str, V]` for a map.
    fn object(&mut self, s: &Map<String, Value>, hint: &str, depth: usize) -> String {
        let props = s
            .get("properties")
            .and_then(Value::as_object)
            .filter(|p| !p.is_empty());
        let Some(props) = props.filter(|_| self.classes.len() < MAX_CLASSES) else {
            return match s.get("additionalProperties").filter(|a| a.is_object()) {
                Some(values) => format!("dict[str, {}]", self.at(values, hint, depth + 1)),
                None => "dict[str, Any]".into(),
            };
        };
        let name = self.class_name(hint);
        // Claimed before the fields are typed, so a nested class cannot take it.
        self.names.insert(name.clone());
        let required = required_of(s);
        let mut fields = Vec::new();
        for (key, field) in props.iter().take(MAX_FIELDS) {
            let mut ty = self.at(field, &pascal(key), depth + 1);
            if !required.contains(&key) {
                ty = format!("NotRequired[{ty}]");
            }
            fields.push((key.as_str(), ty, comment(field)));
        }
        let text = if fields.iter().all(|(k, _, _)| is_identifier(k)) {
            let mut t = format!("class {name}(TypedDict):\n");
            for (key, ty, note) in &fields {
                t.push_str(&format!("    {key}: {ty}"));
                if let Some(note) = note {
                    t.push_str(&format!("  # {note}"));
                }
                t.push('\n');
            }
            t
        } else {
            // Names Python cannot spell as attributes: the functional form.
            let items: Vec<String> = fields
                .iter()
                .map(|(k, ty, _)| format!("{}: {ty}", str_repr(k)))
                .collect();
            format!(
                "{name} = TypedDict({}, {{{}}})\n",
                str_repr(&name),
                items.join(", ")
            )
        };
        self.classes.push(text);
        name
    }

    /// `<Tool><hint>`, made unique among this tool's classes.
    fn class_name(&self, hint: &str) -> String {
        let base = format!("{}{}", self.prefix, pascal(hint));
        let mut name = base.clone();
        let mut n = 2;
        while self.names.contains(&name) {
            name = format!("{base}{n}");
            n += 1;
        }
        name
    }
}

/// The names an object schema requires.
pub fn required_of(s: &Map<String, Value>) -> Vec<&String> {
    let props = s.get("properties").and_then(Value::as_object);
    s.get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .filter_map(|n| props.and_then(|p| p.get_key_value(n)).map(|(k, _)| k))
                .collect()
        })
        .unwrap_or_default()
}

/// A value usable in a `Literal`.
fn scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// `parts` as one union: duplicates dropped, `None` last, `Any` absorbing the rest.
fn union(parts: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for p in parts {
        if p == "Any" {
            return p;
        }
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    if seen.len() > MAX_UNION || seen.is_empty() {
        return "Any".into();
    }
    seen.sort_by_key(|p| p == "None");
    seen.join(" | ")
}

/// A field's description as one line of a comment, cut.
fn comment(field: &Value) -> Option<String> {
    let d = field.get("description")?.as_str()?.trim();
    if d.is_empty() {
        return None;
    }
    let mut out = String::new();
    for c in d.chars().take(MAX_COMMENT) {
        if c.is_control() {
            out.push(' ');
        } else {
            push_printable(&mut out, c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_enums_arrays_and_unions() {
        let mut t = Typer::new("t");
        assert_eq!(t.ty(&json!({"type": "string"}), "x"), "str");
        assert_eq!(
            t.ty(&json!({"enum": ["a", "b'c", 1, null]}), "x"),
            "Literal['a', \"b'c\", 1, None]"
        );
        assert_eq!(t.ty(&json!({"const": true}), "x"), "Literal[True]");
        assert_eq!(
            t.ty(&json!({"type": "array", "items": {"type": "integer"}}), "x"),
            "list[int]"
        );
        assert_eq!(
            t.ty(&json!({"type": ["null", "integer"]}), "x"),
            "int | None"
        );
        assert_eq!(
            t.ty(
                &json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
                "x"
            ),
            "str | None"
        );
        assert_eq!(
            t.ty(
                &json!({"type": "object", "additionalProperties": {"type": "number"}}),
                "x"
            ),
            "dict[str, float]"
        );
        assert_eq!(t.ty(&json!({"type": "object"}), "x"), "dict[str, Any]");
        assert_eq!(t.ty(&json!(5), "x"), "Any");
        assert!(t.classes().is_empty());
    }

    #[test]
    fn objects_are_typed_dicts_named_after_the_tool_children_first() {
        let mut t = Typer::new("get-weather");
        let schema = json!({"type": "object", "properties": {
            "temp": {"type": "number", "description": "Degrees\nC"},
            "where": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }, "required": ["temp"]});
        assert_eq!(t.ty(&schema, "Result"), "GetWeatherResult");
        let classes = t.classes();
        assert_eq!(
            classes,
            vec![
                "class GetWeatherWhere(TypedDict):\n    city: str\n".to_string(),
                "class GetWeatherResult(TypedDict):\n    temp: float  # Degrees C\n    where: NotRequired[GetWeatherWhere]\n".to_string(),
            ]
        );
    }

    #[test]
    fn names_python_cannot_spell_use_the_functional_form_and_names_stay_unique() {
        let mut t = Typer::new("t");
        let a = t.ty(&json!({"properties": {"from": {"type": "string"}}}), "Opt");
        let b = t.ty(&json!({"properties": {"x": {"type": "string"}}}), "Opt");
        assert_eq!((a.as_str(), b.as_str()), ("TOpt", "TOpt2"));
        let classes = t.classes();
        assert_eq!(
            classes[0],
            "TOpt = TypedDict('TOpt', {'from': NotRequired[str]})\n"
        );
    }

    #[test]
    fn hostile_schemas_are_bounded() {
        let mut deep = json!({"type": "string"});
        for _ in 0..50 {
            deep = json!({"type": "array", "items": deep});
        }
        let mut t = Typer::new("t");
        assert!(t.ty(&deep, "x").contains("Any"));
        let many: serde_json::Map<String, Value> = (0..100)
            .map(|i| {
                (
                    format!("f{i}"),
                    json!({"type": "object", "properties": {"a": {"type": "string"}}}),
                )
            })
            .collect();
        let mut t = Typer::new("t");
        t.ty(&json!({"type": "object", "properties": many}), "R");
        let classes = t.classes();
        assert!(classes.len() <= MAX_CLASSES + 1, "{}", classes.len());
        let wide = json!({"enum": (0..100).collect::<Vec<_>>(), "type": "integer"});
        assert_eq!(Typer::new("t").ty(&wide, "x"), "int");
    }

    #[test]
    fn repr_is_pythons() {
        assert_eq!(repr(&json!("a\u{1b}\n'")), "\"a\\x1b\\n'\"");
        assert_eq!(repr(&json!("it's \"x\"")), "'it\\'s \"x\"'");
        assert_eq!(
            repr(&json!({"a": [true, null, 1.5]})),
            "{'a': [True, None, 1.5]}"
        );
        assert!(is_identifier("ok_1") && !is_identifier("from") && !is_identifier("page-size"));
        assert_eq!(pascal("get-structured-content"), "GetStructuredContent");
        assert_eq!(pascal("1st"), "T1st");
    }
}
