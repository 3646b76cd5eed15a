//! `mcp-code-bridge setup`, the real binary against client config files as each client writes
//! them (`tests/fixtures/setup/<case>/before/` is a home folder, `after/` the expected result):
//! byte-for-byte results, backups, a second run, `--dry-run`, confirmation, a malformed file,
//! and the copies in `~/MCPs` as `servers` lists them. Every run gets a temporary HOME (and XDG
//! and uv folders), so no real client file is ever touched.

use std::collections::BTreeMap;
use std::io::Write;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::SystemTime;

const BRIDGE: &str = env!("CARGO_BIN_EXE_mcp-code-bridge");
const CLIENTS: [&str; 5] = [
    "claude-code",
    "claude-desktop",
    "cursor",
    "vscode",
    "windsurf",
];

/// A file's bytes, modification time and permission bits.
type Snapshot = BTreeMap<PathBuf, (Vec<u8>, SystemTime, u32)>;

/// A temporary home holding the `before/` trees of some fixture cases.
pub(super) struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
    pub(super) home: PathBuf,
}

impl Home {
    pub(super) fn new(cases: &[&str]) -> Home {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let home = root.join("home");
        std::fs::create_dir_all(&home).expect("home");
        for case in cases {
            copy_tree(&fixture(case).join("before"), &home);
        }
        Home {
            _dir: dir,
            root,
            home,
        }
    }

    /// The bridge (or `program`) with nothing of this machine's environment but PATH.
    pub(super) fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.root.join("xdg-config"))
            .env("XDG_CACHE_HOME", self.root.join("xdg-cache"))
            .env("XDG_DATA_HOME", self.root.join("xdg-data"))
            .env("XDG_STATE_HOME", self.root.join("xdg-state"))
            .env("UV_CACHE_DIR", self.root.join("uv-cache"))
            .env("MCP_BRIDGE_STATE_DIR", self.root.join("state"))
            .current_dir(&self.root)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(Path::new(BRIDGE), args)
            .output()
            .expect("run the bridge")
    }

    /// The bridge with `args` and the settings `env` added.
    pub(super) fn run_with(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut c = self.command(Path::new(BRIDGE), args);
        c.envs(env.iter().copied());
        c.output().expect("run the bridge")
    }

    /// Every file under the home folder.
    fn snapshot(&self) -> Snapshot {
        let mut out = Snapshot::new();
        walk(&self.home, &mut |p| {
            let meta = std::fs::metadata(p).expect("metadata");
            out.insert(
                p.strip_prefix(&self.home)
                    .expect("under home")
                    .to_path_buf(),
                (
                    std::fs::read(p).expect("read"),
                    meta.modified().expect("mtime"),
                    meta.permissions().mode() & 0o7777,
                ),
            );
        });
        out
    }

    /// The files of the home folder that are not backups, as text.
    fn files(&self) -> BTreeMap<PathBuf, String> {
        self.snapshot()
            .into_iter()
            .filter(|(p, _)| !is_backup(p))
            .map(|(p, (b, _, _))| (p, String::from_utf8(b).expect("utf-8")))
            .collect()
    }

    /// The `after/` tree of `case` with its placeholders filled in.
    fn expected(&self, case: &str) -> BTreeMap<PathBuf, String> {
        let after = fixture(case).join("after");
        let bridge = Path::new(BRIDGE).canonicalize().expect("bridge path");
        let mut out = BTreeMap::new();
        walk(&after, &mut |p| {
            let text = std::fs::read_to_string(p).expect("read fixture");
            out.insert(
                p.strip_prefix(&after).expect("under after").to_path_buf(),
                text.replace("@HOME@", &self.home.display().to_string())
                    .replace("@BRIDGE@", &bridge.display().to_string()),
            );
        });
        out
    }

    pub(super) fn show(&self, text: &[u8]) -> String {
        String::from_utf8_lossy(text).replace(&self.home.display().to_string(), "HOME")
    }
}

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/setup")
        .join(case)
}

fn copy_tree(from: &Path, to: &Path) {
    walk(from, &mut |p| {
        let dest = to.join(p.strip_prefix(from).expect("under fixture"));
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::copy(p, &dest).expect("copy fixture");
    });
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}

fn is_backup(p: &Path) -> bool {
    p.to_string_lossy().contains(".bak-")
}

pub(super) fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

