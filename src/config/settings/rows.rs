//! The settings table: every environment variable the bridge reads, with its default, what it
//! accepts and one line of description. `settings.rs` and `data.rs` read each variable through
//! its row, GUIDE.md's "Environment variables" table is held equal to [`ROWS`] by a test
//! (`guide_table.rs`), and `doctor` lists the rows a user changed.

use super::net_settings as net;
use super::oauth_settings as oauth;
use super::policy_settings as policy;
use super::serve_settings as serve;
use super::table::{Flag, Number, Row, Text, Unit, DAY, GIB, KIB, MIB, TIB};

/// The sandbox image the bridge uses unless `MCP_BRIDGE_IMAGE` says otherwise.
pub const DEFAULT_IMAGE: &str = "mcp-code-bridge-sandbox:latest";

/// The registry recipe's base image unless `MCP_BRIDGE_IMAGE_BASE` names another (the `BASE`
/// argument's default in `container/Containerfile`).
pub const DEFAULT_IMAGE_BASE: &str = "docker.io/library/python:3.12-slim";

/// How long a run waits for an image build before it is told to try again, unless
/// `MCP_BRIDGE_IMAGE_BUILD_WAIT` says otherwise: under the 60 s a client commonly allows a
/// request (the TypeScript SDK's default), so the run's answer arrives before the client gives up.
pub const DEFAULT_IMAGE_BUILD_WAIT: u64 = 50;

