//! Whether an approval file inside a project is the user's own: written on this machine by the
//! user's client, not delivered with the repository.
//!
//! Clients keep such files (Claude Code's `.claude/settings.local.json`) out of git; one the
//! repository's git tracks came with the clone, and a cloned repository is someone else's
//! writing. The check fails closed: every doubt (a link on the way, another owner, a file others
//! may write, git missing or refusing) is a [`NotOwn`] with the reason. Git runs with nothing of
//! the repository's choosing that could run code: no system or global config, no hooks, no
//! fsmonitor, no optional locks, literal pathspecs, and no search above the repository found here.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::shown::{Shown, ShownPath};

/// Why a project file's approvals do not count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOwn {
    /// The file, or a folder on the way to it inside the project, is a symbolic link.
    Link(PathBuf),
    /// The file belongs to another user.
    OtherOwner {
        /// Its owner's uid.
        uid: u32,
    },
    /// Users other than its owner may write it.
    WritableByOthers {
        /// Its mode bits.
        mode: u32,
    },
    /// The repository's git tracks it: it came with the repository.
    Tracked {
        /// The folder holding the repository's `.git`.
        repo: PathBuf,
    },
    /// Git could not say (not installed, refused the repository, failed).
    GitUnsure {
        /// The folder holding the repository's `.git`.
        repo: PathBuf,
        /// What git (or starting it) said.
        said: String,
    },
    /// The file's metadata cannot be read.
    Unreadable(String),
}

impl std::fmt::Display for NotOwn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotOwn::Link(p) => write!(f, "{} is a symbolic link", ShownPath(p)),
            NotOwn::OtherOwner { uid } => write!(
                f,
                "it belongs to uid {uid}, not to you (uid {}): your client did not write it",
                euid()
            ),
            NotOwn::WritableByOthers { mode } => write!(
                f,
                "other users may write it (mode {:o})",
                mode & 0o7777
            ),
            NotOwn::Tracked { repo } => write!(
                f,
                "the git repository at {} tracks it, so it came with the repository (clients keep it untracked)",
                ShownPath(repo)
            ),
            NotOwn::GitUnsure { repo, said } => write!(
                f,
                "git could not tell whether the repository at {} tracks it: {}",
                ShownPath(repo),
                Shown(said)
            ),
            NotOwn::Unreadable(e) => write!(f, "cannot inspect it: {}", Shown(e)),
        }
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Checks that `project/rel` (an existing file) is the user's own: no link on the way inside the
/// project, owned by this uid, not writable by others, and not tracked by any git repository
/// the project is in.
pub fn check(project: &Path, rel: &Path) -> Result<(), NotOwn> {
    let mut at = project.to_path_buf();
    for part in rel.components() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at).map_err(|e| NotOwn::Unreadable(e.to_string()))?;
        if meta.file_type().is_symlink() {
            return Err(NotOwn::Link(at));
        }
    }
    let meta = std::fs::symlink_metadata(&at).map_err(|e| NotOwn::Unreadable(e.to_string()))?;
    if meta.uid() != euid() {
        return Err(NotOwn::OtherOwner { uid: meta.uid() });
    }
    if meta.mode() & 0o002 != 0 {
        return Err(NotOwn::WritableByOthers { mode: meta.mode() });
    }
    // From the file's own folder up: a folder on the way may be a repository of its own (a
    // submodule checked out at `.claude`).
    let (dir, name) = match (at.parent(), at.file_name()) {
        (Some(dir), Some(name)) => (dir.to_path_buf(), PathBuf::from(name)),
        _ => return Err(NotOwn::Unreadable("not a file path".into())),
    };
    match repository_of(&dir) {
        None => Ok(()),
        Some(repo) => match tracked(&repo, &dir, &name) {
            Ok(false) => Ok(()),
            Ok(true) => Err(NotOwn::Tracked { repo }),
            Err(said) => Err(NotOwn::GitUnsure { repo, said }),
        },
    }
}

/// The nearest folder at or above `dir` that holds a `.git` (folder or file).
fn repository_of(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
        .map(Path::to_path_buf)
}

/// Whether git's index for the repository at `repo` lists `dir/rel`.
fn tracked(repo: &Path, dir: &Path, rel: &Path) -> Result<bool, String> {
    let mut git = Command::new("git");
    git.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        git.env("PATH", path);
    }
    // Never above the repository found here, no config but the repository's own (of which
    // nothing that runs code is honoured below), no prompts, no locks, pathspecs taken literally.
    git.env("GIT_CEILING_DIRECTORIES", repo.parent().unwrap_or(repo))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .env("LC_ALL", "C");
    git.args([
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
    ])
    .args(["-c", "core.untrackedCache=false"])
    .arg("-C")
    .arg(dir)
    .args(["ls-files", "-z", "--cached", "--"])
    .arg(rel)
    .stdin(Stdio::null());
    let out = output_within(git, GIT_TIMEOUT)?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let line = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("git ls-files failed ({}): {line}", out.status));
    }
    Ok(!out.stdout.is_empty())
}

