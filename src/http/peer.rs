//! Whose is a loopback connection: without a tokens file, `serve --http` admits only this
//! user's own processes. Anyone on the machine can connect to a loopback port, and another
//! local user must not run code as us or reach our MCP servers; so the kernel's table of TCP
//! sockets is asked which uid owns the client's end: over netlink (`sock_diag.rs`), else in
//! `/proc/net/tcp` and `/proc/net/tcp6`.

use std::net::{IpAddr, SocketAddr};

/// Bytes of a socket table read at most (a busy machine has thousands of sockets, about
/// 150 bytes each).
const MAX_BYTES: u64 = 32 << 20;

/// The uid owning the client end of the TCP connection from `peer` to `local`, if the kernel
/// shows it (Linux): asked over netlink (`sock_diag.rs`), else read from the socket table.
pub fn peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    match super::sock_diag::socket_uid(peer, local) {
        Ok(uid) => uid,
        Err(super::sock_diag::Unavailable) => table_uid(local, peer),
    }
}

/// [`peer_uid`] from the kernel's socket table (`/proc/net/tcp{,6}`).
fn table_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    use std::io::Read;
    let table = match peer.ip() {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let mut text = String::new();
    std::fs::File::open(table)
        .ok()?
        .take(MAX_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    find_uid(&text, &encode(peer), &encode(local))
}

/// The uid column of the line whose local address is `client` and remote address `server`.
/// One substring search (many connections arriving at once each ask; a field-by-field parse
/// of every line made that quadratic and slow).
fn find_uid(table: &str, client: &str, server: &str) -> Option<u32> {
    let needle = format!(" {client} {server} ");
    let at = table.find(&needle)?;
    let rest = &table[at + needle.len()..];
    let line = rest.split('\n').next()?;
    // st, tx_queue:rx_queue, tr:tm->when, retrnsmt, uid
    line.split_whitespace().nth(4)?.parse().ok()
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
        let server = listener.local_addr().expect("addr");
        assert_eq!(peer_uid(server, peer), Some(crate::checked_dir::euid()));
        assert_eq!(table_uid(server, peer), Some(crate::checked_dir::euid()));
        assert_eq!(find_uid("header\n", "A", "B"), None);
        let line = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n   1: 0100007F:924B 0100007F:B04A 01 00000000:00000000 00:00000000 00000000  1000        0 7 1\n";
        assert_eq!(find_uid(line, "0100007F:924B", "0100007F:B04A"), Some(1000));
        assert_eq!(
            find_uid(line, "0100007F:B04A", "0100007F:924B"),
            None,
            "the other end"
        );
    }
}
