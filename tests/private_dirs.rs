//! Folders of the bridge that another local user made first or can write to (issue 22, point
//! 1): nothing is put in them and nothing is read from them. Another user is uid 65534 (`chown`
//! needs root; CI runs the tests as root).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use mcp_code_bridge::checked_dir::DirError;
use mcp_code_bridge::config::{AllowList, Approval, Consent};
use mcp_code_bridge::outbox::Outbox;

use crate::support::settings;

const OTHER: u32 = 65534;

/// `path` made as another user would have made it: theirs, open to everyone. False (and the
/// test skipped) when not root.
fn plant(path: &Path) -> bool {
    if mcp_code_bridge::checked_dir::euid() != 0 {
        eprintln!("skipped: giving a folder to another uid needs root (CI runs as root)");
        return false;
    }
    std::fs::create_dir_all(path).expect("mkdir");
    std::os::unix::fs::chown(path, Some(OTHER), Some(OTHER)).expect("chown");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    true
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect()
}

#[test]
fn approvals_in_a_state_folder_another_user_owns_are_not_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let approval = Approval {
        name: "evil".into(),
        source: "/repo/.mcp.json".into(),
        sha256: "ab".repeat(32),
    };
    let forged = serde_json::json!({ "allowed": [approval] }).to_string();
    // Written by this user in its own folder, the same file counts.
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).expect("mkdir");
    std::fs::write(mine.join("consent.json"), &forged).expect("write");
    let decide = |state: &Path| {
        AllowList::load(state).decide("evil", Path::new("/repo/.mcp.json"), &"ab".repeat(32))
    };
    assert!(matches!(decide(&mine), Consent::Allowed(_)));
    let theirs = tmp.path().join("theirs");
    if !plant(&theirs) {
        return;
    }
    std::fs::write(theirs.join("consent.json"), &forged).expect("write");
    assert_eq!(decide(&theirs), Consent::Needed);
    // A consent.json of another user in this user's own folder is not read either.
    std::os::unix::fs::chown(mine.join("consent.json"), Some(OTHER), Some(OTHER)).expect("chown");
    assert_eq!(decide(&mine), Consent::Needed);
}

#[test]
fn no_file_from_the_sandbox_goes_into_an_outbox_another_user_owns() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    let outbox_dir = state.join("outbox");
    if !plant(&outbox_dir) {
        return;
    }
    let s = settings(&[("MCP_BRIDGE_STATE_DIR", state.to_str().expect("utf-8"))]);
    let outbox = Outbox::new(&s);
    let err = outbox.new_part().expect_err("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    let text = err.to_string();
    assert!(
        text.contains(outbox_dir.to_str().expect("utf-8")) && text.contains("uid 65534"),
        "{text}"
    );
    assert!(
        entries(&outbox_dir).is_empty(),
        "nothing put in their folder"
    );
    let refused = mcp_code_bridge::app::check_folders(&s).expect_err("refused at start");
    assert!(
        matches!(refused, DirError::NotOwned { owner: OTHER, .. }),
        "{refused:?}"
    );
}

#[test]
fn a_bridge_does_not_start_with_snapshots_or_tool_cache_of_another_user() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for sub in ["snapshots", "tool-cache"] {
        let state = tmp.path().join(sub).join("state");
        std::fs::create_dir_all(&state).expect("mkdir");
        if !plant(&state.join(sub)) {
            return;
        }
        let s = settings(&[
            ("MCP_BRIDGE_STATE_DIR", state.to_str().expect("utf-8")),
            ("XDG_RUNTIME_DIR", tmp.path().to_str().expect("utf-8")),
        ]);
        let err = mcp_code_bridge::app::check_folders(&s).expect_err("refused");
        assert!(
            matches!(&err, DirError::NotOwned { path, .. } if *path == state.join(sub)),
            "{err:?}"
        );
    }
}
