//! [`BridgeServer`]: our MCP face. One tool (two with `MCP_BRIDGE_LANGUAGES=python,typescript`),
//! one resource; decides whose error an error is.
//!
//! A failure of the user's code, a timeout, a sandbox problem or bad `run_python` arguments is a
//! tool result with `isError: true`; a request we cannot route (unknown tool or resource) is a
//! JSON-RPC error.
//! Knows the sandbox only through the [`Sandbox`] handle.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetSkillRequestParams, GetSkillResult,
    Implementation, ListResourcesResult, ListSkillsResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::time::Instant;

use super::approve::{self, ElicitAsker, Face, Rounds};
use super::files;
use super::progress::Forwarder;
use super::resources::{capabilities, CAPABILITIES_URI};
use super::router::{SandboxRouter, SessionTie, Who};
use super::skills;
use super::tool::{self, TOOL_NAME, TS_TOOL_NAME};

mod release;
mod result;

use crate::calls::{Asker, Caller, Language, RunScope, SignInWay, TraceContext};
use crate::config::Settings;
use crate::outbox::Outbox;
use crate::report::{RunReport, RunStatus};
use crate::sandbox::{Progress, RunRequest, Sandbox};
use crate::skills::SkillStore;
use release::RELEASED;

/// The bridge's MCP server handler; cheap to clone.
#[derive(Clone)]
pub struct BridgeServer {
    target: Target,
    settings: Arc<Settings>,
    /// Runs of 2026-07-28 clients waiting for an approval, and the seal of their state.
    rounds: Arc<Rounds>,
}

/// Where runs go.
#[derive(Clone)]
enum Target {
    /// Stdio `run`: the one sandbox and its files.
    One {
        sandbox: Sandbox,
        outbox: Arc<Outbox>,
    },
    /// `serve --http`: each client's own, found by the router; the tie tells it when this
    /// handler's session ends.
    Many(Arc<SessionTie>),
}

/// Where one run goes, and what its result must carry.
struct Destination {
    sandbox: Sandbox,
    caller: Option<Arc<Caller>>,
    minted: Option<String>,
    _lease: Option<Box<dyn Send + Sync>>,
}

impl BridgeServer {
    /// A handler running code in `sandbox` with `settings`, serving the files in `outbox`.
    pub fn new(sandbox: Sandbox, settings: Arc<Settings>, outbox: Arc<Outbox>) -> Self {
        BridgeServer {
            target: Target::One { sandbox, outbox },
            settings,
            rounds: Arc::new(Rounds::default()),
        }
    }

    /// A handler for many clients, each running in the sandbox `router` finds for it. Make
    /// one per MCP session with [`BridgeServer::fresh`].
    pub fn many(router: Arc<dyn SandboxRouter>, settings: Arc<Settings>) -> Self {
        BridgeServer {
            target: Target::Many(SessionTie::new(router)),
            settings,
            rounds: Arc::new(Rounds::default()),
        }
    }

    /// This handler for a new session (or a stateless request): the same sandboxes and
    /// parked approval rounds, a tie of its own.
    pub fn fresh(&self) -> Self {
        let target = match &self.target {
            Target::One { .. } => self.target.clone(),
            Target::Many(tie) => Target::Many(SessionTie::new(tie.router().clone())),
        };
        BridgeServer {
            target,
            settings: self.settings.clone(),
            rounds: self.rounds.clone(),
        }
    }

    /// The skills store of this bridge's state folder (read on each request; cheap to make).
    fn skill_store(&self) -> SkillStore {
        SkillStore::new(&self.settings.state_dir)
    }

    /// The sandbox a run with the `sandbox` argument `handle` from `who` goes to.
    async fn destination(
        &self,
        who: Option<&Who>,
        handle: Option<&str>,
    ) -> Result<Destination, Refused> {
        match &self.target {
            // One client: a handle (from a prompt written for `serve --http`) changes nothing.
            Target::One { sandbox, .. } => Ok(Destination {
                sandbox: sandbox.clone(),
                caller: None,
                minted: None,
                _lease: None,
            }),
            Target::Many(tie) => {
                let Some(who) = who else {
                    return Err(Refused::Rpc(ErrorData::invalid_request(
                        "the request did not come through the HTTP front",
                        None,
                    )));
                };
                tie.note(who);
                if who.session.is_some() && handle.is_some() {
                    return Err(Refused::Tool(
                        "this MCP session has its own sandbox: leave out `sandbox` (handles \
                         are for clients without sessions)"
                            .into(),
                    ));
                }
                let routed = tie
                    .router()
                    .route(who, handle)
                    .await
                    .map_err(Refused::Rpc)?;
                Ok(Destination {
                    sandbox: routed.sandbox,
                    caller: Some(routed.caller),
                    minted: routed.minted,
                    _lease: Some(routed.lease),
                })
            }
        }
    }

