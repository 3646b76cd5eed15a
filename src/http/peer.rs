//! Whose is a loopback connection: without a tokens file, `serve --http` admits only this
//! user's own processes. Anyone on the machine can connect to a loopback port, and another
//! local user must not run code as us or reach our MCP servers; so the kernel's table of TCP
//! sockets (`/proc/net/tcp`, `/proc/net/tcp6`) is asked which uid owns the client's end.

use std::net::{IpAddr, SocketAddr};

/// Lines of a socket table read at most (a busy machine has thousands of sockets).
const MAX_LINES: usize = 200_000;

/// The uid owning the client end of the TCP connection from `peer` to `local`, if the
/// kernel's tables show it (Linux).
pub fn peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let table = match peer.ip() {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let text = std::fs::read_to_string(table).ok()?;
    find_uid(&text, &encode(peer), &encode(local))
}

/// The uid column of the line whose local address is `client` and remote address `server`.
fn find_uid(table: &str, client: &str, server: &str) -> Option<u32> {
    table.lines().skip(1).take(MAX_LINES).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (local.eq_ignore_ascii_case(client) && remote.eq_ignore_ascii_case(server))
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// `addr` as the kernel prints it: the address as 32-bit words in host byte order, in hex,
/// then `:` and the port in hex.
fn encode(addr: SocketAddr) -> String {
    let words: Vec<u32> = match addr.ip() {
        IpAddr::V4(ip) => vec![u32::from_ne_bytes(ip.octets())],
        IpAddr::V6(ip) => ip
            .octets()
            .chunks(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    let mut out: String = words.iter().map(|w| format!("{w:08X}")).collect();
    out.push_str(&format!(":{:04X}", addr.port()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_the_kernel_does() {
        // On little-endian x86_64, 127.0.0.1:8080 reads 0100007F:1F90.
        if cfg!(target_endian = "little") {
            assert_eq!(
                encode("127.0.0.1:8080".parse().expect("addr")),
                "0100007F:1F90"
            );
            assert_eq!(
                encode("[::1]:80".parse().expect("addr")),
                "00000000000000000000000001000000:0050"
            );
        }
    }

    #[test]
    fn finds_the_owner_of_a_real_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (_server_end, peer) = listener.accept().expect("accept");
        assert_eq!(peer, client.local_addr().expect("local"));
        let uid = peer_uid(listener.local_addr().expect("addr"), peer);
        assert_eq!(uid, Some(crate::checked_dir::euid()));
        assert_eq!(find_uid("header\n", "A", "B"), None);
    }
}
