//! A server entry's policy keys parsed into a [`ServerPolicy`]: the tool lists
//! (`"allowedTools"`, `"disabledTools"`, `"requireApproval"`, `"autoApprove"`) and the limit
//! overrides (`"callsPerMinute"`, `"maxCallsPerRun"`, `"maxResultBytesPerRun"`), and what of
//! them a project's file may set: only what tightens ([`for_project`]). Also the merge of a
//! project's policy into the user's own entry of the same name ([`over_users`]).

use serde_json::{Map, Value};

use super::tool_rules::Limits;
use super::tool_rules::{LimitOverrides, Pattern, RuleList, ServerPolicy, ToolRules};

/// Patterns one list may hold at most.
pub const MAX_PATTERNS: usize = 1000;
/// Characters one pattern may have at most.
pub const MAX_PATTERN_CHARS: usize = 256;

/// The limit keys of an entry, each with the setting it overrides.
const LIMIT_KEYS: [(&str, &str); 3] = [
    ("callsPerMinute", "MCP_BRIDGE_CALLS_PER_MINUTE"),
    ("maxCallsPerRun", "MCP_BRIDGE_RUN_MAX_CALLS"),
    ("maxResultBytesPerRun", "MCP_BRIDGE_RUN_MAX_RESULT_BYTES"),
];

/// Parses the policy keys of entry `obj`; the error names the key.
pub fn parse_policy(obj: &Map<String, Value>) -> Result<ServerPolicy, String> {
    let list = |which: RuleList| patterns(obj, which.key());
    let tools = ToolRules {
        allowed: match obj.get(RuleList::Allowed.key()) {
            None | Some(Value::Null) => None,
            Some(_) => Some(list(RuleList::Allowed)?),
        },
        disabled: list(RuleList::Disabled)?,
        require_approval: list(RuleList::RequireApproval)?,
        auto_approve: list(RuleList::AutoApprove)?,
    };
    let limits = LimitOverrides {
        calls_per_minute: count(obj, LIMIT_KEYS[0].0)?,
        max_calls_per_run: count(obj, LIMIT_KEYS[1].0)?,
        max_result_bytes_per_run: count(obj, LIMIT_KEYS[2].0)?,
    };
    Ok(ServerPolicy { tools, limits })
}

fn patterns(obj: &Map<String, Value>, key: &str) -> Result<Vec<Pattern>, String> {
    let bad = || format!("\"{key}\" must be an array of tool names (\"*\" matches any run)");
    let items = match obj.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(bad()),
    };
    if items.len() > MAX_PATTERNS {
        return Err(format!(
            "\"{key}\" has {} entries; at most {MAX_PATTERNS}",
            items.len()
        ));
    }
    items
        .iter()
        .map(|v| match v.as_str() {
            Some(s) if s.chars().count() > MAX_PATTERN_CHARS => Err(format!(
                "an entry of \"{key}\" is longer than {MAX_PATTERN_CHARS} characters"
            )),
            Some(s) => Ok(Pattern::new(s)),
            None => Err(bad()),
        })
        .collect()
}

fn count(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("\"{key}\" must be a non-negative whole number (0: no limit)")),
    }
}

/// Whether limit `value` (`0`: none) is at most `setting` (`0`: none).
fn within(value: u64, setting: u64) -> bool {
    setting == 0 || (value != 0 && value <= setting)
}

/// `policy` as a project's file may set it: the keys that only tighten (the tool lists that
/// hide or ask, limits at most the setting's); the rest is dropped with a note naming the key
/// and why.
pub fn for_project(mut policy: ServerPolicy, settings: &Limits) -> (ServerPolicy, Vec<String>) {
    let mut notes = Vec::new();
    if !policy.tools.auto_approve.is_empty() {
        policy.tools.auto_approve.clear();
        notes.push(format!(
            "\"{}\" is ignored: a project's file may only tighten a server's policy",
            RuleList::AutoApprove.key()
        ));
    }
    let l = &mut policy.limits;
    let settings = [
        settings.calls_per_minute,
        settings.run_max_calls,
        settings.run_max_result_bytes,
    ];
    let slots = [
        &mut l.calls_per_minute,
        &mut l.max_calls_per_run,
        &mut l.max_result_bytes_per_run,
    ];
    for ((slot, setting), (key, row)) in slots.into_iter().zip(settings).zip(LIMIT_KEYS) {
        if let Some(v) = *slot {
            if !within(v, setting) {
                *slot = None;
                notes.push(format!(
                    "\"{key}\": {v} is ignored: a project's file may only lower a limit, and \
                     {row} is {}",
                    if setting == 0 {
                        "0 (no limit) already".to_string()
                    } else {
                        setting.to_string()
                    }
                ));
            }
        }
    }
    (policy, notes)
}

