//! Integration tests: one binary, one module per area.

// Shared helpers: settings, a bridge on the process test runtime, an MCP client over pipes.
mod support;

// The sandbox actor against the real entrypoint (timeouts, restarts, output, requests).
mod sandbox;
// Which frame channel a sandbox gets (socket, stdio, a refused mount).
mod sandbox_channel;
// The engine lost under a sandbox: the call, the reconnect, the orphans.
mod sandbox_engine_loss;
// The namespace saved at an idle stop and restored, bounds, hostile snapshots, reset.
mod sandbox_snapshot;
// A long cell's output as progress reports.
mod sandbox_progress;
// Modules imported ahead by a sandbox started ahead of use (MCP_BRIDGE_PRELOAD).
mod sandbox_preload;

// The upstream pool against the real stub MCP server (start, call, crash, deadline, cache).
mod upstream;
// Servers shared by many clients: a process per client for "perClient", replies never cross.
mod upstream_per_client;
// A streamable HTTP server: the HTTP lane, questions on a call's stream, calls withdrawn.
mod upstream_http;

// Client config files as each client writes them: provenance, consent, what starts.
mod client_homes;
// A repository approving its own servers; `servers --allow` approving one shown definition.
mod consent_repo;

// `setup` against client config files as each client writes them: edits, backups, dry run.
mod setup;
// `setup` run as root on files of another user: owner, group and mode kept; old backups pruned.
mod setup_owner;

// The MCP face over in-memory pipes: tools/list, run_python, errors, resources.
mod server;
// Data in: shared folders an engine cannot mount.
mod data_in;
// Files out and pictures back: the host folder, limits, hostile frames, MCP content.
mod files_out;
// Folders of the bridge another local user made first or can write to: refused, never used.
mod private_dirs;
// The module tree: no import cycle between the parts of any folder.
mod module_tree;
// ARCHITECTURE.md's module map: a row for every file and a file for every row.
mod module_map;

// A benchmark probe of the raw engine attach round trip (ignored by default).
mod attach_rtt;
// Shutting the upstream layer down: a hanging start, fifty servers at once.
mod upstream_shutdown;
// Benchmark probe (ignored): direct rmcp client vs the upstream layer, no sandbox.
mod upstream_rtt;
// A sandbox's host requests end with its session (shutdown waits for them).
mod host_call_tasks;
// Property tests of the frame decoder, frame parser and request dispatcher (bounded).
mod fuzz;