    /// The outboxes `who` may list and read.
    fn outboxes(&self, who: Option<&Who>) -> Vec<Arc<Outbox>> {
        match (&self.target, who) {
            (Target::One { outbox, .. }, _) => vec![outbox.clone()],
            (Target::Many(tie), Some(who)) => tie.router().outboxes(who),
            (Target::Many(_), None) => Vec::new(),
        }
    }

    /// Runs one `run_python` call (or `run_typescript`: `language`) and renders it as a tool
    /// result; `asker` asks the user to approve calls (none: such calls fail closed).
    ///
    /// Bad arguments are a tool result with `isError: true` (SEP-1303), not a JSON-RPC error.
    ///
    /// # Errors
    /// None today; the `Result` keeps the handler's shape.
    #[allow(clippy::too_many_arguments)]
    pub async fn run_python(
        &self,
        language: Language,
        args: Option<rmcp::model::JsonObject>,
        who: Option<&Who>,
        cancel: tokio_util::sync::CancellationToken,
        progress: Progress,
        asker: Option<Arc<dyn Asker>>,
        trace: Option<TraceContext>,
    ) -> Result<CallToolResult, ErrorData> {
        let arrived = Instant::now();
        let args = match tool::parse_args(args) {
            Ok(args) => args,
            // SEP-1303 (2025-11-25): input validation errors are tool results the model sees.
            Err(message) => {
                let tool = match language {
                    Language::Python => TOOL_NAME,
                    Language::TypeScript => TS_TOOL_NAME,
                };
                let report = RunReport::failed(
                    RunStatus::Error,
                    format!("invalid {tool} arguments: {message}"),
                );
                return Ok(self.result(&report));
            }
        };
        if args.release && args.code.trim().is_empty() {
            return self.release_only(who, args.sandbox.as_deref());
        }
        let dest = match self.destination(who, args.sandbox.as_deref()).await {
            Ok(dest) => dest,
            Err(Refused::Rpc(err)) => return Err(err),
            Err(Refused::Tool(message)) => {
                let report = RunReport::failed(RunStatus::Error, message);
                return Ok(self.result(&report));
            }
        };
        let capped = self.settings.timeout_capped_note(args.timeout);
        // Under `serve` a caller signs in for itself, to its own records (the pool gives it its
        // own handles of remote servers); it is never signed in to the operator's
        // (`upstream/sign_in.rs`).
        let scope = Arc::new(
            RunScope::new(&args.code, args.narrowing, asker)
                .with_audited_code(self.settings.policy.audit_code.then_some(&*args.code))
                .with_caller(dest.caller.clone())
                .with_trace_context(trace)
                .signing_in(SignInWay::Ask)
                .in_language(language),
        );
        let req = RunRequest {
            code: args.code,
            servers: args.servers,
            timeout: self.settings.call_timeout(args.timeout),
            arrived,
            cancel,
            progress,
            scope,
        };
        let mut report = dest.sandbox.run(req).await;
        if let Some(note) = capped {
            report.add_notice(note);
        }
        let Destination {
            minted,
            _lease: lease,
            ..
        } = dest;
        if args.release {
            // This run's hold first, so that the release finds it idle.
            drop(lease);
            if let (Target::Many(tie), Some(who)) = (&self.target, who) {
                let handle = args.sandbox.as_deref().or(minted.as_deref());
                tie.router().release(who, handle)?;
                report.add_notice(RELEASED.to_string());
                return Ok(self.result(&report));
            }
        }
        if let Some(handle) = &minted {
            report.add_notice(format!(
                "this sandbox's handle is {handle}: pass sandbox=\"{handle}\" to run_python to \
                 keep its variables and files"
            ));
        }
        let mut result = self.result(&report);
        if let Some(handle) = minted {
            let mut meta = result.meta.take().unwrap_or_default();
            meta.0
                .insert(SANDBOX_META.into(), serde_json::Value::String(handle));
            result.meta = Some(meta);
        }
        if let Some(trace) = report.trace.take() {
            let mut meta = result.meta.take().unwrap_or_default();
            meta.0.insert(TRACE_META.into(), trace);
            result.meta = Some(meta);
        }
        Ok(result)
    }
}

/// The result `_meta` key carrying a handle minted for a stateless client.
pub const SANDBOX_META: &str = "mcp-code-bridge/sandbox";

/// The result `_meta` key carrying the run's trace (`calls::Trace`).
pub const TRACE_META: &str = "mcp-code-bridge/trace";

/// Why a run was not sent to a sandbox.
enum Refused {
    /// A JSON-RPC error (who the client is, a handle, a limit).
    Rpc(ErrorData),
    /// A tool error the model can act on.
    Tool(String),
}

