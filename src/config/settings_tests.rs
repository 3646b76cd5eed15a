//! Unit tests of `Settings`: defaults, every bad value naming its variable, derived paths.

use super::*;

fn with(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
    Settings::from_pairs(pairs)
}

#[test]
fn defaults_match_the_contract() {
    let s = with(&[]).expect("defaults are valid");
    assert_eq!(s.runtime, RuntimeChoice::Auto);
    assert_eq!(s.image, DEFAULT_IMAGE);
    assert_eq!(s.timeout, Duration::from_secs(30));
    assert_eq!(s.max_timeout, Duration::from_secs(120));
    assert_eq!(s.memory_bytes, 512 << 20);
    assert_eq!(s.pids, 128);
    assert_eq!(s.cpus, None);
    assert_eq!(s.container_user, "65534:65534");
    assert_eq!(s.idle_timeout, Some(Duration::from_secs(300)));
    assert_eq!(s.output_mode, OutputMode::Compact);
    assert_eq!(s.snapshot_max, Some(128 << 20));
    assert_eq!(s.snapshot_timeout, Duration::from_secs(30));
    assert_eq!(s.progress_interval, Duration::from_secs(1));
    assert!(s.call_lane);
    assert_eq!(s.image_build, ImageBuildMode::Auto);
    assert_eq!(s.image_rootfs, None);
    assert_eq!(s.image_base, "docker.io/library/python:3.12-slim");
    assert_eq!(s.image_mirror, None);
    assert_eq!(s.image_build_wait, Duration::from_secs(50));
    assert!(
        !with(&[("MCP_BRIDGE_CALL_LANE", "0")])
            .expect("valid")
            .call_lane
    );
}

#[test]
fn uvs_cache_is_found_as_uv_finds_it() {
    let home = [("HOME", "/home/u")];
    let dir = |pairs: &[(&str, &str)]| with(pairs).expect("valid").uv_cache_dir;
    assert_eq!(dir(&home), Some(PathBuf::from("/home/u/.cache/uv")));
    assert_eq!(
        dir(&[home[0], ("XDG_CACHE_HOME", "/c")]),
        Some(PathBuf::from("/c/uv"))
    );
    assert_eq!(
        dir(&[home[0], ("XDG_CACHE_HOME", "/c"), ("UV_CACHE_DIR", "/u")]),
        Some(PathBuf::from("/u"))
    );
    let s = with(&[home[0], ("CLAUDE_CONFIG_DIR", "/cc")]).expect("valid");
    assert_eq!(s.claude_config_dir, Some(PathBuf::from("/cc")));
}

#[test]
fn bad_values_name_the_variable() {
    for (k, v) in [
        ("MCP_BRIDGE_RUNTIME", "lxc"),
        ("MCP_BRIDGE_TIMEOUT", "soon"),
        ("MCP_BRIDGE_MEMORY", "lots"),
        ("MCP_BRIDGE_PIDS", "0"),
        ("MCP_BRIDGE_CPUS", "-1"),
        ("MCP_BRIDGE_OUTPUT_MODE", "yaml"),
        ("MCP_BRIDGE_CONTAINER_USER", "root root"),
        ("MCP_BRIDGE_LOG_LEVEL", "[[["),
        ("MCP_BRIDGE_CALL_LANE", "fast"),
        ("MCP_BRIDGE_IMAGE_BUILD", "sometimes"),
        ("MCP_BRIDGE_IMAGE_ROOTFS", "relative/rootfs.tar"),
        ("MCP_BRIDGE_IMAGE_MIRROR", "ftp://mirror"),
        ("MCP_BRIDGE_IMAGE_BASE", "python 3"),
        ("MCP_BRIDGE_IMAGE_BUILD_WAIT", "a while"),
        ("MCP_BRIDGE_IMAGE_PIP", "pyarrow; rm -rf /"),
        ("MCP_BRIDGE_MOUNTS", "/no/such/folder:/data"),
        ("MCP_BRIDGE_MAX_SERVER_MESSAGE", "0"),
        ("MCP_BRIDGE_OUTBOX_MAX_FILE", "big"),
        ("MCP_BRIDGE_SNAPSHOT_MAX", "big"),
        ("MCP_BRIDGE_SNAPSHOT_MAX", "-1m"),
        ("MCP_BRIDGE_SNAPSHOT_TIMEOUT", "0"),
        ("MCP_BRIDGE_SNAPSHOT_TIMEOUT", "a while"),
        ("MCP_BRIDGE_PROGRESS_INTERVAL", "10ms"),
        ("MCP_BRIDGE_PROGRESS_INTERVAL", "often"),
    ] {
        let err = with(&[(k, v)]).expect_err(k).to_string();
        assert!(err.contains(k), "{err}");
    }
    let err = with(&[("MCP_BRIDGE_TIMEOUT", "200")])
        .expect_err("conflict")
        .to_string();
    assert!(err.contains("MCP_BRIDGE_MAX_TIMEOUT"), "{err}");
}

