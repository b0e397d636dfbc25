//! The UDP fast-path system calls: batched send and receive (`sendmmsg`/`recvmmsg`),
//! segmentation offload on both ends (`UDP_SEGMENT` "GSO", `UDP_GRO`), the socket's kernel
//! drop counter (`SO_RXQ_OVFL`, `SO_MEMINFO`) and forced socket buffer sizes.
//!
//! Why these: one `send()` per datagram costs ~4 µs of stack traversal on this project's
//! machines (≈ 230 k datagrams/s, measured in a baseline study); `sendmmsg` saves the syscall
//! entry (+30 %), GSO traverses the stack once per 64 datagrams (×6.4 at 64 bytes).
//! The drop counter is how linerate tells "the receiving socket's buffer overflowed" (a host
//! problem, fixed with `-w`) apart from loss on the path.
//!
//! Kernel limits (Linux `net/ipv4/udp.c`), which callers must respect for [`send_gso`]:
//! * at most `UDP_MAX_SEGMENTS` segments per call: 64 since GSO appeared (4.18), 128 since a
//!   2024 change (this project's 6.18 kernels accept 128); [`GSO_MAX_SEGMENTS`] is the portable
//!   64. More gives `EINVAL`.
//! * the whole buffer is one UDP datagram before segmentation, so at most 65 507 payload bytes
//!   over IPv4 (65 535 minus the 20-byte IP and 8-byte UDP headers) ([`GSO_MAX_BYTES`]);
//!   more gives `EMSGSIZE`.
//! * a segment plus headers must fit the route's MTU (`EINVAL` otherwise), and the egress
//!   device must offload checksums (`EIO` otherwise): callers fall back to [`send_batch`].
//!   All segments have the given size except the last, which may be shorter.
//!
//! On loopback a GSO "super-datagram" is delivered unsegmented to a socket with `UDP_GRO`, so
//! GSO+GRO over `lo` measures no per-packet work at all: reports must say which was used.
//!
//! Linux is implemented with libc. Other Unix systems get [`portable`]'s plain `send`/`recv`,
//! one datagram per call, no offloads and no drop counter ("unsupported", never a made-up
//! figure). The portable module is compiled and tested on Linux too.
//!
//! What this module must not do: print, decide policy (sizes, retries, fallbacks are the
//! caller's), keep global state or start threads.

use std::io;
use std::os::fd::AsFd;

/// Most datagrams one [`send_batch`] or [`recv_batch`] call handles; more are left for the
/// next call.
pub const MAX_BATCH: usize = 64;
/// Most segments per [`send_gso`] call on every kernel with GSO (see the module docs).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Most payload bytes per [`send_gso`] call (one IPv4 UDP datagram before segmentation).
pub const GSO_MAX_BYTES: usize = 65_507;

/// What the kernel said about one received message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes placed in the buffer.
    pub len: usize,
    /// With `UDP_GRO` enabled: the message holds several datagrams of this size coalesced
    /// (the last may be shorter). None: the message is one datagram.
    pub gro_segment: Option<u16>,
    /// With the drop counter enabled: the socket's cumulative kernel drop count when this
    /// message was queued. The kernel attaches it only once it is non-zero, so None means
    /// "no drops yet" on a socket where [`enable_drop_counter`] succeeded.
    pub drops: Option<u32>,
    /// The message was longer than its buffer and was cut (`MSG_TRUNC`).
    pub truncated: bool,
}

/// Sends each of `datagrams` (at most [`MAX_BATCH`]) as one datagram on a connected socket,
/// with one `sendmmsg` call. Returns how many went (fewer when the socket buffer filled or
/// an error stopped the batch after the first); an error only when none went.
/// `EAGAIN` (an expired `SO_SNDTIMEO`) comes back as [`io::ErrorKind::WouldBlock`].
pub fn send_batch(sock: &impl AsFd, datagrams: &[&[u8]]) -> io::Result<usize> {
    if datagrams.is_empty() {
        return Ok(0);
    }
    imp::send_batch(sock.as_fd(), &datagrams[..datagrams.len().min(MAX_BATCH)])
}

