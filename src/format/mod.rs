//! Rendering a [`RunReport`] for the model: compact text or TOON. Pure functions, no I/O.

mod compact;
mod toon;

use crate::config::OutputMode;
use crate::report::RunReport;

pub use compact::render_compact;
pub use toon::render_toon;

/// Renders `report` in `mode`.
pub fn render(report: &RunReport, mode: OutputMode) -> String {
    match mode {
        OutputMode::Compact => render_compact(report),
        OutputMode::Toon => render_toon(report),
    }
}

/// The report as a JSON object with empty fields dropped (the `structuredContent`).
pub fn structured(report: &RunReport) -> serde_json::Value {
    serde_json::to_value(report).expect("RunReport serializes: plain data")
}
