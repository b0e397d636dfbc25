//! Per-socket quality of service: the IP type-of-service byte (`IP_TOS`, `IPV6_TCLASS`), the
//! kernel's fair-queue pacing cap (`SO_MAX_PACING_RATE`) and "don't fragment"
//! (`IP_MTU_DISCOVER` = `IP_PMTUDISC_DO`), set and read back.
//!
//! Kept apart from `socket.rs` because both depend on the socket's address family as it is
//! *used*: a dual-stack server's accepted socket is IPv6 but carries IPv4 packets for an
//! IPv4 client, and those take their TOS from `IP_TOS`, not `IPV6_TCLASS` (iperf3 sets both
//! for that reason, and so does [`set_tos`]). Linux only; elsewhere the answers are
//! "unsupported" and None.

use std::io;
use std::os::fd::AsFd;

/// Sets the type-of-service byte: `IP_TOS` on an IPv4 socket; `IPV6_TCLASS` on an IPv6 one,
/// and `IP_TOS` too where the kernel allows it (the socket may carry IPv4 packets for a
/// mapped peer). Unprivileged processes may set any value; TCP keeps the two ECN bits.
pub fn set_tos(sock: &impl AsFd, tos: u8) -> io::Result<()> {
    imp::set_tos(sock.as_fd(), tos)
}

/// The type-of-service byte the kernel holds for the packets `sock` sends now: `IP_TOS` for
/// an IPv4 socket or an IPv6 one connected to an IPv4-mapped peer, else `IPV6_TCLASS`.
pub fn tos(sock: &impl AsFd) -> Option<u8> {
    imp::tos(sock.as_fd())
}

/// Sets `SO_MAX_PACING_RATE` to `bits_per_second` (the kernel takes bytes per second, so the
/// rate is divided by 8, as iperf3 does): the fair-queue qdisc, or TCP's internal pacing,
/// spaces the socket's packets so it never sends faster.
pub fn set_max_pacing_rate(sock: &impl AsFd, bits_per_second: u64) -> io::Result<()> {
    imp::set_max_pacing_rate(sock.as_fd(), bits_per_second)
}

/// `SO_MAX_PACING_RATE` as read back, in bits per second; None where unsupported.
pub fn max_pacing_rate(sock: &impl AsFd) -> Option<u64> {
    imp::max_pacing_rate(sock.as_fd())
}

/// Never fragment what `sock` sends, with the don't-fragment bit set (`IP_PMTUDISC_DO`;
/// `IPV6_PMTUDISC_DO` on IPv6, and the IPv4 one too where allowed): a datagram larger than
/// the path MTU fails with EMSGSIZE instead.
pub fn set_dont_fragment(sock: &impl AsFd) -> io::Result<()> {
    imp::set_dont_fragment(sock.as_fd())
}

