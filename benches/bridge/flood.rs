//! The output floods: 1 GiB through `print()`, through fd 1 below the capture, and as one line
//! without a newline on fd 2, with the bridge's peak RSS after each.

use std::time::{Duration, Instant};

use crate::client::{Bridge, Workdir};
use crate::stats::Table;

/// Sandbox code for each output flood of `mib` MiB, written in 1 MiB pieces.
fn flood_code(kind: &str, mib: usize) -> String {
    let write_all =
        "import os\ndef put(fd, data):\n    view = memoryview(data)\n    while view:\n        \
                     view = view[os.write(fd, view):]\n";
    match kind {
        // Through the entrypoint's capture: only head and tail of the budget reach the host.
        "print" => format!("s = 'x' * ({MIB} - 1)\nfor _ in range({mib}):\n    print(s)\n"),
        // Below the capture: fd 1 is fd 2, so every line crosses the attach stream as stderr.
        "fd1" => format!(
            "{write_all}chunk = (b'y' * 1023 + b'\\n') * 1024\nfor _ in range({mib}):\n    put(1, chunk)\n\
             print('flooded')\n"
        ),
        // One line with no newline at all: the stderr line assembler's too-long path.
        _ => format!(
            "{write_all}chunk = b'z' * {MIB}\nfor _ in range({mib}):\n    put(2, chunk)\n\
             print('flooded')\n"
        ),
    }
}

const MIB: usize = 1 << 20;

/// Bytes written so far by the engine process that relays this bridge's attach streams (the
/// podman service the bridge started, or dockerd with `MCP_BRIDGE_RUNTIME=docker`), from
/// /proc/<pid>/io; None when not found. Shows that a flood below the capture really crossed
/// to the bridge.
fn relay_written(bridge_pid: u32) -> Option<u64> {
    let own = format!("podman-{bridge_pid}.sock");
    let docker = std::env::var("MCP_BRIDGE_RUNTIME").is_ok_and(|r| r.trim() == "docker");
    let mut found = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let exe = argv[0].rsplit('/').next().unwrap_or("");
        let service = argv.iter().any(|a| a == "service");
        if (docker && exe == "dockerd")
            || (!docker && service && argv.iter().any(|a| a.contains(&own)))
        {
            found = Some(pid);
            break;
        }
    }
    let io = std::fs::read_to_string(format!("/proc/{}/io", found?)).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Three 1 GiB output floods (256 MiB quick), each timed, with the bridge's peak RSS after it.
pub async fn flood(t: &mut Table, quick: bool) {
    let mib = if quick { 256 } else { 1024 };
    let size = if mib >= 1024 {
        format!("{} GiB", mib / 1024)
    } else {
        format!("{mib} MiB")
    };
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[("MCP_BRIDGE_MAX_TIMEOUT", "600")]).await;
    b.run("print(1)", &[], 60).await;
    let cases = [
        ("print", format!("{size} via print() (cut by the capture)")),
        ("fd1", format!("{size} of 1 KiB lines via os.write(1)")),
        (
            "line",
            format!("{size} line without newline via os.write(2)"),
        ),
    ];
    for (kind, label) in cases {
        let (_, before) = b.rss_kib();
        let relayed_before = relay_written(b.pid);
        let s = Instant::now();
        let (out, err) = b.run(&flood_code(kind, mib), &[], 600).await;
        let took = s.elapsed().as_secs_f64();
        // The result comes over the frame channel and can overtake the end of the flood on the
        // attach stream: read the peak once the engine has passed the whole flood on.
        let expect = if kind == "print" {
            0
        } else {
            (mib * MIB) as u64
        };
        let mut relayed = None;
        if let Some(start) = relayed_before {
            let until = Instant::now() + Duration::from_secs(30);
            loop {
                relayed = relay_written(b.pid).map(|z| z.saturating_sub(start));
                if relayed.is_none_or(|r| r >= expect) || Instant::now() > until {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let drained = s.elapsed().as_secs_f64();
        let (rss, peak) = b.rss_kib();
        let relayed = match relayed {
            Some(r) => format!("; the engine relayed {} MiB by {drained:.2} s", r >> 20),
            None => String::new(),
        };
        let head: String = out.chars().take(500).collect();
        assert!(!err && out.len() < 200_000, "{kind} flood: {head}");
        if kind == "print" {
            assert!(out.contains("characters cut here"), "print flood not cut");
        } else {
            assert!(out.trim_end().ends_with("flooded"), "{kind} flood: {out}");
        }
        let (next, err) = b.run("print(2)", &[], 60).await;
        assert!(
            !err && next.trim_end().ends_with('2'),
            "after the {kind} flood: {next}"
        );
        t.single(
            &format!("flood: {label}, wall time"),
            "s",
            took,
            if kind == "print" {
                format!("counted and cut inside the sandbox{relayed}")
            } else {
                format!("{:.0} MiB/s{relayed}", mib as f64 / drained)
            },
        );
        t.single(
            &format!("memory: bridge peak RSS (VmHWM) after the {kind} flood"),
            "MiB",
            peak as f64 / 1024.0,
            format!(
                "{:.1} MiB before; RSS after {:.1} MiB",
                before as f64 / 1024.0,
                rss as f64 / 1024.0
            ),
        );
    }
    b.stop().await;
}
