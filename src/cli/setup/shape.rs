//! How each client writes a server entry: the table it keeps servers in, whether its file is
//! JSONC, and the bridge's entry in that client's own shape (`alwaysLoad` only where the client
//! reads it). GUIDE.md ("`setup`") cites each client's docs.

use jsonc_parser::cst::CstInputValue;

use crate::config::Client;

/// How a client starts the bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
}

impl Launch {
    /// The command line as one line, for messages.
    pub fn display(&self) -> String {
        std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The key of the client's server table: VS Code's `servers`, everyone else's `mcpServers`.
pub fn table_key(client: Client) -> &'static str {
    match client {
        Client::VsCode => "servers",
        _ => "mcpServers",
    }
}

/// The bridge's entry as `client` writes its own: Claude Code's `claude mcp add` shape with
/// `alwaysLoad` (Claude Code 2.1.121 and later load such a server's tools up front instead of
/// deferring them behind tool search); VS Code's `type: stdio` (its schema allows no other keys);
/// `command` and `args` for Cursor, Claude Desktop and Windsurf.
pub fn bridge_entry(client: Client, launch: &Launch) -> CstInputValue {
    let command = (
        "command".to_string(),
        CstInputValue::from(launch.command.as_str()),
    );
    let args = (
        "args".to_string(),
        CstInputValue::Array(
            launch
                .args
                .iter()
                .map(|a| CstInputValue::from(a.as_str()))
                .collect(),
        ),
    );
    let stdio = ("type".to_string(), CstInputValue::from("stdio"));
    let props = match client {
        Client::ClaudeCode => vec![
            stdio,
            command,
            args,
            ("env".to_string(), CstInputValue::Object(Vec::new())),
            ("alwaysLoad".to_string(), CstInputValue::Bool(true)),
        ],
        Client::VsCode => vec![stdio, command, args],
        Client::Cursor | Client::ClaudeDesktop | Client::Windsurf => vec![command, args],
    };
    CstInputValue::Object(props)
}

/// The text of a new, empty config file for `client`, indented as the client writes its own
/// (VS Code: tabs; the others: two spaces, as `JSON.stringify(value, null, 2)`).
pub fn empty_file(client: Client) -> &'static str {
    match client {
        Client::VsCode => "{\n\t\"servers\": {}\n}\n",
        _ => "{\n  \"mcpServers\": {}\n}\n",
    }
}
