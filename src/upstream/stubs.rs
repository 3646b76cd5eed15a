//! Typed stubs (`runtime.stubs(server)`): a server's tools as Python text, one `async def` per
//! tool with its parameters typed from `inputSchema` and its return type from `outputSchema`
//! (a `TypedDict`; `str` for a text-only tool; FastMCP's `{"result": v}` wrap unwrapped), each
//! description a docstring. [`ToolTypes`] is one tool's typing, which the docs' signature and
//! `help()` show too (`docs.rs`), so all three agree. Pure; the text is bounded.

use rmcp::model::Tool;
use serde_json::Value;

use super::pytypes::{self, alias, is_identifier, push_printable, repr, Typer};

/// The stub text of one server at most; the tools past it are left out, and said so.
pub const MAX_STUB_BYTES: usize = 1 << 20;
/// The longest tool description kept in a docstring.
const MAX_DOC_CHARS: usize = 4000;
/// The longest parameter description kept in a docstring.
const MAX_PARAM_DOC: usize = 300;

/// One parameter as the stub, the signature and `help()` show it.
pub struct TypedParam {
    /// The schema's name for it.
    pub name: String,
    /// Its annotation (`str`, `Literal['a', 'b']`, `GetWeatherWhere`...).
    pub ty: String,
    /// Whether the schema requires it.
    pub required: bool,
    /// The schema's default, when it declares one.
    pub default: Option<Value>,
    /// Its description, when it has one.
    pub doc: Option<String>,
}

/// One tool's typing: parameters (required first, then optional, each in the schema's order),
/// return annotation, and the `TypedDict` classes they name.
pub struct ToolTypes {
    /// The parameters.
    pub params: Vec<TypedParam>,
    /// The return annotation.
    pub returns: String,
    /// The class text, in definition order.
    pub classes: Vec<String>,
    /// The top-level fields of the result's `TypedDict`, `name: type`, for the docstring.
    pub result_fields: Vec<String>,
}

impl ToolTypes {
    /// The typing of `tool`.
    pub fn of(tool: &Tool) -> ToolTypes {
        let mut typer = Typer::new(&alias(&tool.name));
        let schema = tool.input_schema.as_ref();
        let props = schema.get("properties").and_then(Value::as_object);
        let required = pytypes::required_of(schema);
        let mut params: Vec<TypedParam> = props
            .into_iter()
            .flatten()
            .map(|(name, p)| TypedParam {
                name: name.clone(),
                ty: typer.ty(p, name),
                required: required.contains(&name),
                default: p.get("default").cloned(),
                doc: p
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
            .collect();
        // Required first; `sort_by_key` is stable, so each group keeps the schema's order.
        params.sort_by_key(|p| !p.required);
        let (returns, result_fields) = returns(tool, &mut typer);
        ToolTypes {
            params,
            returns,
            classes: typer.classes(),
            result_fields,
        }
    }

    /// `name(a: int, b: str | None = None) -> R`: the signature the docs and errors show.
    pub fn signature(&self, name: &str) -> String {
        let shown: Vec<String> = self.params.iter().map(TypedParam::shown).collect();
        format!("{name}({}) -> {}", shown.join(", "), self.returns)
    }
}

impl TypedParam {
    /// Its annotation in a signature: `ty`, or `ty | None` when it is optional and its default
    /// is `None` (the schema declares none).
    pub fn annotation(&self) -> String {
        if self.required || self.default.is_some() {
            self.ty.clone()
        } else {
            optional(&self.ty)
        }
    }

    /// `name: ty`, with `= default` when optional (`None` unless the schema declares one).
    fn shown(&self) -> String {
        let ty = self.annotation();
        match (&self.default, self.required) {
            (_, true) => format!("{}: {ty}", self.name),
            (Some(d), false) => format!("{}: {ty} = {}", self.name, repr(d)),
            (None, false) => format!("{}: {ty} = None", self.name),
        }
    }
}

/// `ty | None`, unless it admits `None` already.
fn optional(ty: &str) -> String {
    if ty == "Any" || ty == "None" || ty.ends_with("| None") {
        ty.to_string()
    } else {
        format!("{ty} | None")
    }
}

/// The return annotation of `tool`, and its result class's fields.
fn returns(tool: &Tool, typer: &mut Typer) -> (String, Vec<String>) {
    let Some(out) = tool.output_schema.as_deref() else {
        return ("str".into(), Vec::new());
    };
    if super::result::wraps_result(tool) {
        let inner = out
            .get("properties")
            .and_then(|p| p.get("result"))
            .cloned()
            .unwrap_or(Value::Null);
        return (typer.ty(&inner, "Result"), Vec::new());
    }
    let schema = Value::Object(out.clone());
    let ty = typer.ty(&schema, "Result");
    let required = pytypes::required_of(out);
    let fields = out
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            let mut scratch = Typer::new(&alias(&tool.name));
            p.iter()
                .map(|(k, v)| {
                    let t = scratch.ty(v, k);
                    let opt = if required.contains(&k) {
                        ""
                    } else {
                        " (optional)"
                    };
                    format!("{k}: {t}{opt}")
                })
                .collect()
        })
        .unwrap_or_default();
    (ty, fields)
}

