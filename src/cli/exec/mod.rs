//! `mcp-code-bridge exec`: one snippet run through the same path as `run_python`, for scripts
//! and CI; `output.rs` says where its output goes and which exit code it ends with.

mod ask;
mod output;

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::sync::Arc;

use crate::app::App;
use crate::audit::AuditLog;
use crate::calls::Language;
use crate::config::Settings;
use crate::sandbox::{Progress, RunRequest};
use crate::shutdown;

pub use ask::{ExecAnswers, ExecAsker};
pub use output::{
    exit_code, print, status, to_json, write_plain, EXIT_CANCELLED, EXIT_OK, EXIT_RAISED,
    EXIT_SANDBOX, EXIT_TIMEOUT, EXIT_USAGE,
};

/// What `exec` was asked to run, and how: its command line.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The code (Python unless `--language` says otherwise), or `-` to read it from stdin.
    pub code: String,
    /// MCP servers to load, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub servers: Vec<String>,
    /// Timeout in seconds (default MCP_BRIDGE_TIMEOUT, capped at MCP_BRIDGE_MAX_TIMEOUT).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Print one JSON object on stdout instead: status, exit_code, stdout, stderr, error,
    /// notice, duration (seconds).
    #[arg(long)]
    pub json: bool,
    /// Accept a downstream server's form question with its defaults (for scripts and CI);
    /// without it, questions are asked on the terminal when stdin is one, else declined.
    #[arg(long)]
    pub answer_defaults: bool,
    /// The code's language: python, or typescript (as `run_typescript` runs it: JavaScript
    /// or TypeScript, in the sandbox's node).
    #[arg(long, value_enum, default_value = "python")]
    pub language: ExecLanguage,
}

/// `exec --language`: the words the command line takes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExecLanguage {
    /// Python, as `run_python` runs it.
    Python,
    /// TypeScript or JavaScript, as `run_typescript` runs it.
    Typescript,
}

impl From<ExecLanguage> for Language {
    fn from(l: ExecLanguage) -> Language {
        match l {
            ExecLanguage::Python => Language::Python,
            ExecLanguage::Typescript => Language::TypeScript,
        }
    }
}

/// Runs `args.code` once (`-`: read from stdin) and prints the report (`output.rs`); the exit
/// code says how it ended. `answer_defaults`: a downstream server's form question is accepted
/// with its defaults; else it is asked on the terminal when stdin is one (`ask.rs`), else
/// declined. TypeScript is run whatever `MCP_BRIDGE_LANGUAGES` says: the setting decides which
/// tools a client is shown, and a command line asks for the language itself.
pub async fn exec(settings: Arc<Settings>, audit: Option<AuditLog>, args: ExecArgs) -> ExitCode {
    let ExecArgs {
        code,
        servers,
        timeout,
        json,
        answer_defaults,
        language,
    } = args;
    let language = Language::from(language);
    let answers = if answer_defaults {
        Some(ExecAnswers::Defaults)
    } else if code != "-" && std::io::stdin().is_terminal() {
        Some(ExecAnswers::Terminal)
    } else {
        None
    };
    let code = if code == "-" {
        let mut buf = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut buf) {
            eprintln!("mcp-code-bridge: reading code from stdin: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
        buf
    } else {
        code
    };
    let started = std::time::Instant::now();
    // A script waits for a missing image's whole build (its progress goes to the log).
    let mut patient = settings.as_ref().clone();
    patient.image_build_wait = std::time::Duration::from_secs(EXEC_IMAGE_BUILD_WAIT_SECS);
    let app = App::with_engine_audited(Arc::new(patient), audit);
    let capped = settings.timeout_capped_note(timeout);
    // Calls that need approval fail closed; servers' questions go to `ExecAsker`.
    let asker = answers.map(|a| Arc::new(ExecAsker::new(a)) as Arc<dyn crate::calls::Asker>);
    // A server that needs sign-in is signed in to as `login` does, when a link can be opened.
    let way = if crate::upstream::oauth::browser::can_open() {
        crate::calls::SignInWay::Open
    } else {
        crate::calls::SignInWay::Nobody
    };
    let scope = crate::calls::RunScope::new(&code, None, asker)
        .with_audited_code(settings.policy.audit_code.then_some(&*code))
        .signing_in(way)
        .in_language(language);
    let scope = std::sync::Arc::new(scope);
    let req = RunRequest {
        code,
        servers: servers.into(),
        timeout: settings.call_timeout(timeout),
        arrived: tokio::time::Instant::now(),
        cancel: app.ct.child_token(),
        progress: Progress::none(),
        scope,
    };
    let report = tokio::select! {
        r = app.sandbox.run(req) => r,
        _ = shutdown::signalled() => {
            app.shutdown().await;
            return ExitCode::from(EXIT_CANCELLED);
        }
    };
    let duration = started.elapsed();
    app.shutdown().await;
    let mut report = report;
    if let Some(note) = capped {
        report.add_notice(note);
    }
    ExitCode::from(print(&report, json, duration))
}

/// How long `exec` waits for a missing image's build (MCP_BRIDGE_IMAGE_BUILD_WAIT is for MCP
/// clients, which give up on a request after about a minute).
const EXEC_IMAGE_BUILD_WAIT_SECS: u64 = 3 * 3600;