/// `MCP_BRIDGE_RUNTIME`.
pub const RUNTIME: Text = Text {
    name: "MCP_BRIDGE_RUNTIME",
    default: "auto",
    allowed: "`podman`, `docker` or `auto`",
    doc: "the container engine; `auto`: `DOCKER_HOST` if set, else the first live podman or docker socket, else podman's own service",
};
/// `MCP_BRIDGE_IMAGE`.
pub const IMAGE: Text = Text {
    name: "MCP_BRIDGE_IMAGE",
    default: "`mcp-code-bridge-sandbox:latest`",
    allowed: "an image name",
    doc: "sandbox image (needs `python3`)",
};
/// `MCP_BRIDGE_IMAGE_BUILD`.
pub const IMAGE_BUILD: Text = Text {
    name: "MCP_BRIDGE_IMAGE_BUILD",
    default: "auto",
    allowed: "`auto`, `registry`, `debian` or `off`",
    doc: "how a missing image is built (\"The sandbox image\")",
};
/// `MCP_BRIDGE_IMAGE_BUILD_WAIT`.
pub const IMAGE_BUILD_WAIT: Number = Number::new(
    "MCP_BRIDGE_IMAGE_BUILD_WAIT",
    Unit::Seconds,
    DEFAULT_IMAGE_BUILD_WAIT,
    (0, 3600),
    "seconds a run waits for an image build before it answers \"try again\"; 0 = do not wait",
);
/// `MCP_BRIDGE_IMAGE_BASE`.
pub const IMAGE_BASE: Text = Text {
    name: "MCP_BRIDGE_IMAGE_BASE",
    default: "`docker.io/library/python:3.12-slim`",
    allowed: "an image reference",
    doc: "the registry recipe's base image",
};
/// `MCP_BRIDGE_IMAGE_MIRROR`.
pub const IMAGE_MIRROR: Text = Text {
    name: "MCP_BRIDGE_IMAGE_MIRROR",
    default: "host's apt source, else `http://deb.debian.org/debian`",
    allowed: "an `http(s)://` or `file:/` URL",
    doc: "Debian mirror for the debian recipe",
};
/// `MCP_BRIDGE_IMAGE_ROOTFS`.
pub const IMAGE_ROOTFS: Text = Text {
    name: "MCP_BRIDGE_IMAGE_ROOTFS",
    default: "unset",
    allowed: "an absolute path",
    doc: "an uncompressed root filesystem tar to make the image from; wins over `MCP_BRIDGE_IMAGE_BUILD` unless that is `off`",
};
/// `MCP_BRIDGE_IMAGE_PIP`.
pub const IMAGE_PIP: Text = Text {
    name: "MCP_BRIDGE_IMAGE_PIP",
    default: "unset",
    allowed: "PyPI requirements, separated by blanks or commas",
    doc: "PyPI packages the debian recipe adds, e.g. `pyarrow<19` (pip runs as root in the build's chroot)",
};
/// `MCP_BRIDGE_IMAGE_HOST_BUILD`.
pub const IMAGE_HOST_BUILD: Flag = Flag {
    name: "MCP_BRIDGE_IMAGE_HOST_BUILD",
    default: false,
    doc: "`1`: the bridge may run the debian recipe (debootstrap, apt, chroot, as root on this host) by itself when the image is missing; `image build` needs no setting",
};
/// `MCP_BRIDGE_SETUP_BACKUPS`.
pub const SETUP_BACKUPS: Number = Number::new(
    "MCP_BRIDGE_SETUP_BACKUPS",
    Unit::Count,
    5,
    (1, 100),
    "backups `setup` keeps per file; older `FILE.bak-<UTC>` are removed",
);
/// `MCP_BRIDGE_TIMEOUT`.
pub const TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_TIMEOUT",
    Unit::Seconds,
    30,
    (1, DAY),
    "default per-call timeout",
);
/// `MCP_BRIDGE_MAX_TIMEOUT`.
pub const MAX_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_MAX_TIMEOUT",
    Unit::Seconds,
    120,
    (1, DAY),
    "cap on the per-call timeout",
);
/// `MCP_BRIDGE_MEMORY`.
pub const MEMORY: Number = Number::new(
    "MCP_BRIDGE_MEMORY",
    Unit::Bytes,
    512 * MIB,
    (16 * MIB, TIB),
    "memory limit of the sandbox (`k`, `m`, `g`, `t` suffixes); Python needs at least 16m",
);
/// `MCP_BRIDGE_PIDS`.
pub const PIDS: Number = Number::new(
    "MCP_BRIDGE_PIDS",
    Unit::Count,
    128,
    (1, 4_194_304),
    "process limit of the sandbox (at most the kernel's largest pid)",
);
/// `MCP_BRIDGE_CPUS`.
pub const CPUS: Text = Text {
    name: "MCP_BRIDGE_CPUS",
    default: "unset",
    allowed: "a number above 0, at most 1024",
    doc: "CPU quota, e.g. `1` or `0.5`",
};
/// `MCP_BRIDGE_CONTAINER_USER`.
pub const CONTAINER_USER: Text = Text {
    name: "MCP_BRIDGE_CONTAINER_USER",
    default: "65534:65534",
    allowed: "`uid[:gid]`",
    doc: "the user the sandbox runs as",
};
/// `MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT`.
pub const RUNTIME_IDLE_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT",
    Unit::Seconds,
    300,
    (0, 7 * DAY),
    "stop the idle sandbox after N s; 0 = never",
);
/// `MCP_BRIDGE_SNAPSHOT_MAX`.
pub const SNAPSHOT_MAX: Number = Number::new(
    "MCP_BRIDGE_SNAPSHOT_MAX",
    Unit::Bytes,
    128 * MIB,
    (MIB, 16 * GIB),
    "largest snapshot of your variables kept across an idle stop; `0` or `off`: none",
)
.or_off()
.default_shown("a quarter of `MCP_BRIDGE_MEMORY` (128m)");
/// `MCP_BRIDGE_SNAPSHOT_TIMEOUT`.
pub const SNAPSHOT_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_SNAPSHOT_TIMEOUT",
    Unit::Seconds,
    30,
    (1, 3600),
    "how long saving or restoring a snapshot may take",
);
/// `MCP_BRIDGE_PROGRESS_INTERVAL`.
pub const PROGRESS_INTERVAL: Number = Number::new(
    "MCP_BRIDGE_PROGRESS_INTERVAL",
    Unit::Millis,
    1000,
    (250, DAY * 1000),
    "how often a long cell's output is reported as progress: seconds (`0.5`, `2s`) or `500ms`",
);
/// `MCP_BRIDGE_STATE_DIR`.
pub const STATE_DIR: Text = Text {
    name: "MCP_BRIDGE_STATE_DIR",
    default: "`~/.local/state/mcp-code-bridge`",
    allowed: "a folder",
    doc: "the bridge's own files (tool cache, `consent.json`, outbox, snapshots); it and every folder above it must be yours (or root's) and writable by no one else (above it: or sticky, as `/tmp`), else `run` and `exec` refuse to start (exit 2) naming the folder, its owner and mode",
};
/// `MCP_BRIDGE_OUTPUT_MODE`.
pub const OUTPUT_MODE: Text = Text {
    name: "MCP_BRIDGE_OUTPUT_MODE",
    default: "compact",
    allowed: "`compact` or `toon`",
    doc: "how results are rendered for the model (\"Output\")",
};
/// `MCP_BRIDGE_LOG_LEVEL`.
pub const LOG_LEVEL: Text = Text {
    name: "MCP_BRIDGE_LOG_LEVEL",
    default: "info (`run`, `exec`), warn (other commands)",
    allowed: "a tracing filter",
    doc: "what is logged to stderr, e.g. `debug` or `mcp_code_bridge=trace` (`-v` on a command: info)",
};
/// `MCP_BRIDGE_MAX_OUTPUT`.
pub const MAX_OUTPUT: Number = Number::new(
    "MCP_BRIDGE_MAX_OUTPUT",
    Unit::Count,
    65_536,
    (256, GIB),
    "characters kept per output stream (bridge addition)",
);
/// `MCP_BRIDGE_MAX_FRAME`.
pub const MAX_FRAME: Number = Number::new(
    "MCP_BRIDGE_MAX_FRAME",
    Unit::Bytes,
    64 * MIB,
    (64 * KIB, 4 * GIB),
    "largest frame accepted from the sandbox; also the most a host request (a tool call's arguments) may take once read, so one of many small values is refused sooner: at 64m about 240,000 numbers or 40,000 two-field objects (ARCHITECTURE.md, \"Memory ceiling\") (bridge addition)",
);
/// `MCP_BRIDGE_MAX_PENDING_RESULTS`.
pub const MAX_PENDING_RESULTS: Number = Number::new(
    "MCP_BRIDGE_MAX_PENDING_RESULTS",
    Unit::Bytes,
    256 * MIB,
    (MIB, 4 * GIB),
    "bytes of tool results the bridge holds for sandbox code that has not read them yet; past it a result becomes an error raised in the sandbox; the same budget bounds the bytes of host requests being handled (one past it is refused) (bridge addition)",
);
/// `MCP_BRIDGE_ALLOW_WEAK_SANDBOX`.
pub const ALLOW_WEAK_SANDBOX: Flag = Flag {
    name: "MCP_BRIDGE_ALLOW_WEAK_SANDBOX",
    default: false,
    doc: "`1`: use a sandbox that fails the isolation self-check (bridge addition)",
};
/// `MCP_BRIDGE_CHANNEL`.
pub const CHANNEL: Text = Text {
    name: "MCP_BRIDGE_CHANNEL",
    default: "auto",
    allowed: "`auto` or `stdio`",
    doc: "`stdio`: never use the socket channel (bridge addition)",
};
/// `MCP_BRIDGE_CALL_LANE`.
pub const CALL_LANE: Flag = Flag {
    name: "MCP_BRIDGE_CALL_LANE",
    default: true,
    doc: "`0`: every proxied `tools/call` goes through rmcp's normal request path instead of the bridge's own fast path, to stdio and to streamable HTTP servers (bridge addition; same results and error texts, slower)",
};
/// `MCP_BRIDGE_PREWARM`.
pub const PREWARM: Flag = Flag {
    name: "MCP_BRIDGE_PREWARM",
    default: true,
    doc: "`0`: start the sandbox on the first call, not at server start (bridge addition)",
};
/// `MCP_BRIDGE_STRUCTURED_CONTENT`.
pub const STRUCTURED_CONTENT: Flag = Flag {
    name: "MCP_BRIDGE_STRUCTURED_CONTENT",
    default: false,
    doc: "`1`: add `structuredContent` (with a `files` list) to results, except one carrying a picture: Claude Code shows the model only `structuredContent` when present and would drop the image (see \"Output\"; bridge addition)",
};
/// `MCP_BRIDGE_MOUNTS`.
pub const MOUNTS: Text = Text {
    name: "MCP_BRIDGE_MOUNTS",
    default: "unset",
    allowed: "`HOST_DIR:SANDBOX_DIR[,...]`, at most 32",
    doc: "host folders mounted read-only into the sandbox (\"Data in and out\"); `~/` is expanded",
};
/// `MCP_BRIDGE_MAX_SERVER_MESSAGE`.
pub const MAX_SERVER_MESSAGE: Number = Number::new(
    "MCP_BRIDGE_MAX_SERVER_MESSAGE",
    Unit::Bytes,
    64 * MIB,
    (MIB, 4 * GIB),
    "largest JSON-RPC message accepted from a stdio or legacy SSE MCP server; over it the call fails naming this setting and the server restarts on next use",
);
/// `MCP_BRIDGE_OUTBOX_MAX_FILE`.
pub const OUTBOX_MAX_FILE: Number = Number::new(
    "MCP_BRIDGE_OUTBOX_MAX_FILE",
    Unit::Bytes,
    25 * MIB,
    (KIB, 4 * GIB),
    "largest file copied out of the sandbox",
);
/// `MCP_BRIDGE_OUTBOX_MAX_CELL`.
pub const OUTBOX_MAX_CELL: Number = Number::new(
    "MCP_BRIDGE_OUTBOX_MAX_CELL",
    Unit::Bytes,
    100 * MIB,
    (KIB, 16 * GIB),
    "bytes of files copied out per call",
);
/// `MCP_BRIDGE_OUTBOX_MAX_FILES`.
pub const OUTBOX_MAX_FILES: Number = Number::new(
    "MCP_BRIDGE_OUTBOX_MAX_FILES",
    Unit::Count,
    50,
    (1, 10_000),
    "files copied out per call, pictures included",
);
/// `MCP_BRIDGE_OUTBOX_KEEP_DAYS`.
pub const OUTBOX_KEEP_DAYS: Number = Number::new(
    "MCP_BRIDGE_OUTBOX_KEEP_DAYS",
    Unit::Days,
    7,
    (0, 3650),
    "earlier sessions' outbox folders older than this are removed",
);
/// `MCP_BRIDGE_OUTBOX_MAX_TOTAL`.
pub const OUTBOX_MAX_TOTAL: Number = Number::new(
    "MCP_BRIDGE_OUTBOX_MAX_TOTAL",
    Unit::Bytes,
    GIB,
    (MIB, TIB),
    "bytes kept in all sessions' outbox folders together; the oldest earlier sessions go first",
);
/// `MCP_BRIDGE_IMAGES`.
pub const IMAGES: Flag = Flag {
    name: "MCP_BRIDGE_IMAGES",
    default: true,
    doc: "`0`: pictures are not returned as image content (still saved as files and linked)",
};
/// `MCP_BRIDGE_IMAGES_MAX_SIDE`.
pub const IMAGES_MAX_SIDE: Number = Number::new(
    "MCP_BRIDGE_IMAGES_MAX_SIDE",
    Unit::Count,
    1568,
    (64, 8192),
    "longest side of a returned picture, in pixels",
);
/// `MCP_BRIDGE_IMAGES_MAX_BYTES`.
pub const IMAGES_MAX_BYTES: Number = Number::new(
    "MCP_BRIDGE_IMAGES_MAX_BYTES",
    Unit::Bytes,
    MIB,
    (16 * KIB, 32 * MIB),
    "largest returned PNG",
);
/// `MCP_BRIDGE_CONFIG_DIR`.
pub const CONFIG_DIR: Text = Text {
    name: "MCP_BRIDGE_CONFIG_DIR",
    default: "`~/MCPs`",
    allowed: "a folder",
    doc: "directory of server definition files",
};
/// `MCP_SERVERS_CONFIG`.
pub const SERVERS_CONFIG: Text = Text {
    name: "MCP_SERVERS_CONFIG",
    default: "unset",
    allowed: "a file",
    doc: "one more server definition file",
};
/// `MCP_BRIDGE_PIN_TOOLS`.
pub const PIN_TOOLS: Text = Text {
    name: "MCP_BRIDGE_PIN_TOOLS",
    default: "unset",
    allowed: "`0` or `1`",
    doc: "pin the tool definitions servers list at their first start (SHA-256, GUIDE \"Pinned tool definitions\"): a changed or new tool is refused with `ToolChangedError` until `servers --approve-changes NAME`; `1`: every server; unset: project-scoped and remote (`http`/`sse`) servers; `0`: none",
};
/// `MCP_BRIDGE_IMPORT_CLIENT_CONFIGS`.
pub const IMPORT_CLIENT_CONFIGS: Flag = Flag {
    name: "MCP_BRIDGE_IMPORT_CLIENT_CONFIGS",
    default: false,
    doc: "`1`: also read the MCP clients' config files (\"Client configs\")",
};
/// `MCP_BRIDGE_ALLOW_SELF_SERVER`.
pub const ALLOW_SELF_SERVER: Flag = Flag {
    name: "MCP_BRIDGE_ALLOW_SELF_SERVER",
    default: false,
    doc: "`1`: allow entries that launch this bridge",
};