#[test]
fn every_on_off_setting_reads_the_same_words() {
    // One parser for all of them: `on` once worked for one setting and exited 2 for another.
    for name in [
        "MCP_BRIDGE_PREWARM",
        "MCP_BRIDGE_ALLOW_WEAK_SANDBOX",
        "MCP_BRIDGE_CALL_LANE",
        "MCP_BRIDGE_IMPORT_CLIENT_CONFIGS",
        "MCP_BRIDGE_ALLOW_SELF_SERVER",
        "MCP_BRIDGE_STRUCTURED_CONTENT",
        "MCP_BRIDGE_IMAGES",
    ] {
        for word in ["1", "true", "yes", "on", "ON", "0", "false", "no", "off"] {
            assert!(with(&[(name, word)]).is_ok(), "{name}={word}");
        }
        let err = with(&[(name, "maybe")]).expect_err(name).to_string();
        assert!(err.contains(name), "{err}");
    }
}

#[test]
fn a_mount_of_an_engine_socket_dir_is_refused() {
    let xdg = tempfile::tempdir().expect("temp dir");
    let podman = xdg.path().join("podman");
    std::fs::create_dir(&podman).expect("mkdir");
    use std::os::unix::fs::PermissionsExt;
    for dir in [xdg.path(), podman.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let xdg_text = xdg.path().display().to_string();
    for shared in [podman.display().to_string(), xdg_text.clone()] {
        let mounts = format!("{shared}:/data");
        let err = with(&[
            ("XDG_RUNTIME_DIR", &xdg_text),
            ("MCP_BRIDGE_MOUNTS", &mounts),
        ])
        .expect_err("engine socket dir")
        .to_string();
        assert!(
            err.contains("MCP_BRIDGE_MOUNTS") && err.contains("socket"),
            "{err}"
        );
    }
}

#[test]
fn snapshots_can_be_turned_off_and_small_limits_are_raised() {
    for off in ["0", "off", "OFF"] {
        let s = with(&[("MCP_BRIDGE_SNAPSHOT_MAX", off)]).expect("valid");
        assert_eq!(s.snapshot_max, None, "{off}");
    }
    let s = with(&[("MCP_BRIDGE_SNAPSHOT_MAX", "10k")]).expect("valid");
    assert_eq!(s.snapshot_max, Some(1 << 20));
    let s = with(&[("MCP_BRIDGE_MEMORY", "2g")]).expect("valid");
    assert_eq!(
        s.snapshot_max,
        Some(512 << 20),
        "a quarter of the memory by default"
    );
    let s = with(&[
        ("MCP_BRIDGE_SNAPSHOT_MAX", "32m"),
        ("MCP_BRIDGE_PROGRESS_INTERVAL", "500ms"),
    ])
    .expect("valid");
    assert_eq!(s.snapshot_max, Some(32 << 20));
    assert_eq!(s.progress_interval, Duration::from_millis(500));
}

#[test]
fn timeouts_are_clamped() {
    let s = with(&[("MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "0")]).expect("valid");
    assert_eq!(s.idle_timeout, None);
    assert_eq!(s.call_timeout(None), Duration::from_secs(30));
    assert_eq!(s.call_timeout(Some(5)), Duration::from_secs(5));
    assert_eq!(s.call_timeout(Some(1000)), Duration::from_secs(120));
    assert_eq!(s.timeout_capped_note(Some(120)), None);
    assert!(s
        .timeout_capped_note(Some(1000))
        .expect("capped")
        .contains("ran with 120 s"));
}
