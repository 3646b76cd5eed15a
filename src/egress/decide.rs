//! [`decide`]: whether the sandbox may reach `host:port`, and at which addresses. The host must
//! be on the allow list with that port; a name is resolved here, and an address that is special
//! (`address.rs`: loopback, private, link-local, metadata, ...) is dropped unless the list names
//! that IP literally. The proxy connects to the addresses returned, never resolving again.

use std::net::{IpAddr, SocketAddr};

use super::address::{classify, Special};
use super::resolve::{ResolveError, Resolver};
use crate::config::{parse_host, AllowEntry, AllowHost};

/// The setting every refusal names.
pub const SETTING: &str = "MCP_BRIDGE_NETWORK_ALLOW";

/// Why a destination is refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Not a host name or IP address.
    #[error("{0:?} is not a host name or IP address")]
    BadHost(String),
    /// Not on the allow list (with this port).
    #[error("{host}:{port} is not in {SETTING}")]
    NotListed {
        /// The host asked for.
        host: String,
        /// The port.
        port: u16,
    },
    /// Every address the name resolves to is special.
    #[error("{host} resolves to {ip}, {}, which only an IP literal in {SETTING} allows", .why.as_str())]
    Special {
        /// The host asked for.
        host: String,
        /// The first special address met.
        ip: IpAddr,
        /// What is special about it.
        why: Special,
    },
    /// The name has no address.
    #[error("{host} is in {SETTING} but {err}")]
    Unresolved {
        /// The host asked for.
        host: String,
        /// Why.
        err: ResolveError,
    },
    /// The run used up its connections or bytes.
    #[error("this run reached {0} (the network budget of one run; see {SETTING})")]
    Budget(&'static str),
}

impl Refusal {
    /// A short word for the audit line's outcome detail.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::BadHost(_) => "bad_host",
            Refusal::NotListed { .. } => "not_listed",
            Refusal::Special { .. } => "special_address",
            Refusal::Unresolved { .. } => "unresolved",
            Refusal::Budget(_) => "budget",
        }
    }
}

/// The host part of a request target as the list compares it (`[::1]` → `::1`).
pub fn host_of(raw: &str) -> Option<AllowHost> {
    if let Some(inner) = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return inner.parse().ok().map(AllowHost::Ip);
    }
    parse_host(raw)
}

/// The addresses to connect to for `raw_host:port`, or why not.
///
/// # Errors
/// [`Refusal`] naming what is wrong.
pub async fn decide(
    allow: &[AllowEntry],
    resolver: &Resolver,
    raw_host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, Refusal> {
    let shown: String = raw_host.chars().take(256).collect();
    let Some(host) = host_of(raw_host) else {
        return Err(Refusal::BadHost(shown));
    };
    if !allow.iter().any(|e| e.host == host && e.allows_port(port)) {
        return Err(Refusal::NotListed { host: shown, port });
    }
    let name = match host {
        AllowHost::Ip(ip) => return Ok(vec![SocketAddr::new(ip, port)]),
        AllowHost::Name(name) => name,
    };
    let found = resolver
        .lookup(&name, port)
        .await
        .map_err(|err| Refusal::Unresolved {
            host: shown.clone(),
            err,
        })?;
    let literal = |ip: IpAddr| {
        allow
            .iter()
            .any(|e| e.host == AllowHost::Ip(ip) && e.allows_port(port))
    };
    let mut first_special = None;
    let mut kept = Vec::new();
    for ip in found {
        match classify(ip) {
            Some(why) if !literal(ip) => {
                first_special.get_or_insert((ip, why));
            }
            _ => kept.push(SocketAddr::new(ip, port)),
        }
    }
    match (kept.is_empty(), first_special) {
        (true, Some((ip, why))) => Err(Refusal::Special {
            host: shown,
            ip,
            why,
        }),
        _ => Ok(kept),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NetSettings;
    use std::collections::HashMap;

    fn allow(list: &str) -> Vec<AllowEntry> {
        NetSettings::from_lookup(&|k| (k == SETTING).then(|| list.to_string()))
            .expect("valid")
            .allow
    }

    fn hosts() -> Resolver {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        Resolver::Hosts(HashMap::from([
            ("local.test".to_string(), vec![ip("127.0.0.1")]),
            ("meta.test".to_string(), vec![ip("169.254.169.254")]),
            (
                "mixed.test".to_string(),
                vec![ip("10.0.0.1"), ip("93.184.216.34")],
            ),
            ("public.test".to_string(), vec![ip("93.184.216.34")]),
        ]))
    }

    #[tokio::test]
    async fn names_to_special_addresses_are_refused_unless_the_ip_is_listed() {
        let r = hosts();
        let list = allow("local.test:8080,meta.test,public.test,mixed.test,127.0.0.1:9000");
        let err = decide(&list, &r, "local.test", 8080)
            .await
            .expect_err("loopback");
        assert!(
            matches!(
                err,
                Refusal::Special {
                    why: Special::Loopback,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(SETTING), "{err}");
        let err = decide(&list, &r, "META.test", 80)
            .await
            .expect_err("metadata");
        assert!(
            matches!(
                err,
                Refusal::Special {
                    why: Special::Metadata,
                    ..
                }
            ),
            "{err}"
        );
        // Only the public address of a mixed answer is used.
        let got = decide(&list, &r, "mixed.test", 443)
            .await
            .expect("public part");
        assert_eq!(got, vec!["93.184.216.34:443".parse().expect("addr")]);
        // Listed literally: allowed, even loopback, on exactly that port.
        let got = decide(&list, &r, "127.0.0.1", 9000).await.expect("literal");
        assert_eq!(got, vec!["127.0.0.1:9000".parse().expect("addr")]);
        // The literal entry lets a name reach it too, on that port.
        let list = allow("local.test:9000,127.0.0.1:9000");
        assert!(decide(&list, &r, "local.test", 9000).await.is_ok());
    }

    #[tokio::test]
    async fn hosts_and_ports_not_listed_are_refused() {
        let r = hosts();
        let list = allow("public.test,127.0.0.1:9000");
        for (host, port) in [
            ("public.test", 22),
            ("other.test", 443),
            ("127.0.0.1", 9001),
            ("127.0.0.2", 9000),
            ("[::1]", 9000),
            ("93.184.216.34", 443),
        ] {
            let err = decide(&list, &r, host, port).await.expect_err(host);
            assert!(matches!(err, Refusal::NotListed { .. }), "{host}: {err}");
            assert!(err.to_string().contains(SETTING), "{err}");
        }
        for bad in ["", "a b", "x/y", "[zz]"] {
            assert!(matches!(
                decide(&list, &r, bad, 80).await,
                Err(Refusal::BadHost(_))
            ));
        }
        let list = allow("nowhere.test");
        assert!(matches!(
            decide(&list, &r, "nowhere.test", 80).await,
            Err(Refusal::Unresolved { .. })
        ));
    }
}
