//! Which resolved addresses the proxy refuses unless the allow list names them literally: the
//! host's own (loopback, unspecified), the local networks' (RFC 1918, ULA, CGNAT, link-local)
//! and the clouds' metadata services. Pure: no lookups.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not reached through a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 0.0.0.0, ::.
    Unspecified,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7.
    Private,
    /// 100.64.0.0/10 (carrier-grade NAT).
    SharedNat,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 169.254.169.254, fd00:ec2::254 and the like.
    Metadata,
    /// Multicast, broadcast and reserved ranges.
    Reserved,
}

impl Special {
    /// A few words for the refusal and the audit line.
    pub fn as_str(self) -> &'static str {
        match self {
            Special::Loopback => "a loopback address",
            Special::Unspecified => "an unspecified address",
            Special::Private => "a private address",
            Special::SharedNat => "a carrier-grade NAT address",
            Special::LinkLocal => "a link-local address",
            Special::Metadata => "a cloud metadata address",
            Special::Reserved => "a reserved address",
        }
    }
}

/// The metadata services' addresses (AWS, GCP, Azure, OpenStack, Alibaba, Oracle).
const METADATA_V4: [Ipv4Addr; 2] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(100, 100, 100, 200),
];
/// AWS's IPv6 metadata address.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// What is special about `ip`, or `None` for a public address.
pub fn classify(ip: IpAddr) -> Option<Special> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            // An IPv4-mapped or -compatible address is the IPv4 address it carries.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return classify_v4(v4);
            }
            classify_v6(v6)
        }
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Special> {
    let [a, b, ..] = ip.octets();
    Some(if METADATA_V4.contains(&ip) {
        Special::Metadata
    } else if ip.is_loopback() {
        Special::Loopback
    } else if ip.is_unspecified() || a == 0 {
        Special::Unspecified
    } else if ip.is_private() {
        Special::Private
    } else if a == 100 && (64..128).contains(&b) {
        Special::SharedNat
    } else if ip.is_link_local() {
        Special::LinkLocal
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 || ip.is_documentation() {
        Special::Reserved
    } else {
        return None;
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Special> {
    let first = ip.segments()[0];
    Some(if ip == METADATA_V6 {
        Special::Metadata
    } else if ip.is_loopback() {
        Special::Loopback
    } else if ip.is_unspecified() {
        Special::Unspecified
    } else if first & 0xfe00 == 0xfc00 {
        Special::Private
    } else if first & 0xffc0 == 0xfe80 {
        Special::LinkLocal
    } else if ip.is_multicast() || first == 0x2001 && ip.segments()[1] == 0x0db8 {
        Special::Reserved
    } else if ip.segments()[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (::a.b.c.d, deprecated): judged as the IPv4 address it carries
        let [.., c, d] = ip.segments();
        return classify_v4(Ipv4Addr::new(
            (c >> 8) as u8,
            c as u8,
            (d >> 8) as u8,
            d as u8,
        ));
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(s: &str) -> Option<Special> {
        classify(s.parse().expect("an address"))
    }

    #[test]
    fn the_hosts_own_and_local_networks_are_special() {
        for (ip, want) in [
            ("127.0.0.1", Special::Loopback),
            ("127.8.9.10", Special::Loopback),
            ("::1", Special::Loopback),
            ("::ffff:127.0.0.1", Special::Loopback),
            ("::127.0.0.1", Special::Loopback),
            ("0.0.0.0", Special::Unspecified),
            ("::", Special::Unspecified),
            ("10.1.2.3", Special::Private),
            ("172.16.0.1", Special::Private),
            ("172.31.255.255", Special::Private),
            ("192.168.1.1", Special::Private),
            ("::ffff:192.168.1.1", Special::Private),
            ("fd12:3456::1", Special::Private),
            ("fc00::1", Special::Private),
            ("100.64.0.1", Special::SharedNat),
            ("100.127.255.255", Special::SharedNat),
            ("169.254.1.1", Special::LinkLocal),
            ("fe80::1", Special::LinkLocal),
            ("169.254.169.254", Special::Metadata),
            ("::ffff:169.254.169.254", Special::Metadata),
            ("fd00:ec2::254", Special::Metadata),
            ("100.100.100.200", Special::Metadata),
            ("224.0.0.1", Special::Reserved),
            ("255.255.255.255", Special::Reserved),
            ("ff02::1", Special::Reserved),
        ] {
            assert_eq!(of(ip), Some(want), "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_not() {
        for ip in [
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "151.101.0.223",
            "2a04:4e42::223",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(of(ip), None, "{ip}");
        }
    }
}
