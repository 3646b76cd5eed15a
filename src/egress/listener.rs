//! [`EgressListener`]: the unix socket the sandbox's relay connects to, in the sandbox's
//! frame-channel folder (the only host folder mounted for the bridge's own use). Like the frame
//! channel, the first connection presenting the session's random token is taken and the socket
//! file removed; nothing else ever connects.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};

/// The socket's file name inside the channel folder.
pub const SOCKET_NAME: &str = "egress.sock";
/// Bytes of the token (hex) the relay sends first, then `\n`.
const TOKEN_HEX: usize = 32;
/// How long a connecting peer has to send its token.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// A listening egress socket.
pub struct EgressListener {
    path: PathBuf,
    listener: UnixListener,
    token: String,
}

impl EgressListener {
    /// Binds `<dir>/egress.sock` (mode 0666: the sandbox user connects; the token keeps other
    /// local users out).
    ///
    /// # Errors
    /// Binding failed.
    pub fn bind(dir: &Path) -> std::io::Result<EgressListener> {
        let path = dir.join(SOCKET_NAME);
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
        let mut bytes = [0u8; TOKEN_HEX / 2];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(EgressListener {
            path,
            listener,
            token: bytes.iter().map(|b| format!("{b:02x}")).collect(),
        })
    }

    /// The secret the relay must present.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Waits for the relay's connection; peers without the token are dropped. Cancel safe.
    ///
    /// # Errors
    /// The listening socket failed.
    pub async fn accept(&self) -> std::io::Result<UnixStream> {
        loop {
            let (mut stream, _) = self.listener.accept().await?;
            let mut hello = [0u8; TOKEN_HEX + 1];
            let read = tokio::time::timeout(HELLO_TIMEOUT, stream.read_exact(&mut hello)).await;
            let good = matches!(read, Ok(Ok(_)))
                && hello[TOKEN_HEX] == b'\n'
                && subtle::ConstantTimeEq::ct_eq(&hello[..TOKEN_HEX], self.token.as_bytes()).into();
            if good {
                let _ = std::fs::remove_file(&self.path);
                return Ok(stream);
            }
            tracing::warn!("dropped an egress connection without the session token");
        }
    }
}

impl Drop for EgressListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
