//! `mcp-code-bridge doctor`: the engine, its socket, the image, and a self-check run inside a
//! real sandbox (the posture checks of `sandbox/posture.rs` plus active probes: network, writes
//! outside tmpfs, running binaries from /tmp), each printed as PASS or FAIL.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::app::App;
use crate::cli::safe_line::safe_line;
use crate::config::Settings;
use crate::container::{connect, ImageInfo};
use crate::image::status::{node_line, node_of, recipe_line, recipe_of, when_missing, Recipe};
use crate::report::RunStatus;
use crate::sandbox::posture::{evaluate, Check, Expected};
use crate::sandbox::{Progress, RunRequest};

/// Sandbox code that reports the posture plus active probes as one JSON line (also what a
/// `kube manifest --self-check` pod runs).
pub(crate) const PROBE: &str = r#"
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
    mark(out, if ok { "PASS" } else { "FAIL" }, name, detail);
}

/// Every detail (engine answers, settings, the sandbox's words) is one line, escaped.
pub(crate) fn mark(out: &mut String, mark: &str, name: &str, detail: &str) {
    let (name, detail) = (safe_line(name), safe_line(detail));
    out.push_str(&format!("{mark}  {name:<20} {detail}\n"));
}

/// The image lines: PASS when present (WARN when stale), or WARN saying how a missing one will
/// be made and FAIL for the sandbox checks that cannot run; returns whether the image is there.
fn image_lines(out: &mut String, settings: &Settings, info: Option<&ImageInfo>) -> bool {
    let Some(info) = info else {
        mark(
            out,
            "WARN",
            "image",
            &format!("{} is missing: {}", settings.image, when_missing(settings)),
        );
        line(out, false, "sandbox", "not checked: there is no image yet");
        return false;
    };
    let what = format!("{} (recipe {})", settings.image, recipe_line(info));
    match recipe_of(info) {
        Recipe::Other(_) => mark(out, "WARN", "image", &what),
        Recipe::Current | Recipe::Unknown => line(out, true, "image", &what),
    }
    // The JavaScript runtime: a warning only when run_typescript is offered.
    match (node_of(info), settings.languages.typescript) {
        (Some(_), _) => line(out, true, "javascript", &node_line(info)),
        (None, true) => mark(out, "WARN", "javascript", &node_line(info)),
        (None, false) => line(out, true, "javascript", &node_line(info)),
    }
    true
}

/// The settings in effect: one line per setting given a value other than its default (they
/// were all accepted, or doctor would not have started), else one saying all are defaults.
fn settings_lines(out: &mut String, settings: &Settings) {
    if settings.overrides.is_empty() {
        line(
            out,
            true,
            "settings",
            "all defaults (GUIDE.md, \"Environment variables\")",
        );
    }
    for o in &settings.overrides {
        let detail = format!("{}={} (default {})", o.name, o.value, o.default);
        line(out, true, "setting", &detail);
    }
}

/// The active probes' outcomes as checks: each passes only when the sandbox refused it.
pub(crate) fn probe_checks(report: &Value) -> Vec<Check> {
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
            settings_lines(&mut out, &settings);
            return (out, false);
        }
    };
    line(
        &mut out,
        true,
        "engine",
        &format!("{} at {}", conn.runtime.engine(), conn.endpoint),
    );
    settings_lines(&mut out, &settings);
    let image = conn.runtime.image_info(&settings.image).await;
    conn.close().await;
    match image {
        Ok(info) if image_lines(&mut out, &settings, info.as_ref()) => {}
        Ok(_) => return (out, false),
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
            servers: Vec::new().into(),
            timeout: Duration::from_secs(60),
            arrived: tokio::time::Instant::now(),
            cancel: Default::default(),
            progress: Progress::none(),
            scope: crate::calls::RunScope::plain(PROBE),
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

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::from_pairs(pairs).expect("valid settings")
    }

    #[test]
    fn the_image_lines_say_present_stale_or_how_it_will_be_built() {
        use crate::image::recipe::{LABEL_RECIPE, RECIPE_VERSION};
        let s = settings(&[("MCP_BRIDGE_IMAGE", "mcb:1")]);
        let with_recipe = |v: &str| ImageInfo {
            labels: [(LABEL_RECIPE.to_string(), v.to_string())].into(),
            ..Default::default()
        };
        let mut out = String::new();
        assert!(image_lines(
            &mut out,
            &s,
            Some(&with_recipe(&RECIPE_VERSION.to_string()))
        ));
        assert_eq!(
            out,
            format!(
                "PASS  image                mcb:1 (recipe {RECIPE_VERSION} (this binary's))\n\
                 PASS  javascript           none (run_typescript needs node: rebuild with \
                 `mcp-code-bridge image build`)\n"
            )
        );
        // With run_typescript offered, an image without node is a warning; with node, PASS.
        let ts = settings(&[
            ("MCP_BRIDGE_IMAGE", "mcb:1"),
            ("MCP_BRIDGE_LANGUAGES", "python,typescript"),
        ]);
        let mut out = String::new();
        image_lines(
            &mut out,
            &ts,
            Some(&with_recipe(&RECIPE_VERSION.to_string())),
        );
        assert!(out.contains("WARN  javascript           none"), "{out}");
        let mut node = with_recipe(&RECIPE_VERSION.to_string());
        node.labels.insert(
            crate::image::recipe::LABEL_NODE.into(),
            crate::image::recipe::NODE_VERSION.into(),
        );
        let mut out = String::new();
        image_lines(&mut out, &ts, Some(&node));
        assert!(out.contains("PASS  javascript           node 22."), "{out}");
        let mut out = String::new();
        assert!(image_lines(&mut out, &s, Some(&with_recipe("3"))));
        assert!(
            out.starts_with(
                "WARN  image                mcb:1 (recipe 3, stale: this binary builds recipe"
            ),
            "{out}"
        );
        let mut out = String::new();
        assert!(!image_lines(&mut out, &s, None));
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with(
                "WARN  image                mcb:1 is missing: the bridge builds it on first use"
            ),
            "{out}"
        );
        assert_eq!(
            lines[1],
            "FAIL  sandbox              not checked: there is no image yet"
        );
    }

    #[test]
    fn the_settings_given_are_listed_with_their_defaults() {
        let mut out = String::new();
        settings_lines(&mut out, &settings(&[]));
        assert_eq!(
            out,
            "PASS  settings             all defaults (GUIDE.md, \"Environment variables\")\n"
        );
        let mut out = String::new();
        let s = settings(&[
            ("MCP_BRIDGE_TIMEOUT", "60"),
            ("MCP_BRIDGE_IMAGE", "mcb:\u{1b}[2J1"),
        ]);
        settings_lines(&mut out, &s);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "PASS  setting              MCP_BRIDGE_IMAGE=mcb:\\u{1b}[2J1 (default `mcp-code-bridge-sandbox:latest`)",
                "PASS  setting              MCP_BRIDGE_TIMEOUT=60 (default 30)",
            ]
        );
    }

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
