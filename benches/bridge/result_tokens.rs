//! What the model reads of five typical `run_python` results, before and after results stopped
//! carrying `structuredContent` by default (GUIDE.md, "Output"). Claude Code passes the model only the
//! JSON of `structuredContent` when a result has it (anthropics/claude-code#54450, #79944), else
//! the text blocks; "before" is the bridge with `MCP_BRIDGE_STRUCTURED_CONTENT=1`, which is what
//! every result carried until then. Tokens are counted with OpenAI's o200k_base BPE
//! (tiktoken-rs, offline): Claude's tokenizer is not public, so read the ratios, not the counts.

use rmcp::model::CallToolResult;

use crate::client::{text_of, Bridge, Workdir};
use crate::stats::Table;

/// (name, code, servers, timeout) of the five results.
const CASES: &[(&str, &str, &[&str], u64)] = &[
    ("print", "print('The answer is', 6 * 7)", &[], 30),
    (
        "DataFrame",
        "import pandas as pd\nprint(pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], \
         'temp': [3.5, 18.25, 31.0], 'rain': [True, False, False]}).describe(include='all'))",
        &[],
        30,
    ),
    (
        "traceback",
        "def parse(row):\n    return int(row['qty'])\nrows = [{'qty': '3'}, {'qty': 'three'}]\n\
         print(sum(parse(r) for r in rows))",
        &[],
        30,
    ),
    (
        "tool result",
        "r = await mcp_stub.echo(text='order 1042: 3 items, shipped \"express\"\\nETA: 2 days')\n\
         print(r)",
        &["stub"],
        60,
    ),
    (
        "timeout",
        "import time\nprint('starting')\ntime.sleep(30)",
        &[],
        1,
    ),
];

/// What Claude Code gives the model: the structured JSON when present, else the text.
fn model_view(r: &CallToolResult) -> String {
    match &r.structured_content {
        Some(v) => serde_json::to_string(v).expect("json"),
        None => text_of(r),
    }
}

/// Runs the five cases on a bridge with `env`; returns the model's view of each.
async fn views(env: &[(&str, &str)]) -> Vec<String> {
    let work = Workdir::new(0);
    let b = Bridge::start(&work, env).await;
    let mut out = Vec::new();
    for (_, code, servers, timeout) in CASES {
        out.push(model_view(&b.call(code, servers, *timeout).await));
    }
    b.stop().await;
    out
}

/// The `result_tokens` scenario: one row per case, and the total.
pub async fn result_tokens(t: &mut Table, _quick: bool) {
    let bpe = tiktoken_rs::o200k_base().expect("o200k_base ships inside tiktoken-rs");
    let before = views(&[("MCP_BRIDGE_STRUCTURED_CONTENT", "1")]).await;
    let after = views(&[]).await;
    let (mut sum_before, mut sum_after) = (0, 0);
    for (i, (name, ..)) in CASES.iter().enumerate() {
        let b = bpe.encode_with_special_tokens(&before[i]).len();
        let a = bpe.encode_with_special_tokens(&after[i]).len();
        sum_before += b;
        sum_after += a;
        t.single(
            &format!("model sees: {name} result"),
            "tokens",
            a as f64,
            format!(
                "before (structuredContent JSON): {b}; ratio {:.2}",
                a as f64 / b as f64
            ),
        );
    }
    t.single(
        "model sees: the five results",
        "tokens",
        sum_after as f64,
        format!(
            "before: {sum_before}; ratio {:.2}",
            sum_after as f64 / sum_before as f64
        ),
    );
}
