//! The owner of one TCP socket, asked of the kernel by its exact addresses over netlink
//! (`NETLINK_SOCK_DIAG`, what `ss` uses): one hash lookup in the kernel, where reading
//! `/proc/net/tcp` prints every socket of the machine (about 20 ms on a loaded machine with a
//! few thousand, which a flood of connections turned into seconds of delay for everyone).
//! Linux only; `None` when the kernel does not answer, and the caller falls back to the table.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLMSG_ERROR` (linux/netlink.h).
const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST`.
const NLM_F_REQUEST: u16 = 1;
/// `INET_DIAG_NOCOOKIE`: match the socket by its addresses alone.
const NO_COOKIE: u32 = !0;
/// The netlink header's size (`NLMSG_HDRLEN`).
const HEADER: usize = std::mem::size_of::<NlMsgHdr>();

/// `struct nlmsghdr`.
#[repr(C)]
#[derive(Clone, Copy)]
struct NlMsgHdr {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
}

/// `struct inet_diag_sockid`: ports and addresses in network byte order.
#[repr(C)]
#[derive(Clone, Copy)]
struct SockId {
    sport: [u8; 2],
    dport: [u8; 2],
    src: [u8; 16],
    dst: [u8; 16],
    interface: u32,
    cookie: [u32; 2],
}

/// `struct inet_diag_req_v2` behind its netlink header.
#[repr(C)]
#[derive(Clone, Copy)]
struct Request {
    header: NlMsgHdr,
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: SockId,
}

/// `struct inet_diag_msg`, up to the uid.
#[repr(C)]
#[derive(Clone, Copy)]
struct DiagMsg {
    family: u8,
    state: u8,
    timer: u8,
    retrans: u8,
    id: SockId,
    expires: u32,
    rqueue: u32,
    wqueue: u32,
    uid: u32,
    inode: u32,
}

/// An address's bytes as `inet_diag_sockid` holds them (IPv4 in the first four).
fn addr_bytes(ip: IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out = v6.octets(),
    }
    out
}

/// The request for the TCP socket whose own address is `src` and peer `dst` (same family).
fn request(src: SocketAddr, dst: SocketAddr) -> Request {
    let family = if src.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    Request {
        header: NlMsgHdr {
            len: std::mem::size_of::<Request>() as u32,
            kind: SOCK_DIAG_BY_FAMILY,
            flags: NLM_F_REQUEST,
            seq: 1,
            pid: 0,
        },
        family: family as u8,
        protocol: libc::IPPROTO_TCP as u8,
        ext: 0,
        pad: 0,
        states: !0,
        id: SockId {
            sport: src.port().to_be_bytes(),
            dport: dst.port().to_be_bytes(),
            src: addr_bytes(src.ip()),
            dst: addr_bytes(dst.ip()),
            interface: 0,
            cookie: [NO_COOKIE, NO_COOKIE],
        },
    }
}

/// Netlink's socket diagnostics could not be asked (no such protocol here, or no answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable;

/// The uid in the kernel's answer `reply`, if it is a socket's description.
fn uid_of(reply: &[u8]) -> Option<u32> {
    if reply.len() < HEADER {
        return None;
    }
    // SAFETY: `reply` holds at least a header's bytes; read unaligned.
    let header: NlMsgHdr = unsafe { std::ptr::read_unaligned(reply.as_ptr().cast()) };
    if header.kind == NLMSG_ERROR || header.kind != SOCK_DIAG_BY_FAMILY {
        return None;
    }
    let body = reply.get(HEADER..)?;
    if body.len() < std::mem::size_of::<DiagMsg>() {
        return None;
    }
    // SAFETY: `body` holds at least a `DiagMsg`'s bytes; read unaligned.
    let msg: DiagMsg = unsafe { std::ptr::read_unaligned(body.as_ptr().cast()) };
    Some(msg.uid)
}

/// The uid owning the TCP socket bound to `src` and connected to `dst` (`None`: the kernel
/// knows no such socket).
///
/// # Errors
/// [`Unavailable`] when the kernel could not be asked.
pub fn socket_uid(src: SocketAddr, dst: SocketAddr) -> Result<Option<u32>, Unavailable> {
    let Some((src, dst)) = same_family(src, dst) else {
        return Ok(None);
    };
    // SAFETY: plain socket creation; the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(Unavailable);
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: a valid descriptor, a `timeval` of the size given.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    // SAFETY: `sockaddr_nl` is plain data; all zero is valid.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    let req = request(src, dst);
    // SAFETY: `req` is `repr(C)` plain data of the length given; `kernel` a valid address.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            (&req as *const Request).cast(),
            std::mem::size_of::<Request>(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(Unavailable);
    }
    let mut buf = [0u8; 1024];
    // SAFETY: `buf` is writable for its length.
    let got = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let got = usize::try_from(got).map_err(|_| Unavailable)?;
    Ok(uid_of(&buf[..got.min(buf.len())]))
}

/// `src` and `dst` in one family: an IPv4 peer of an IPv6 socket is the IPv4 socket it is.
fn same_family(src: SocketAddr, dst: SocketAddr) -> Option<(SocketAddr, SocketAddr)> {
    let canon = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let (src, dst) = (canon(src), canon(dst));
    (src.is_ipv4() == dst.is_ipv4()).then_some((src, dst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_names_the_owner_of_a_real_connection() {
        for host in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = std::net::TcpListener::bind(host) else {
                continue; // no IPv6 here
            };
            let server = listener.local_addr().expect("addr");
            let client = std::net::TcpStream::connect(server).expect("connect");
            let (_server_end, peer) = listener.accept().expect("accept");
            assert_eq!(peer, client.local_addr().expect("local"));
            assert_eq!(
                socket_uid(peer, server),
                Ok(Some(crate::checked_dir::euid()))
            );
            // A socket that does not exist.
            let gone = SocketAddr::new(peer.ip(), 1);
            assert_eq!(socket_uid(gone, server), Ok(None));
        }
    }

    #[test]
    fn answers_that_are_not_a_socket_are_none() {
        assert_eq!(uid_of(&[]), None);
        let mut error = [0u8; 64];
        error[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        assert_eq!(uid_of(&error), None);
        let mut short = [0u8; HEADER + 8];
        short[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert_eq!(uid_of(&short), None);
    }
}
