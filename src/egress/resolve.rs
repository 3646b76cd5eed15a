//! [`Resolver`]: names to addresses for the proxy, done by the bridge (never by the sandbox):
//! the system's resolver, or only a hosts(5) file when `MCP_BRIDGE_NETWORK_HOSTS` names one
//! (tests point names at loopback and metadata addresses this way).

use std::collections::HashMap;
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest hosts file read.
pub const MAX_HOSTS_FILE: u64 = 1 << 20;
/// Addresses kept per name.
pub const MAX_ADDRESSES: usize = 16;
/// How long one lookup may take.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a name has no address.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The resolver found none.
    #[error("it does not resolve")]
    NotFound,
    /// The lookup took longer than [`LOOKUP_TIMEOUT`].
    #[error("its lookup timed out")]
    Timeout,
    /// The hosts file `MCP_BRIDGE_NETWORK_HOSTS` names cannot be read.
    #[error("the hosts file MCP_BRIDGE_NETWORK_HOSTS names cannot be read")]
    HostsFile,
}

/// Where names are looked up.
#[derive(Debug, Clone)]
pub enum Resolver {
    /// The system's resolver (getaddrinfo, on tokio's blocking pool).
    System,
    /// Only these names (lower case).
    Hosts(HashMap<String, Vec<IpAddr>>),
    /// Only the names of this hosts file, read at each lookup (at most [`MAX_HOSTS_FILE`]).
    HostsFile(PathBuf),
}

impl Resolver {
    /// The resolver for `hosts_file`: the system's when `None`.
    pub fn new(hosts_file: Option<&Path>) -> Resolver {
        match hosts_file {
            None => Resolver::System,
            Some(path) => Resolver::HostsFile(path.to_path_buf()),
        }
    }

    /// The addresses of `name` (lower case), at most [`MAX_ADDRESSES`], in the resolver's order.
    ///
    /// # Errors
    /// [`ResolveError`] when there is none.
    pub async fn lookup(&self, name: &str, port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        let found = match self {
            Resolver::Hosts(map) => map.get(name).cloned().unwrap_or_default(),
            Resolver::HostsFile(path) => {
                let mut text = String::new();
                std::fs::File::open(path)
                    .and_then(|f| f.take(MAX_HOSTS_FILE).read_to_string(&mut text))
                    .map_err(|_| ResolveError::HostsFile)?;
                parse_hosts(&text).remove(name).unwrap_or_default()
            }
            Resolver::System => {
                match tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((name, port)))
                    .await
                {
                    Err(_) => return Err(ResolveError::Timeout),
                    Ok(Err(_)) => Vec::new(),
                    Ok(Ok(addrs)) => addrs.map(|a| a.ip()).take(MAX_ADDRESSES).collect(),
                }
            }
        };
        if found.is_empty() {
            return Err(ResolveError::NotFound);
        }
        Ok(found)
    }
}

/// hosts(5): `ADDRESS NAME [ALIAS...]` per line, `#` comments; the first lines win per name.
fn parse_hosts(text: &str) -> HashMap<String, Vec<IpAddr>> {
    let mut map: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) else {
            continue;
        };
        for name in words {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let addrs = map.entry(name).or_default();
            if addrs.len() < MAX_ADDRESSES && !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hosts_file_is_the_only_source_of_names() {
        let r = Resolver::Hosts(parse_hosts(
            "# test\n127.0.0.1 Local.Test alias.test. # comment\n169.254.169.254 meta.test\nbad line\n::1 local.test\n",
        ));
        let local = r.lookup("local.test", 80).await.expect("found");
        assert_eq!(
            local,
            vec![
                "127.0.0.1".parse::<IpAddr>().expect("ip"),
                "::1".parse().expect("ip")
            ]
        );
        assert_eq!(r.lookup("alias.test", 80).await.expect("found").len(), 1);
        assert!(matches!(
            r.lookup("localhost", 80).await,
            Err(ResolveError::NotFound)
        ));
    }
}