/// The docstring text of a tool (not yet quoted): its description, its parameters'
/// descriptions, and what it returns.
pub fn doc_text(tool: &Tool, types: &ToolTypes) -> String {
    let mut doc: String = tool
        .description
        .as_deref()
        .unwrap_or("")
        .trim()
        .chars()
        .take(MAX_DOC_CHARS)
        .collect();
    let described: Vec<&TypedParam> = types.params.iter().filter(|p| p.doc.is_some()).collect();
    if !described.is_empty() {
        doc.push_str("\n\nArgs:");
        for p in described {
            let d: String = p
                .doc
                .as_deref()
                .unwrap_or("")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(MAX_PARAM_DOC)
                .collect();
            doc.push_str(&format!("\n    {}: {d}", p.name));
        }
    }
    if types.returns == "str" && tool.output_schema.is_none() {
        doc.push_str(
            "\n\nReturns its text (text that is JSON comes back parsed: a dict, a list...).",
        );
    }
    if !types.result_fields.is_empty() {
        doc.push_str(&format!("\n\nReturns {}:", types.returns));
        for f in &types.result_fields {
            doc.push_str(&format!("\n    {f}"));
        }
    }
    doc.trim().to_string()
}

/// `text` as a triple-quoted Python string literal that nothing in it can end early.
fn docstring(text: &str, indent: &str) -> String {
    let mut out = String::from("\"\"\"");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => {
                out.push('\n');
                out.push_str(indent);
            }
            '\t' => out.push_str("    "),
            c => push_printable(&mut out, c),
        }
    }
    out.push_str("\"\"\"");
    out
}

/// The stub of one tool: its classes, then `async def <alias>(*, ...) -> R` with its docstring.
fn tool_stub(tool: &Tool) -> String {
    let types = ToolTypes::of(tool);
    let name = alias(&tool.name);
    let mut out = String::new();
    for class in &types.classes {
        out.push_str(class);
        out.push_str("\n\n");
    }
    let params = if types.params.iter().all(|p| is_identifier(&p.name)) {
        let shown: Vec<String> = types.params.iter().map(TypedParam::shown).collect();
        if shown.is_empty() {
            String::new()
        } else {
            format!("*, {}", shown.join(", "))
        }
    } else {
        // Parameter names Python cannot spell: keyword arguments typed by a `TypedDict`.
        let class = format!("{}Args", pytypes::pascal(&name));
        let fields: Vec<String> = types
            .params
            .iter()
            .map(|p| {
                let ty = if p.required {
                    p.ty.clone()
                } else {
                    format!("NotRequired[{}]", p.ty)
                };
                format!("{}: {ty}", pytypes::str_repr(&p.name))
            })
            .collect();
        out.push_str(&format!(
            "{class} = TypedDict({}, {{{}}})\n\n\n",
            pytypes::str_repr(&class),
            fields.join(", ")
        ));
        format!("**kwargs: Unpack[{class}]")
    };
    out.push_str(&format!(
        "async def {name}({params}) -> {}:\n    {}\n    ...\n",
        types.returns,
        docstring(&doc_text(tool, &types), "    ")
    ));
    out
}

