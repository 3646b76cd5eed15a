//! Opening a sign-in link for a person: `$BROWSER` when set (the URL its one argument, no
//! shell), else the desktop's opener (`xdg-open`, `open`) when one is on `PATH`, else nothing
//! (the caller prints the link). The program is not waited for; it is reaped in the background.

use std::path::{Path, PathBuf};
use std::process::Stdio;

/// How the link was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// With this program (`$BROWSER`, or the desktop's opener).
    With(String),
    /// Not opened: no program to open it with, or it could not be run (the reason).
    No(Option<String>),
}

/// Whether a link can be opened here: `$BROWSER` is set, or a desktop opener is on `PATH`.
pub fn can_open() -> bool {
    std::env::var_os("BROWSER").is_some_and(|b| !b.is_empty()) || desktop_opener().is_some()
}

/// Opens `url` as described above.
pub fn open(url: &str) -> Opened {
    let program = match std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        Some(b) => PathBuf::from(b),
        None => match desktop_opener() {
            Some(p) => p,
            None => return Opened::No(None),
        },
    };
    let shown = crate::shown::ShownPath(&program).to_string();
    let mut cmd = tokio::process::Command::new(&program);
    cmd.arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(false);
    match cmd.spawn() {
        Ok(mut child) => {
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            Opened::With(shown)
        }
        Err(e) => Opened::No(Some(format!("{shown}: {e}"))),
    }
}

/// The desktop's opener on `PATH`, if any.
fn desktop_opener() -> Option<PathBuf> {
    let names: &[&str] = if cfg!(target_os = "macos") {
        &["open"]
    } else {
        &["xdg-open"]
    };
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
