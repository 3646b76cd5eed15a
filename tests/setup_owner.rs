//! `setup` run as root on a client file that belongs to another user (uid 65534, as after a
//! `sudo` without `-H`): the file and its backup keep that owner, group and mode, and only the
//! newest `MCP_BRIDGE_SETUP_BACKUPS` backups of it are kept. Needs root to give files away: a
//! non-root run skips, except under `CI=true`, where it fails.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::setup::{code, Home};

/// The owner the test gives the file (nobody / nogroup).
const OTHER: u32 = 65534;

fn as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let ci = std::env::var("CI").unwrap_or_default().to_ascii_lowercase();
    assert!(
        !matches!(ci.as_str(), "1" | "true" | "yes"),
        "this test gives files to another user: CI must run it as root"
    );
    eprintln!("skipped: needs root to give a file to another user");
    false
}

fn give_away(path: &Path, mode: u32) {
    std::os::unix::fs::chown(path, Some(OTHER), Some(OTHER)).expect("chown");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn owner_and_mode(path: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(path).expect("metadata");
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

fn backups_of(file: &Path) -> Vec<PathBuf> {
    let name = file
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let mut out: Vec<PathBuf> = std::fs::read_dir(file.parent().expect("folder"))
        .expect("ls")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{name}.bak-")))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn setup_as_root_keeps_the_owner_group_and_mode_of_the_file_and_its_backup() {
    if !as_root() {
        return;
    }
    let h = Home::new(&["cursor"]);
    let file = h.home.join(".cursor/mcp.json");
    give_away(&file, 0o640);
    let out = h.run_with(&[], &["setup", "--yes", "--client", "cursor"]);
    assert_eq!(
        code(&out),
        0,
        "{}{}",
        h.show(&out.stdout),
        h.show(&out.stderr)
    );
    assert_eq!(owner_and_mode(&file), (OTHER, OTHER, 0o640), "the file");
    let backups = backups_of(&file);
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(
        owner_and_mode(&backups[0]),
        (OTHER, OTHER, 0o640),
        "the backup"
    );
}

#[test]
fn setup_keeps_only_the_newest_backups_of_a_file_and_nothing_else_is_removed() {
    if !as_root() {
        return;
    }
    let h = Home::new(&["cursor"]);
    let file = h.home.join(".cursor/mcp.json");
    let folder = file.parent().expect("folder").to_path_buf();
    let planted = [
        "mcp.json.bak-20240101T000000Z",
        "mcp.json.bak-20250101T000000Z",
        "mcp.json.bak-20250101T000000Z-2",
        "mcp.json.bak-20250601T120000Z",
    ];
    let not_ours = ["mcp.json.bak-mine", "other.json.bak-20200101T000000Z"];
    for n in planted.iter().chain(&not_ours) {
        std::fs::write(folder.join(n), n).expect("plant");
    }
    let out = h.run_with(
        &[("MCP_BRIDGE_SETUP_BACKUPS", "3")],
        &["setup", "--yes", "--client", "cursor"],
    );
    let said = h.show(&out.stdout);
    assert_eq!(code(&out), 0, "{said}{}", h.show(&out.stderr));
    let left: Vec<String> = backups_of(&file)
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .filter(|n| n != "mcp.json.bak-mine")
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    assert_eq!(
        &left[..2],
        &planted[2..],
        "the two newest planted ones stay"
    );
    assert!(left[2].as_str() > planted[3], "and this run's: {left:?}");
    for n in &not_ours {
        assert!(folder.join(n).exists(), "{n} was removed");
    }
    assert!(
        said.contains("removed the old backup") && said.contains("20240101T000000Z"),
        "{said}"
    );
}
