//! [`ChannelListener`]: the optional socket frame channel between the bridge and a sandbox.
//!
//! With a local engine, frames need not pass through the engine's attach stream (conmon and the
//! engine's API process on every frame, both ways). The bridge listens on a Unix socket in a
//! private directory that is bind-mounted read-only into the sandbox; the entrypoint connects,
//! proves it got the boot frame by sending the session's random token, and from then on every
//! frame uses the socket. Stdio still carries the boot frame, stderr and the exit. If anything
//! fails, frames stay on stdio. Only the first connection with the right token is accepted; the
//! socket file is removed as soon as it is, and the directory when the session ends.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};

use crate::checked_dir::{CheckedDir, DirError, FIX_RUNTIME};

/// The socket's file name inside the channel directory.
pub const SOCKET_NAME: &str = "frames.sock";
/// Longest hello line accepted, in bytes.
const HELLO_MAX: usize = 256;
/// How long a connecting peer has to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// A listening channel socket in its own directory.
pub struct ChannelListener {
    dir: PathBuf,
    listener: UnixListener,
    token: String,
}

impl ChannelListener {
    /// Creates `<base>/<name>/` (mode 0711) with a listening socket (mode 0666: the sandbox
    /// user must be able to connect; the random token keeps other local users out). `base` is
    /// the checked private folder, so no other user can have put or swapped anything there.
    ///
    /// # Errors
    /// Creating the directory or binding the socket failed.
    pub fn bind(base: &CheckedDir, name: &str) -> std::io::Result<ChannelListener> {
        // A folder of this name can only be a leftover of this process (the name has our pid).
        match std::fs::remove_dir_all(base.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let dir = base
            .fresh_sub(name, 0o711, FIX_RUNTIME)
            .map_err(DirError::into_io)?
            .path()
            .to_path_buf();
        let path = dir.join(SOCKET_NAME);
        let listener = UnixListener::bind(&path).and_then(|l| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
            Ok(l)
        });
        let listener = match listener {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        Ok(ChannelListener {
            dir,
            listener,
            token: random_token()?,
        })
    }

    /// Removes `ch-<pid>-*` directories under `base` left by bridges that are gone
    /// (killed before they could clean up).
    pub fn remove_stale(base: &CheckedDir) {
        let Ok(entries) = std::fs::read_dir(base.path()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix("ch-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }

    /// The host directory to mount into the sandbox.
    pub fn host_dir(&self) -> &Path {
        &self.dir
    }

    /// The secret the entrypoint must present.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Waits for the entrypoint's authenticated connection; peers with a wrong or missing
    /// token are dropped and waiting goes on. Cancel safe.
    pub async fn accept(&self) -> std::io::Result<UnixStream> {
        loop {
            let (mut stream, _) = self.listener.accept().await?;
            match tokio::time::timeout(HELLO_TIMEOUT, read_hello(&mut stream)).await {
                Ok(Ok(token)) if constant_time_eq(token.as_bytes(), self.token.as_bytes()) => {
                    let _ = std::fs::remove_file(self.dir.join(SOCKET_NAME));
                    return Ok(stream);
                }
                _ => tracing::warn!("dropped a channel connection without the session token"),
            }
        }
    }
}

impl Drop for ChannelListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads `{"t":"hello","token":"..."}\n` byte by byte (nothing after it may be consumed).
async fn read_hello(stream: &mut UnixStream) -> std::io::Result<String> {
    let mut line = Vec::with_capacity(64);
    loop {
        let b = stream.read_u8().await?;
        if b == b'\n' {
            break;
        }
        if line.len() == HELLO_MAX {
            return Err(std::io::Error::other("hello too long"));
        }
        line.push(b);
    }
    let v: serde_json::Value = serde_json::from_slice(&line).map_err(std::io::Error::other)?;
    match (v.get("t").and_then(|t| t.as_str()), v.get("token")) {
        (Some("hello"), Some(serde_json::Value::String(token))) => Ok(token.clone()),
        _ => Err(std::io::Error::other("not a hello frame")),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checked_dir::Access;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn only_the_token_holder_gets_in_and_the_socket_file_goes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = CheckedDir::open(&tmp.path().join("private"), Access::Private, FIX_RUNTIME)
            .expect("private dir");
        let ch = ChannelListener::bind(&base, "ch-test").expect("bind");
        let sock = ch.host_dir().join(SOCKET_NAME);
        let mode = std::fs::metadata(ch.host_dir())
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o711);
        let token = ch.token().to_string();
        assert_eq!(token.len(), 32);
        let client = async {
            let mut bad = UnixStream::connect(&sock).await.expect("connect");
            bad.write_all(b"{\"t\":\"hello\",\"token\":\"guess\"}\n")
                .await
                .expect("write");
            let mut junk = UnixStream::connect(&sock).await.expect("connect");
            junk.write_all(&[b'x'; 300]).await.expect("write");
            let mut good = UnixStream::connect(&sock).await.expect("connect");
            let hello = format!("{{\"t\":\"hello\",\"token\":\"{token}\"}}\nafter");
            good.write_all(hello.as_bytes()).await.expect("write");
            (bad, junk, good)
        };
        let (accepted, _peers) = tokio::join!(ch.accept(), client);
        let mut accepted = accepted.expect("accepted");
        let mut rest = [0u8; 5];
        accepted
            .read_exact(&mut rest)
            .await
            .expect("bytes after hello");
        assert_eq!(&rest, b"after", "nothing after the hello is consumed");
        assert!(!sock.exists(), "socket file removed once connected");
        let dir = ch.host_dir().to_path_buf();
        drop(ch);
        assert!(!dir.exists(), "directory removed with the listener");
    }
}
