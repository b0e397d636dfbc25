//! Socket options and facts: buffer sizes, maximum segment size, congestion control,
//! receive low-water mark, path MTU, and the kernel's TCP view (`TCP_INFO`).
//!
//! Linux is implemented with real system calls. Other Unix systems get fallbacks: socket
//! buffer sizes go through `socket2` (portable), and everything else answers "unsupported".
//! Sockets are passed as `&impl AsFd`, so both [`std::net::TcpStream`] and `socket2::Socket`
//! work.

use std::io;
use std::os::fd::AsFd;

use super::{context, invalid_input};

/// What the kernel actually granted on a socket (read with `getsockopt` after
/// any `setsockopt`). A field is `None` when the OS or the socket type cannot
/// report it (for example, TCP fields on a UDP socket).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocketFacts {
    /// `SO_SNDBUF` as read back. Linux reports twice the requested value (the
    /// kernel reserves the extra half for bookkeeping), capped by
    /// `net.core.wmem_max`.
    pub send_buffer_bytes: Option<u64>,
    /// `SO_RCVBUF` as read back (doubled on Linux, capped by `net.core.rmem_max`).
    pub recv_buffer_bytes: Option<u64>,
    /// `TCP_MAXSEG` as read back: the current maximum segment size once
    /// connected, the requested or default value before.
    pub mss_bytes: Option<u32>,
    /// `TCP_CONGESTION` as read back: the congestion control algorithm in use.
    pub congestion: Option<String>,
    /// `TCP_NODELAY` as read back.
    pub no_delay: Option<bool>,
    /// The type-of-service byte as read back (`qos::tos`); filled only where a test set one.
    pub tos: Option<u8>,
    /// `SO_MAX_PACING_RATE` as read back, bits per second; filled only where a test set one.
    pub max_pacing_rate_bps: Option<u64>,
    /// Whether the socket never fragments (`qos::dont_fragment`); filled only where a test
    /// asked for it.
    pub dont_fragment: Option<bool>,
}

#[cfg(test)]
/// The window scale factors of a connection (RFC 7323), as `TCP_INFO` reports them: windows
/// are announced in units of `1 << shift` bytes, so at most `65535 << shift`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowScales {
    /// Applied to the windows the peer announces (`tcpi_snd_wscale`).
    pub send: u8,
    /// Applied to the windows this end announces (`tcpi_rcv_wscale`).
    pub receive: u8,
}

/// Reads the buffer sizes, maximum segment size and congestion control
/// algorithm of `sock`. Options the OS or socket cannot report are `None`.
pub fn socket_facts(sock: &impl AsFd) -> SocketFacts {
    imp::socket_facts(sock.as_fd())
}

/// Sets `SO_SNDBUF` and then `SO_RCVBUF` to `bytes` each. The kernel may grant
/// a different amount; read it back with [`socket_facts`]. An error message
/// names the option that failed.
pub fn set_buffers(sock: &impl AsFd, bytes: u64) -> io::Result<()> {
    imp::set_buffers(sock.as_fd(), bytes)
}

/// Sets `TCP_MAXSEG`, the largest segment the socket will send. Call it before
/// `connect` for it to take effect. Linux accepts values from 88 to 32767.
pub fn set_mss(sock: &impl AsFd, mss: u32) -> io::Result<()> {
    imp::set_mss(sock.as_fd(), mss)
}

/// Sets `TCP_CONGESTION` to the algorithm called `name`.
///
/// When the kernel refuses, the error message names the algorithm and lists
/// what this host offers (from `/proc/sys/net/ipv4/tcp_available_congestion_control`),
/// e.g. `congestion control "foo" is not available on this host (available: reno
/// bbr cubic); load its module or pick one of those`.
pub fn set_congestion(sock: &impl AsFd, name: &str) -> io::Result<()> {
    imp::set_congestion(sock.as_fd(), name)
}

/// The congestion control algorithms the kernel offers, in the kernel's order;
/// `None` when the OS does not say.
pub fn available_congestion() -> Option<Vec<String>> {
    imp::available_congestion()
}

/// Waits up to `timeout` until `sock` is readable or writable (poll(2)); returns
/// (readable, writable). Errors and hang-ups count as both, so the next call reports them.
pub fn wait_readable_or_writable(
    sock: &impl AsFd,
    timeout: std::time::Duration,
) -> io::Result<(bool, bool)> {
    poll_one(sock, libc::POLLIN | libc::POLLOUT, timeout)
}

/// Waits up to `timeout` until `sock` is writable (an error or hang-up counts as writable).
pub fn wait_writable(sock: &impl AsFd, timeout: std::time::Duration) -> io::Result<bool> {
    poll_one(sock, libc::POLLOUT, timeout).map(|(_, writable)| writable)
}