#[test]
fn each_clients_file_gets_the_bridge_in_its_own_shape_with_a_backup_once() {
    for case in CLIENTS.iter().chain(&["cursor-new"]) {
        let h = Home::new(&[case]);
        let before = h.snapshot();
        let out = h.run(&["setup", "--yes", "--import-servers"]);
        let said = h.show(&out.stdout);
        assert_eq!(code(&out), 0, "{case}: {said}{}", h.show(&out.stderr));
        assert_eq!(h.files(), h.expected(case), "{case}: {said}");

        // Each file that existed and changed has one backup equal to it, with its permissions.
        let after = h.snapshot();
        for (path, (bytes, _, mode)) in &before {
            let backups: Vec<_> = after
                .iter()
                .filter(|(p, _)| {
                    is_backup(p) && p.to_string_lossy().starts_with(&*path.to_string_lossy())
                })
                .collect();
            if after[path].0 == *bytes {
                assert!(backups.is_empty(), "{case}: unchanged {path:?} backed up");
                continue;
            }
            assert_eq!(backups.len(), 1, "{case}: backups of {path:?}: {backups:?}");
            let (b_path, (b_bytes, _, b_mode)) = backups[0];
            assert_eq!(b_bytes, bytes, "{case}: {b_path:?} is not the original");
            assert_eq!(
                (b_mode, after[path].2),
                (mode, *mode),
                "{case}: permissions"
            );
            assert!(
                said.contains(&format!("backed up HOME/{}", path.display())),
                "{case}: {said}"
            );
        }
        // New files (a client file, the copies) are private and have no backup.
        for (path, (_, _, mode)) in &after {
            if !before.contains_key(path) && !is_backup(path) {
                assert_eq!(*mode, 0o600, "{case}: {path:?}");
            }
        }

        // The second run finds everything in place and writes nothing.
        let again = h.run(&["setup", "--yes", "--import-servers"]);
        assert_eq!(code(&again), 0, "{case}: {}", h.show(&again.stderr));
        let said = h.show(&again.stdout);
        assert!(
            said.contains("already registered as 'code'"),
            "{case}: {said}"
        );
        assert!(said.ends_with("Nothing to change.\n"), "{case}: {said}");
        assert_eq!(
            h.snapshot(),
            after,
            "{case}: the second run changed something"
        );
    }
}

#[test]
fn a_malformed_file_is_reported_and_left_untouched_while_the_others_proceed() {
    let h = Home::new(&["malformed"]);
    let before = h.snapshot();
    let out = h.run(&["setup", "--yes", "--import-servers"]);
    assert_eq!(code(&out), 1, "{}", h.show(&out.stdout));
    let problems = h.show(&out.stderr);
    assert!(
        problems.contains("problem: HOME/.cursor/mcp.json: not valid: trailing comma at line 6")
            && problems.contains("left untouched"),
        "{problems}"
    );
    let cursor = PathBuf::from(".cursor/mcp.json");
    assert_eq!(h.snapshot()[&cursor], before[&cursor], "bytes and mtime");
    assert_eq!(h.files(), h.expected("malformed"));
    assert!(!h
        .snapshot()
        .keys()
        .any(|p| is_backup(p) && p.starts_with(".cursor")));
}

#[test]
fn dry_run_shows_every_diff_and_changes_nothing() {
    let h = Home::new(&CLIENTS);
    let before = h.snapshot();
    let out = h.run(&["setup", "--dry-run", "--import-servers"]);
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    let said = h.show(&out.stdout);
    for file in [
        "--- HOME/.claude.json\n+++ HOME/.claude.json",
        "+++ HOME/.config/Claude/claude_desktop_config.json",
        "+++ HOME/.cursor/mcp.json",
        "+++ HOME/.config/Code/User/mcp.json",
        "+++ HOME/.codeium/windsurf/mcp_config.json",
        "--- /dev/null\n+++ HOME/MCPs/from-claude-code.json",
        "+      \"alwaysLoad\": true",
        "+\t\t\t\"type\": \"stdio\",",
    ] {
        assert!(said.contains(file), "missing {file:?} in\n{said}");
    }
    assert!(said.ends_with("Dry run: nothing was changed.\n"), "{said}");
    assert_eq!(
        h.snapshot(),
        before,
        "bytes, mtimes and files: no copy, no backup"
    );

    // --client picks the files.
    let out = h.run(&[
        "setup",
        "--dry-run",
        "--client",
        "vscode",
        "--client",
        "cursor",
    ]);
    let said = h.show(&out.stdout);
    assert!(
        said.contains("+++ HOME/.cursor/mcp.json")
            && said.contains("+++ HOME/.config/Code/User/mcp.json")
            && !said.contains("+++ HOME/.claude.json")
            && !said.contains("from-"),
        "{said}"
    );
    assert_eq!(h.snapshot(), before);
}