impl ServerHandler for BridgeServer {
    fn get_info(&self) -> ServerConfig {
        // Approved skills ride on resources (SEP-2640): `server/skills.rs`.
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_skills()
            .build();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new(
                "mcp-code-bridge",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(tool::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let many = matches!(self.target, Target::Many(_));
        let definition = if many {
            tool::definition_for_many()
        } else {
            tool::definition()
        };
        let mut tools = vec![definition];
        if self.settings.languages.typescript {
            tools.push(tool::definition_ts(many));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let language = match request.name.as_ref() {
            TOOL_NAME => Language::Python,
            TS_TOOL_NAME if self.settings.languages.typescript => Language::TypeScript,
            TS_TOOL_NAME => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool '{TS_TOOL_NAME}': set MCP_BRIDGE_LANGUAGES=python,typescript \
                         to offer it; the only tool is {TOOL_NAME}"
                    ),
                    None,
                ))
            }
            _ if self.settings.languages.typescript => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool '{}'; the tools are {TOOL_NAME} and {TS_TOOL_NAME}",
                        request.name
                    ),
                    None,
                ))
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool '{}'; the only tool is {TOOL_NAME}",
                        request.name
                    ),
                    None,
                ))
            }
        };
        let who = Who::of(&context);
        // Whose approval rounds these are: only the same caller's retry answers them.
        let caller = who.as_ref().map(Who::binding).unwrap_or_default();
        // A retry of a 2026-07-28 client answering an approval question.
        if request.request_state.is_some() || request.input_responses.is_some() {
            let links = approve::takes_links(&context);
            return self
                .rounds
                .resume(&caller, links, &request, context.ct)
                .await;
        }
        let token = context.meta.get_progress_token();
        let trace = TraceContext::from_meta(&context.meta.0 .0);
        let (progress, forwarder) = Forwarder::start(context.peer.clone(), token);
        let asker: Option<Arc<dyn Asker>> = match approve::face(&context) {
            Face::Elicit(peer) => Some(Arc::new(ElicitAsker::new(peer))),
            Face::None => None,
            Face::Rounds => {
                // The run goes on in the background between rounds; its progress reaches
                // the client during this first round only.
                let me = self.clone();
                let arguments = request.arguments.clone();
                let links = approve::takes_links(&context);
                let run = move |asker, stop| async move {
                    me.run_python(
                        language,
                        arguments,
                        who.as_ref(),
                        stop,
                        progress,
                        Some(asker),
                        trace,
                    )
                    .await
                };
                let response = self
                    .rounds
                    .start(&caller, links, request.arguments.as_ref(), run, context.ct)
                    .await;
                forwarder.finish().await;
                return response;
            }
        };
        let result = self
            .run_python(
                language,
                request.arguments,
                who.as_ref(),
                context.ct,
                progress,
                asker,
                trace,
            )
            .await;
        forwarder.finish().await;
        result.map(Into::into)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let outboxes = self.outboxes(Who::of(&context).as_ref());
        let (mut items, next) = match outboxes.as_slice() {
            [one] => files::page(one, cursor),
            // Several sandboxes (a token's stateless clients): each one's first page.
            many => (
                many.iter()
                    .flat_map(|o| files::page(o, None).0)
                    .collect::<Vec<_>>(),
                None,
            ),
        };
        if cursor.is_none() {
            let resource = Resource::new(CAPABILITIES_URI, "capabilities")
                .with_description("Sandbox helpers and how to load MCP servers")
                .with_mime_type("text/markdown");
            items.insert(0, resource);
        }
        let mut result = ListResourcesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let owner = skill_owner(Who::of(&context).as_ref());
        if let Some(contents) = skills::read(&self.skill_store(), owner.as_deref(), &request.uri) {
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        if request.uri != CAPABILITIES_URI {
            for outbox in self.outboxes(Who::of(&context).as_ref()) {
                if let Some(contents) = files::read(&outbox, &request.uri).await {
                    return Ok(ReadResourceResult::new(vec![contents?]).into());
                }
            }
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let text = capabilities(&self.settings.data.mounts);
        let contents =
            ResourceContents::text(text, CAPABILITIES_URI).with_mime_type("text/markdown");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let owner = skill_owner(Who::of(&context).as_ref());
        let served = skills::list(&self.skill_store(), owner.as_deref());
        Ok(ListSkillsResult::with_all_items(served))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let owner = skill_owner(Who::of(&context).as_ref());
        match skills::get(&self.skill_store(), owner.as_deref(), &request.uri) {
            Some(skill) => Ok(GetSkillResult::new(skill)),
            None => Err(ErrorData::invalid_params(
                format!("no approved skill at {}", request.uri),
                None,
            )),
        }
    }
}

/// Whose skills a request sees: the caller token's under `serve` when it has an identity, else
/// the operator's (as the sandbox's `skills` module sees them).
fn skill_owner(who: Option<&Who>) -> Option<String> {
    who.filter(|w| w.identity.is_some())
        .map(|w| w.token.to_string())
}