/// Waits up to `timeout`, to the nanosecond (ppoll(2)), until `sock` is readable; an error or
/// hang-up counts as readable, so the next read reports it. Unlike a read timeout
/// (`SO_RCVTIMEO`, which the kernel counts in scheduler ticks: 4 ms steps at HZ=250, rounded
/// up), ppoll's timer is precise, and never ends early: the control pump waits this way for a
/// deadline, an open-loop request stream for its next request.
pub fn wait_readable(sock: &impl AsFd, timeout: std::time::Duration) -> io::Result<bool> {
    poll_one(sock, libc::POLLIN, timeout).map(|(readable, _)| readable)
}

/// ppoll(2) on one socket for `events`: (readable, writable) as asked, errors as both.
fn poll_one(
    sock: &impl AsFd,
    events: libc::c_short,
    timeout: std::time::Duration,
) -> io::Result<(bool, bool)> {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd { fd: sock.as_fd().as_raw_fd(), events, revents: 0 };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: one valid pollfd and one valid timespec for the duration of the call; no signal
    // mask is passed (null), so the thread's mask is unchanged.
    let n = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok((false, false)) } else { Err(e) };
    }
    let broken = p.revents & (libc::POLLERR | libc::POLLHUP) != 0;
    let asked = |flag| events & flag != 0 && (broken || p.revents & flag != 0);
    Ok((asked(libc::POLLIN), asked(libc::POLLOUT)))
}

/// Sets `SO_RCVLOWAT`: a blocked reader is woken only once `bytes` are queued (or at
/// end-of-stream, error or timeout). Batching wake-ups this way is what lets a receiver keep
/// up on fast paths (see docs/PERFORMANCE.md). Linux caps the value at half the receive
/// buffer, so it cannot stall a flow with a small window.
pub fn set_recv_lowat(sock: &impl AsFd, bytes: u32) -> io::Result<()> {
    imp::set_recv_lowat(sock.as_fd(), bytes)
}

/// Sets `TCP_NOTSENT_LOWAT`: a TCP sender blocks (and polls unwritable) once `bytes` it wrote
/// wait in the socket unsent, and is woken when that drops below half. Unset, a socket has
/// the system's `net.ipv4.tcp_notsent_lowat` (unlimited unless changed); see
/// `traffic::unsent` for why linerate sets it.
pub fn set_notsent_lowat(sock: &impl AsFd, bytes: u32) -> io::Result<()> {
    imp::set_notsent_lowat(sock.as_fd(), bytes)
}

/// The path MTU the kernel holds for a connected socket's route (IP_MTU / IPV6_MTU), in
/// bytes; None where the OS does not say.
pub fn path_mtu(sock: &impl AsFd, ipv6: bool) -> Option<u32> {
    imp::path_mtu(sock.as_fd(), ipv6)
}

/// Sets the don't-fragment bit on a UDP socket and makes the kernel ignore its cached path
/// MTU (`IP_PMTUDISC_PROBE` / `IPV6_PMTUDISC_PROBE`), so sends up to the interface MTU leave
/// whole and a router that cannot forward them drops them: what a path-MTU probe needs.
pub fn set_pmtu_probe(sock: &impl AsFd, ipv6: bool) -> io::Result<()> {
    imp::set_pmtu_probe(sock.as_fd(), ipv6)
}

/// Whether a datagram was refused for being larger than the path lets through (`EMSGSIZE`,
/// on send or, after an ICMP "too big", on receive): a path-MTU probe's answer, not a fault.
pub fn too_big(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EMSGSIZE)
}

#[cfg(test)]
/// The window scales a connected TCP socket agreed on in its handshake; None where unsupported,
/// not TCP, or not connected.
pub fn window_scales(sock: &impl AsFd) -> Option<WindowScales> {
    imp::window_scales(sock.as_fd())
}

#[cfg(test)]
/// Cumulative retransmitted segments of a TCP socket over its lifetime
/// (`tcpi_total_retrans` from `TCP_INFO`); `None` when unsupported or when
/// `sock` is not a TCP socket.
pub fn tcp_retransmits(sock: &impl AsFd) -> Option<u64> {
    imp::tcp_retransmits(sock.as_fd())
}

/// TCP's view of a connection from `TCP_INFO`; None where unsupported or not TCP. Fields the
/// running kernel did not fill (older kernels return a shorter struct) are None.
pub fn tcp_internals(sock: &impl AsFd) -> Option<linerate_proto::TcpInternals> {
    imp::tcp_internals(sock.as_fd())
}

/// The kernel's TCP memory pressure mark (`net.ipv4.tcp_mem`, second value) in bytes: above
/// it the kernel squeezes every TCP socket's buffers, towards the third value it drops
/// segments. None when the OS has no such setting or it cannot be read.
pub fn tcp_memory_pressure_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem").ok()?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        tcp_mem_pressure(&text, u64::try_from(page).ok()?)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The pressure mark in bytes from `tcp_mem`'s text (`low pressure high`, in pages of
/// `page` bytes).
pub fn tcp_mem_pressure(text: &str, page: u64) -> Option<u64> {
    let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    pages.checked_mul(page).filter(|b| *b > 0)
}

