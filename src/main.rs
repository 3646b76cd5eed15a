//! The `mcp-code-bridge` command: CLI parsing, logging to stderr, and exit codes.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use mcp_code_bridge::audit::AuditLog;
use mcp_code_bridge::cli::exec as exec_cli;
use mcp_code_bridge::cli::image::ImageAction;
use mcp_code_bridge::cli::safe_line::safe_line;
use mcp_code_bridge::cli::setup::ClientArg;
use mcp_code_bridge::config::{Client, Settings};

/// One MCP tool, run_python, in a locked-down container that reaches your other MCP servers.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Log what the bridge does (info) to stderr; `servers`, `doctor`, `image` and `setup`
    /// otherwise print only their answer and warnings. MCP_BRIDGE_LOG_LEVEL, when set, decides.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdin/stdout (logs go to stderr).
    Run,
    /// Serve MCP to many agents over streamable HTTP at http://ADDR/mcp, each client in its own
    /// sandbox (one per MCP session; clients without sessions get a handle from run_python).
    /// Loopback only, and only this user's processes, unless --token-file names the bearer
    /// tokens (`TOKEN [NAME]` per line, mode 0600; re-read on SIGHUP). SIGTERM drains: runs in
    /// flight get MCP_BRIDGE_DRAIN_TIMEOUT, then every sandbox is removed. Limits: see
    /// GUIDE.md, "Serving many agents".
    Serve {
        /// Where to listen (port 0: any free port; the log says which).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
        http: std::net::SocketAddr,
        /// The bearer tokens file (required for a non-loopback address).
        #[arg(long, value_name = "PATH")]
        token_file: Option<std::path::PathBuf>,
    },
    /// Run one snippet through the same path: its stdout to stdout, its stderr and traceback to
    /// stderr. Exit 0 ok, 1 raised, n for sys.exit(n), 2 usage or config error, 124 timeout,
    /// 125 sandbox or engine failure, 130 interrupted.
    Exec(exec_cli::ExecArgs),
    /// List the discovered MCP servers, where each was defined, and config problems; exit 3
    /// when there are problems. Starts nothing.
    #[command(group(clap::ArgGroup::new("approving").args(["allow", "approve_changes"]).multiple(true)))]
    Servers {
        /// Approve a project's server (its `.mcp.json`, `.cursor/mcp.json` or `.vscode/mcp.json`
        /// entry as written now) so the bridge may start it: shows the one definition `servers`
        /// shows and asks on a terminal (or takes --yes); repeat for several.
        #[arg(long, value_name = "NAME")]
        allow: Vec<String>,
        /// With --allow: approve the definition in this file instead (another file defining
        /// the same name).
        #[arg(long, value_name = "FILE", requires = "allow")]
        from: Option<std::path::PathBuf>,
        /// With --allow or --approve-changes: approve without asking (after reading what it
        /// prints).
        #[arg(long, requires = "approving")]
        yes: bool,
        /// Pin the changed tool definitions this server listed since its tools were pinned
        /// (MCP_BRIDGE_PIN_TOOLS): shows the diff and asks on a terminal (or takes --yes).
        #[arg(long, value_name = "NAME", conflicts_with_all = ["allow", "from"])]
        approve_changes: Option<String>,
    },
    /// Sign in to a remote MCP server (OAuth): opens the sign-in page with $BROWSER when set,
    /// else the desktop's opener, else prints the link; waits for the browser's callback on
    /// loopback (MCP_BRIDGE_LOGIN_TIMEOUT). Exit 0 signed in, 1 failed, 2 no such remote server.
    Login {
        /// The server's name.
        name: String,
    },
    /// Sign out of a remote MCP server: its tokens are revoked where its authorization server
    /// offers it, and forgotten.
    Logout {
        /// The server's name.
        name: String,
        /// Sign this `serve` caller (its token's name in the tokens file) out of the server,
        /// instead of yourself.
        #[arg(long, value_name = "TOKEN_NAME")]
        caller: Option<String>,
    },
    /// Check the engine, the image and, inside a sandbox, its isolation; non-zero exit if any fails.
    Doctor,
    /// List the skills sandbox code kept (runtime.save_skill): name, digest, state (approved,
    /// pending, changed), owner, description. A skill runs in later runs only once approved in
    /// its exact text. Exit 0 done, 1 not found, declined or a store problem.
    Skills {
        /// Show this skill's text and approve that text (asks on a terminal, or --yes).
        #[arg(long, value_name = "NAME", conflicts_with = "remove")]
        approve: Option<String>,
        /// With --approve: approve without asking (after reading the text it prints).
        #[arg(long, requires = "approve")]
        yes: bool,
        /// Remove this skill.
        #[arg(long, value_name = "NAME", conflicts_with = "export")]
        remove: Option<String>,
        /// Write your approved skills as folders DIR/<name>/ holding SKILL.md (front matter
        /// with name and description, how to call it) and the module <name>.py.
        #[arg(long, value_name = "DIR", conflicts_with = "approve")]
        export: Option<std::path::PathBuf>,
    },
    /// Register the bridge in the MCP clients on this machine, after showing each change as a
    /// diff; optionally copy their servers into ~/MCPs (and with --move take them out of the
    /// clients; --undo puts them back).
    ///
    /// Edits the user-scope config files of Claude Code, Cursor, VS Code, Claude Desktop and
    /// Windsurf in place (comments, order and indentation kept). Asks on a terminal; without
    /// one, changes nothing unless --yes. Each changed file is backed up next to itself first
    /// (FILE.bak-<UTC time>). A second run changes nothing. Exit 0 done or nothing to do, 1 a
    /// file was left untouched (problem) or the changes were declined, 2 nothing done (no
    /// terminal to confirm on and no --yes, bad --command, no home folder).
    Setup {
        /// A client to register in; repeat for several (default: every client found).
        #[arg(long = "client", value_name = "CLIENT", value_enum)]
        clients: Vec<ClientArg>,
        /// The bridge's server name in the clients' files.
        #[arg(long, default_value = "code")]
        name: String,
        /// The command line clients start the bridge with (quoted as in a shell), e.g.
        /// "uvx mcp-code-bridge run" [default: this binary's absolute path and `run`, or `uvx
        /// mcp-code-bridge run` when this binary runs from uv's cache]
        #[arg(long, value_name = "COMMAND LINE")]
        command: Option<String>,
        /// Also copy the clients' servers into ~/MCPs (MCP_BRIDGE_CONFIG_DIR), as written, into
        /// new files `from-<client>.json` that name their source; never over an existing file
        /// or server name.
        #[arg(long)]
        import_servers: bool,
        /// With --import-servers: then take the copied servers out of the clients' files (the
        /// bridge serves them), recording what was taken out for --undo; what cannot be copied
        /// stays, with the reason.
        #[arg(long = "move")]
        move_servers: bool,
        /// Put back into the clients' files (those of --client, when given) what --move took
        /// out (unless an entry of that name is there again) and remove its copies from ~/MCPs
        /// (unless changed since).
        #[arg(long, conflicts_with_all = ["import_servers", "move_servers", "command", "name"])]
        undo: bool,
        /// Apply without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Show the diffs and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Show the audit log's last entries (MCP_BRIDGE_AUDIT_LOG, and its rotated files when
    /// --last reaches back): one line per tool call, a summary line ending each run; refused
    /// calls stand out (DENIED, LIMIT, DECLINED, UNAPPROVED) and the header counts them. Lines
    /// that are not audit entries are skipped and counted. Exit 2 when no log is named. With
    /// --verify, check the log's chain of MACs instead and name the first line that does not hold.
    Audit {
        /// How many entries to show (the newest).
        #[arg(long, value_name = "N", default_value_t = mcp_code_bridge::cli::audit::DEFAULT_LAST)]
        last: usize,
        /// Print the entries as JSON lines (non-ASCII escaped) instead.
        #[arg(long)]
        json: bool,
        /// The log to read [default: MCP_BRIDGE_AUDIT_LOG].
        #[arg(long, value_name = "PATH")]
        file: Option<std::path::PathBuf>,
        /// Check the log's chain of MACs, oldest kept file first, instead: exit 0 when every
        /// line holds, 1 naming the first line that does not, 2 when it cannot be checked.
        #[arg(long, conflicts_with_all = ["last", "json"])]
        verify: bool,
    },
    /// Sandboxes on Kubernetes: print the pod spec the design uses, judge its self-check.
    Kube {
        #[command(subcommand)]
        action: mcp_code_bridge::cli::kube::KubeAction,
    },
    /// The sandbox image (MCP_BRIDGE_IMAGE): build it, show it, remove it.
    Image {
        /// The engine to use (default: MCP_BRIDGE_RUNTIME, else the first found).
        #[arg(long, global = true, value_parser = ["podman", "docker"])]
        engine: Option<String>,
        #[command(subcommand)]
        action: ImageAction,
    },
}

