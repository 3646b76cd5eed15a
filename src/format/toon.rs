//! TOON: the report's fields as a TOON block (the `toon-format` crate).

use crate::report::RunReport;

/// Renders `report` as TOON; falls back to JSON if the encoder refuses (it should not).
pub fn render_toon(report: &RunReport) -> String {
    toon_format::encode_default(report).unwrap_or_else(|err| {
        tracing::warn!(cause = %err, "TOON encoding failed; sending JSON");
        serde_json::to_string(report).unwrap_or_default()
    })
}
