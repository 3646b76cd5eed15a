//! `MCP_BRIDGE_MOUNTS`: host folders the operator shares read-only with the sandbox, checked at
//! startup. Reads the file system (canonical paths, modes); mounts nothing.
//!
//! A host folder must exist, be a readable directory, neither be, hold nor sit inside a host
//! system folder (`/proc`, `/etc`, ...: host_system.rs) or a container engine's socket directory
//! (a socket in the sandbox would hand it the engine), and hold no socket, FIFO or device node
//! (special_files.rs, a bounded walk). Symlinks are resolved first: the resolved path is the one
//! checked and mounted. A
//! sandbox folder must be absolute, and neither be, hold nor sit inside a path the sandbox
//! itself needs (its tmpfs mounts, `/proc`, `/usr`, the frame channel, ...).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::host_system::system_folder;
use super::special_files::check_special_files;

/// One read-only bind mount: a host directory and where it appears in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The host directory, canonical (symlinks resolved).
    pub host: PathBuf,
    /// The absolute, normalized path inside the sandbox.
    pub inside: String,
    /// What the startup walk for sockets and FIFOs did not look at (for a warning).
    pub unchecked: Vec<String>,
}

/// At most this many mounts.
pub const MAX_MOUNTS: usize = 32;

/// Sandbox paths a mount may not be, hold or sit inside: the sandbox's own tmpfs mounts, the
/// kernel's file systems, the system the interpreter runs from, and the frame channel.
pub const RESERVED_INSIDE: &[&str] = &[
    "/workspace",
    "/tmp",
    "/var/tmp",
    "/proc",
    "/dev",
    "/sys",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/run/mcp-bridge",
];

/// What a host folder is checked against.
#[derive(Debug, Clone, Default)]
pub struct HostRules {
    /// Engine socket paths and socket directories (existing ones are canonicalized here).
    pub sockets: Vec<PathBuf>,
    /// The home directory, for a leading `~/`.
    pub home: Option<PathBuf>,
    /// The sandbox user's uid, when numeric (a folder it owns needs no `o+rx`).
    pub sandbox_uid: Option<u32>,
    /// The bridge's per-user private folder by name: its fallback folders (`NAME-<random>`
    /// beside it, made when another user holds the name) hold the same sockets.
    pub runtime_folder: Option<PathBuf>,
}

/// Parses and checks `HOST_DIR:SANDBOX_DIR[,HOST_DIR:SANDBOX_DIR...]`.
///
/// # Errors
/// What is wrong with the first bad entry, naming it.
pub fn parse_mounts(text: &str, rules: &HostRules) -> Result<Vec<Mount>, String> {
    let sockets: Vec<PathBuf> = rules
        .sockets
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let mut mounts: Vec<Mount> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, inside) = entry
            .rsplit_once(':')
            .ok_or_else(|| format!("{entry:?} is not HOST_DIR:SANDBOX_DIR"))?;
        let inside = sandbox_dir(inside).map_err(|why| format!("{entry:?}: {why}"))?;
        let host =
            host_dir(host.trim(), rules, &sockets).map_err(|why| format!("{entry:?}: {why}"))?;
        if let Some(other) = mounts.iter().find(|m| overlaps(&m.inside, &inside)) {
            return Err(format!(
                "{entry:?}: the sandbox folder {inside} overlaps {} of another mount",
                other.inside
            ));
        }
        let unchecked = check_special_files(&host)
            .map_err(|why| format!("{entry:?}: {why}"))?
            .unchecked;
        mounts.push(Mount {
            host,
            inside,
            unchecked,
        });
        if mounts.len() > MAX_MOUNTS {
            return Err(format!("more than {MAX_MOUNTS} mounts"));
        }
    }
    Ok(mounts)
}