fn main() -> ExitCode {
    // Before any thread: the allocator's arenas (`heap`).
    mcp_code_bridge::heap::tune();
    let cli = Cli::parse();
    // exec's own failures must not look like the code's (1 = it raised).
    let failure = match cli.command {
        Command::Exec(_) => ExitCode::from(exec_cli::EXIT_SANDBOX),
        _ => ExitCode::FAILURE,
    };
    let settings = match Settings::from_env() {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!(
                "mcp-code-bridge: configuration error: {}",
                mcp_code_bridge::cli::safe_line::safe_line(&e.to_string())
            );
            return ExitCode::from(exec_cli::EXIT_USAGE);
        }
    };
    // `run` and `exec` log what they do; the other commands print their answer to a person.
    let level = match (&settings.log_level, &cli.command) {
        (Some(level), _) => level.as_str(),
        (None, Command::Run | Command::Exec(_) | Command::Serve { .. }) => "info",
        (None, _) if cli.verbose => "info",
        (None, _) => "warn",
    };
    init_logging(level);
    for note in settings.data.mounts.iter().flat_map(|m| &m.unchecked) {
        tracing::warn!(
            "MCP_BRIDGE_MOUNTS: {note}; sockets and FIFOs there were not looked for (the \
             sandbox's own rules still keep them closed)"
        );
    }
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
            eprintln!(
                "mcp-code-bridge: {}",
                mcp_code_bridge::cli::safe_line::safe_line(&format!("{e:#}"))
            );
            failure
        }
    }
}