#[test]
fn without_a_terminal_and_without_yes_it_refuses_and_changes_nothing() {
    let h = Home::new(&CLIENTS);
    let before = h.snapshot();
    let out = h.run(&["setup", "--import-servers"]);
    assert_eq!(code(&out), 2);
    let why = h.show(&out.stderr);
    assert!(
        why.contains("standard input is not a terminal") && why.contains("--yes"),
        "{why}"
    );
    assert!(h.show(&out.stdout).contains("+++ HOME/.claude.json"));
    assert_eq!(h.snapshot(), before);
}

#[test]
fn on_a_terminal_it_asks_before_changing_anything() {
    let h = Home::new(&["cursor"]);
    let before = h.snapshot();
    let answer = |text: &str| {
        let (mut master, slave) = crate::support::pty();
        let child = h
            .command(Path::new(BRIDGE), &["setup"])
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        master.write_all(text.as_bytes()).expect("answer");
        let out = child.wait_with_output().expect("wait");
        drop(master);
        out
    };
    let out = answer("n\n");
    assert_eq!(code(&out), 1);
    assert!(h.show(&out.stderr).contains("Apply these changes? [y/N]"));
    assert!(h.show(&out.stdout).ends_with("Nothing was changed.\n"));
    assert_eq!(h.snapshot(), before);
    let out = answer("y\n");
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    assert_eq!(h.files(), {
        let mut e = h.expected("cursor");
        e.retain(|p, _| !p.starts_with("MCPs"));
        e
    });
}

#[test]
fn the_copied_servers_are_what_servers_lists_from_mcps() {
    let h = Home::new(&CLIENTS);
    let out = h.run(&["setup", "--yes", "--import-servers"]);
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    let listed = h.run(&["servers"]);
    assert_eq!(code(&listed), 0, "{}", h.show(&listed.stdout));
    let rows: Vec<String> = h
        .show(&listed.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            format!("{} {} {} {}", f[0], f[1], f[2], f[4])
        })
        .collect();
    assert_eq!(
        rows,
        [
            "docs http HOME/MCPs/from-claude-code.json own config",
            // The user's own, already there before.
            "fetch stdio HOME/MCPs/from-windsurf.json own config",
            "filesystem stdio HOME/MCPs/from-claude-desktop.json own config",
            "git stdio HOME/MCPs/from-windsurf-2.json own config",
            "memory stdio HOME/MCPs/from-vscode.json own config",
            // Claude Code's `notes` is not copied over the user's own.
            "notes stdio HOME/MCPs/notes.json own config",
            "sqlite stdio HOME/MCPs/from-cursor.json own config",
        ]
    );
    // Reading the clients' files too, the bridge knows its own entry in each client's shape.
    let with_clients = h
        .command(Path::new(BRIDGE), &["servers"])
        .env("MCP_BRIDGE_IMPORT_CLIENT_CONFIGS", "1")
        .output()
        .expect("servers");
    let said = h.show(&with_clients.stdout);
    let own: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("would launch mcp-code-bridge itself"))
        .collect();
    assert_eq!(own.len(), 5, "{said}");
    assert!(own.iter().all(|l| l.starts_with("note\t")), "{said}");
    assert!(!said.lines().any(|l| l.starts_with("code\t")), "{said}");
    // The copy keeps the secret as written, and names where it came from.
    let copy = std::fs::read_to_string(h.home.join("MCPs/from-claude-code.json")).expect("copy");
    assert!(copy.contains("\"Authorization\": \"Bearer docs-literal-token\""));
    assert!(copy.contains(&format!("\"file\": \"{}/.claude.json\"", h.home.display())));
}

#[test]
fn from_uvs_cache_the_lasting_uvx_command_is_registered() {
    let h = Home::new(&["claude-code"]);
    let bin = h.root.join("uv-cache/archive-v0/Xq3bT9/bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let cached = bin.join("mcp-code-bridge");
    if std::fs::hard_link(BRIDGE, &cached).is_err() {
        std::fs::copy(BRIDGE, &cached).expect("copy the bridge");
    }
    let out = h
        .command(&cached, &["setup", "--yes", "--client", "claude-code"])
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    let text = std::fs::read_to_string(h.home.join(".claude.json")).expect("read");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        json["mcpServers"]["code"],
        serde_json::json!({"type": "stdio", "command": "uvx", "args": ["mcp-code-bridge", "run"],
            "env": {}, "alwaysLoad": true})
    );
    // The installed binary, or another command, sees the bridge already registered.
    let again = h.run(&[
        "setup",
        "--yes",
        "--command",
        "/opt/other/mcp-code-bridge run",
    ]);
    assert!(
        h.show(&again.stdout)
            .contains("already registered as 'code'"),
        "{}",
        h.show(&again.stdout)
    );
}

