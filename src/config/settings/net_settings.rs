//! [`NetSettings`]: the sandbox's egress allow list (`MCP_BRIDGE_NETWORK_ALLOW`) and its
//! bounds. Unset, the sandbox has no network at all. Each value is read through its row; a bad
//! value is a startup error naming it. The proxy that enforces the list is `egress/`.

use std::net::IpAddr;
use std::path::PathBuf;

use super::super::error::ConfigError;
use super::table::{Lookup, Number, Text, Unit, GIB, MIB};

/// Entries `MCP_BRIDGE_NETWORK_ALLOW` may hold.
pub const MAX_ALLOW_ENTRIES: usize = 256;
/// Longest host name accepted (DNS's limit).
pub const MAX_HOST_NAME: usize = 253;
/// The ports an entry without one allows: HTTP's and HTTPS's.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// `MCP_BRIDGE_NETWORK_ALLOW`.
pub const NETWORK_ALLOW: Text = Text {
    name: "MCP_BRIDGE_NETWORK_ALLOW",
    default: "unset (no network)",
    allowed: "`host[:port]` entries separated by commas; a host without a port allows 80 and 443",
    doc: "destinations the sandbox may reach through the bridge's proxy (HTTP, and HTTPS by CONNECT); a name resolving to a loopback, private, link-local or metadata address is refused unless that IP is listed literally (\"Network\")",
};
/// `MCP_BRIDGE_NETWORK_HOSTS`.
pub const NETWORK_HOSTS: Text = Text {
    name: "MCP_BRIDGE_NETWORK_HOSTS",
    default: "unset (the system resolver)",
    allowed: "an absolute path to a hosts(5) file",
    doc: "the proxy resolves names from this file alone (tests)",
};
/// `MCP_BRIDGE_NETWORK_MAX_BYTES`.
pub const NETWORK_MAX_BYTES: Number = Number::new(
    "MCP_BRIDGE_NETWORK_MAX_BYTES",
    Unit::Bytes,
    GIB,
    (MIB, 64 * GIB),
    "bytes up and down through the proxy per run; past it connections are cut",
);
/// `MCP_BRIDGE_NETWORK_MAX_CONNECTIONS`.
pub const NETWORK_MAX_CONNECTIONS: Number = Number::new(
    "MCP_BRIDGE_NETWORK_MAX_CONNECTIONS",
    Unit::Count,
    256,
    (1, 100_000),
    "connections through the proxy per run; later ones are refused",
);

/// `MCP_BRIDGE_NETWORK_PACKAGES_SIZE`.
pub const NETWORK_PACKAGES_SIZE: Number = Number::new(
    "MCP_BRIDGE_NETWORK_PACKAGES_SIZE",
    Unit::Bytes,
    256 * MIB,
    (16 * MIB, 64 * GIB),
    "size of the sandbox's package folder (`/opt/packages`, on `sys.path`, the one writable place that may hold compiled extensions; counted in `MCP_BRIDGE_MEMORY`); only with `MCP_BRIDGE_NETWORK_ALLOW`",
);

/// Where an entry points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowHost {
    /// A host name, lower case, without a trailing dot.
    Name(String),
    /// An IP address, allowed exactly (even a private one).
    Ip(IpAddr),
}

/// One entry of the allow list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    /// The host.
    pub host: AllowHost,
    /// The port; `None` allows [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

impl AllowEntry {
    /// Whether this entry allows `port`.
    pub fn allows_port(&self, port: u16) -> bool {
        match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        }
    }
}

/// The egress settings, read once at startup.
#[derive(Debug, Clone, PartialEq)]
pub struct NetSettings {
    /// `MCP_BRIDGE_NETWORK_ALLOW`; empty: no network.
    pub allow: Vec<AllowEntry>,
    /// `MCP_BRIDGE_NETWORK_HOSTS`.
    pub hosts_file: Option<PathBuf>,
    /// `MCP_BRIDGE_NETWORK_MAX_BYTES`.
    pub max_bytes: u64,
    /// `MCP_BRIDGE_NETWORK_MAX_CONNECTIONS`.
    pub max_connections: u64,
    /// `MCP_BRIDGE_NETWORK_PACKAGES_SIZE`.
    pub packages_size: u64,
}

impl NetSettings {
    /// Reads the egress settings through `var`, each through its row.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_lookup(var: &Lookup) -> Result<Self, ConfigError> {
        Ok(NetSettings {
            allow: NETWORK_ALLOW.parse(var, Vec::new(), parse_allow_list)?,
            hosts_file: NETWORK_HOSTS.parse(var, None, |v| {
                let p = PathBuf::from(v.trim());
                if p.is_absolute() {
                    Ok(Some(p))
                } else {
                    Err("an absolute path".into())
                }
            })?,
            max_bytes: NETWORK_MAX_BYTES.get(var)?,
            max_connections: NETWORK_MAX_CONNECTIONS.get(var)?,
            packages_size: NETWORK_PACKAGES_SIZE.get(var)?,
        })
    }

    /// Whether the sandbox gets a way out at all.
    pub fn enabled(&self) -> bool {
        !self.allow.is_empty()
    }
}