/// Whether the kernel holds `sock` to "don't fragment" (`IP_PMTUDISC_DO`) for the packets it
/// sends now; None where unsupported.
pub fn dont_fragment(sock: &impl AsFd) -> Option<bool> {
    imp::dont_fragment(sock.as_fd())
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::c_int;
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd};

    use crate::sys::context;

    fn set(fd: BorrowedFd<'_>, level: c_int, name: c_int, value: &[u8]) -> io::Result<()> {
        let len = libc::socklen_t::try_from(value.len()).unwrap_or(libc::socklen_t::MAX);
        // SAFETY: `value` is a live slice of `len` readable bytes the kernel only reads; `fd`
        // is live for the call.
        let rc =
            unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, value.as_ptr().cast(), len) };
        if rc == -1 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    /// Reads an option of at most 8 bytes; returns the bytes and how many the kernel wrote.
    fn get(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> Option<([u8; 8], usize)> {
        let mut buf = [0u8; 8];
        let mut len = buf.len() as libc::socklen_t;
        // SAFETY: `buf` is an exclusively borrowed 8-byte array and `len` says so; any bytes
        // are valid; `fd` is live for the call.
        let rc = unsafe {
            libc::getsockopt(fd.as_raw_fd(), level, name, buf.as_mut_ptr().cast(), &mut len)
        };
        (rc == 0).then_some((buf, (len as usize).min(8)))
    }

    fn get_int(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> Option<c_int> {
        let (buf, n) = get(fd, level, name)?;
        (n == size_of::<c_int>()).then(|| c_int::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]))
    }

    /// (is IPv6, carries IPv4 packets): from the socket's own and its peer's address.
    fn family(fd: BorrowedFd<'_>) -> (bool, bool) {
        let sock = socket2::SockRef::from(&fd);
        let v6 = sock.local_addr().ok().and_then(|a| a.as_socket()).is_some_and(|a| a.is_ipv6());
        let mapped = sock
            .peer_addr()
            .ok()
            .and_then(|a| a.as_socket_ipv6())
            .is_some_and(|a| a.ip().to_ipv4_mapped().is_some());
        (v6, !v6 || mapped)
    }

    /// An option of one IP version: (name, value, label for errors).
    type IpOption = (c_int, c_int, &'static str);

    /// Sets `v4` on an IPv4 socket; on an IPv6 one `v6`, and `v4` too where the kernel allows
    /// it (as iperf3 does: it only matters for the IPv4 packets of a mapped peer).
    fn set_per_family(fd: BorrowedFd<'_>, v6: IpOption, v4: IpOption) -> io::Result<()> {
        let one = |level, (name, value, label): IpOption| {
            set(fd, level, name, &value.to_ne_bytes())
                .map_err(|e| context(e, format_args!("setting {label}")))
        };
        if family(fd).0 {
            one(libc::IPPROTO_IPV6, v6)?;
            let _ = one(libc::IPPROTO_IP, v4);
            Ok(())
        } else {
            one(libc::IPPROTO_IP, v4)
        }
    }

    /// Reads the `v4` option for a socket sending IPv4 packets, else the `v6` one.
    fn get_per_family(fd: BorrowedFd<'_>, v6: c_int, v4: c_int) -> Option<c_int> {
        if family(fd).1 {
            get_int(fd, libc::IPPROTO_IP, v4)
        } else {
            get_int(fd, libc::IPPROTO_IPV6, v6)
        }
    }

    pub(super) fn set_tos(fd: BorrowedFd<'_>, tos: u8) -> io::Result<()> {
        let t = c_int::from(tos);
        set_per_family(fd, (libc::IPV6_TCLASS, t, "IPV6_TCLASS"), (libc::IP_TOS, t, "IP_TOS"))
    }

    pub(super) fn tos(fd: BorrowedFd<'_>) -> Option<u8> {
        get_per_family(fd, libc::IPV6_TCLASS, libc::IP_TOS).and_then(|t| u8::try_from(t).ok())
    }

    pub(super) fn set_max_pacing_rate(fd: BorrowedFd<'_>, bits_per_second: u64) -> io::Result<()> {
        let bytes = (bits_per_second / 8).to_ne_bytes();
        set(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes).map_err(|e| {
            context(
                e,
                format_args!("setting SO_MAX_PACING_RATE to {} bytes/s", bits_per_second / 8),
            )
        })
    }

    pub(super) fn set_dont_fragment(fd: BorrowedFd<'_>) -> io::Result<()> {
        set_per_family(
            fd,
            (libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER to DO"),
            (libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO, "IP_MTU_DISCOVER to DO"),
        )
    }

    pub(super) fn dont_fragment(fd: BorrowedFd<'_>) -> Option<bool> {
        // IP_PMTUDISC_DO and IPV6_PMTUDISC_DO are both 2.
        get_per_family(fd, libc::IPV6_MTU_DISCOVER, libc::IP_MTU_DISCOVER)
            .map(|v| v == libc::IP_PMTUDISC_DO)
    }

    pub(super) fn max_pacing_rate(fd: BorrowedFd<'_>) -> Option<u64> {
        let (buf, n) = get(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE)?;
        let bytes = match n {
            8 => u64::from_ne_bytes(buf),
            4 => u64::from(u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]])),
            _ => return None,
        };
        Some(bytes.saturating_mul(8))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::os::fd::BorrowedFd;

    fn unsupported(what: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{what} is not supported on this operating system"),
        )
    }

    pub(super) fn set_tos(_fd: BorrowedFd<'_>, _tos: u8) -> io::Result<()> {
        Err(unsupported("setting the type of service"))
    }

    pub(super) fn tos(_fd: BorrowedFd<'_>) -> Option<u8> {
        None
    }

    pub(super) fn set_max_pacing_rate(_fd: BorrowedFd<'_>, _bps: u64) -> io::Result<()> {
        Err(unsupported("SO_MAX_PACING_RATE"))
    }

    pub(super) fn max_pacing_rate(_fd: BorrowedFd<'_>) -> Option<u64> {
        None
    }

    pub(super) fn set_dont_fragment(_fd: BorrowedFd<'_>) -> io::Result<()> {
        Err(unsupported("don't fragment"))
    }

    pub(super) fn dont_fragment(_fd: BorrowedFd<'_>) -> Option<bool> {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::{TcpListener, TcpStream, UdpSocket};

    use super::*;

    #[test]
    fn tos_is_read_back_on_ipv4_tcp_and_udp() {
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        assert_ne!(tos(&c), Some(0xb8), "a fresh socket must not already carry EF");
        set_tos(&c, 0xb8).expect("set");
        assert_eq!(tos(&c), Some(0xb8));
        // TCP keeps the ECN bits for itself: 0xbb reads back as 0xb8.
        set_tos(&c, 0xbb).expect("set");
        assert_eq!(tos(&c), Some(0xb8));
        let u = UdpSocket::bind("127.0.0.1:0").expect("udp");
        set_tos(&u, 0x28).expect("set");
        assert_eq!(tos(&u), Some(0x28));
    }

    #[test]
    fn tos_on_ipv6_reads_the_traffic_class() {
        let Ok(u) = UdpSocket::bind("[::1]:0") else { return };
        set_tos(&u, 0x88).expect("set");
        assert_eq!(tos(&u), Some(0x88));
    }

    #[test]
    fn dont_fragment_is_read_back() {
        let u = UdpSocket::bind("127.0.0.1:0").expect("udp");
        assert_eq!(dont_fragment(&u), Some(false), "UDP's default lets the kernel fragment");
        set_dont_fragment(&u).expect("set");
        assert_eq!(dont_fragment(&u), Some(true));
    }

    #[test]
    fn pacing_cap_is_read_back_in_bits() {
        let u = UdpSocket::bind("127.0.0.1:0").expect("udp");
        let before = max_pacing_rate(&u).expect("readable");
        set_max_pacing_rate(&u, 80_000_000).expect("set");
        assert_eq!(max_pacing_rate(&u), Some(80_000_000));
        assert_ne!(before, 80_000_000);
    }
}
