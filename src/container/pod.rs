//! The Kubernetes shape of a sandbox (ARCHITECTURE.md, "Sandboxes on Kubernetes"): a Pod built
//! from the same [`SandboxSpec`] the engines get, and the deny-all NetworkPolicy that goes with
//! it. Pure data (`serde_json::Value`, one per document); printing is the caller's.
//!
//! What a pod spec cannot say, and what stands in for it: no network (a NetworkPolicy; `podman
//! kube play --network none`), the pids limit (the kubelet's `podPidsLimit`), `noexec` on the
//! scratch folders (emptyDir has no mount options).

use serde_json::{json, Value};

use super::SandboxSpec;

/// The label every sandbox pod carries, valued with the pod's name; the policy selects on it.
pub const POD_LABEL: &str = "mcp-code-bridge.sandbox";

/// The sandbox's one container.
pub const CONTAINER: &str = "sandbox";

/// What the pod runs besides the spec's limits.
#[derive(Debug, Clone)]
pub struct PodOptions {
    /// The pod's name (a DNS label).
    pub name: String,
    /// Python source the container runs (`python3 -I -B`), carried base64-encoded (see
    /// [`python_command`]).
    pub program: String,
    /// Keep stdin open: the bridge attaches and speaks frames (false for a one-shot program).
    pub stdin: bool,
    /// `runtimeClassName` (e.g. `gvisor`), when the cluster offers one.
    pub runtime_class: Option<String>,
}

/// `python3 -I -B -c` running `program`, which travels base64-encoded: podman 4.3's `kube play`
/// re-encodes the file with one YAML library and parses it with another, which fails on a long
/// program with quotes and newlines ("did not find expected '-' indicator").
pub fn python_command(program: &str) -> Vec<String> {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(program);
    let run = format!("import base64;exec(base64.b64decode('{encoded}'))");
    ["python3", "-I", "-B", "-c", &run]
        .map(String::from)
        .to_vec()
}

/// A docker size (`64m`, `512k`, `1g`, bytes without a suffix) as a Kubernetes quantity
/// (`64Mi`): the same number with the binary suffix, since `m` means milli there.
fn quantity(docker_size: &str) -> String {
    let (digits, suffix) = docker_size.split_at(
        docker_size
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(docker_size.len()),
    );
    let binary = match suffix.to_ascii_lowercase().as_str() {
        "k" => "Ki",
        "m" => "Mi",
        "g" => "Gi",
        _ => "",
    };
    format!("{digits}{binary}")
}

/// CPUs in nano-cpus as millicores (`1500m`).
fn millicores(nano_cpus: i64) -> String {
    format!("{}m", (nano_cpus / 1_000_000).max(1))
}

/// The uid and gid of a spec's `uid:gid` user (65534 when unreadable).
fn ids(user: &str) -> (i64, i64) {
    let mut parts = user.split(':').map(|p| p.parse::<i64>().ok());
    let uid = parts.next().flatten().unwrap_or(65534);
    (uid, parts.next().flatten().unwrap_or(uid))
}

/// The sandbox pod for `spec`.
pub fn pod(spec: &SandboxSpec, options: &PodOptions) -> Value {
    let (uid, gid) = ids(&spec.user);
    let mut limits = json!({ "memory": spec.memory_bytes.to_string() });
    if let Some(nano) = spec.nano_cpus {
        limits["cpu"] = json!(millicores(nano));
    }
    let volume_name = |dir: &str| dir.trim_start_matches('/').replace('/', "-");
    let mounts: Vec<Value> = spec
        .tmpfs
        .keys()
        .map(|dir| json!({ "name": volume_name(dir), "mountPath": dir }))
        .collect();
    let volumes: Vec<Value> = spec
        .tmpfs
        .iter()
        .map(|(dir, opts)| {
            let size = opts
                .split(',')
                .find_map(|o| o.strip_prefix("size="))
                .map(quantity);
            let mut empty = json!({ "medium": "Memory" });
            if let Some(size) = size {
                empty["sizeLimit"] = json!(size);
            }
            json!({ "name": volume_name(dir), "emptyDir": empty })
        })
        .collect();
    let env: Vec<Value> = spec
        .env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| json!({ "name": k, "value": v }))
        .collect();
    let seccomp = json!({ "type": "RuntimeDefault" });
    let container = json!({
        "name": CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": python_command(&options.program),
        "env": env,
        "workingDir": spec.workdir,
        "stdin": options.stdin,
        "stdinOnce": false,
        "tty": false,
        "securityContext": {
            "runAsUser": uid,
            "runAsGroup": gid,
            "runAsNonRoot": true,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "privileged": false,
            "capabilities": { "drop": ["ALL"] },
            "seccompProfile": seccomp,
        },
        "resources": { "limits": limits.clone(), "requests": limits },
        "volumeMounts": mounts,
    });
    let mut pod_spec = json!({
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "hostNetwork": false,
        "hostPID": false,
        "hostIPC": false,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsUser": uid,
            "runAsGroup": gid,
            "runAsNonRoot": true,
            "seccompProfile": seccomp,
        },
        "containers": [container],
        "volumes": volumes,
    });
    if let Some(class) = &options.runtime_class {
        pod_spec["runtimeClassName"] = json!(class);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": options.name,
            "labels": {
                POD_LABEL: options.name,
                "app.kubernetes.io/name": "mcp-code-bridge-sandbox",
                "app.kubernetes.io/managed-by": "mcp-code-bridge",
            },
        },
        "spec": pod_spec,
    })
}