/// The client files and the user's folder, backups left out.
fn clients_and_copies(h: &Home) -> BTreeMap<PathBuf, String> {
    h.files()
}

fn json(h: &Home, rel: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(h.home.join(rel)).expect("read");
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace(",\n\t\t}", "\n\t\t}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}\n{text}"))
}

#[test]
fn move_then_undo_puts_every_clients_file_back_byte_for_byte() {
    let h = Home::new(&CLIENTS);
    let out = h.run(&["setup", "--yes"]);
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    let registered = clients_and_copies(&h);

    let out = h.run(&["setup", "--yes", "--import-servers", "--move"]);
    let said = h.show(&out.stdout);
    assert_eq!(code(&out), 0, "{said}{}", h.show(&out.stderr));
    // The copied entries are gone from their clients; what could not be copied stays, said so.
    for (file, key, gone, stays) in [
        (
            ".claude.json",
            "mcpServers",
            "docs",
            &["github", "notes", "code"][..],
        ),
        (
            ".cursor/mcp.json",
            "mcpServers",
            "sqlite",
            &["linear", "code"],
        ),
        (
            ".config/Code/User/mcp.json",
            "servers",
            "memory",
            &["github-remote", "code"],
        ),
        (
            ".config/Claude/claude_desktop_config.json",
            "mcpServers",
            "filesystem",
            &["code"],
        ),
        (
            ".codeium/windsurf/mcp_config.json",
            "mcpServers",
            "git",
            &["context7", "code"],
        ),
    ] {
        let v = json(&h, file);
        assert!(v[key].get(gone).is_none(), "{file}: {gone} still there");
        for s in stays {
            assert!(v[key].get(s).is_some(), "{file}: {s} was taken out");
        }
    }
    assert!(
        said.contains("not copied: 'notes' (Claude Code): HOME/MCPs already defines it; it stays in the client")
            && said.contains("not copied: 'linear' (Cursor): uses ${env:LINEAR_API_KEY}"),
        "{said}"
    );
    // The VS Code comment about the moved entry went with it; the file's own comment stayed.
    let vscode = std::fs::read_to_string(h.home.join(".config/Code/User/mcp.json")).expect("read");
    assert!(!vscode.contains("Knowledge graph memory") && vscode.starts_with("// Servers"));
    let record = h.root.join("state/setup/moved.json");
    let mode = std::fs::metadata(&record)
        .expect("recorded")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let moved = h.snapshot();

    // A second run changes nothing.
    let again = h.run(&["setup", "--yes", "--import-servers", "--move"]);
    assert_eq!(code(&again), 0, "{}", h.show(&again.stderr));
    assert!(h.show(&again.stdout).ends_with("Nothing to change.\n"));
    assert_eq!(h.snapshot(), moved);

    // A dry run of the undo changes nothing either.
    let dry = h.run(&["setup", "--undo", "--dry-run"]);
    assert_eq!(code(&dry), 0, "{}", h.show(&dry.stderr));
    assert_eq!(h.snapshot(), moved);
    assert!(record.exists());

    let undo = h.run(&["setup", "--undo", "--yes"]);
    let said = h.show(&undo.stdout);
    assert_eq!(code(&undo), 0, "{said}{}", h.show(&undo.stderr));
    assert_eq!(clients_and_copies(&h), registered, "{said}");
    assert!(!record.exists(), "all undone: the record is gone");
    let twice = h.run(&["setup", "--undo", "--yes"]);
    assert_eq!(code(&twice), 0);
    assert!(h.show(&twice.stdout).starts_with("Nothing to undo"));
}