/// The sandbox folder `text`, normalized (`//` and a trailing `/` dropped), or why not.
fn sandbox_dir(text: &str) -> Result<String, String> {
    let text = text.trim();
    if !text.starts_with('/') {
        return Err(format!(
            "the sandbox folder {text:?} must be an absolute path"
        ));
    }
    if text.chars().any(|c| c.is_control() || c == '\\') {
        return Err("the sandbox folder has a control character or a backslash".into());
    }
    let mut parts = Vec::new();
    for part in text.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return Err(format!(
                "the sandbox folder {text:?} must not contain . or .."
            ));
        }
        parts.push(part);
    }
    if parts.is_empty() {
        return Err("the sandbox folder must not be /".into());
    }
    let inside = format!("/{}", parts.join("/"));
    if let Some(reserved) = RESERVED_INSIDE.iter().find(|r| overlaps(r, &inside)) {
        return Err(format!(
            "the sandbox folder {inside} collides with {reserved}, which the sandbox needs; \
             choose another, such as /data"
        ));
    }
    Ok(inside)
}

/// True when one of two normalized absolute paths is the other or inside it.
fn overlaps(a: &str, b: &str) -> bool {
    let inside = |x: &str, y: &str| x == y || x.strip_prefix(y).is_some_and(|r| r.starts_with('/'));
    inside(a, b) || inside(b, a)
}

