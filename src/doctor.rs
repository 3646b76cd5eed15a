//! `mcp-code-bridge doctor`: the engine, its socket, the image, and a self-check run inside a
//! real sandbox (the posture checks of `bridge/posture.rs` plus active probes: network, writes
//! outside tmpfs, running binaries from /tmp), each printed as PASS or FAIL.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::app::App;
use crate::bridge::posture::{evaluate, Check, Expected};
use crate::bridge::{Progress, RunRequest};
use crate::config::Settings;
use crate::container::connect;
use crate::report::RunStatus;

/// Sandbox code that reports the posture plus active probes as one JSON line.
const PROBE: &str = r#"
import json, os, shutil, socket, subprocess
from _mcp_bridge import selfcheck
report = selfcheck.posture()
def outcome(fn):
    try:
        fn()
        return "allowed"
    except Exception as e:
        return "refused (%s)" % type(e).__name__
report["probe_network"] = outcome(lambda: socket.create_connection(("1.1.1.1", 53), timeout=2).close())
report["probe_write_root"] = outcome(lambda: open("/doctor-probe", "w").close())
report["probe_write_usr"] = outcome(lambda: open("/usr/doctor-probe", "w").close())
def run_from_tmp():
    shutil.copy("/bin/true", "/tmp/doctor-true")
    os.chmod("/tmp/doctor-true", 0o755)
    subprocess.run(["/tmp/doctor-true"], check=True)
report["probe_exec_tmp"] = outcome(run_from_tmp)
print("DOCTOR " + json.dumps(report))
"#;

/// One line of the report.
fn line(out: &mut String, ok: bool, name: &str, detail: &str) {
    out.push_str(&format!(
        "{}  {name:<20} {detail}\n",
        if ok { "PASS" } else { "FAIL" }
    ));
}

fn probe_checks(report: &Value) -> Vec<Check> {
    let refused = |key: &str| {
        report
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("refused"))
    };
    let detail = |key: &str| {
        report
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("not run")
            .to_string()
    };
    [
        (
            "network blocked",
            "probe_network",
            "connect to 1.1.1.1:53: ",
        ),
        (
            "/ not writable",
            "probe_write_root",
            "create /doctor-probe: ",
        ),
        (
            "/usr not writable",
            "probe_write_usr",
            "create /usr/doctor-probe: ",
        ),
        (
            "/tmp not executable",
            "probe_exec_tmp",
            "run a copy of /bin/true: ",
        ),
    ]
    .into_iter()
    .map(|(name, key, what)| Check {
        name,
        ok: refused(key),
        detail: format!("{what}{}", detail(key)),
    })
    .collect()
}

/// Runs every check; returns the printable report and whether all passed.
pub async fn doctor(settings: Arc<Settings>) -> (String, bool) {
    let mut out = String::new();
    let mut all_ok = true;
    let conn = match connect(&settings).await {
        Ok(c) => c,
        Err(e) => {
            line(&mut out, false, "engine", &e.to_string());
            return (out, false);
        }
    };
    line(
        &mut out,
        true,
        "engine",
        &format!("{} at {}", conn.runtime.engine(), conn.endpoint),
    );
    let image = conn.runtime.image_present(&settings.image).await;
    conn.close().await;
    match image {
        Ok(true) => line(&mut out, true, "image", &settings.image),
        Ok(false) => {
            line(
                &mut out,
                false,
                "image",
                &format!(
                    "{} is missing: build it with `container/build.sh`",
                    settings.image
                ),
            );
            return (out, false);
        }
        Err(e) => {
            line(&mut out, false, "image", &e.to_string());
            return (out, false);
        }
    }
    // Run the probe even in a weak sandbox: the point is to show what is wrong.
    let mut relaxed = settings.as_ref().clone();
    relaxed.allow_weak_sandbox = true;
    relaxed.prewarm = false;
    let app = App::with_engine(Arc::new(relaxed));
    let report = app
        .sandbox
        .run(RunRequest {
            code: PROBE.into(),
            servers: Vec::new(),
            timeout: Duration::from_secs(60),
            arrived: tokio::time::Instant::now(),
            cancel: Default::default(),
            progress: Progress::none(),
        })
        .await;
    app.shutdown().await;
    let posture = report
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("DOCTOR "))
        .and_then(|j| serde_json::from_str::<Value>(j).ok());
    let Some(posture) = posture.filter(|_| report.status == RunStatus::Ok) else {
        let why = report.error.unwrap_or_else(|| "no report".into());
        line(&mut out, false, "sandbox", &why);
        return (out, false);
    };
    line(
        &mut out,
        true,
        "sandbox",
        "started; self-check ran inside it",
    );
    let mut checks = evaluate(&posture, &Expected::from_settings(&settings));
    checks.extend(probe_checks(&posture));
    for c in &checks {
        all_ok &= c.ok;
        line(&mut out, c.ok, c.name, &c.detail);
    }
    (out, all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn probes_pass_only_when_refused() {
        let report = json!({
            "probe_network": "refused (OSError)",
            "probe_write_root": "allowed",
            "probe_write_usr": "refused (OSError)",
        });
        let checks = probe_checks(&report);
        let ok: Vec<bool> = checks.iter().map(|c| c.ok).collect();
        assert_eq!(ok, [true, false, true, false], "{checks:?}");
        assert!(checks[3].detail.ends_with("not run"));
    }
}
