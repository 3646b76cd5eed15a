//! TOON: the report's fields as a TOON block (the `toon-format` crate), stdout and stderr as
//! length-annotated arrays of lines (`stdout[2]: a,b`) in a fenced block, as the Python bridge
//! renders them.

use serde_json::Value;

use crate::report::RunReport;

/// Renders `report` as a fenced TOON block; falls back to JSON if the encoder refuses (it
/// should not).
pub fn render_toon(report: &RunReport) -> String {
    let mut payload = serde_json::to_value(report).unwrap_or(Value::Null);
    for key in ["stdout", "stderr"] {
        if let Some(Value::String(text)) = payload.get(key) {
            let lines = text.lines().map(|l| Value::String(l.to_string())).collect();
            payload[key] = Value::Array(lines);
        }
    }
    let body = toon_format::encode_default(&payload).unwrap_or_else(|err| {
        tracing::warn!(cause = %err, "TOON encoding failed; sending JSON");
        serde_json::to_string(&payload).unwrap_or_default()
    });
    format!("```toon\n{}\n```", body.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RunStatus;

    #[test]
    fn streams_are_arrays_of_lines() {
        let report = RunReport {
            status: RunStatus::Error,
            stdout: "a\nb, c\n".into(),
            stderr: "warn\n".into(),
            error: Some("Traceback\nValueError: x".into()),
            ..Default::default()
        };
        let text = render_toon(&report);
        assert!(
            text.starts_with("```toon\n") && text.ends_with("\n```"),
            "{text}"
        );
        assert!(text.contains("status: error"), "{text}");
        assert!(text.contains("stdout[2]: a,\"b, c\""), "{text}");
        assert!(text.contains("stderr[1]: warn"), "{text}");
    }
}
