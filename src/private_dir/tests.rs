//! Folders another user made first, links in place of folders, modes open to others.

use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

use super::*;

/// Another user's uid for `chown` (needs root, as the tests run in CI).
const OTHER: u32 = 65534;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

/// A temp folder whose own path is safe to walk (0700 under a root-owned /tmp).
fn base() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn root() -> bool {
    if sys::euid() == 0 {
        return true;
    }
    eprintln!("skipped: chown to another uid needs root (CI runs these tests as root)");
    false
}

#[test]
fn a_fresh_folder_is_made_private_and_accepted() {
    let b = base();
    let want = b.path().join("a/b/mcp-code-bridge-0");
    let dir = CheckedDir::open(&want, Access::Private, FIX_RUNTIME).expect("fresh folder");
    assert_eq!(dir.path(), want);
    assert_eq!(mode_of(&want), 0o700);
    assert_eq!(mode_of(&b.path().join("a")), 0o700);
    // Opening it again accepts it as it is.
    CheckedDir::open(&want, Access::Private, FIX_RUNTIME).expect("again");
}

#[test]
fn a_folder_another_user_made_first_is_refused_with_owner_mode_and_fix() {
    if !root() {
        return;
    }
    let b = base();
    let planted = b.path().join("mcp-code-bridge-0");
    std::fs::create_dir(&planted).expect("mkdir");
    std::os::unix::fs::chown(&planted, Some(OTHER), Some(OTHER)).expect("chown");
    chmod(&planted, 0o777);
    let err = CheckedDir::open(&planted, Access::Private, FIX_RUNTIME).expect_err("refused");
    assert!(
        matches!(
            err,
            DirError::NotOwned {
                owner: OTHER,
                mode: 0o777,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    for part in [
        planted.to_str().expect("utf-8"),
        "uid 65534",
        "mode 0777",
        "XDG_RUNTIME_DIR",
    ] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    // Nothing was changed in the other user's folder.
    assert_eq!(mode_of(&planted), 0o777);
    // The state folder is refused the same way.
    let err = CheckedDir::open(&planted, Access::Shared, FIX_STATE).expect_err("refused");
    assert!(err.to_string().contains("MCP_BRIDGE_STATE_DIR"), "{err}");
}

#[test]
fn a_link_in_place_of_the_folder_is_refused_not_followed() {
    let b = base();
    let real = b.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    chmod(&real, 0o755);
    let link = b.path().join("mcp-code-bridge-0");
    symlink(&real, &link).expect("symlink");
    let err = CheckedDir::open(&link, Access::Private, FIX_RUNTIME).expect_err("refused");
    assert!(
        matches!(
            err,
            DirError::NotAFolder {
                kind: "symbolic link",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(mode_of(&real), 0o755, "the link's target was not touched");
    // A dangling link is not followed to create its target either.
    let dangling = b.path().join("dangling");
    symlink(b.path().join("elsewhere"), &dangling).expect("symlink");
    CheckedDir::open(&dangling, Access::Private, FIX_RUNTIME).expect_err("refused");
    assert!(!b.path().join("elsewhere").exists());
}

#[test]
fn a_folder_open_to_others_is_refused_or_closed() {
    let b = base();
    let group_writable = b.path().join("gw");
    std::fs::create_dir(&group_writable).expect("mkdir");
    chmod(&group_writable, 0o770);
    let err = CheckedDir::open(&group_writable, Access::Shared, FIX_STATE).expect_err("refused");
    assert!(
        matches!(err, DirError::OpenToOthers { mode: 0o770, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("mode 0770"), "{err}");
    // Readable by others but writable by no one else: a private folder is closed to them,
    // a shared one kept as it is.
    let readable = b.path().join("r");
    std::fs::create_dir(&readable).expect("mkdir");
    chmod(&readable, 0o755);
    CheckedDir::open(&readable, Access::Shared, FIX_STATE).expect("shared");
    assert_eq!(mode_of(&readable), 0o755);
    CheckedDir::open(&readable, Access::Private, FIX_RUNTIME).expect("private");
    assert_eq!(mode_of(&readable), 0o700);
}

#[test]
fn folders_on_the_way_must_be_unchangeable_by_others() {
    let b = base();
    let open = b.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    chmod(&open, 0o777);
    let err =
        CheckedDir::open(&open.join("state"), Access::Shared, FIX_STATE).expect_err("refused");
    assert!(
        matches!(&err, DirError::UnsafeAncestor { path, mode: 0o777, .. } if *path == open),
        "{err:?}"
    );
    // With the sticky bit (as /tmp) others cannot rename what is ours: accepted.
    chmod(&open, 0o1777);
    CheckedDir::open(&open.join("state"), Access::Shared, FIX_STATE).expect("sticky");
    // A link on the way in a safe folder is followed.
    let via = b.path().join("via");
    symlink(&open, &via).expect("symlink");
    let dir = CheckedDir::open(&via.join("state"), Access::Shared, FIX_STATE).expect("via link");
    assert_eq!(dir.path(), via.join("state"));
}

#[test]
fn a_link_on_the_way_owned_by_another_user_is_refused() {
    if !root() {
        return;
    }
    let b = base();
    let real = b.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    let link = b.path().join("link");
    symlink(&real, &link).expect("symlink");
    std::os::unix::fs::lchown(&link, Some(OTHER), Some(OTHER)).expect("lchown");
    let err = CheckedDir::open(&link.join("x"), Access::Shared, FIX_STATE).expect_err("refused");
    assert!(
        matches!(err, DirError::UnsafeAncestor { owner: OTHER, .. }),
        "{err:?}"
    );
}

#[test]
fn inside_a_checked_folder_nothing_is_followed_or_taken_over() {
    let b = base();
    let dir = CheckedDir::open(&b.path().join("state"), Access::Shared, FIX_STATE).expect("dir");
    let outside = b.path().join("outside");
    std::fs::write(&outside, "keep").expect("write");
    symlink(&outside, dir.join("consent.json")).expect("symlink");
    // A link where a file goes: neither created through nor opened.
    assert!(dir.create_file("consent.json", 0o600).is_err());
    assert!(dir.open_file("consent.json", libc::O_RDONLY, 0).is_err());
    assert_eq!(std::fs::read_to_string(&outside).expect("read"), "keep");
    // A link where a subfolder goes.
    symlink(b.path(), dir.join("outbox")).expect("symlink");
    let err = dir
        .sub("outbox", Access::Private, FIX_STATE)
        .expect_err("refused");
    assert!(matches!(err, DirError::NotAFolder { .. }), "{err:?}");
    // A fresh folder gets exactly the mode asked for; a second one of the name is refused.
    let ch = dir.fresh_sub("ch-1", 0o711, FIX_RUNTIME).expect("fresh");
    assert_eq!(mode_of(ch.path()), 0o711);
    assert!(dir.fresh_sub("ch-1", 0o711, FIX_RUNTIME).is_err());
    let mut f = ch.create_file("a", 0o600).expect("create");
    std::io::Write::write_all(&mut f, b"x").expect("write");
    assert_eq!(mode_of(&ch.join("a")), 0o600);
    ch.remove_file("a").expect("remove");
}

#[test]
fn a_subfolder_another_user_owns_is_refused() {
    if !root() {
        return;
    }
    let b = base();
    let dir = CheckedDir::open(&b.path().join("state"), Access::Shared, FIX_STATE).expect("dir");
    let outbox = dir.join("outbox");
    std::fs::create_dir(&outbox).expect("mkdir");
    std::os::unix::fs::chown(&outbox, Some(OTHER), Some(OTHER)).expect("chown");
    let err = dir
        .sub("outbox", Access::Private, FIX_STATE)
        .expect_err("refused");
    assert!(
        matches!(err, DirError::NotOwned { owner: OTHER, .. }),
        "{err:?}"
    );
    // A file of another user is not opened either.
    let file = dir.join("consent.json");
    std::fs::write(&file, "{}").expect("write");
    std::os::unix::fs::chown(&file, Some(OTHER), Some(OTHER)).expect("chown");
    let err = dir
        .open_file("consent.json", libc::O_RDONLY, 0)
        .expect_err("refused");
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
}