/// A project's `policy` (already [`for_project`]) applied over the user's own `user` policy of
/// the same server: the user's rules stay, the project's only add to them. A note when the
/// project's `"allowedTools"` cannot be combined with the user's own (the user's is kept).
pub fn over_users(user: &ServerPolicy, project: &ServerPolicy) -> (ServerPolicy, Option<String>) {
    let mut out = user.clone();
    let mut note = None;
    let t = &mut out.tools;
    match (&t.allowed, &project.tools.allowed) {
        (None, Some(p)) => t.allowed = Some(p.clone()),
        (Some(_), Some(_)) => {
            note = Some(
                "the project's \"allowedTools\" is not applied: the user's own entry has one, \
                 which is kept"
                    .to_string(),
            );
        }
        _ => {}
    }
    t.disabled.extend(project.tools.disabled.iter().cloned());
    t.require_approval
        .extend(project.tools.require_approval.iter().cloned());
    let tighter = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if a == 0 || b == 0 => Some(a.max(b)),
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let (u, p) = (&mut out.limits, &project.limits);
    u.calls_per_minute = tighter(u.calls_per_minute, p.calls_per_minute);
    u.max_calls_per_run = tighter(u.max_calls_per_run, p.max_calls_per_run);
    u.max_result_bytes_per_run = tighter(u.max_result_bytes_per_run, p.max_result_bytes_per_run);
    (out, note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        let Value::Object(m) = v else { panic!() };
        m
    }

    #[test]
    fn lists_and_limits_parse_and_bad_ones_name_the_key() {
        let p = parse_policy(&obj(json!({
            "allowedTools": ["get_*", "list"],
            "disabledTools": ["*secret*"],
            "requireApproval": ["write_*"],
            "autoApprove": ["write_note"],
            "callsPerMinute": 30,
            "maxCallsPerRun": 0,
        })))
        .expect("valid");
        assert_eq!(p.tools.allowed.as_ref().map(Vec::len), Some(2));
        assert!(p.tools.refusal("get_secret").is_some());
        assert!(p.tools.refusal("list").is_none());
        assert!(p.tools.needs_approval("write_x").is_some());
        assert!(p.tools.auto_approved("write_note").is_some());
        assert_eq!(p.limits.calls_per_minute, Some(30));
        assert_eq!(p.limits.max_calls_per_run, Some(0));
        assert_eq!(p.limits.max_result_bytes_per_run, None);
        assert_eq!(
            parse_policy(&obj(json!({}))).expect("empty"),
            ServerPolicy::default()
        );
        // An empty allow list hides every tool; an absent one hides none.
        let none = parse_policy(&obj(json!({"allowedTools": []}))).expect("valid");
        assert!(none.tools.refusal("x").is_some());

        let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("t{i}")).collect();
        let long = "x".repeat(MAX_PATTERN_CHARS + 1);
        for (entry, key) in [
            (json!({"disabledTools": "x"}), "\"disabledTools\""),
            (json!({"allowedTools": [1]}), "\"allowedTools\""),
            (json!({"autoApprove": many}), "\"autoApprove\" has 1001"),
            (json!({"requireApproval": [long]}), "\"requireApproval\""),
            (json!({"callsPerMinute": -1}), "\"callsPerMinute\""),
            (
                json!({"maxResultBytesPerRun": "9"}),
                "\"maxResultBytesPerRun\"",
            ),
            (json!({"maxCallsPerRun": 1.5}), "\"maxCallsPerRun\""),
        ] {
            let e = parse_policy(&obj(entry)).expect_err(key);
            assert!(e.contains(key), "{e}");
        }
        let fits = vec!["y".repeat(MAX_PATTERN_CHARS); MAX_PATTERNS];
        assert!(parse_policy(&obj(json!({"disabledTools": fits}))).is_ok());
    }

    #[test]
    fn a_project_only_tightens() {
        let settings = Limits {
            calls_per_minute: 60,
            run_max_calls: 0,
            run_max_result_bytes: 1000,
        };
        let p = parse_policy(&obj(json!({
            "allowedTools": ["a"], "disabledTools": ["b"], "requireApproval": ["c"],
            "autoApprove": ["*"],
            "callsPerMinute": 61, "maxCallsPerRun": 5, "maxResultBytesPerRun": 0,
        })))
        .expect("valid");
        let (kept, notes) = for_project(p.clone(), &settings);
        assert_eq!(kept.tools.allowed, p.tools.allowed);
        assert_eq!(kept.tools.disabled, p.tools.disabled);
        assert_eq!(kept.tools.require_approval, p.tools.require_approval);
        assert!(kept.tools.auto_approve.is_empty());
        assert_eq!(kept.limits.calls_per_minute, None);
        assert_eq!(kept.limits.max_calls_per_run, Some(5));
        assert_eq!(kept.limits.max_result_bytes_per_run, None);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].starts_with("\"autoApprove\" is ignored"),
            "{notes:?}"
        );
        assert!(notes[1].contains("\"callsPerMinute\": 61") && notes[1].contains("is 60"));
        assert!(notes[2].contains("\"maxResultBytesPerRun\": 0"));
        let lower = parse_policy(&obj(json!({"callsPerMinute": 60}))).expect("valid");
        assert!(for_project(lower, &settings).1.is_empty());
    }

    #[test]
    fn a_project_over_the_users_entry_only_adds() {
        let user = parse_policy(&obj(json!({
            "disabledTools": ["drop_*"], "autoApprove": ["peek"], "callsPerMinute": 0,
            "maxCallsPerRun": 10,
        })))
        .expect("valid");
        let project = parse_policy(&obj(json!({
            "allowedTools": ["*"], "disabledTools": ["write_*"], "maxCallsPerRun": 20,
            "callsPerMinute": 5,
        })))
        .expect("valid");
        let (out, note) = over_users(&user, &project);
        assert!(note.is_none());
        assert!(out.tools.refusal("drop_table").is_some());
        assert!(out.tools.refusal("write_note").is_some());
        assert!(out.tools.auto_approved("peek").is_some());
        assert_eq!(out.limits.max_calls_per_run, Some(10));
        assert_eq!(out.limits.calls_per_minute, Some(5));
        let mine = parse_policy(&obj(json!({"allowedTools": ["peek"]}))).expect("valid");
        let (out, note) = over_users(&mine, &project);
        assert_eq!(out.tools.allowed, mine.tools.allowed);
        assert!(note.expect("a note").contains("allowedTools"));
    }

    /// A project's `.mcp.json` (Claude Code, project scope) with `entry` as server `gh`, and
    /// the user's `~/.claude.json` with `user` as `gh` when given; `allowed`: the project's
    /// entry approved with `servers --allow` as it is written now.
    fn discover_project(
        d: &std::path::Path,
        entry: Value,
        user: Option<Value>,
        allowed: Option<&Value>,
    ) -> crate::config::servers::Servers {
        use crate::config::servers::allow_list::{AllowList, Approval};
        use crate::config::servers::clients::{Client, ClientFile, Scope};
        use crate::config::servers::spec::Sources;
        let project = d.join(".mcp.json");
        std::fs::write(&project, json!({"mcpServers": {"gh": entry}}).to_string()).expect("w");
        let home = d.join("claude.json");
        let user_table = user.map(|u| json!({"gh": u})).unwrap_or(json!({}));
        std::fs::write(&home, json!({"mcpServers": user_table}).to_string()).expect("w");
        let state = d.join("state");
        std::fs::create_dir_all(&state).expect("mkdir");
        if let Some(approved) = allowed {
            let mut list = AllowList::load(&state);
            list.allow(Approval {
                name: "gh".into(),
                source: project.clone(),
                sha256: crate::config::servers::consent::entry_hash(approved),
            })
            .expect("allow");
        }
        let file = |scope, path: &std::path::Path| ClientFile {
            client: Client::ClaudeCode,
            scope,
            path: path.to_path_buf(),
        };
        crate::config::servers::discover_with_env(
            &Sources {
                client_files: vec![file(Scope::Project, &project), file(Scope::User, &home)],
                state_dir: Some(state),
                limits: Limits {
                    calls_per_minute: 60,
                    ..Limits::default()
                },
                ..Sources::default()
            },
            &|_| None,
        )
    }

    #[test]
    fn a_project_entrys_approval_pins_its_rules_and_loosening_keys_are_ignored() {
        let d = tempfile::tempdir().expect("tempdir");
        let entry = json!({"command": "gh-mcp", "allowedTools": ["get_*"],
                           "autoApprove": ["*"], "callsPerMinute": 600});
        let s = discover_project(d.path(), entry.clone(), None, Some(&entry));
        let gh = s.get("gh").expect("gh");
        assert!(gh.consent.permits(), "{:?}", gh.consent);
        assert!(gh.tool_refusal("get_issue").is_none());
        assert!(gh.tool_refusal("delete_repo").is_some());
        assert!(gh.policy.tools.auto_approve.is_empty());
        assert_eq!(gh.policy.limits.calls_per_minute, None);
        let notes: Vec<&str> = s.notes.iter().map(|n| n.message.as_str()).collect();
        assert!(
            notes
                .iter()
                .any(|n| n.contains("'gh': \"autoApprove\" is ignored")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("\"callsPerMinute\": 600 is ignored")
                    && n.contains("MCP_BRIDGE_CALLS_PER_MINUTE is 60")),
            "{notes:?}"
        );
        // Widening its allow list after the approval makes it need approval again.
        let wider = json!({"command": "gh-mcp", "allowedTools": ["*"],
                           "autoApprove": ["*"], "callsPerMinute": 600});
        let s = discover_project(d.path(), wider, None, Some(&entry));
        assert!(!s.get("gh").expect("gh").consent.permits());
    }

    #[test]
    fn a_project_entry_never_replaces_the_users_policy() {
        let d = tempfile::tempdir().expect("tempdir");
        let user = json!({"command": "gh-mcp", "disabledTools": ["delete_*"],
                          "maxCallsPerRun": 5});
        let project = json!({"command": "gh-mcp", "disabledTools": ["merge_*"],
                             "maxCallsPerRun": 50});
        let s = discover_project(d.path(), project.clone(), Some(user), Some(&project));
        let gh = s.get("gh").expect("gh");
        // Claude Code's precedence keeps the project's definition (project over user) ...
        assert!(gh.source.ends_with(".mcp.json"), "{:?}", gh.source);
        // ... but the user's rules stay and the project's only add to them.
        assert!(gh.tool_refusal("delete_repo").is_some());
        assert!(gh.tool_refusal("merge_pr").is_some());
        assert!(gh.tool_refusal("get_issue").is_none());
        assert_eq!(gh.policy.limits.max_calls_per_run, Some(5));
    }

    #[test]
    fn per_client_from_a_project_applies_and_never_drops_the_users() {
        let d = tempfile::tempdir().expect("tempdir");
        // Approved, a project's entry may ask for a process per client: it only isolates more.
        let project = json!({"command": "gh-mcp", "perClient": true});
        let s = discover_project(d.path(), project.clone(), None, Some(&project));
        assert!(s.get("gh").expect("gh").per_client);
        // Winning over the user's own entry, it cannot take the user's isolation away.
        let user = json!({"command": "gh-mcp", "perClient": true});
        let plain = json!({"command": "gh-mcp"});
        let s = discover_project(d.path(), plain.clone(), Some(user), Some(&plain));
        let gh = s.get("gh").expect("gh");
        assert!(gh.source.ends_with(".mcp.json"), "{:?}", gh.source);
        assert!(gh.per_client);
    }
}
