//! The posture check: the sandbox's own report of its isolation (`entrypoint/selfcheck.py`, sent
//! in `ready`) compared with what the bridge asked the engine for. A sandbox weaker than
//! configured (an engine that ignored a limit or an option) is refused unless the user opts out
//! with `MCP_BRIDGE_ALLOW_WEAK_SANDBOX=1`; `mcp-code-bridge doctor` prints every check.

use serde_json::Value;

use crate::config::Settings;

/// What the sandbox must look like.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expected {
    /// User id inside.
    pub uid: u64,
    /// Memory limit, bytes.
    pub memory_bytes: u64,
    /// Process limit.
    pub pids: u64,
    /// Folders are shared (`MCP_BRIDGE_MOUNTS`): the sandbox's rules against ways out of them
    /// (no unix socket by path, no write-open outside its scratch places) must be in force.
    pub shared_folders: bool,
}

impl Expected {
    /// The expectations that follow from `settings`.
    pub fn from_settings(settings: &Settings) -> Expected {
        let uid = settings
            .container_user
            .split(':')
            .next()
            .and_then(|u| u.parse().ok())
            .unwrap_or(65534);
        Expected {
            uid,
            memory_bytes: settings.memory_bytes,
            pids: settings.pids,
            shared_folders: !settings.data.mounts.is_empty(),
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Short name, e.g. `capabilities`.
    pub name: &'static str,
    /// Whether the sandbox is as strict as expected.
    pub ok: bool,
    /// What was seen (and expected, when it failed).
    pub detail: String,
}

fn check(name: &'static str, ok: bool, detail: String) -> Check {
    Check { name, ok, detail }
}

/// Evaluates a posture report against `want`. Missing or malformed facts fail their check.
pub fn evaluate(report: &Value, want: &Expected) -> Vec<Check> {
    let int = |k: &str| report.get(k).and_then(Value::as_i64);
    let flag = |k: &str| report.get(k).and_then(Value::as_bool);
    let shown = |k: &str| {
        report
            .get(k)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "unknown".into())
    };
    let limit = |name: &'static str, key: &str, max: u64| {
        let seen = int(key);
        let ok = matches!(seen, Some(v) if v > 0 && (v as u64) <= max);
        let detail = match seen {
            Some(-1) => format!("unlimited (wanted at most {max})"),
            Some(v) if ok => v.to_string(),
            Some(v) => format!("{v} (wanted at most {max})"),
            None => format!("could not be read (wanted at most {max})"),
        };
        check(name, ok, detail)
    };
    let interfaces = report.get("network_interfaces").and_then(Value::as_array);
    let mut checks = vec![
        check(
            "user",
            int("uid") == Some(want.uid as i64),
            format!("uid {} (wanted {})", shown("uid"), want.uid),
        ),
        check(
            "capabilities",
            int("cap_eff") == Some(0),
            format!("effective set {}", shown("cap_eff")),
        ),
        check(
            "no-new-privileges",
            int("no_new_privs") == Some(1),
            format!("NoNewPrivs {}", shown("no_new_privs")),
        ),
        check(
            "seccomp",
            int("seccomp") == Some(2),
            format!("mode {} (2 = filtering)", shown("seccomp")),
        ),
        check(
            "read-only root",
            flag("root_read_only") == Some(true),
            format!("read-only {}", shown("root_read_only")),
        ),
        check(
            "noexec /tmp",
            flag("tmp_noexec") == Some(true) && flag("tmp_nosuid") == Some(true),
            format!(
                "noexec {}, nosuid {}",
                shown("tmp_noexec"),
                shown("tmp_nosuid")
            ),
        ),
        check(
            "no network",
            interfaces.is_some_and(|i| i.is_empty()),
            format!("interfaces besides lo: {}", shown("network_interfaces")),
        ),
        limit("memory limit", "memory_limit", want.memory_bytes),
        limit("pids limit", "pids_limit", want.pids),
    ];
    if want.shared_folders {
        let ok = flag("unix_sockets_blocked") == Some(true)
            && flag("shared_writes_blocked") == Some(true);
        let seen = format!(
            "unix sockets blocked {}, writes outside scratch blocked {}",
            shown("unix_sockets_blocked"),
            shown("shared_writes_blocked")
        );
        let detail = if ok {
            seen
        } else {
            format!(
                "{seen} (MCP_BRIDGE_MOUNTS needs both: a socket or FIFO in a shared folder is a \
                 way out)"
            )
        };
        checks.push(check("shared-folder rules", ok, detail));
    }
    checks
}

/// The failed checks as one message for an error, or `None` when all passed.
pub fn failures(checks: &[Check]) -> Option<String> {
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    (!failed.is_empty()).then(|| failed.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn want() -> Expected {
        Expected {
            uid: 65534,
            memory_bytes: 512 << 20,
            pids: 128,
            shared_folders: false,
        }
    }

    fn strict() -> Value {
        json!({"uid": 65534, "gid": 65534, "cap_eff": 0, "cap_bnd": 0, "no_new_privs": 1,
               "seccomp": 2, "root_read_only": true, "tmp_noexec": true, "tmp_nosuid": true,
               "network_interfaces": [], "memory_limit": 512 << 20, "pids_limit": 128,
               "unix_sockets_blocked": true, "shared_writes_blocked": true})
    }

    #[test]
    fn a_strict_sandbox_passes_every_check() {
        let checks = evaluate(&strict(), &want());
        assert_eq!(checks.len(), 9);
        assert!(checks.iter().all(|c| c.ok), "{checks:?}");
        assert_eq!(failures(&checks), None);
    }

    #[test]
    fn each_weakening_fails_its_check() {
        let cases = [
            ("uid", json!(0), "user"),
            ("cap_eff", json!(0x8004_05fb_u64), "capabilities"),
            ("no_new_privs", json!(0), "no-new-privileges"),
            ("seccomp", json!(0), "seccomp"),
            ("root_read_only", json!(false), "read-only root"),
            ("tmp_noexec", json!(false), "noexec /tmp"),
            ("network_interfaces", json!(["eth0"]), "no network"),
            ("memory_limit", json!(-1), "memory limit"),
            ("memory_limit", json!(1u64 << 31), "memory limit"),
            ("pids_limit", json!(null), "pids limit"),
        ];
        for (key, value, name) in cases {
            let mut report = strict();
            report[key] = value;
            let checks = evaluate(&report, &want());
            let failed: Vec<&str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
            assert_eq!(failed, [name], "{key} weakened");
            assert!(failures(&checks).expect("a failure").starts_with(name));
        }
        assert!(evaluate(&json!("garbage"), &want()).iter().all(|c| !c.ok));
    }

    #[test]
    fn shared_folders_need_both_rules_in_force() {
        let shared = Expected {
            shared_folders: true,
            ..want()
        };
        assert!(evaluate(&strict(), &shared).iter().all(|c| c.ok));
        for (key, value) in [
            ("unix_sockets_blocked", json!(false)),
            ("shared_writes_blocked", json!(false)),
            ("shared_writes_blocked", json!(null)),
        ] {
            let mut report = strict();
            report[key] = value;
            let checks = evaluate(&report, &shared);
            let failed: Vec<&str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
            assert_eq!(failed, ["shared-folder rules"], "{key}");
            // without shared folders the rules are not asked for
            assert!(evaluate(&report, &want()).iter().all(|c| c.ok), "{key}");
        }
    }
}
