//! The settings that choose one of a few modes (`MCP_BRIDGE_RUNTIME`, `MCP_BRIDGE_CHANNEL`,
//! `MCP_BRIDGE_OUTPUT_MODE`, `MCP_BRIDGE_LOG_LEVEL`): their types and the words each accepts.

/// Which container engine to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeChoice {
    /// `DOCKER_HOST` if set, else the first live podman or docker socket, else podman's own service.
    Auto,
    /// Podman only.
    Podman,
    /// Docker only.
    Docker,
}

/// Which channel frames between the bridge and the sandbox use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelMode {
    /// A Unix socket bind-mounted into the sandbox when the engine is local, else stdio.
    Auto,
    /// Always the container's stdio (through the engine's attach stream).
    Stdio,
}

/// How results are rendered for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Plain text: stdout, then stderr and error sections when non-empty.
    Compact,
    /// The same payload as a TOON block.
    Toon,
}

/// `podman`, `docker` or `auto`.
pub fn parse_runtime(v: &str) -> Result<RuntimeChoice, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(RuntimeChoice::Auto),
        "podman" => Ok(RuntimeChoice::Podman),
        "docker" => Ok(RuntimeChoice::Docker),
        _ => Err("expected podman, docker or auto".into()),
    }
}

/// `compact` or `toon`.
pub fn parse_output_mode(v: &str) -> Result<OutputMode, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "compact" => Ok(OutputMode::Compact),
        "toon" => Ok(OutputMode::Toon),
        _ => Err("expected compact or toon".into()),
    }
}

/// `auto` (also `socket`) or `stdio`.
pub fn parse_channel(v: &str) -> Result<ChannelMode, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" | "socket" => Ok(ChannelMode::Auto),
        "stdio" => Ok(ChannelMode::Stdio),
        _ => Err("expected auto or stdio".into()),
    }
}

/// A tracing filter directive (`debug`, `mcp_code_bridge=trace`), kept as written.
pub fn parse_log_level(v: &str) -> Result<Option<String>, String> {
    tracing_subscriber::EnvFilter::try_new(v)
        .map(|_| Some(v.to_string()))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_reads_its_words_in_any_case() {
        assert_eq!(parse_runtime(" Podman "), Ok(RuntimeChoice::Podman));
        assert_eq!(parse_runtime("docker"), Ok(RuntimeChoice::Docker));
        assert!(parse_runtime("lxc").is_err());
        assert_eq!(parse_output_mode("TOON"), Ok(OutputMode::Toon));
        assert!(parse_output_mode("yaml").is_err());
        assert_eq!(parse_channel("socket"), Ok(ChannelMode::Auto));
        assert_eq!(parse_channel("stdio"), Ok(ChannelMode::Stdio));
        assert!(parse_channel("pipe").is_err());
        assert_eq!(parse_log_level("debug"), Ok(Some("debug".into())));
        assert!(parse_log_level("[[[").is_err());
    }
}

/// Which servers' tool definitions are pinned (`MCP_BRIDGE_PIN_TOOLS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinTools {
    /// Unset: the servers whose definitions the user did not write (project-scoped, remote).
    #[default]
    Untrusted,
    /// `1`: every server.
    All,
    /// `0`: none.
    Off,
}

/// `1` (every server) or `0` (none); unset is [`PinTools::Untrusted`].
pub fn parse_pin_tools(v: &str) -> Result<PinTools, String> {
    match super::values::parse_flag(v)? {
        true => Ok(PinTools::All),
        false => Ok(PinTools::Off),
    }
}