/// The host folder `text`, canonical and checked, or why not.
fn host_dir(text: &str, rules: &HostRules, sockets: &[PathBuf]) -> Result<PathBuf, String> {
    let expanded = match (text.strip_prefix("~/"), &rules.home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(text),
    };
    if !expanded.is_absolute() {
        return Err(format!(
            "the host folder {text:?} must be an absolute path (or start with ~/)"
        ));
    }
    let host = std::fs::canonicalize(&expanded)
        .map_err(|e| format!("the host folder {} cannot be used: {e}", expanded.display()))?;
    let meta = std::fs::metadata(&host)
        .map_err(|e| format!("the host folder {} cannot be used: {e}", host.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", host.display()));
    }
    if host.parent().is_none() {
        return Err("the host folder must not be / (share a folder of data instead)".into());
    }
    if let Some(why) = system_folder(&host) {
        return Err(format!(
            "{why}; a shared folder must hold data, not the host's own state: share a folder \
             of data instead"
        ));
    }
    std::fs::read_dir(&host)
        .map_err(|e| format!("the host folder {} is not readable: {e}", host.display()))?;
    if let Some(fallback) = rules
        .runtime_folder
        .as_deref()
        .and_then(|named| in_fallback_runtime_folder(&host, named))
    {
        return Err(format!(
            "the host folder {} is or is inside {}, a private folder of the bridge (its engine \
             service's socket, the sandbox's channels); sharing it would hand the sandbox the engine",
            host.display(),
            fallback.display()
        ));
    }
    if let Some(socket) = sockets
        .iter()
        .find(|s| s.starts_with(&host) || host.starts_with(s))
    {
        return Err(format!(
            "the host folder {} is or holds a container engine's socket ({}); sharing it would \
             hand the sandbox the engine",
            host.display(),
            socket.display()
        ));
    }
    let others_rx = meta.mode() & 0o005 == 0o005;
    if !others_rx && rules.sandbox_uid != Some(meta.uid()) {
        return Err(format!(
            "the host folder {} (mode {:o}) cannot be read by the sandbox, which runs as an \
             unprivileged user that is neither its owner nor in its group: make it readable \
             (chmod o+rx on the folder, o+r on its files) or share another folder",
            host.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(host)
}

/// The fallback runtime folder (`NAME-<anything>` beside the per-user folder `named`) that
/// `host` is or is inside, if any.
fn in_fallback_runtime_folder(host: &Path, named: &Path) -> Option<PathBuf> {
    let parent = named.parent()?;
    let parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
    let mut prefix = named.file_name()?.to_os_string();
    prefix.push("-");
    let prefix = prefix.as_encoded_bytes();
    host.ancestors()
        .find(|a| {
            a.parent() == Some(parent.as_path())
                && a.file_name()
                    .is_some_and(|n| n.as_encoded_bytes().starts_with(prefix))
        })
        .map(Path::to_path_buf)
}

/// Container engine sockets and socket directories a mounted folder must keep clear of:
/// podman's and docker's usual places, `DOCKER_HOST`'s socket, and the bridge's private dir
/// (its own podman service, the frame channels).
pub(super) fn engine_sockets(
    xdg: Option<&Path>,
    home: Option<&Path>,
    docker_host: Option<&str>,
    private_dir: PathBuf,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "/run/podman",
        "/var/run/podman",
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/docker",
        "/run/containerd",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Some(xdg) = xdg {
        out.extend([xdg.join("podman"), xdg.join("docker.sock")]);
    }
    if let Some(home) = home {
        out.extend([home.join(".docker/run"), home.join(".docker/desktop")]);
    }
    if let Some(path) = docker_host.and_then(|h| h.strip_prefix("unix://")) {
        out.push(PathBuf::from(path));
    }
    out.push(private_dir);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn rules(sockets: Vec<PathBuf>) -> HostRules {
        HostRules {
            sockets,
            home: None,
            sandbox_uid: Some(65534),
            runtime_folder: None,
        }
    }

    fn data_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        dir
    }

    #[test]
    fn good_mounts_are_canonical_and_normalized() {
        let a = data_dir();
        let b = data_dir();
        let link = a.path().join("link");
        std::os::unix::fs::symlink(b.path(), &link).expect("symlink");
        let text = format!(
            "{}:/data/, {}://more//x",
            a.path().display(),
            link.display()
        );
        let mounts = parse_mounts(&text, &rules(vec![])).expect("valid");
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].inside, "/data");
        assert_eq!(mounts[1].inside, "/more/x");
        // the symlink is resolved: its target is what gets mounted
        assert_eq!(
            mounts[1].host,
            std::fs::canonicalize(b.path()).expect("canon")
        );
        assert_eq!(parse_mounts("", &rules(vec![])), Ok(vec![]));
    }

    #[test]
    fn bad_host_folders_are_refused_with_the_reason() {
        let a = data_dir();
        let file = a.path().join("f.csv");
        std::fs::write(&file, "x").expect("write");
        let private = a.path().join("private");
        std::fs::create_dir(&private).expect("mkdir");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let sock_dir = a.path().join("engine");
        std::fs::create_dir(&sock_dir).expect("mkdir");
        let cases = [
            ("/nonexistent-mcp-dir:/data".to_string(), "cannot be used"),
            (format!("{}:/data", file.display()), "not a directory"),
            ("/:/data".into(), "must not be /"),
            ("relative/dir:/data".into(), "absolute"),
            (
                format!("{}:/data", private.display()),
                "cannot be read by the sandbox",
            ),
            (format!("{}:/data", a.path().display()), "socket"),
            (format!("{}:/data", sock_dir.display()), "socket"),
            ("no-colon".into(), "HOST_DIR:SANDBOX_DIR"),
        ];
        let sockets = vec![sock_dir.join("podman.sock")];
        for (text, want) in cases {
            let err = parse_mounts(&text, &rules(sockets.clone())).expect_err(&text);
            assert!(err.contains(want), "{text}: {err}");
        }
        // a folder inside a socket directory is refused too
        let inner = sock_dir.join("inner");
        std::fs::create_dir(&inner).expect("mkdir");
        let err = parse_mounts(
            &format!("{}:/data", inner.display()),
            &rules(vec![sock_dir.clone()]),
        )
        .expect_err("inside a socket dir");
        assert!(err.contains("socket"), "{err}");
    }

    #[test]
    fn host_system_folders_are_refused_also_through_a_symlink() {
        let a = data_dir();
        let link = a.path().join("innocent");
        std::os::unix::fs::symlink("/proc/self", &link).expect("symlink");
        let etc = a.path().join("conf");
        std::os::unix::fs::symlink("/etc", &etc).expect("symlink");
        let cases = [
            "/proc".to_string(),
            "/proc/1".into(),
            "/sys".into(),
            "/dev".into(),
            "/etc".into(),
            "/run".into(),
            "/var".into(),
            link.display().to_string(),
            etc.display().to_string(),
        ];
        for host in cases {
            let text = format!("{host}:/data");
            let err = parse_mounts(&text, &rules(vec![])).expect_err(&text);
            assert!(err.contains("host system folder"), "{text}: {err}");
            assert!(
                err.contains("is or sits inside") || err.contains("holds"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_socket_in_a_shared_folder_is_refused_at_start() {
        let a = data_dir();
        let sock = a.path().join("svc.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let text = format!("{}:/data", a.path().display());
        let err = parse_mounts(&text, &rules(vec![])).expect_err("socket");
        assert!(
            err.contains("svc.sock") && err.contains("unix socket"),
            "{err}"
        );
    }

    #[test]
    fn a_folder_the_sandbox_user_owns_needs_no_other_bits() {
        let a = data_dir();
        let uid = std::fs::metadata(a.path()).expect("meta").uid();
        std::fs::set_permissions(a.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let r = HostRules {
            sandbox_uid: Some(uid),
            ..Default::default()
        };
        assert!(parse_mounts(&format!("{}:/data", a.path().display()), &r).is_ok());
    }

    #[test]
    fn bad_sandbox_folders_are_refused() {
        let a = data_dir();
        let host = a.path().display().to_string();
        for (inside, want) in [
            ("data", "absolute"),
            ("/", "must not be /"),
            ("/data/../etc", ". or .."),
            ("/workspace", "collides with /workspace"),
            ("/workspace/out", "collides with /workspace"),
            ("/tmp/x", "collides with /tmp"),
            ("/var", "collides with /var/tmp"),
            ("/usr/local/data", "collides with /usr"),
            ("/proc", "collides"),
            ("/run", "collides with /run/mcp-bridge"),
            ("/etc", "collides"),
        ] {
            let text = format!("{host}:{inside}");
            let err = parse_mounts(&text, &rules(vec![])).expect_err(&text);
            assert!(err.contains(want), "{text}: {err}");
        }
        let err = parse_mounts(&format!("{host}:/data,{host}:/data/sub"), &rules(vec![]))
            .expect_err("overlap");
        assert!(err.contains("overlaps"), "{err}");
        let err = parse_mounts(&format!("{host}:/data,{host}:/data/"), &rules(vec![]))
            .expect_err("duplicate");
        assert!(err.contains("overlaps"), "{err}");
    }

    #[test]
    fn a_home_relative_folder_is_expanded() {
        let a = data_dir();
        std::fs::create_dir(a.path().join("d")).expect("mkdir");
        std::fs::set_permissions(a.path().join("d"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let r = HostRules {
            home: Some(a.path().to_path_buf()),
            ..rules(vec![])
        };
        let m = parse_mounts("~/d:/data", &r).expect("valid");
        assert!(m[0].host.ends_with("d"), "{m:?}");
    }

    #[test]
    fn a_fallback_runtime_folder_and_what_is_inside_it_are_refused() {
        let base = tempfile::tempdir().expect("temp dir");
        let named = base.path().join("mcp-code-bridge-1000");
        let fallback = base.path().join("mcp-code-bridge-1000-a1b2c3d4e5f6");
        let inside = fallback.join("podman");
        let beside = base.path().join("mcp-code-bridge-1000x");
        for d in [&inside, &beside] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        for d in [
            base.path(),
            fallback.as_path(),
            inside.as_path(),
            beside.as_path(),
        ] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let r = HostRules {
            runtime_folder: Some(named),
            ..rules(vec![])
        };
        for shared in [&fallback, &inside] {
            let err = parse_mounts(&format!("{}:/data", shared.display()), &r)
                .expect_err("a folder of the bridge");
            assert!(err.contains("private folder of the bridge"), "{err}");
        }
        parse_mounts(&format!("{}:/data", beside.display()), &r).expect("another name");
    }

    #[test]
    fn component_check_is_exact() {
        assert!(overlaps("/data", "/data"));
        assert!(overlaps("/data/x", "/data"));
        assert!(!overlaps("/database", "/data"));
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
            let err = crate::config::settings::Settings::from_pairs(&[
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
}