#[cfg(target_os = "linux")]
mod imp {
    #[cfg(test)]
    use super::WindowScales;
    use super::{SocketFacts, context, invalid_input};
    use std::ffi::c_int;
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd};

    /// Longest congestion control name plus its NUL (`TCP_CA_NAME_MAX`).
    const CA_NAME_MAX: usize = 16;
    /// Where the kernel lists the congestion control algorithms it has loaded.
    const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
    /// Where the kernel lists the algorithms unprivileged processes may pick.
    const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

    /// Types for which every bit pattern is a valid value, so that `getsockopt`
    /// may write arbitrary bytes into them.
    ///
    /// # Safety
    /// Implementors must be plain data: no references, pointers with
    /// invariants, enums, `bool`s or other types with invalid bit patterns.
    unsafe trait PlainData: Copy {}
    // SAFETY: every bit pattern is a valid integer.
    unsafe impl PlainData for c_int {}
    // SAFETY: every bit pattern is a valid byte array.
    unsafe impl<const N: usize> PlainData for [u8; N] {}
    // SAFETY: `tcp_info` consists of integer fields only.
    unsafe impl PlainData for libc::tcp_info {}

    /// `getsockopt(2)` into `out`; returns the number of bytes the kernel wrote.
    fn getsockopt<T: PlainData>(
        fd: BorrowedFd<'_>,
        level: c_int,
        name: c_int,
        out: &mut T,
    ) -> io::Result<usize> {
        let mut len = libc::socklen_t::try_from(size_of::<T>())
            .map_err(|_| invalid_input("getsockopt buffer too large"))?;
        // SAFETY: `out` is an exclusively borrowed `T` of `len` bytes and
        // `PlainData` guarantees any bytes the kernel writes form a valid `T`;
        // `fd` is a live descriptor for the duration of the call.
        let rc = unsafe {
            libc::getsockopt(fd.as_raw_fd(), level, name, (out as *mut T).cast(), &mut len)
        };
        if rc == -1 {
            return Err(io::Error::last_os_error());
        }
        // socklen_t is 32 bits and usize at least 32 bits on Linux.
        Ok((len as usize).min(size_of::<T>()))
    }

    /// `getsockopt(2)` for an option whose value is a C `int`.
    fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> io::Result<c_int> {
        let mut value: c_int = 0;
        match getsockopt(fd, level, name, &mut value)? {
            n if n == size_of::<c_int>() => Ok(value),
            n => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("getsockopt returned {n} bytes for an int option"),
            )),
        }
    }

    /// `setsockopt(2)` with `value` as the raw option bytes.
    fn setsockopt_bytes(
        fd: BorrowedFd<'_>,
        level: c_int,
        name: c_int,
        value: &[u8],
    ) -> io::Result<()> {
        let len = libc::socklen_t::try_from(value.len())
            .map_err(|_| invalid_input("setsockopt value too large"))?;
        // SAFETY: `value` is a live slice of exactly `len` readable bytes and
        // the kernel only reads from it; `fd` is live for the call.
        let rc =
            unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, value.as_ptr().cast(), len) };
        if rc == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `setsockopt(2)` for an option whose value is a C `int`.
    fn setsockopt_int(
        fd: BorrowedFd<'_>,
        level: c_int,
        name: c_int,
        value: c_int,
    ) -> io::Result<()> {
        setsockopt_bytes(fd, level, name, &value.to_ne_bytes())
    }

    pub(super) fn socket_facts(fd: BorrowedFd<'_>) -> SocketFacts {
        let int = |level, name| getsockopt_int(fd, level, name).ok();
        SocketFacts {
            send_buffer_bytes: int(libc::SOL_SOCKET, libc::SO_SNDBUF)
                .and_then(|v| u64::try_from(v).ok()),
            recv_buffer_bytes: int(libc::SOL_SOCKET, libc::SO_RCVBUF)
                .and_then(|v| u64::try_from(v).ok()),
            mss_bytes: int(libc::IPPROTO_TCP, libc::TCP_MAXSEG).and_then(|v| u32::try_from(v).ok()),
            congestion: congestion(fd),
            no_delay: int(libc::IPPROTO_TCP, libc::TCP_NODELAY).map(|v| v != 0),
            ..SocketFacts::default()
        }
    }

    /// Reads `TCP_CONGESTION`; `None` for non-TCP sockets.
    fn congestion(fd: BorrowedFd<'_>) -> Option<String> {
        let mut buf = [0u8; CA_NAME_MAX];
        let n = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut buf).ok()?;
        let raw = &buf[..n];
        let name = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
        if name.is_empty() {
            return None;
        }
        String::from_utf8(name.to_vec()).ok()
    }

    pub(super) fn set_buffers(fd: BorrowedFd<'_>, bytes: u64) -> io::Result<()> {
        let value = c_int::try_from(bytes).map_err(|_| {
            invalid_input(format!(
                "setting SO_SNDBUF/SO_RCVBUF to {bytes} bytes: more than the largest \
                 possible value ({} bytes)",
                c_int::MAX
            ))
        })?;
        for (name, label) in [(libc::SO_SNDBUF, "SO_SNDBUF"), (libc::SO_RCVBUF, "SO_RCVBUF")] {
            setsockopt_int(fd, libc::SOL_SOCKET, name, value)
                .map_err(|e| context(e, format_args!("setting {label} to {bytes} bytes")))?;
        }
        Ok(())
    }

    pub(super) fn path_mtu(fd: BorrowedFd<'_>, ipv6: bool) -> Option<u32> {
        let v = if ipv6 {
            getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU)
        } else {
            getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU)
        };
        v.ok().and_then(|m| u32::try_from(m).ok()).filter(|m| *m > 0)
    }

    pub(super) fn set_pmtu_probe(fd: BorrowedFd<'_>, ipv6: bool) -> io::Result<()> {
        let r = if ipv6 {
            setsockopt_int(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IPV6_PMTUDISC_PROBE,
            )
            .and_then(|_| setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1))
        } else {
            setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE)
        };
        r.map_err(|e| context(e, format_args!("setting the don't-fragment probe mode")))
    }

    pub(super) fn set_recv_lowat(fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
        let value = c_int::try_from(bytes.max(1)).unwrap_or(c_int::MAX);
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, value)
            .map_err(|e| context(e, format_args!("setting SO_RCVLOWAT to {bytes} bytes")))
    }

    pub(super) fn set_notsent_lowat(fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
        // The kernel takes the value as an unsigned int: u32::MAX is its "no limit".
        let value = bytes as c_int;
        setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, value)
            .map_err(|e| context(e, format_args!("setting TCP_NOTSENT_LOWAT to {bytes} bytes")))
    }

    pub(super) fn set_mss(fd: BorrowedFd<'_>, mss: u32) -> io::Result<()> {
        let attempt = c_int::try_from(mss)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
            .and_then(|value| setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, value));
        attempt.map_err(|e| context(e, format_args!("setting TCP_MAXSEG to {mss} bytes")))
    }

    pub(super) fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
        // The kernel silently truncates longer names, so refuse them here: no
        // algorithm can have such a name.
        let plausible = !name.is_empty() && name.len() < CA_NAME_MAX && !name.contains('\0');
        let attempt = if plausible {
            setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes())
        } else {
            Err(io::Error::from_raw_os_error(libc::ENOENT))
        };
        attempt.map_err(|e| congestion_error(name, e))
    }

    /// Explains why the kernel refused congestion control `name`.
    fn congestion_error(name: &str, err: io::Error) -> io::Error {
        let list =
            |found: Option<Vec<String>>| found.map_or_else(|| "unknown".into(), |v| v.join(" "));
        let available = list(available_congestion());
        match err.raw_os_error() {
            Some(libc::ENOENT) => io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "congestion control {name:?} is not available on this host \
                     (available: {available}); load its module or pick one of those"
                ),
            ),
            Some(libc::EPERM) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "congestion control {name:?} is available but not allowed for \
                     unprivileged processes (allowed: {}); run with CAP_NET_ADMIN or \
                     add it to net.ipv4.tcp_allowed_congestion_control",
                    list(read_word_list(ALLOWED_CC))
                ),
            ),
            _ => io::Error::new(
                err.kind(),
                format!("setting congestion control {name:?}: {err} (available: {available})"),
            ),
        }
    }

    /// Reads a whitespace-separated list from a `/proc` file; `None` if the file
    /// cannot be read or is empty.
    fn read_word_list(path: &str) -> Option<Vec<String>> {
        let text = std::fs::read_to_string(path).ok()?;
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        (!words.is_empty()).then_some(words)
    }

    pub(super) fn available_congestion() -> Option<Vec<String>> {
        read_word_list(AVAILABLE_CC)
    }

    pub(super) fn tcp_internals(fd: BorrowedFd<'_>) -> Option<linerate_proto::TcpInternals> {
        // Read as bytes: the kernel's eighth byte holds bitfields that libc's struct leaves as
        // padding (`tcpi_delivery_rate_app_limited`, Linux 4.9+).
        let mut raw = [0u8; std::mem::size_of::<libc::tcp_info>()];
        let written = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut raw).ok()?;
        // SAFETY: `raw` holds size_of::<tcp_info>() initialised bytes, and `tcp_info` has
        // integer fields only, so any bytes form a valid value; read unaligned from the array.
        let i: libc::tcp_info = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
        from_tcp_info(&i, written, raw[APP_LIMITED_BYTE])
    }

    /// Where the kernel's `tcp_info` keeps `tcpi_delivery_rate_app_limited` (bit 0; the
    /// fast-open failure bits above it): the byte after the window scales.
    const APP_LIMITED_BYTE: usize = std::mem::offset_of!(libc::tcp_info, tcpi_snd_rcv_wscale) + 1;

    /// Converts a `tcp_info` of which the kernel wrote the first `written` bytes: fields past
    /// that (absent in older kernels) are None; rates become bits per second.
    pub(super) fn from_tcp_info(
        i: &libc::tcp_info,
        written: usize,
        bits_byte: u8,
    ) -> Option<linerate_proto::TcpInternals> {
        macro_rules! have {
            ($field:ident) => {
                std::mem::offset_of!(libc::tcp_info, $field) + std::mem::size_of_val(&i.$field)
                    <= written
            };
        }
        macro_rules! opt {
            ($field:ident) => {
                have!($field).then_some(i.$field)
            };
        }
        if !have!(tcpi_total_retrans) {
            return None;
        }
        let bits = |v: Option<u64>| v.filter(|v| *v != u64::MAX).map(|v| v.saturating_mul(8));
        Some(linerate_proto::TcpInternals {
            rtt_us: i.tcpi_rtt,
            rttvar_us: i.tcpi_rttvar,
            min_rtt_us: opt!(tcpi_min_rtt),
            cwnd_segments: i.tcpi_snd_cwnd,
            ssthresh_segments: i.tcpi_snd_ssthresh,
            snd_mss_bytes: i.tcpi_snd_mss,
            rcv_mss_bytes: i.tcpi_rcv_mss,
            total_retrans: i.tcpi_total_retrans,
            pacing_rate_bits_per_second: bits(opt!(tcpi_pacing_rate)),
            delivery_rate_bits_per_second: bits(opt!(tcpi_delivery_rate)),
            // The bit came with the delivery rate (4.9): where that is written, so is it.
            delivery_rate_app_limited: have!(tcpi_delivery_rate).then_some(bits_byte & 1 == 1),
            busy_us: opt!(tcpi_busy_time),
            rwnd_limited_us: opt!(tcpi_rwnd_limited),
            sndbuf_limited_us: opt!(tcpi_sndbuf_limited),
            bytes_sent: opt!(tcpi_bytes_sent),
            bytes_retrans: opt!(tcpi_bytes_retrans),
            snd_wnd_bytes: opt!(tcpi_snd_wnd),
            reord_seen: opt!(tcpi_reord_seen),
            pmtu_bytes: Some(i.tcpi_pmtu).filter(|m| *m > 0),
        })
    }

    #[cfg(test)]
    pub(super) fn window_scales(fd: BorrowedFd<'_>) -> Option<WindowScales> {
        // SAFETY: `tcp_info` has integer fields only, so all-zero is a valid value.
        let mut i: libc::tcp_info = unsafe { std::mem::zeroed() };
        let written = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut i).ok()?;
        let end = std::mem::offset_of!(libc::tcp_info, tcpi_snd_rcv_wscale) + 1;
        // Kernel TCP states (include/net/tcp_states.h) without an agreed scale yet (or any more).
        const SYN_SENT: u8 = 2;
        const CLOSE: u8 = 7;
        const LISTEN: u8 = 10;
        let handshaken = !matches!(i.tcpi_state, SYN_SENT | CLOSE | LISTEN);
        // The byte holds two 4-bit fields: the send scale in the low bits.
        let b = i.tcpi_snd_rcv_wscale;
        (written >= end && handshaken).then_some(WindowScales { send: b & 0xf, receive: b >> 4 })
    }

    #[cfg(test)]
    pub(super) fn tcp_retransmits(fd: BorrowedFd<'_>) -> Option<u64> {
        // One reader of TCP_INFO: `tcp_internals` already checks the field was written.
        tcp_internals(fd).map(|t| u64::from(t.total_retrans))
    }
}