#[test]
fn undo_leaves_alone_what_was_written_since_the_move() {
    let h = Home::new(&CLIENTS);
    let out = h.run(&["setup", "--yes", "--import-servers", "--move"]);
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    // Claude Code rewrote its file since; the user added a `sqlite` of their own to Cursor and
    // edited the VS Code copy.
    let claude = h.home.join(".claude.json");
    let text = std::fs::read_to_string(&claude).expect("read");
    std::fs::write(
        &claude,
        text.replace("\"numStartups\": 184", "\"numStartups\": 185"),
    )
    .expect("write");
    let cursor = h.home.join(".cursor/mcp.json");
    let text = std::fs::read_to_string(&cursor).expect("read");
    std::fs::write(
        &cursor,
        text.replacen(
            "\"mcpServers\": {",
            "\"mcpServers\": {\n    \"sqlite\": {\"command\": \"mine\"},",
            1,
        ),
    )
    .expect("write");
    let copy = h.home.join("MCPs/from-vscode.json");
    let text = std::fs::read_to_string(&copy).expect("read");
    std::fs::write(&copy, text.replace("server-memory", "server-memory@1")).expect("write");

    let undo = h.run(&["setup", "--undo", "--yes"]);
    let said = h.show(&undo.stdout);
    assert_eq!(code(&undo), 0, "{said}{}", h.show(&undo.stderr));
    assert!(
        said.contains("left alone: 'sqlite' is there again, written since the move")
            && said.contains("HOME/MCPs/from-vscode.json: changed since the move; left as it is"),
        "{said}"
    );
    assert_eq!(
        json(&h, ".cursor/mcp.json")["mcpServers"]["sqlite"]["command"],
        "mine"
    );
    assert!(!h.home.join("MCPs/from-cursor.json").exists());
    assert!(copy.exists(), "an edited copy stays");
    // Claude Code's file gets `docs` back at its place, and keeps what it wrote since.
    let v = json(&h, ".claude.json");
    assert_eq!(v["numStartups"], 185);
    let names: Vec<&String> = v["mcpServers"].as_object().expect("table").keys().collect();
    assert_eq!(names, ["github", "notes", "docs", "code"], "its old place");
    let text = std::fs::read_to_string(&claude).expect("read");
    assert!(
        text.contains("    \"docs\": {\n      \"type\": \"http\",\n      \"url\": \"https://docs.example.test/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer docs-literal-token\"\n      }\n    }"),
        "{text}"
    );
    assert!(!h.root.join("state/setup/moved.json").exists());
}

#[test]
fn a_damaged_record_or_move_alone_is_refused_and_nothing_changes() {
    let h = Home::new(&CLIENTS);
    let before = h.snapshot();
    let alone = h.run(&["setup", "--yes", "--move"]);
    assert_eq!(code(&alone), 2);
    assert!(h
        .show(&alone.stderr)
        .contains("use it with --import-servers"));
    let dry = h.run(&["setup", "--dry-run", "--import-servers", "--move"]);
    assert_eq!(code(&dry), 0, "{}", h.show(&dry.stderr));
    assert!(h.show(&dry.stdout).contains("-    \"docs\": {"));
    assert_eq!(h.snapshot(), before);
    assert!(
        !h.root.join("state/setup/moved.json").exists(),
        "a dry run records nothing"
    );

    let out = h.run(&["setup", "--yes", "--import-servers", "--move"]);
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    let moved = h.snapshot();
    let record = h.root.join("state/setup/moved.json");
    let text = std::fs::read_to_string(&record).expect("record");
    std::fs::write(&record, &text[..text.len() / 2]).expect("damage");
    for args in [
        &["setup", "--undo", "--yes"][..],
        &["setup", "--yes", "--import-servers", "--move"],
    ] {
        let out = h.run(args);
        assert_eq!(code(&out), 2, "{args:?}");
        let why = h.show(&out.stderr);
        assert!(
            why.contains("not a record of `setup --move`") && why.contains("nothing was changed"),
            "{why}"
        );
        assert!(!why.contains("docs-literal-token"), "{why}");
        assert_eq!(h.snapshot(), moved, "{args:?}");
    }
}

#[test]
fn undo_with_client_puts_back_only_that_clients_entries() {
    let h = Home::new(&["cursor", "claude-desktop"]);
    let out = h.run(&["setup", "--yes", "--import-servers", "--move"]);
    assert_eq!(code(&out), 0, "{}", h.show(&out.stderr));
    let undo = h.run(&["setup", "--undo", "--yes", "--client", "cursor"]);
    let said = h.show(&undo.stdout);
    assert_eq!(code(&undo), 0, "{said}{}", h.show(&undo.stderr));
    assert!(json(&h, ".cursor/mcp.json")["mcpServers"]
        .get("sqlite")
        .is_some());
    assert!(
        json(&h, ".config/Claude/claude_desktop_config.json")["mcpServers"]
            .get("filesystem")
            .is_none()
    );
    assert!(
        said.contains("1 client file(s) not undone stay in"),
        "{said}"
    );
    let rest = h.run(&["setup", "--undo", "--yes"]);
    assert_eq!(code(&rest), 0, "{}", h.show(&rest.stderr));
    assert!(
        json(&h, ".config/Claude/claude_desktop_config.json")["mcpServers"]
            .get("filesystem")
            .is_some()
    );
    assert!(h.show(&rest.stdout).contains("all undone"));
}