/// The NetworkPolicy that denies the pod every connection, in and out: it selects the pod and
/// lists both policy types with no rule.
pub fn deny_all(name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": { "name": format!("{name}-deny-all") },
        "spec": {
            "podSelector": { "matchLabels": { POD_LABEL: name } },
            "policyTypes": ["Ingress", "Egress"],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    fn spec(pairs: &[(&str, &str)]) -> SandboxSpec {
        let settings = Settings::from_pairs(pairs).expect("settings");
        SandboxSpec::new(&settings, "x".into(), Vec::new(), Default::default())
    }

    fn options() -> PodOptions {
        PodOptions {
            name: "sb-1".into(),
            program: "print('hi')\nprint(\"there\")".into(),
            stdin: true,
            runtime_class: None,
        }
    }

    #[test]
    fn the_container_is_locked_down_as_the_engines_lock_it() {
        let p = pod(&spec(&[]), &options());
        let c = &p["spec"]["containers"][0];
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsUser"], 65534);
        assert_eq!(sc["runAsGroup"], 65534);
        assert_eq!(sc["runAsNonRoot"], true);
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["privileged"], false);
        assert_eq!(sc["capabilities"], json!({ "drop": ["ALL"] }));
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
        let ps = &p["spec"];
        assert_eq!(ps["automountServiceAccountToken"], false);
        assert_eq!(ps["enableServiceLinks"], false);
        assert_eq!(ps["hostNetwork"], false);
        assert_eq!(ps["restartPolicy"], "Never");
        assert_eq!(ps["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            ps["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert!(ps.get("runtimeClassName").is_none());
        assert_eq!(c["stdin"], true);
        assert_eq!(c["tty"], false);
    }

    #[test]
    fn limits_come_from_the_settings_and_scratch_folders_are_memory_with_a_size() {
        let p = pod(
            &spec(&[("MCP_BRIDGE_MEMORY", "256m"), ("MCP_BRIDGE_CPUS", "1.5")]),
            &options(),
        );
        let r = &p["spec"]["containers"][0]["resources"];
        assert_eq!(r["limits"]["memory"], (256u64 << 20).to_string());
        assert_eq!(r["limits"]["cpu"], "1500m");
        assert_eq!(r["requests"], r["limits"]);
        let mounts = &p["spec"]["containers"][0]["volumeMounts"];
        let paths: Vec<&str> = mounts
            .as_array()
            .expect("mounts")
            .iter()
            .filter_map(|m| m["mountPath"].as_str())
            .collect();
        assert_eq!(paths, ["/tmp", "/var/tmp", "/workspace"]);
        let tmp = &p["spec"]["volumes"][0];
        assert_eq!(tmp["name"], "tmp");
        assert_eq!(
            tmp["emptyDir"],
            json!({ "medium": "Memory", "sizeLimit": "64Mi" })
        );
        let no_cpu = pod(&spec(&[]), &options());
        assert!(no_cpu["spec"]["containers"][0]["resources"]["limits"]
            .get("cpu")
            .is_none());
    }

    #[test]
    fn the_program_travels_base64_and_gvisor_is_asked_for_by_name() {
        let mut o = options();
        o.runtime_class = Some("gvisor".into());
        let p = pod(&spec(&[]), &o);
        assert_eq!(p["spec"]["runtimeClassName"], "gvisor");
        let cmd = &p["spec"]["containers"][0]["command"];
        assert_eq!(cmd[0], "python3");
        let run = cmd[4].as_str().expect("program");
        assert!(!run.contains('\n') && !run.contains('"'), "{run}");
        use base64::Engine as _;
        let inner = run
            .strip_prefix("import base64;exec(base64.b64decode('")
            .and_then(|r| r.strip_suffix("'))"))
            .expect("wrapped");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(inner)
            .expect("base64");
        assert_eq!(decoded, o.program.as_bytes());
    }

    #[test]
    fn the_policy_denies_both_ways_for_exactly_this_pod() {
        let np = deny_all("sb-1");
        assert_eq!(np["kind"], "NetworkPolicy");
        assert_eq!(np["spec"]["podSelector"]["matchLabels"][POD_LABEL], "sb-1");
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert!(np["spec"].get("ingress").is_none() && np["spec"].get("egress").is_none());
        let p = pod(&spec(&[]), &options());
        assert_eq!(p["metadata"]["labels"][POD_LABEL], "sb-1");
        assert_eq!(quantity("512k"), "512Ki");
        assert_eq!(quantity("2g"), "2Gi");
        assert_eq!(quantity("4096"), "4096");
    }
}