/// Whether the kernel knows `UDP_SEGMENT` (probed by setting the socket's default segment
/// size to 0, which means "off"). The egress device may still refuse at send time (`EIO`).
pub fn gso_supported(sock: &impl AsFd) -> bool {
    imp::gso_supported(sock.as_fd())
}

/// Sends `buf` as datagrams of `segment` bytes (the last may be shorter) with one `sendmsg`
/// carrying a `UDP_SEGMENT` control message. See the module docs for the limits. Returns the
/// bytes sent (all of `buf`; UDP sends are all or nothing).
pub fn send_gso(sock: &impl AsFd, buf: &[u8], segment: u16) -> io::Result<usize> {
    if segment == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "GSO segment size of 0"));
    }
    imp::send_gso(sock.as_fd(), buf, segment)
}

/// Receives up to `min(bufs.len(), out.len(), MAX_BATCH)` messages with one `recvmmsg`: waits
/// (up to the socket's `SO_RCVTIMEO`) for the first, then takes what is already queued.
/// Returns how many messages were received; `out[i]` describes `bufs[i]`. A timeout comes
/// back as [`io::ErrorKind::WouldBlock`] (or `TimedOut`).
pub fn recv_batch(
    sock: &impl AsFd,
    bufs: &mut [Vec<u8>],
    out: &mut [RecvMeta],
) -> io::Result<usize> {
    let n = bufs.len().min(out.len()).min(MAX_BATCH);
    if n == 0 {
        return Ok(0);
    }
    imp::recv_batch(sock.as_fd(), &mut bufs[..n], &mut out[..n])
}

/// Asks the kernel to coalesce arriving datagrams (`UDP_GRO`); see [`RecvMeta::gro_segment`].
/// Receive buffers must then hold 64 KiB. False where unsupported.
pub fn enable_gro(sock: &impl AsFd) -> bool {
    imp::enable_gro(sock.as_fd())
}

/// Asks the kernel to attach its drop counter to received messages (`SO_RXQ_OVFL`); see
/// [`RecvMeta::drops`]. False where unsupported.
pub fn enable_drop_counter(sock: &impl AsFd) -> bool {
    imp::enable_drop_counter(sock.as_fd())
}

/// The socket's cumulative kernel drop count (`SO_MEMINFO`, Linux 4.13+): packets the
/// kernel discarded for this socket, mostly because its receive buffer was full. Unlike
/// [`RecvMeta::drops`] this also covers drops after the last datagram was queued. None where
/// unsupported.
///
/// The kernel counts packets as it queues them, so on a socket with `UDP_GRO` one drop can
/// be a whole coalesced super-datagram: measured over loopback with 1472-byte datagrams in
/// 44-segment GSO sends, every drop stood for exactly 44 lost datagrams (310 drops, 13 640
/// lost). Without GRO one drop is one datagram.
pub fn kernel_drops(sock: &impl AsFd) -> Option<u64> {
    imp::kernel_drops(sock.as_fd())
}

/// Sets the send and receive buffers to `bytes` each and returns what the kernel granted,
/// as read back `(SO_SNDBUF, SO_RCVBUF)`. Tries `SO_SNDBUFFORCE`/`SO_RCVBUFFORCE` first
/// (they pass `net.core.wmem_max`/`rmem_max` but need `CAP_NET_ADMIN`, e.g. root), then the
/// plain options (capped by those sysctls). Linux reads back twice the size in force (the
/// second half is for its bookkeeping).
pub fn set_udp_buffers(sock: &impl AsFd, bytes: u64) -> io::Result<(u64, u64)> {
    let value = i32::try_from(bytes).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("socket buffer of {bytes} bytes"))
    })?;
    imp::set_udp_buffers(sock.as_fd(), value)
}