/// Other operating systems: portable socket buffer sizes through `socket2`,
/// everything else unsupported.
#[cfg(not(target_os = "linux"))]
mod imp {
    #[cfg(test)]
    use super::WindowScales;
    use super::{SocketFacts, context, invalid_input};
    use socket2::SockRef;
    use std::io;
    use std::os::fd::BorrowedFd;

    /// An [`io::ErrorKind::Unsupported`] error naming what is unsupported.
    fn unsupported(what: std::fmt::Arguments<'_>) -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{what} is not supported on this operating system"),
        )
    }

    pub(super) fn socket_facts(fd: BorrowedFd<'_>) -> SocketFacts {
        let sock = SockRef::from(&fd);
        SocketFacts {
            send_buffer_bytes: sock.send_buffer_size().ok().and_then(|v| u64::try_from(v).ok()),
            recv_buffer_bytes: sock.recv_buffer_size().ok().and_then(|v| u64::try_from(v).ok()),
            mss_bytes: None,
            congestion: None,
            no_delay: sock.nodelay().ok(),
            ..SocketFacts::default()
        }
    }

    #[cfg(test)]
    pub(super) fn window_scales(_fd: BorrowedFd<'_>) -> Option<WindowScales> {
        None
    }

    pub(super) fn set_buffers(fd: BorrowedFd<'_>, bytes: u64) -> io::Result<()> {
        let sock = SockRef::from(&fd);
        let size = usize::try_from(bytes).map_err(|_| {
            invalid_input(format!("setting SO_SNDBUF/SO_RCVBUF to {bytes} bytes: too large"))
        })?;
        sock.set_send_buffer_size(size)
            .map_err(|e| context(e, format_args!("setting SO_SNDBUF to {bytes} bytes")))?;
        sock.set_recv_buffer_size(size)
            .map_err(|e| context(e, format_args!("setting SO_RCVBUF to {bytes} bytes")))
    }

    pub(super) fn path_mtu(_fd: BorrowedFd<'_>, _ipv6: bool) -> Option<u32> {
        None
    }

    pub(super) fn set_pmtu_probe(_fd: BorrowedFd<'_>, _ipv6: bool) -> io::Result<()> {
        Err(unsupported(format_args!("setting the don't-fragment probe mode")))
    }

    pub(super) fn set_recv_lowat(_fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
        Err(unsupported(format_args!("setting SO_RCVLOWAT to {bytes} bytes")))
    }

    pub(super) fn set_notsent_lowat(_fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
        Err(unsupported(format_args!("setting TCP_NOTSENT_LOWAT to {bytes} bytes")))
    }

    pub(super) fn tcp_internals(_fd: BorrowedFd<'_>) -> Option<linerate_proto::TcpInternals> {
        None
    }

    pub(super) fn set_mss(_fd: BorrowedFd<'_>, mss: u32) -> io::Result<()> {
        Err(unsupported(format_args!("setting TCP_MAXSEG to {mss} bytes")))
    }

    pub(super) fn set_congestion(_fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
        Err(unsupported(format_args!("choosing congestion control {name:?}")))
    }

    pub(super) fn available_congestion() -> Option<Vec<String>> {
        None
    }

    #[cfg(test)]
    pub(super) fn tcp_retransmits(_fd: BorrowedFd<'_>) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::ZeroCopySource;

    #[test]
    fn tcp_mem_pressure_is_the_second_value_in_pages() {
        assert_eq!(super::tcp_mem_pressure("287898\t383866\t575796\n", 4096), Some(1_572_315_136));
        assert_eq!(super::tcp_mem_pressure("1 2", 65536), Some(131_072));
        for bad in ["", "287898", "1 x 3", "1 0 3"] {
            assert_eq!(super::tcp_mem_pressure(bad, 4096), None, "{bad:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_kernel_reports_a_tcp_memory_pressure_mark() {
        assert!(super::tcp_memory_pressure_bytes().is_some_and(|b| b >= 1 << 20));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn tcp_info_fixture_full_and_truncated() {
        // SAFETY: `tcp_info` has integer fields only, so all-zero is a valid value.
        let mut i: libc::tcp_info = unsafe { std::mem::zeroed() };
        i.tcpi_rtt = 2178;
        i.tcpi_rttvar = 3;
        i.tcpi_snd_cwnd = 252;
        i.tcpi_snd_mss = 1448;
        i.tcpi_total_retrans = 7;
        i.tcpi_pacing_rate = 74_000_000; // bytes per second
        i.tcpi_delivery_rate = 59_750_000;
        i.tcpi_busy_time = 3_000_000;
        i.tcpi_rwnd_limited = 12_000;
        i.tcpi_snd_wnd = 65_535;
        let full =
            super::imp::from_tcp_info(&i, std::mem::size_of::<libc::tcp_info>(), 1).expect("full");
        assert_eq!((full.rtt_us, full.rttvar_us, full.cwnd_segments), (2178, 3, 252));
        assert_eq!(full.pacing_rate_bits_per_second, Some(592_000_000));
        assert_eq!(full.delivery_rate_bits_per_second, Some(478_000_000));
        assert_eq!(full.busy_us, Some(3_000_000));
        assert_eq!(full.rwnd_limited_us, Some(12_000));
        assert_eq!(full.snd_wnd_bytes, Some(65_535));
        assert_eq!(full.delivery_rate_app_limited, Some(true), "bit 0 of the eighth byte");
        let busy = std::mem::size_of::<libc::tcp_info>();
        let fastopen_bits = super::imp::from_tcp_info(&i, busy, 0b110).expect("full");
        assert_eq!(fastopen_bits.delivery_rate_app_limited, Some(false));
        // A kernel that stops after tcpi_total_retrans (before 3.15): no rates, no timers.
        let old = std::mem::offset_of!(libc::tcp_info, tcpi_total_retrans) + 4;
        let short = super::imp::from_tcp_info(&i, old, 1).expect("short");
        assert_eq!(short.total_retrans, 7);
        assert_eq!(
            (short.pacing_rate_bits_per_second, short.busy_us, short.snd_wnd_bytes),
            (None, None, None)
        );
        // Too short to hold even the basics.
        assert_eq!(super::imp::from_tcp_info(&i, 8, 0), None);
        // "Unlimited" pacing is reported as all ones: not a rate.
        i.tcpi_pacing_rate = u64::MAX;
        let unlimited =
            super::imp::from_tcp_info(&i, std::mem::size_of::<libc::tcp_info>(), 1).expect("full");
        assert_eq!(unlimited.pacing_rate_bits_per_second, None);
    }
    use super::*;

    #[test]
    fn zero_copy_source_rejects_zero_length() {
        let err = ZeroCopySource::new(0, b"linerate").expect_err("zero length must fail");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("at least 1 byte"), "{err}");
    }

    #[test]
    fn zero_copy_source_rejects_empty_pattern() {
        let err = ZeroCopySource::new(8, b"").expect_err("empty pattern must fail");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn zero_copy_source_rejects_partial_pattern() {
        let err = ZeroCopySource::new(10, b"linerate").expect_err("10 is not a multiple of 8");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("multiple"), "{err}");
    }

    /// Fallback behaviour: unsupported capabilities answer with typed "unsupported".
    #[cfg(not(target_os = "linux"))]
    mod fallback {
        use super::super::*;
        use crate::sys::ZeroCopySource;
        use std::net::{TcpListener, TcpStream};

        #[test]
        fn unsupported_capabilities_say_so() {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("local addr");
            let client = TcpStream::connect(addr).expect("connect");
            let mss = set_mss(&client, 1000).expect_err("unsupported");
            assert_eq!(mss.kind(), io::ErrorKind::Unsupported);
            assert_eq!(tcp_retransmits(&client), None);
            assert_eq!(available_congestion(), None);
            assert!(!ZeroCopySource::is_supported());
            let zc = ZeroCopySource::new(8, b"linerate").expect_err("unsupported");
            assert_eq!(zc.kind(), io::ErrorKind::Unsupported);
        }
    }

    /// Linux behaviour, over loopback only.
    #[cfg(target_os = "linux")]
    mod linux {
        use super::super::*;
        use crate::sys::ZeroCopySource;
        use socket2::{Domain, Protocol, Socket, Type};
        use std::io::Read;
        use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
        use std::thread;

        const PATTERN: &[u8] = b"linerate";
        const MIB: usize = 1024 * 1024;

        fn listener() -> TcpListener {
            TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0")
        }

        fn addr_of(listener: &TcpListener) -> SocketAddr {
            listener.local_addr().expect("local addr")
        }

        /// A connected loopback pair: (client, server side).
        fn pair() -> (TcpStream, TcpStream) {
            let listener = listener();
            let client = TcpStream::connect(addr_of(&listener)).expect("connect");
            let (server, _) = listener.accept().expect("accept");
            (client, server)
        }

        fn sysctl_u64(path: &str) -> u64 {
            std::fs::read_to_string(path)
                .expect("read sysctl")
                .trim()
                .parse()
                .expect("sysctl is a number")
        }

        /// Reads `stream` to EOF, checking byte i == PATTERN[i % PATTERN.len()];
        /// returns the number of bytes read.
        fn read_pattern(mut stream: TcpStream) -> u64 {
            let mut buf = vec![0u8; 256 * 1024];
            let mut pos: u64 = 0;
            loop {
                let n = stream.read(&mut buf).expect("read");
                if n == 0 {
                    return pos;
                }
                for &byte in &buf[..n] {
                    let want = PATTERN[(pos % PATTERN.len() as u64) as usize];
                    assert_eq!(byte, want, "stream byte {pos} breaks the pattern");
                    pos += 1;
                }
            }
        }

        #[test]
        fn set_buffers_is_read_back_doubled() {
            let (client, _server) = pair();
            let want: u64 = 128 * 1024;
            set_buffers(&client, want).expect("set buffers");
            let facts = socket_facts(&client);
            // Linux caps the request at the sysctl maximum, then doubles it.
            let wmem_max = sysctl_u64("/proc/sys/net/core/wmem_max");
            let rmem_max = sysctl_u64("/proc/sys/net/core/rmem_max");
            assert_eq!(facts.send_buffer_bytes, Some(2 * want.min(wmem_max)));
            assert_eq!(facts.recv_buffer_bytes, Some(2 * want.min(rmem_max)));
            if wmem_max >= want {
                assert!(facts.send_buffer_bytes >= Some(want));
            }
        }

        #[test]
        fn set_buffers_rejects_impossible_size() {
            let (client, _server) = pair();
            let err = set_buffers(&client, u64::MAX).expect_err("too large");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains("SO_SNDBUF"), "{err}");
        }

        #[test]
        fn set_buffers_error_names_the_option() {
            let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
            set_buffers(&udp, 64 * 1024).expect("udp sockets have buffers too");
            // Provoke an error with a descriptor that is not a socket.
            let file = std::fs::File::open("/proc/self/stat").expect("open file");
            let err = set_buffers(&file, 64 * 1024).expect_err("not a socket");
            assert!(err.to_string().starts_with("setting SO_SNDBUF"), "{err}");
        }

        #[test]
        fn set_mss_before_connect_caps_segment_size() {
            let listener = listener();
            let sock =
                Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
            set_mss(&sock, 1000).expect("set mss");
            sock.connect(&addr_of(&listener).into()).expect("connect");
            let _server = listener.accept().expect("accept");
            let mss = socket_facts(&sock).mss_bytes.expect("mss read back");
            assert!(mss > 0 && mss <= 1000, "mss {mss}");
        }

        #[test]
        fn set_mss_out_of_range_names_the_option() {
            let sock =
                Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
            for bad in [1, u32::MAX] {
                let err = set_mss(&sock, bad).expect_err("out of range");
                assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
                assert!(err.to_string().contains("TCP_MAXSEG"), "{err}");
            }
        }

        #[test]
        fn set_congestion_reno_is_read_back() {
            let (client, _server) = pair();
            set_congestion(&client, "reno").expect("reno is built in");
            assert_eq!(socket_facts(&client).congestion.as_deref(), Some("reno"));
        }

        #[test]
        fn set_congestion_unknown_lists_available() {
            let (client, _server) = pair();
            let before = socket_facts(&client).congestion;
            for name in ["no-such-algo", "an-algorithm-name-far-too-long"] {
                let err = set_congestion(&client, name).expect_err("unknown algorithm");
                let msg = err.to_string();
                assert!(msg.contains(name) && msg.contains("available"), "{msg}");
                assert_eq!(err.kind(), io::ErrorKind::NotFound);
            }
            assert_eq!(socket_facts(&client).congestion, before);
        }

        #[test]
        fn available_congestion_lists_a_standard_algorithm() {
            let algos = available_congestion().expect("Linux lists algorithms");
            assert!(algos.iter().any(|a| a == "reno" || a == "cubic"), "{algos:?}");
        }

        #[test]
        fn tcp_retransmits_on_connected_socket() {
            let (client, server) = pair();
            assert!(tcp_retransmits(&client).is_some());
            assert!(tcp_retransmits(&server).is_some());
            let i = tcp_internals(&client).expect("TCP_INFO on a connected socket");
            assert!(i.snd_mss_bytes > 0 && i.cwnd_segments > 0, "{i:?}");
            assert!(i.busy_us.is_some() && i.bytes_sent.is_some(), "kernel 4.19+ fields: {i:?}");
            // An idle connection's sender has offered nothing: application-limited.
            assert_eq!(i.delivery_rate_app_limited, Some(true), "{i:?}");
        }

        #[test]
        fn udp_socket_has_no_tcp_facts() {
            let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
            let facts = socket_facts(&udp);
            assert!(facts.send_buffer_bytes.is_some() && facts.recv_buffer_bytes.is_some());
            assert_eq!((facts.mss_bytes, facts.congestion), (None, None));
            assert_eq!(tcp_retransmits(&udp), None);
            assert_eq!(tcp_internals(&udp), None);
        }

        #[test]
        fn zero_copy_is_supported() {
            assert!(ZeroCopySource::is_supported());
        }

        #[test]
        fn zero_copy_send_starts_at_file_start() {
            let src = ZeroCopySource::new(64 * PATTERN.len(), PATTERN).expect("memfd");
            let (client, server) = pair();
            let reader = thread::spawn(move || read_pattern(server));
            assert_eq!(src.send(&client, 0).expect("empty send"), 0);
            let n = src.send(&client, usize::MAX).expect("sendfile");
            assert!(n > 0 && n <= 64 * PATTERN.len());
            drop(client);
            assert_eq!(reader.join().expect("reader thread"), n as u64);
        }

        #[test]
        fn zero_copy_full_socket_would_block() {
            let src = ZeroCopySource::new(MIB, PATTERN).expect("memfd");
            let (client, server) = pair();
            set_buffers(&server, 4096).expect("small receive buffer");
            set_buffers(&client, 4096).expect("small send buffer");
            client.set_nonblocking(true).expect("nonblocking");
            let mut sent: u64 = 0;
            for _ in 0..100_000 {
                match src.send(&client, MIB) {
                    Ok(n) => sent += n as u64,
                    Err(e) => {
                        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
                        return;
                    }
                }
            }
            panic!("socket never filled after {sent} bytes");
        }
    }
}
