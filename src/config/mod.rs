//! Configuration: the only module that reads environment variables and server config files
//! (the user's own and, opt-in, the MCP clients': see GUIDE.md, "Client configs").
//!
//! Everything here is data in, validated and typed out. Nothing here spawns, connects or logs
//! about runtime state; callers receive an immutable [`Settings`] and share it as `Arc`.
//!
//! Settings are one table ([`ROWS`], `rows.rs`): each `MCP_BRIDGE_*` variable's default, what
//! it accepts and one line for GUIDE. Every variable is read through its row (`table.rs`), and
//! a value out of range or malformed is refused naming the variable, the value and what is
//! allowed; nothing is clamped. GUIDE's table is [`guide_table`]'s rendering of it, held equal
//! by a test.

mod error;
mod servers;
mod settings;
mod text_file;

pub use error::ConfigError;
pub use servers::allow_list::{AllowList, Approval};
pub use servers::clients::{client_config_files, Client, ClientFile, Origin, Scope};
pub use servers::consent::{entry_hash, Consent};
pub use servers::entry_policy::{MAX_PATTERNS, MAX_PATTERN_CHARS};
pub use servers::oauth::OAuthEntry;
pub use servers::own_file::NotOwn;
pub use servers::pending::{pick, project_definitions, PickError};
pub use servers::portable::{launches_bridge, portability, Portability};
pub use servers::spec::{ConfigIssue, ProjectEntry, ServerSpec, Sources, Transport};
pub use servers::tool_rules::{
    LimitOverrides, Limits, Pattern, Refusal, RuleList, ServerPolicy, ToolRules,
};
pub use servers::{discover, discover_with_env, Servers};
pub use settings::data::{DataSettings, ImageBudget, OutboxLimits, DEFAULT_MAX_SERVER_MESSAGE};
pub use settings::guide_table::guide_table;
pub use settings::image_values::ImageBuildMode;
pub use settings::languages::Languages;
pub use settings::modes::{ChannelMode, OutputMode, PinTools, RuntimeChoice};
pub use settings::mounts::{Mount, RESERVED_INSIDE};
pub use settings::net_settings::{parse_host, AllowEntry, AllowHost, NetSettings};
pub use settings::oauth_settings::OAuthSettings;
pub use settings::overrides::Override;
pub use settings::policy_settings::{ApprovalMode, PolicySettings};
pub use settings::rows::{DEFAULT_IMAGE, DEFAULT_IMAGE_BASE, DEFAULT_IMAGE_BUILD_WAIT, ROWS};
pub use settings::serve_settings::{ServeSettings, MAX_PRELOAD, MAX_SANDBOXES};
pub use settings::table::{Flag, Lookup, Number, Reading, Row, Text, Unit};
pub use settings::Settings;
pub use text_file::{read_text, MAX_CONFIG_BYTES};