/// Sets the calling thread's timer slack (how late the kernel may fire its sleeps so that it
/// can group wake-ups; Linux's default is 50 µs) and returns the previous value, or None where
/// unsupported. A pacing sender sets it to 1 ns: on this project's VMs that cut the spread of
/// inter-datagram gaps at 1 Gbit/s by more than half (coefficient of variation 2.2 → 0.95)
/// and removed the pacer's catch-up skips.
pub fn set_timer_slack(nanoseconds: u64) -> Option<u64> {
    imp::set_timer_slack(nanoseconds)
}

/// The kernel had no buffer memory for the datagram (`ENOBUFS`, e.g. a full device queue):
/// nothing was sent, and trying again shortly is the remedy.
pub fn is_no_buffer_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
}

/// [`send_gso`] failed in a way that plain sends would not: the egress device cannot offload
/// checksums (`EIO`), a segment exceeds the route's MTU or the kernel's segment count
/// (`EINVAL`), or the option is unknown (`ENOPROTOOPT`, `EOPNOTSUPP`). Callers fall back to
/// [`send_batch`].
pub fn is_gso_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
    ) || e.kind() == io::ErrorKind::Unsupported
}

/// Plain POSIX `send`/`recv`, one datagram per call: the fallback for systems without the
/// Linux calls. Compiled everywhere so that Linux tests exercise it.
#[cfg_attr(target_os = "linux", allow(dead_code))]
mod portable {
    use super::RecvMeta;
    use socket2::SockRef;
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd};

    pub(super) fn send_batch(fd: BorrowedFd<'_>, datagrams: &[&[u8]]) -> io::Result<usize> {
        for (i, d) in datagrams.iter().enumerate() {
            // SAFETY: `d` is a live slice of `d.len()` readable bytes; the kernel only reads
            // it. `fd` is a live descriptor for the duration of the call.
            let rc = unsafe { libc::send(fd.as_raw_fd(), d.as_ptr().cast(), d.len(), 0) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return if i == 0 { Err(e) } else { Ok(i) };
            }
        }
        Ok(datagrams.len())
    }

    pub(super) fn recv_batch(
        fd: BorrowedFd<'_>,
        bufs: &mut [Vec<u8>],
        out: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let (Some(buf), Some(meta)) = (bufs.first_mut(), out.first_mut()) else { return Ok(0) };
        // SAFETY: `buf` is an exclusively borrowed, initialised buffer of `buf.len()` bytes;
        // the kernel writes at most that many. `fd` is live for the call.
        let rc = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        *meta = RecvMeta { len: rc as usize, ..RecvMeta::default() };
        Ok(1)
    }

    pub(super) fn set_udp_buffers(fd: BorrowedFd<'_>, bytes: i32) -> io::Result<(u64, u64)> {
        let sock = SockRef::from(&fd);
        let size = bytes as usize;
        sock.set_send_buffer_size(size)?;
        sock.set_recv_buffer_size(size)?;
        Ok((sock.send_buffer_size()? as u64, sock.recv_buffer_size()? as u64))
    }
}

/// Other operating systems: the portable calls and no offloads.
#[cfg(not(target_os = "linux"))]
mod imp {
    use super::portable;
    use std::io;
    use std::os::fd::BorrowedFd;

    pub(super) use portable::{recv_batch, send_batch, set_udp_buffers};

    pub(super) fn gso_supported(_fd: BorrowedFd<'_>) -> bool {
        false
    }

    pub(super) fn send_gso(_fd: BorrowedFd<'_>, _buf: &[u8], _segment: u16) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "UDP GSO is Linux-only"))
    }

    pub(super) fn enable_gro(_fd: BorrowedFd<'_>) -> bool {
        false
    }

    pub(super) fn enable_drop_counter(_fd: BorrowedFd<'_>) -> bool {
        false
    }

    pub(super) fn kernel_drops(_fd: BorrowedFd<'_>) -> Option<u64> {
        None
    }

    pub(super) fn set_timer_slack(_nanoseconds: u64) -> Option<u64> {
        None
    }
}

/// Linux: the real system calls (in `udp/linux.rs`).
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as imp;

#[cfg(test)]
mod tests;