/// Every setting, in GUIDE's order.
pub const ROWS: &[Row] = &[
    Row::Text(&RUNTIME),
    Row::Text(&IMAGE),
    Row::Text(&IMAGE_BUILD),
    Row::Number(&IMAGE_BUILD_WAIT),
    Row::Text(&IMAGE_BASE),
    Row::Text(&IMAGE_MIRROR),
    Row::Text(&IMAGE_ROOTFS),
    Row::Text(&IMAGE_PIP),
    Row::Flag(&IMAGE_HOST_BUILD),
    Row::Number(&SETUP_BACKUPS),
    Row::Number(&TIMEOUT),
    Row::Number(&MAX_TIMEOUT),
    Row::Number(&MEMORY),
    Row::Number(&PIDS),
    Row::Text(&CPUS),
    Row::Text(&CONTAINER_USER),
    Row::Number(&RUNTIME_IDLE_TIMEOUT),
    Row::Number(&SNAPSHOT_MAX),
    Row::Number(&SNAPSHOT_TIMEOUT),
    Row::Number(&PROGRESS_INTERVAL),
    Row::Text(&STATE_DIR),
    Row::Text(&OUTPUT_MODE),
    Row::Text(&super::languages::LANGUAGES),
    Row::Text(&LOG_LEVEL),
    Row::Number(&MAX_OUTPUT),
    Row::Number(&MAX_FRAME),
    Row::Number(&MAX_PENDING_RESULTS),
    Row::Flag(&ALLOW_WEAK_SANDBOX),
    Row::Text(&CHANNEL),
    Row::Flag(&CALL_LANE),
    Row::Flag(&PREWARM),
    Row::Text(&serve::PRELOAD),
    Row::Number(&serve::WARM_POOL),
    Row::Number(&serve::MAX_SANDBOXES),
    Row::Number(&serve::SANDBOXES_PER_TOKEN),
    Row::Number(&serve::REQUESTS_PER_TOKEN),
    Row::Number(&serve::HTTP_MAX_BODY),
    Row::Text(&serve::HTTP_ALLOWED_ORIGINS),
    Row::Number(&serve::HTTP_UNAUTH_TIMEOUT),
    Row::Number(&serve::HTTP_CONNECTIONS_PER_PEER),
    Row::Number(&serve::SANDBOX_TTL),
    Row::Number(&serve::DRAIN_TIMEOUT),
    Row::Flag(&STRUCTURED_CONTENT),
    Row::Text(&MOUNTS),
    Row::Text(&net::NETWORK_ALLOW),
    Row::Text(&net::NETWORK_HOSTS),
    Row::Number(&net::NETWORK_MAX_BYTES),
    Row::Number(&net::NETWORK_MAX_CONNECTIONS),
    Row::Number(&net::NETWORK_PACKAGES_SIZE),
    Row::Text(&policy::AUDIT_LOG),
    Row::Flag(&policy::AUDIT_VALUES),
    Row::Flag(&policy::AUDIT_CODE),
    Row::Number(&policy::AUDIT_MAX_BYTES),
    Row::Text(&policy::APPROVAL),
    Row::Number(&policy::APPROVAL_TIMEOUT),
    Row::Number(&policy::QUESTION_TIMEOUT),
    Row::Number(&policy::CALLS_PER_MINUTE),
    Row::Number(&policy::RUN_MAX_CALLS),
    Row::Number(&policy::RUN_MAX_RESULT_BYTES),
    Row::Number(&policy::RUN_MAX_REFUSALS),
    Row::Number(&MAX_SERVER_MESSAGE),
    Row::Number(&OUTBOX_MAX_FILE),
    Row::Number(&OUTBOX_MAX_CELL),
    Row::Number(&OUTBOX_MAX_FILES),
    Row::Number(&OUTBOX_KEEP_DAYS),
    Row::Number(&OUTBOX_MAX_TOTAL),
    Row::Flag(&IMAGES),
    Row::Number(&IMAGES_MAX_SIDE),
    Row::Number(&IMAGES_MAX_BYTES),
    Row::Text(&CONFIG_DIR),
    Row::Text(&SERVERS_CONFIG),
    Row::Flag(&IMPORT_CLIENT_CONFIGS),
    Row::Text(&PIN_TOOLS),
    Row::Flag(&ALLOW_SELF_SERVER),
    Row::Number(&oauth::LOGIN_TIMEOUT),
    Row::Text(&oauth::OAUTH_CLIENT_METADATA_URL),
    Row::Text(&oauth::PUBLIC_URL),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_defaults_are_the_ones_the_code_uses() {
        assert_eq!(IMAGE.default, format!("`{DEFAULT_IMAGE}`"));
        assert_eq!(IMAGE_BASE.default, format!("`{DEFAULT_IMAGE_BASE}`"));
        assert_eq!(
            SNAPSHOT_MAX.default_shown,
            Some("a quarter of `MCP_BRIDGE_MEMORY` (128m)")
        );
        assert_eq!(SNAPSHOT_MAX.default, MEMORY.default / 4);
    }
}
