//! JSON values written as block-style YAML, for `kube manifest`: mappings and sequences
//! indented, every string double-quoted as JSON writes it (a JSON string is a valid YAML
//! double-quoted scalar), so no value is ever read back as another type. Pure.

use serde_json::Value;

/// `value` as one YAML document (no `---`), ending with a newline.
pub fn document(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        other => other.to_string(),
    }
}

fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && k.starts_with(|c: char| c.is_ascii_alphabetic())
        // YAML 1.1 parsers (go-yaml v2, which kubectl and podman use) read these as booleans.
        && !matches!(
            k.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null"
        );
    if plain {
        k.to_string()
    } else {
        Value::String(k.to_string()).to_string()
    }
}

fn nested(value: &Value) -> bool {
    matches!(value, Value::Object(m) if !m.is_empty())
        || matches!(value, Value::Array(a) if !a.is_empty())
}

fn mapping(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    for (i, (k, v)) in map.iter().enumerate() {
        // The first key of a mapping inside a sequence item follows its `- `.
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&key(k));
        out.push(':');
        value_after(out, v, indent);
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Value::Object(m) if !m.is_empty() => mapping(out, m, indent + 2),
            Value::Array(a) if !a.is_empty() => {
                out.push('\n');
                sequence(out, a, indent + 2);
            }
            other => {
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn value_after(out: &mut String, v: &Value, indent: usize) {
    if !nested(v) {
        out.push(' ');
        out.push_str(&scalar(v));
        out.push('\n');
        return;
    }
    out.push('\n');
    match v {
        Value::Object(m) => mapping(out, m, indent + 2),
        Value::Array(a) => sequence(out, a, indent + 2),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nesting_and_quoting() {
        let v = json!({
            "kind": "Pod",
            "spec": {
                "containers": [{"args": ["-c", "x: y\n'z'"], "env": [], "name": "a"}],
                "empty": {},
                "labels": {"app.kubernetes.io/name": "s", "odd key": "v"},
                "n": 3, "on": false,
            }
        });
        let text = document(&v);
        // Keys given in sorted order: the same text whether or not serde_json keeps insertion
        // order (its `preserve_order` feature, which a dependency may turn on).
        let want = "\
kind: \"Pod\"
spec:
  containers:
    - args:
        - \"-c\"
        - \"x: y\\n'z'\"
      env: []
      name: \"a\"
  empty: {}
  labels:
    app.kubernetes.io/name: \"s\"
    \"odd key\": \"v\"
  \"n\": 3
  \"on\": false
";
        assert_eq!(text, want, "{text}");
    }
}
