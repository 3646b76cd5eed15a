//! The command clients get for starting the bridge: this binary's absolute path, except when it
//! runs from uv's disposable cache (`uvx mcp-code-bridge`), where that path would vanish with
//! the next `uv cache clean` and `uvx mcp-code-bridge run` is the lasting form; or the user's own
//! (`--command`).

use std::path::Path;

use super::shape::Launch;

/// The command line `uvx` users register.
const UVX: [&str; 3] = ["uvx", "mcp-code-bridge", "run"];

/// Why `--command` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--command {given:?}: {reason}")]
pub struct BadCommand {
    /// The value given.
    pub given: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The launch to register: `given` (a command line, split as a POSIX shell would) when set,
/// else `uvx mcp-code-bridge run` when `exe` is inside `uv_cache`, else `exe run`.
///
/// # Errors
/// A [`BadCommand`] when `given` is empty or its quotes are unbalanced.
pub fn choose(
    given: Option<&str>,
    exe: &Path,
    uv_cache: Option<&Path>,
) -> Result<Launch, BadCommand> {
    if let Some(line) = given {
        let bad = |reason| BadCommand {
            given: line.to_string(),
            reason,
        };
        let mut words = shlex::split(line).ok_or_else(|| bad("unbalanced quotes"))?;
        if words.is_empty() {
            return Err(bad("empty"));
        }
        let command = words.remove(0);
        return Ok(Launch {
            command,
            args: words,
        });
    }
    if uv_cache.is_some_and(|cache| inside(exe, cache)) {
        return Ok(Launch {
            command: UVX[0].into(),
            args: UVX[1..].iter().map(|s| s.to_string()).collect(),
        });
    }
    Ok(Launch {
        command: exe.display().to_string(),
        args: vec!["run".into()],
    })
}

/// Whether `path` lies under `dir`, both with symbolic links resolved when they exist.
fn inside(path: &Path, dir: &Path) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    real(path).starts_with(real(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(l: &Launch) -> String {
        l.display()
    }

    #[test]
    fn a_binary_in_uvs_cache_is_registered_as_uvx() {
        let cache = Path::new("/home/u/.cache/uv");
        let exe = cache.join("archive-v0/0a1b2c/bin/mcp-code-bridge");
        assert_eq!(
            words(&choose(None, &exe, Some(cache)).expect("ok")),
            "uvx mcp-code-bridge run"
        );
        let installed = Path::new("/home/u/.local/bin/mcp-code-bridge");
        assert_eq!(
            words(&choose(None, installed, Some(cache)).expect("ok")),
            "/home/u/.local/bin/mcp-code-bridge run"
        );
        assert_eq!(
            words(&choose(None, &exe, None).expect("ok")),
            format!("{} run", exe.display())
        );
    }

    #[test]
    fn an_override_is_split_like_a_shell_line() {
        let exe = Path::new("/x/mcp-code-bridge");
        let l = choose(
            Some("'/Users/me/Application Support/mcp-code-bridge' run"),
            exe,
            None,
        )
        .expect("ok");
        assert_eq!(l.command, "/Users/me/Application Support/mcp-code-bridge");
        assert_eq!(l.args, ["run"]);
        let l = choose(
            Some("uvx --from ./dist/x.whl mcp-code-bridge run"),
            exe,
            None,
        )
        .expect("ok");
        assert_eq!(l.command, "uvx");
        assert_eq!(l.args, ["--from", "./dist/x.whl", "mcp-code-bridge", "run"]);
        assert_eq!(
            choose(Some("  "), exe, None).expect_err("empty").reason,
            "empty"
        );
        assert_eq!(
            choose(Some("'open"), exe, None).expect_err("quotes").reason,
            "unbalanced quotes"
        );
    }
}
