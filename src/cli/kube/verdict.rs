//! `kube verdict`: a self-check pod's output (`kubectl logs`, `podman logs`) judged as `doctor`
//! judges a sandbox: the posture checks of `sandbox/posture.rs` and doctor's probes, with three
//! things a pod spec cannot say shown as WARN instead of FAIL when the pod lacks them (GUIDE.md,
//! "Kubernetes"): `noexec` scratch folders, a pids limit the container can see, and no network
//! interface when a NetworkPolicy refuses every connection instead.

use serde_json::Value;

use crate::cli::doctor::{mark, probe_checks};
use crate::config::Settings;
use crate::sandbox::posture::{evaluate, Check, Expected};

/// Bytes of the pod's output read at most (it is untrusted).
pub const MAX_INPUT: usize = 16 << 20;
/// Lines of output read at most.
pub const MAX_LINES: usize = 10_000;
/// Bytes of one line read at most.
pub const MAX_LINE: usize = 64 << 10;

/// Why a failed check is only a warning in a pod, if it is one.
fn pod_excuse(check: &Check, all: &[Check]) -> Option<&'static str> {
    match check.name {
        "noexec /tmp" | "/tmp not executable" => {
            Some("emptyDir takes no mount options: a pod cannot mount its scratch folders noexec")
        }
        "pids limit" if check.detail.starts_with("unlimited") => Some(
            "a pod spec has no pids limit: the kubelet's podPidsLimit limits the pod's cgroup, \
             which the container does not see",
        ),
        "no network" => all
            .iter()
            .any(|c| c.name == "network blocked" && c.ok)
            .then_some("an interface is there, but connections are refused (the NetworkPolicy)"),
        _ => None,
    }
}

/// The report and whether the pod passed: no FAIL line (WARN lines allowed).
pub fn verdict(settings: &Settings, output: &str) -> (String, bool) {
    let mut out = String::new();
    let report = output
        .lines()
        .take(MAX_LINES)
        .filter(|l| l.len() <= MAX_LINE)
        .find_map(|l| l.trim_end().strip_prefix("DOCTOR "))
        .and_then(|j| serde_json::from_str::<Value>(j).ok());
    let Some(report) = report else {
        mark(
            &mut out,
            "FAIL",
            "self-check",
            "no DOCTOR line in the pod's output (did the pod run `kube manifest --self-check`?)",
        );
        return (out, false);
    };
    mark(&mut out, "PASS", "self-check", "ran inside the pod");
    let mut checks = evaluate(&report, &Expected::from_settings(settings));
    checks.extend(probe_checks(&report));
    let mut ok = true;
    for c in &checks {
        let excuse = (!c.ok).then(|| pod_excuse(c, &checks)).flatten();
        let (word, detail) = match (c.ok, excuse) {
            (true, _) => ("PASS", c.detail.clone()),
            (false, Some(why)) => ("WARN", format!("{} ({why})", c.detail)),
            (false, None) => ("FAIL", c.detail.clone()),
        };
        ok &= word != "FAIL";
        mark(&mut out, word, c.name, &detail);
    }
    (out, ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_report() -> Value {
        // What podman kube play --network none gave for the printed manifest.
        json!({"uid": 65534, "gid": 65534, "cap_eff": 0, "cap_bnd": 0, "no_new_privs": 1,
               "seccomp": 2, "root_read_only": true, "tmp_noexec": false, "tmp_nosuid": true,
               "network_interfaces": [], "memory_limit": 512 << 20, "pids_limit": -1,
               "probe_network": "refused (OSError)", "probe_write_root": "refused (OSError)",
               "probe_write_usr": "refused (OSError)", "probe_exec_tmp": "allowed"})
    }

    fn judge(report: &Value) -> (String, bool) {
        let settings = Settings::from_pairs(&[]).expect("settings");
        verdict(&settings, &format!("noise\nDOCTOR {report}\n"))
    }

    #[test]
    fn what_a_pod_spec_cannot_say_is_a_warning() {
        let (text, ok) = judge(&pod_report());
        assert!(ok, "{text}");
        let warned: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("WARN"))
            .map(|l| l[6..].split("  ").next().unwrap_or_default().trim())
            .collect();
        assert_eq!(
            warned,
            ["noexec /tmp", "pids limit", "/tmp not executable"],
            "{text}"
        );
        assert!(!text.contains("FAIL"), "{text}");
    }

    #[test]
    fn an_interface_passes_only_when_connections_are_refused() {
        let mut r = pod_report();
        r["network_interfaces"] = json!(["eth0"]);
        let (text, ok) = judge(&r);
        assert!(ok && text.contains("WARN  no network"), "{text}");
        r["probe_network"] = json!("allowed");
        let (text, ok) = judge(&r);
        assert!(!ok && text.contains("FAIL  no network"), "{text}");
    }

    #[test]
    fn every_other_weakness_fails() {
        for (key, value) in [
            ("root_read_only", json!(false)),
            ("uid", json!(0)),
            ("cap_eff", json!(1)),
            ("no_new_privs", json!(0)),
            ("seccomp", json!(0)),
            ("memory_limit", json!(-1)),
            ("pids_limit", json!(4096)),
            ("probe_write_usr", json!("allowed")),
        ] {
            let mut r = pod_report();
            r[key] = value;
            let (text, ok) = judge(&r);
            assert!(!ok && text.contains("FAIL"), "{key}: {text}");
        }
        let (text, ok) = verdict(&Settings::from_pairs(&[]).expect("s"), "nothing\n");
        assert!(!ok && text.contains("no DOCTOR line"), "{text}");
    }
}