/// The stub module of server `server` with `tools` (Python 3.11 or later): valid Python,
/// at most [`MAX_STUB_BYTES`].
pub fn stubs(server: &str, tools: &[Tool]) -> String {
    let server_alias = alias(server);
    let head = format!(
        "Typed stubs of MCP server {}: call each tool as `await mcp_{server_alias}.<tool>(...)`.\n\
         Generated by mcp-code-bridge from the server's tool list.",
        repr(&Value::String(server.to_string()))
    );
    let mut out = docstring(&head, "");
    out.push_str("\nfrom typing import Any, Literal, NotRequired, TypedDict, Unpack\n");
    for (i, tool) in tools.iter().enumerate() {
        let stub = tool_stub(tool);
        if out.len() + stub.len() > MAX_STUB_BYTES {
            out.push_str(&format!(
                "\n\n# {} more tools left out: the stub text is capped at {MAX_STUB_BYTES} bytes.\n",
                tools.len() - i
            ));
            break;
        }
        out.push_str("\n\n");
        out.push_str(&stub);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str, desc: &str, input: Value, output: Option<Value>) -> Tool {
        let Value::Object(m) = input else {
            panic!("object")
        };
        let mut t = Tool::new(name.to_string(), desc.to_string(), Arc::new(m));
        if let Some(Value::Object(o)) = output {
            t.output_schema = Some(Arc::new(o));
        }
        t
    }

    fn weather() -> Tool {
        tool(
            "get-structured-content",
            "Returns structured weather.",
            json!({"type": "object", "properties": {
                "location": {"type": "string", "enum": ["New York", "Chicago"], "description": "City"}
            }, "required": ["location"]}),
            Some(json!({"type": "object", "properties": {
                "temperature": {"type": "number"}, "conditions": {"type": "string"},
                "humidity": {"type": "number"}
            }, "required": ["temperature", "conditions", "humidity"]})),
        )
    }

    #[test]
    fn a_tool_with_an_output_schema_returns_its_typed_dict() {
        let text = stubs("everything", &[weather()]);
        assert!(text.contains(
            "class GetStructuredContentResult(TypedDict):\n    temperature: float\n    conditions: str\n    humidity: float\n"
        ), "{text}");
        assert!(text.contains(
            "async def get_structured_content(*, location: Literal['New York', 'Chicago']) -> GetStructuredContentResult:"
        ), "{text}");
        assert!(text.contains("Args:\n        location: City"), "{text}");
        let types = ToolTypes::of(&weather());
        assert_eq!(
            types.signature("get-structured-content"),
            "get-structured-content(location: Literal['New York', 'Chicago']) -> GetStructuredContentResult"
        );
    }

    #[test]
    fn text_only_tools_return_str_and_fastmcp_wraps_are_unwrapped() {
        let echo = tool(
            "echo",
            "",
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": 3}, "s": {"type": "string"}}}),
            None,
        );
        assert_eq!(
            ToolTypes::of(&echo).signature("echo"),
            "echo(n: int = 3, s: str | None = None) -> str"
        );
        let wrapped = tool(
            "add",
            "",
            json!({"type": "object", "properties": {}}),
            Some(
                json!({"type": "object", "title": "addOutput", "required": ["result"],
                        "properties": {"result": {"type": "integer"}}}),
            ),
        );
        assert_eq!(ToolTypes::of(&wrapped).signature("add"), "add() -> int");
    }

    #[test]
    fn a_hostile_description_cannot_end_the_docstring() {
        let evil = tool(
            "x",
            "a\"\"\"\nimport os; os.system('boom')\n\"\"\"\\",
            json!({"type": "object", "properties": {"from": {"type": "string", "description": "\"\"\""}}}),
            None,
        );
        let text = stubs("s\"\"\"", &[evil]);
        assert!(!text.contains("\"\"\"\nimport os"), "{text}");
        assert!(text.contains("**kwargs: Unpack[XArgs]"), "{text}");
    }

    #[test]
    fn the_text_is_capped() {
        let big = "d".repeat(4000);
        let tools: Vec<Tool> = (0..400)
            .map(|i| tool(&format!("t{i}"), &big, json!({"type": "object"}), None))
            .collect();
        let text = stubs("s", &tools);
        assert!(text.len() <= MAX_STUB_BYTES + 200, "{}", text.len());
        assert!(
            text.contains("more tools left out"),
            "cut without saying so"
        );
    }
}
