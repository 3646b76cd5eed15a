//! The host methods sandbox code may call: one list on this side, held equal to
//! `entrypoint/runtime.py`'s `HOST_METHODS` by a test.

/// A host method sandbox code may call (a `call` frame's `method`; ARCHITECTURE.md, "Host
/// methods"). The one list on this side: `entrypoint/runtime.py`'s `HOST_METHODS` is the one on
/// the other, and a test holds the two equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostMethod {
    /// `call_tool`: a proxied MCP tool call.
    CallTool,
    /// `list_servers`.
    ListServers,
    /// `discovered_servers`.
    DiscoveredServers,
    /// `list_tools`.
    ListTools,
    /// `query_tool_docs`.
    QueryToolDocs,
    /// `stubs`: a server's typed stubs.
    Stubs,
    /// `save_skill`: keeps a function as a skill (unapproved).
    SaveSkill,
    /// `list_skills`: the run's owner's skills and their approval state.
    ListSkills,
    /// `load_skill`: an approved skill's module text.
    LoadSkill,
    /// `search_tool_docs`.
    SearchToolDocs,
    /// `describe_server`.
    DescribeServer,
    /// `list_loaded_server_metadata`.
    ListLoadedServerMetadata,
    /// `capability_summary`.
    CapabilitySummary,
    /// `ping`: echoes its params (answered by the dispatcher itself).
    Ping,
    /// `reset`: the user empties the namespace on purpose; the snapshot kept for an idle stop
    /// is dropped (answered by the dispatcher itself).
    Reset,
}

impl HostMethod {
    /// Every host method, in the order of `HOST_METHODS` in `entrypoint/runtime.py`.
    pub const ALL: &'static [HostMethod] = &[
        HostMethod::CallTool,
        HostMethod::ListServers,
        HostMethod::DiscoveredServers,
        HostMethod::ListTools,
        HostMethod::QueryToolDocs,
        HostMethod::Stubs,
        HostMethod::SaveSkill,
        HostMethod::ListSkills,
        HostMethod::LoadSkill,
        HostMethod::SearchToolDocs,
        HostMethod::DescribeServer,
        HostMethod::ListLoadedServerMetadata,
        HostMethod::CapabilitySummary,
        HostMethod::Ping,
        HostMethod::Reset,
    ];

    /// The method's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            HostMethod::CallTool => "call_tool",
            HostMethod::ListServers => "list_servers",
            HostMethod::DiscoveredServers => "discovered_servers",
            HostMethod::ListTools => "list_tools",
            HostMethod::QueryToolDocs => "query_tool_docs",
            HostMethod::Stubs => "stubs",
            HostMethod::SaveSkill => "save_skill",
            HostMethod::ListSkills => "list_skills",
            HostMethod::LoadSkill => "load_skill",
            HostMethod::SearchToolDocs => "search_tool_docs",
            HostMethod::DescribeServer => "describe_server",
            HostMethod::ListLoadedServerMetadata => "list_loaded_server_metadata",
            HostMethod::CapabilitySummary => "capability_summary",
            HostMethod::Ping => "ping",
            HostMethod::Reset => "reset",
        }
    }

    /// The method named `name`, if there is one.
    pub fn parse(name: &str) -> Option<HostMethod> {
        HostMethod::ALL.iter().copied().find(|m| m.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_host_methods() -> Vec<String> {
        let source = include_str!("../../entrypoint/runtime.py");
        let start = source
            .find("\nHOST_METHODS = (")
            .expect("runtime.py defines HOST_METHODS = (...)");
        let body = &source[start + "\nHOST_METHODS = (".len()..];
        let body = &body[..body.find(')').expect("HOST_METHODS closes")];
        body.split(',')
            .map(|item| item.split('#').next().unwrap_or("").trim())
            .filter(|item| !item.is_empty())
            .map(|item| item.trim_matches('"').to_string())
            .collect()
    }

    #[test]
    fn host_methods_are_the_same_list_on_both_sides() {
        let rust: Vec<&str> = HostMethod::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(python_host_methods(), rust);
        for m in HostMethod::ALL {
            assert_eq!(HostMethod::parse(m.name()), Some(*m));
        }
        assert_eq!(HostMethod::parse("rm_rf"), None);
    }
}
