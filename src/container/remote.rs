//! An engine named by `DOCKER_HOST` (or `CONTAINER_HOST`) that is not a unix socket: which
//! transport reaches it (plain TCP, TLS with docker's certificate files, or none: `ssh://`), and
//! the warning a plain-TCP address on another machine deserves.
//!
//! Docker's CLI conventions are kept: `DOCKER_TLS_VERIFY` (any value) turns verification on,
//! and `DOCKER_CERT_PATH` (else `~/.docker`) holds `ca.pem`, `cert.pem` and `key.pem`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::error::TransportError;

/// The certificate files docker's CLI reads from `DOCKER_CERT_PATH`, in the order checked.
pub const TLS_FILES: [&str; 3] = ["ca.pem", "cert.pem", "key.pem"];

/// How to reach a non-unix engine address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// Plain HTTP over TCP: no encryption, no authentication.
    Plain {
        /// The address, as given.
        addr: String,
    },
    /// TLS, the server checked against `ca.pem` (and the system's roots, as bollard adds them),
    /// this client known by `cert.pem` and `key.pem`.
    Tls {
        /// The address, as given.
        addr: String,
        /// The folder holding the three files.
        certs: PathBuf,
    },
}

impl Remote {
    /// The transport for `addr` (not `unix://`), given `DOCKER_TLS_VERIFY`'s folder.
    ///
    /// # Errors
    /// [`TransportError::Address`] for `ssh://` and other schemes the bridge does not speak,
    /// for `https://` without `DOCKER_TLS_VERIFY`, and for `http://` with it; and when a
    /// certificate file is missing.
    pub fn of(addr: &str, tls: Option<&Path>) -> Result<Remote, TransportError> {
        let scheme = addr.split_once("://").map_or("", |(s, _)| s);
        let refuse = |why: String| Err(TransportError::Address(why));
        match (scheme, tls) {
            ("tcp", None) | ("http", None) => Ok(Remote::Plain {
                addr: addr.to_string(),
            }),
            ("tcp", Some(dir)) | ("https", Some(dir)) => {
                if let Some(missing) = TLS_FILES.iter().find(|f| !dir.join(f).is_file()) {
                    return refuse(format!(
                        "DOCKER_TLS_VERIFY is set but {} has no {missing} (DOCKER_CERT_PATH names \
                         the folder of ca.pem, cert.pem and key.pem)",
                        dir.display()
                    ));
                }
                Ok(Remote::Tls {
                    addr: addr.to_string(),
                    certs: dir.to_path_buf(),
                })
            }
            ("https", None) => refuse(
                "an https:// engine needs DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH (ca.pem, \
                 cert.pem, key.pem)"
                    .into(),
            ),
            ("http", Some(_)) => refuse(
                "DOCKER_TLS_VERIFY is set but the address says http://: use tcp:// (or https://)"
                    .into(),
            ),
            ("ssh", _) => refuse(
                "ssh:// engines are not reached directly: forward the engine's socket (`ssh -nNT \
                 -L /tmp/engine.sock:/run/podman/podman.sock user@host`) and set \
                 DOCKER_HOST=unix:///tmp/engine.sock"
                    .into(),
            ),
            _ => refuse("the address must start with unix://, tcp://, http:// or https://".into()),
        }
    }

    /// The warning this transport deserves, if any: plain TCP to an address that is not this
    /// machine's loopback lets anyone on the way read the sandbox's frames and run containers
    /// on that engine.
    pub fn warning(&self) -> Option<String> {
        let Remote::Plain { addr } = self else {
            return None;
        };
        (!is_loopback(addr)).then(|| {
            format!(
                "the container engine at {addr} is reached over plain TCP: anyone on the network \
                 path can read what the sandbox sends and receives, and use that engine as root. \
                 Use TLS (DOCKER_TLS_VERIFY=1, DOCKER_CERT_PATH) or forward a unix socket over \
                 ssh (GUIDE.md, \"Remote engines\")"
            )
        })
    }

    /// How the connection is described in messages and `doctor`.
    pub fn describe(&self, var: &str) -> String {
        match self {
            Remote::Plain { addr } => format!("{addr} ({var}, plain TCP)"),
            Remote::Tls { addr, certs } => {
                format!("{addr} ({var}, TLS, certificates in {})", certs.display())
            }
        }
    }
}

/// Whether the host part of `addr` is `localhost` or a loopback IP address.
fn is_loopback(addr: &str) -> bool {
    let rest = addr.split_once("://").map_or(addr, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tcp_off_this_machine_is_warned_about_and_loopback_is_not() {
        let plain = |a: &str| Remote::of(a, None).expect("plain");
        for quiet in [
            "tcp://127.0.0.1:2375",
            "tcp://localhost:2375",
            "http://127.3.4.5:80",
            "tcp://[::1]:2375",
        ] {
            assert_eq!(plain(quiet).warning(), None, "{quiet}");
        }
        for loud in [
            "tcp://10.0.0.5:2375",
            "tcp://engine.example:2375",
            "tcp://[2001:db8::1]:2375",
            "tcp://localhost.example:2375",
        ] {
            let w = plain(loud).warning().expect(loud);
            assert!(w.contains(loud) && w.contains("DOCKER_TLS_VERIFY"), "{w}");
        }
    }

    #[test]
    fn tls_needs_the_three_files_and_is_never_warned_about() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Remote::of("tcp://10.0.0.5:2376", Some(dir.path())).expect_err("no files");
        assert!(err.to_string().contains("ca.pem"), "{err}");
        for f in TLS_FILES {
            std::fs::write(dir.path().join(f), "x").expect("write");
        }
        let tls = Remote::of("tcp://10.0.0.5:2376", Some(dir.path())).expect("tls");
        assert!(matches!(tls, Remote::Tls { .. }), "{tls:?}");
        assert_eq!(tls.warning(), None);
        assert!(tls.describe("DOCKER_HOST").contains("TLS"));
    }

    #[test]
    fn schemes_the_bridge_does_not_speak_are_refused_with_the_way_round() {
        let dir = std::path::Path::new("/nonexistent");
        let cases = [
            ("ssh://me@host", None, "ssh -nNT"),
            ("https://h:2376", None, "DOCKER_TLS_VERIFY"),
            ("http://h:2375", Some(dir), "tcp://"),
            ("npipe:////./pipe/docker_engine", None, "unix://"),
        ];
        for (addr, tls, hint) in cases {
            let err = Remote::of(addr, tls).expect_err(addr);
            assert!(err.to_string().contains(hint), "{addr}: {err}");
        }
    }
}