/// Parses `host[:port],...`: names (letters, digits, `-`, `.`), IPv4 literals, IPv6 literals in
/// brackets (`[::1]:8080`); at most [`MAX_ALLOW_ENTRIES`].
///
/// # Errors
/// The first bad entry, quoted, with what an entry looks like.
pub fn parse_allow_list(raw: &str) -> Result<Vec<AllowEntry>, String> {
    let mut out = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if out.len() == MAX_ALLOW_ENTRIES {
            return Err(format!("more than {MAX_ALLOW_ENTRIES} entries"));
        }
        let entry = parse_entry(item).ok_or_else(|| {
            format!(
                "{:?} is not host[:port] (e.g. pypi.org, files.pythonhosted.org:443, 10.0.0.5:8080, [::1]:8080)",
                item.chars().take(80).collect::<String>()
            )
        })?;
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    Ok(out)
}

fn parse_entry(item: &str) -> Option<AllowEntry> {
    let (host, port) = if let Some(rest) = item.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let ip: std::net::Ipv6Addr = ip.parse().ok()?;
        let port = match after {
            "" => None,
            p => Some(parse_port(p.strip_prefix(':')?)?),
        };
        return Some(AllowEntry {
            host: AllowHost::Ip(IpAddr::V6(ip)),
            port,
        });
    } else {
        match item.rsplit_once(':') {
            Some((h, p)) => (h, Some(parse_port(p)?)),
            None => (item, None),
        }
    };
    let host = parse_host(host)?;
    Some(AllowEntry { host, port })
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse().ok().filter(|&n| n != 0)
}

/// A host as the allow list and the proxy compare it: an IP literal, or a valid name in lower
/// case without a trailing dot. `None` for anything else.
pub fn parse_host(host: &str) -> Option<AllowHost> {
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Some(AllowHost::Ip(IpAddr::V4(ip)));
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let ok = !name.is_empty()
        && name.len() <= MAX_HOST_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        // all digits and dots, but not an IPv4 address (`1.2.3`): refused, not resolved
        && !name.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    ok.then_some(AllowHost::Name(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str, port: Option<u16>) -> AllowEntry {
        AllowEntry {
            host: AllowHost::Name(n.into()),
            port,
        }
    }

    #[test]
    fn entries_are_names_or_literals_with_optional_ports() {
        let got = parse_allow_list(
            " PyPI.org , files.pythonhosted.org:443,10.0.0.5:8080,[::1]:81,[fd00::1], pypi.org",
        )
        .expect("valid");
        assert_eq!(
            got,
            vec![
                name("pypi.org", None),
                name("files.pythonhosted.org", Some(443)),
                AllowEntry {
                    host: AllowHost::Ip("10.0.0.5".parse().expect("ip")),
                    port: Some(8080)
                },
                AllowEntry {
                    host: AllowHost::Ip("::1".parse().expect("ip")),
                    port: Some(81)
                },
                AllowEntry {
                    host: AllowHost::Ip("fd00::1".parse().expect("ip")),
                    port: None
                },
            ]
        );
        assert!(got[0].allows_port(443) && got[0].allows_port(80) && !got[0].allows_port(22));
        assert!(got[2].allows_port(8080) && !got[2].allows_port(80));
        assert_eq!(parse_allow_list(" , ").expect("empty"), vec![]);
    }

    #[test]
    fn bad_entries_are_refused_with_the_shape_of_a_good_one() {
        for bad in [
            "http://pypi.org",
            "pypi.org:0",
            "pypi.org:65536",
            "pypi.org:",
            "::1",
            "[::1",
            "[::1]x",
            "a b",
            "-x.org",
            "x..org",
            "1.2.3",
            "*.example.com",
            "pypi.org/simple",
        ] {
            let err = parse_allow_list(bad).expect_err(bad);
            assert!(err.contains("host[:port]"), "{bad}: {err}");
        }
        let many = vec!["a.org"; MAX_ALLOW_ENTRIES + 1]
            .iter()
            .enumerate()
            .map(|(i, h)| format!("{h}:{}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        assert!(parse_allow_list(&many).is_err());
    }

    #[test]
    fn settings_name_the_variable_and_default_to_no_network() {
        let get = |pairs: &'static [(&'static str, &'static str)]| {
            NetSettings::from_lookup(&move |k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        let none = get(&[]).expect("defaults");
        assert!(!none.enabled());
        assert_eq!(none.max_connections, 256);
        let err = get(&[("MCP_BRIDGE_NETWORK_ALLOW", "x y")])
            .expect_err("bad")
            .to_string();
        assert!(err.contains("MCP_BRIDGE_NETWORK_ALLOW"), "{err}");
        let err = get(&[("MCP_BRIDGE_NETWORK_HOSTS", "hosts")])
            .expect_err("relative")
            .to_string();
        assert!(err.contains("MCP_BRIDGE_NETWORK_HOSTS"), "{err}");
    }
}