async fn dispatch(command: Command, mut settings: Arc<Settings>) -> anyhow::Result<ExitCode> {
    let runs_code = matches!(
        command,
        Command::Run | Command::Exec(_) | Command::Serve { .. }
    );
    let folder = if runs_code {
        // A folder another user could reach is refused before anything is put in it.
        match mcp_code_bridge::app::check_folders(&settings) {
            Ok(folder) => Some(folder),
            Err(e) => {
                eprintln!("mcp-code-bridge: {e}");
                return Ok(ExitCode::from(exec_cli::EXIT_USAGE));
            }
        }
    } else if matches!(command, Command::Doctor | Command::Image { .. }) {
        // They may start a podman service too; a refused folder is theirs to report.
        mcp_code_bridge::app::runtime_folder(&settings).ok()
    } else {
        None
    };
    if let Some(folder) = folder {
        settings = Arc::new(Settings {
            runtime_folder: Some(folder),
            ..(*settings).clone()
        });
    }
    // An audit log that cannot be written safely stops the bridge: never run unaudited.
    let audit = if runs_code {
        match AuditLog::open(&settings.policy, &settings.state_dir) {
            Ok(log) => log,
            Err(e) => {
                eprintln!("mcp-code-bridge: {}", safe_line(&e.to_string()));
                return Ok(ExitCode::from(exec_cli::EXIT_USAGE));
            }
        }
    } else {
        None
    };
    match command {
        Command::Run => Ok(mcp_code_bridge::cli::run::run(settings, audit).await?),
        Command::Serve { http, token_file } => {
            let opts = mcp_code_bridge::http::ServeOptions {
                addr: http,
                token_file,
            };
            match mcp_code_bridge::http::serve(settings, audit, opts).await {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("mcp-code-bridge: {}", safe_line(&e.to_string()));
                    Ok(ExitCode::from(exec_cli::EXIT_USAGE))
                }
            }
        }
        Command::Exec(args) => Ok(exec_cli::exec(settings, audit, args).await),
        Command::Servers {
            approve_changes: Some(name),
            yes,
            ..
        } => Ok(mcp_code_bridge::cli::servers_pins::approve_changes(
            &settings, &name, yes,
        )),
        Command::Servers { allow, .. } if allow.is_empty() => {
            Ok(mcp_code_bridge::cli::servers::list(&settings))
        }
        Command::Servers {
            allow, from, yes, ..
        } => {
            let args = mcp_code_bridge::cli::servers_allow::AllowArgs {
                names: allow,
                from,
                yes,
            };
            Ok(mcp_code_bridge::cli::servers_allow::allow(&settings, &args))
        }
        Command::Setup {
            clients,
            name,
            command,
            import_servers,
            move_servers,
            undo,
            yes,
            dry_run,
        } => {
            let opts = mcp_code_bridge::cli::setup::Options {
                clients: clients.into_iter().map(Client::from).collect(),
                name,
                command,
                import_servers,
                move_servers,
                undo,
                yes,
                dry_run,
            };
            Ok(mcp_code_bridge::cli::setup::run(&settings, &opts))
        }
        Command::Audit {
            file, verify: true, ..
        } => Ok(mcp_code_bridge::cli::audit_verify::verify(
            settings.policy.audit_log.as_deref(),
            file.as_deref(),
            &settings.state_dir,
        )),
        Command::Audit {
            last, json, file, ..
        } => {
            let args = mcp_code_bridge::cli::audit::AuditArgs { last, json, file };
            Ok(mcp_code_bridge::cli::audit::audit(
                settings.policy.audit_log.as_deref(),
                &args,
            ))
        }
        Command::Image { engine, action } => Ok(ExitCode::from(
            mcp_code_bridge::cli::image::run_action(settings, engine, action).await,
        )),
        Command::Login { name } => Ok(mcp_code_bridge::cli::login::login(&settings, &name).await),
        Command::Logout { name, caller } => {
            Ok(mcp_code_bridge::cli::login::logout(&settings, &name, caller.as_deref()).await)
        }
        Command::Kube { action } => Ok(mcp_code_bridge::cli::kube::run(&settings, action)),
        Command::Skills {
            approve,
            yes,
            remove,
            export,
        } => {
            let args = mcp_code_bridge::cli::skills::SkillsArgs {
                approve,
                yes,
                remove,
                export,
            };
            Ok(mcp_code_bridge::cli::skills::skills(&settings, &args))
        }
        Command::Doctor => {
            let (report, ok) = mcp_code_bridge::cli::doctor::doctor(settings).await;
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

fn init_logging(level: &str) {
    // rmcp logs every child exit and session end at info: keep it to warnings unless asked.
    let directive = if level.contains("rmcp") {
        level.to_string()
    } else {
        format!("{level},rmcp=warn")
    };
    // rmcp's OAuth client writes the authorization code in its debug lines: its module stays
    // at warnings whatever the level asked.
    let directive = format!("{directive},rmcp::transport::auth=warn");
    let filter = tracing_subscriber::EnvFilter::try_new(directive)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(mcp_code_bridge::cli::safe_line::SafeStderr)
        .with_ansi(false)
        .with_target(false)
        .init();
}