/// How long git may take to answer: a repository's `.git` can point git at a FIFO or a huge
/// index, and the bridge's start must not hang on it (the file then does not count).
const GIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `cmd` with piped output, killed after `limit`. Its output is at most what the pipes
/// hold: one that writes more blocks, is killed at the limit and counts as a failure.
fn output_within(mut cmd: Command, limit: Duration) -> Result<std::process::Output, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill(); // it may have exited just now: then there is nothing to kill
                let _ = child.wait();
                return Err(format!("git did not answer within {} s", limit.as_secs()));
            }
            Err(e) => return Err(format!("cannot wait for git: {e}")),
        }
    }
    child
        .wait_with_output()
        .map_err(|e| format!("cannot read git's output: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(ok.status.success(), "{args:?}: {ok:?}");
    }

    #[test]
    fn tracked_links_and_modes_are_not_the_users_own() {
        let d = tempfile::tempdir().expect("test");
        let repo = d.path().join("repo");
        let rel = Path::new(".claude/settings.local.json");
        std::fs::create_dir_all(repo.join(".claude")).expect("test");
        std::fs::write(repo.join(rel), "{}").expect("test");
        // Not in any repository: the user's.
        assert_eq!(check(&repo, rel), Ok(()));
        git(&repo, &["init", "-q"]);
        assert_eq!(check(&repo, rel), Ok(()), "untracked");
        git(&repo, &["add", "-f", ".claude/settings.local.json"]);
        assert!(matches!(check(&repo, rel), Err(NotOwn::Tracked { .. })));
        // From a subfolder of the repository too.
        std::fs::create_dir_all(repo.join("sub/.claude")).expect("test");
        std::fs::write(repo.join("sub").join(rel), "{}").expect("test");
        git(&repo, &["add", "-f", "sub"]);
        assert!(matches!(
            check(&repo.join("sub"), rel),
            Err(NotOwn::Tracked { .. })
        ));
        // `.claude` a repository of its own (a submodule's checkout) that tracks it.
        let nested = d.path().join("outer");
        std::fs::create_dir_all(nested.join(".claude")).expect("test");
        std::fs::write(nested.join(rel), "{}").expect("test");
        git(&nested, &["init", "-q"]);
        git(&nested.join(".claude"), &["init", "-q"]);
        git(&nested.join(".claude"), &["add", "settings.local.json"]);
        assert!(matches!(check(&nested, rel), Err(NotOwn::Tracked { .. })));
        // A link on the way.
        std::fs::remove_file(repo.join(rel)).expect("test");
        std::os::unix::fs::symlink("/dev/null", repo.join(rel)).expect("test");
        assert!(matches!(check(&repo, rel), Err(NotOwn::Link(_))));
        // Another user's file (as root in CI: chown to nobody): their client wrote it, not ours.
        let theirs = d.path().join("theirs");
        std::fs::create_dir_all(theirs.join(".claude")).expect("test");
        std::fs::write(theirs.join(rel), "{}").expect("test");
        if std::os::unix::fs::chown(theirs.join(rel), Some(65534), Some(65534)).is_ok() {
            assert_eq!(check(&theirs, rel), Err(NotOwn::OtherOwner { uid: 65534 }));
        }
        // Writable by others.
        let other = d.path().join("plain");
        std::fs::create_dir_all(other.join(".claude")).expect("test");
        std::fs::write(other.join(rel), "{}").expect("test");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(other.join(rel), std::fs::Permissions::from_mode(0o666))
            .expect("test");
        assert!(matches!(
            check(&other, rel),
            Err(NotOwn::WritableByOthers { .. })
        ));
    }

    #[test]
    fn a_broken_repository_fails_closed() {
        let d = tempfile::tempdir().expect("test");
        let rel = Path::new("f.json");
        std::fs::write(d.path().join(rel), "{}").expect("test");
        std::fs::write(d.path().join(".git"), "gitdir: /nonexistent").expect("test");
        let err = check(d.path(), rel).expect_err("not a repository git can read");
        assert!(matches!(err, NotOwn::GitUnsure { .. }), "{err:?}");
        assert!(err.to_string().contains("git ls-files failed"), "{err}");
    }

    #[test]
    fn a_repository_that_makes_git_hang_fails_closed_in_time() {
        // A repository whose `.git/config` is a FIFO: git blocks reading it; the check gives up
        // and the file does not count.
        let d = tempfile::tempdir().expect("test");
        let rel = Path::new("f.json");
        std::fs::write(d.path().join(rel), "{}").expect("test");
        let git_dir = d.path().join(".git");
        std::fs::create_dir_all(git_dir.join("objects")).expect("test");
        std::fs::create_dir_all(git_dir.join("refs")).expect("test");
        std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").expect("test");
        let fifo = std::ffi::CString::new(git_dir.join("config").as_os_str().as_encoded_bytes())
            .expect("test");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let started = Instant::now();
        let err = check(d.path(), rel).expect_err("git cannot answer");
        assert!(matches!(err, NotOwn::GitUnsure { .. }), "{err:?}");
        assert!(err.to_string().contains("did not answer"), "{err}");
        assert!(
            started.elapsed() < GIT_TIMEOUT * 4,
            "bounded: {:?}",
            started.elapsed()
        );
    }
}
