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

mod allow_list;
mod clients;
mod consent;
mod data;
mod entry;
mod entry_policy;
mod error;
mod expand;
mod guide_table;
mod host_paths;
mod host_system;
mod image_values;
mod modes;
mod mounts;
mod overrides;
mod own_file;
mod pending;
mod policy_settings;
mod portable;
mod read;
mod rows;
mod serve_settings;
mod servers;
mod settings;
mod spec;
mod special_files;
mod table;
mod text_file;
mod tool_rules;
mod values;

pub use allow_list::{AllowList, Approval};
pub use clients::{client_config_files, Client, ClientFile, Origin, Scope};
pub use consent::{entry_hash, Consent};
pub use data::{DataSettings, ImageBudget, OutboxLimits, DEFAULT_MAX_SERVER_MESSAGE};
pub use entry_policy::{MAX_PATTERNS, MAX_PATTERN_CHARS};
pub use error::ConfigError;
pub use guide_table::guide_table;
pub use image_values::ImageBuildMode;
pub use modes::{ChannelMode, OutputMode, RuntimeChoice};
pub use mounts::{Mount, RESERVED_INSIDE};
pub use overrides::Override;
pub use own_file::NotOwn;
pub use pending::{pick, project_definitions, PickError};
pub use policy_settings::{ApprovalMode, Limits, PolicySettings};
pub use portable::{launches_bridge, portability, Portability};
pub use rows::{DEFAULT_IMAGE, DEFAULT_IMAGE_BASE, DEFAULT_IMAGE_BUILD_WAIT, ROWS};
pub use serve_settings::{ServeSettings, MAX_PRELOAD, MAX_SANDBOXES};
pub use servers::{discover, discover_with_env, Servers};
pub use settings::Settings;
pub use spec::{ConfigIssue, ProjectEntry, ServerSpec, Sources, Transport};
pub use table::{Flag, Lookup, Number, Reading, Row, Text, Unit};
pub use text_file::{read_text, MAX_CONFIG_BYTES};
pub use tool_rules::{LimitOverrides, Pattern, Refusal, RuleList, ServerPolicy, ToolRules};
