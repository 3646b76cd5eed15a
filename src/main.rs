//! The `mcp-code-bridge` command: CLI parsing, logging to stderr, and exit codes.

use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use mcp_code_bridge::app::App;
use mcp_code_bridge::bridge::RunRequest;
use mcp_code_bridge::config::Settings;
use mcp_code_bridge::{exec_cli, server, shutdown};

/// One MCP tool, run_python, in a locked-down container that reaches your other MCP servers.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdin/stdout (logs go to stderr).
    Run,
    /// Run one snippet through the same path: its stdout to stdout, its stderr and traceback to
    /// stderr. Exit 0 ok, 1 raised, n for sys.exit(n), 2 usage or config error, 124 timeout,
    /// 125 sandbox or engine failure, 130 interrupted.
    Exec {
        /// Python code, or `-` to read it from stdin.
        code: String,
        /// MCP servers to load, comma separated.
        #[arg(long, value_delimiter = ',')]
        servers: Vec<String>,
        /// Timeout in seconds (default MCP_BRIDGE_TIMEOUT, capped at MCP_BRIDGE_MAX_TIMEOUT).
        #[arg(long)]
        timeout: Option<u64>,
        /// Print one JSON object on stdout instead: status, exit_code, stdout, stderr, error,
        /// notice, duration (seconds).
        #[arg(long)]
        json: bool,
    },
    /// List the discovered MCP servers, where each was defined, and config problems; exit 3
    /// when there are problems. Starts nothing.
    Servers {
        /// Approve a project's server (its `.mcp.json`, `.cursor/mcp.json` or `.vscode/mcp.json`
        /// entry as it is now) so the bridge may start it; repeat for several.
        #[arg(long, value_name = "NAME")]
        allow: Vec<String>,
    },
    /// Check the engine, the image and, inside a sandbox, its isolation; non-zero exit if any fails.
    Doctor,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // exec's own failures must not look like the code's (1 = it raised).
    let failure = match cli.command {
        Command::Exec { .. } => ExitCode::from(exec_cli::EXIT_SANDBOX),
        _ => ExitCode::FAILURE,
    };
    let settings = match Settings::from_env() {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("mcp-code-bridge: configuration error: {e}");
            return ExitCode::from(exec_cli::EXIT_USAGE);
        }
    };
    init_logging(&settings.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcp-code-bridge: cannot start the async runtime: {e}");
            return failure;
        }
    };
    match runtime.block_on(dispatch(cli.command, settings)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mcp-code-bridge: {e:#}");
            failure
        }
    }
}

async fn dispatch(command: Command, settings: Arc<Settings>) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run => run(settings).await,
        Command::Exec {
            code,
            servers,
            timeout,
            json,
        } => exec(settings, code, servers, timeout, json).await,
        Command::Servers { allow } if allow.is_empty() => {
            Ok(mcp_code_bridge::servers_cli::list(&settings))
        }
        Command::Servers { allow } => Ok(mcp_code_bridge::servers_cli::allow(&settings, &allow)),
        Command::Doctor => {
            let (report, ok) = mcp_code_bridge::doctor::doctor(settings).await;
            // A closed stdout (`doctor | head`) ends quietly, never with a panic.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), report.as_bytes());
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

async fn run(settings: Arc<Settings>) -> anyhow::Result<ExitCode> {
    let app = App::with_engine(settings.clone());
    app.index_in_background();
    if settings.prewarm {
        app.sandbox.prewarm();
    }
    let handler = server::BridgeServer::new(app.sandbox.clone(), settings, app.outbox.clone());
    let (read, write) = rmcp::transport::stdio_pipes();
    let result = tokio::select! {
        r = server::serve(handler, read, write, app.ct.clone()) => r,
        _ = shutdown::signalled() => Ok(()),
    };
    app.shutdown().await;
    result.map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `code` once and prints the report (`exec_cli`); the exit code says how it ended.
async fn exec(
    settings: Arc<Settings>,
    code: String,
    servers: Vec<String>,
    timeout: Option<u64>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let code = if code == "-" {
        let mut buf = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut buf) {
            eprintln!("mcp-code-bridge: reading code from stdin: {e}");
            return Ok(ExitCode::from(exec_cli::EXIT_USAGE));
        }
        buf
    } else {
        code
    };
    let started = std::time::Instant::now();
    let app = App::with_engine(settings.clone());
    let capped = settings.timeout_capped_note(timeout);
    let req = RunRequest {
        code,
        servers,
        timeout: settings.call_timeout(timeout),
        arrived: tokio::time::Instant::now(),
        cancel: app.ct.child_token(),
    };
    let report = tokio::select! {
        r = app.sandbox.run(req) => r,
        _ = shutdown::signalled() => {
            app.shutdown().await;
            return Ok(ExitCode::from(exec_cli::EXIT_CANCELLED));
        }
    };
    let duration = started.elapsed();
    app.shutdown().await;
    let mut report = report;
    if let Some(note) = capped {
        report.add_notice(note);
    }
    Ok(ExitCode::from(exec_cli::print(&report, json, duration)))
}

fn init_logging(level: &str) {
    // rmcp logs every child exit and session end at info: keep it to warnings unless asked.
    let directive = if level.contains("rmcp") {
        level.to_string()
    } else {
        format!("{level},rmcp=warn")
    };
    let filter = tracing_subscriber::EnvFilter::try_new(directive)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
}
