//! Linux implementation of `sys::udp`: `sendmmsg`, `recvmmsg` with control messages,
//! `UDP_SEGMENT`, `UDP_GRO`, `SO_RXQ_OVFL` and `SO_MEMINFO` through libc.
//!
//! Every function is one or two system calls on stack-allocated arrays (no heap allocation
//! per call); it must not retry, print or decide anything.

use super::{MAX_BATCH, RecvMeta};
use std::ffi::{c_int, c_uint, c_void};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr;

/// `SOL_UDP`: the socket option level of UDP (the protocol number).
const SOL_UDP: c_int = 17;
/// `UDP_SEGMENT` (Linux 4.18): GSO segment size, as socket option or control message.
const UDP_SEGMENT: c_int = 103;
/// `UDP_GRO` (Linux 5.0): deliver coalesced datagrams with their segment size.
const UDP_GRO: c_int = 104;
/// `SK_MEMINFO_VARS`: how many `u32`s `SO_MEMINFO` returns (Linux 4.13+).
const SK_MEMINFO_VARS: usize = 9;
/// Control buffer for one received message: room for the `UDP_GRO` and `SO_RXQ_OVFL`
/// messages (24 bytes each on 64-bit) with margin; `u64` elements keep it aligned for
/// `cmsghdr`.
type RecvControl = [u64; 8];

fn setsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
    // SAFETY: `value` is a live `c_int` and the length passed is its size; the kernel only
    // reads it. `fd` is a live descriptor for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            ptr::from_ref(&value).cast(),
            size_of::<c_int>() as libc::socklen_t,
        )
    };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = size_of::<c_int>() as libc::socklen_t;
    // SAFETY: `value` is an exclusively borrowed `c_int` of `len` bytes, and any bit pattern
    // is a valid `c_int`. `fd` is live for the call.
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), level, name, ptr::from_mut(&mut value).cast(), &mut len)
    };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

pub(super) fn send_batch(fd: BorrowedFd<'_>, datagrams: &[&[u8]]) -> io::Result<usize> {
    let n = datagrams.len().min(MAX_BATCH);
    // SAFETY: `iovec` and `mmsghdr` are plain C structs of integers and pointers, for which
    // all-zero bytes (null pointers, zero lengths) are valid values.
    let mut iov: [libc::iovec; MAX_BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    for (slot, d) in iov.iter_mut().zip(datagrams) {
        // The kernel only reads through `iov_base` for a send; the cast to `*mut` is what
        // the C type requires.
        *slot = libc::iovec { iov_base: d.as_ptr().cast_mut().cast(), iov_len: d.len() };
    }
    let iov_base = iov.as_mut_ptr();
    for (i, m) in msgs.iter_mut().enumerate().take(n) {
        // `i < n <= MAX_BATCH`, so the pointer stays inside `iov`.
        m.msg_hdr.msg_iov = iov_base.wrapping_add(i);
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: `msgs[..n]` are initialised headers, each pointing at one `iovec` of `iov` that
    // describes a live, readable slice of `datagrams`; all of them outlive the call. No
    // destination address (connected socket) and no control data. `fd` is live.
    let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as c_uint, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

pub(super) fn gso_supported(fd: BorrowedFd<'_>) -> bool {
    // A segment size of 0 means "no GSO by default": harmless, and refused only by kernels
    // that do not know the option.
    setsockopt_int(fd, SOL_UDP, UDP_SEGMENT, 0).is_ok()
}

pub(super) fn send_gso(fd: BorrowedFd<'_>, buf: &[u8], segment: u16) -> io::Result<usize> {
    let mut control = [0u64; 4];
    let mut iov = libc::iovec { iov_base: buf.as_ptr().cast_mut().cast(), iov_len: buf.len() };
    // SAFETY: `msghdr` is a plain C struct; all-zero is valid (no name, no iovecs).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast::<c_void>();
    // SAFETY: CMSG_SPACE is arithmetic on its argument only.
    let space = unsafe { libc::CMSG_SPACE(size_of::<u16>() as c_uint) } as usize;
    debug_assert!(space <= size_of_val(&control));
    msg.msg_controllen = space as _;
    // SAFETY: `msg.msg_control` points at `control`, which is 8-byte aligned, zeroed and at
    // least CMSG_SPACE(2) bytes long, so CMSG_FIRSTHDR returns a valid, aligned header inside
    // it and CMSG_DATA points at 2 writable bytes after that header. The message then
    // describes one readable iovec (`buf`) and one control message; the kernel only reads
    // them during `sendmsg`, while `buf`, `iov` and `control` are alive. `fd` is live.
    let rc = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::other("control buffer too small for UDP_SEGMENT"));
        }
        (*cmsg).cmsg_level = SOL_UDP;
        (*cmsg).cmsg_type = UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as c_uint) as _;
        ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment);
        libc::sendmsg(fd.as_raw_fd(), &msg, 0)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

pub(super) fn recv_batch(
    fd: BorrowedFd<'_>,
    bufs: &mut [Vec<u8>],
    out: &mut [RecvMeta],
) -> io::Result<usize> {
    let n = bufs.len().min(out.len()).min(MAX_BATCH);
    // SAFETY: `iovec` and `mmsghdr` are plain C structs; all-zero bytes are valid values.
    let mut iov: [libc::iovec; MAX_BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    let mut control = [RecvControl::default(); MAX_BATCH];
    for (slot, b) in iov.iter_mut().zip(bufs.iter_mut()) {
        *slot = libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() };
    }
    let iov_base = iov.as_mut_ptr();
    for (i, (m, c)) in msgs.iter_mut().zip(control.iter_mut()).enumerate().take(n) {
        m.msg_hdr.msg_iov = iov_base.wrapping_add(i);
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = c.as_mut_ptr().cast();
        m.msg_hdr.msg_controllen = size_of::<RecvControl>() as _;
    }
    // SAFETY: `msgs[..n]` each point at one iovec describing an exclusively borrowed,
    // initialised buffer of `bufs` (the kernel writes at most `iov_len` bytes into it) and at
    // a distinct, aligned control buffer of `control` of the stated length. All outlive the
    // call. MSG_WAITFORONE: block (up to SO_RCVTIMEO) for the first message only. No
    // timeout pointer (recvmmsg's own timeout is checked only between messages). `fd` is
    // live.
    let rc = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as c_uint,
            libc::MSG_WAITFORONE as _,
            ptr::null_mut(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let got = (rc as usize).min(n);
    for ((m, meta), b) in msgs.iter().zip(out.iter_mut()).zip(bufs.iter()).take(got) {
        *meta = RecvMeta {
            len: (m.msg_len as usize).min(b.len()),
            truncated: m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            ..RecvMeta::default()
        };
        // SAFETY: the kernel filled `m.msg_hdr`'s control buffer (still alive in `control`)
        // and set `msg_controllen` to the bytes it wrote, at most the buffer's length.
        unsafe { parse_control(&m.msg_hdr, meta) };
    }
    Ok(got)
}

/// Reads the `UDP_GRO` and `SO_RXQ_OVFL` control messages of a received message.
///
/// # Safety
/// `hdr.msg_control` must point at a live buffer, aligned for `cmsghdr`, of at least
/// `hdr.msg_controllen` bytes, as filled in by the kernel.
unsafe fn parse_control(hdr: &libc::msghdr, meta: &mut RecvMeta) {
    // SAFETY: the caller guarantees the control buffer; CMSG_FIRSTHDR/CMSG_NXTHDR return
    // null or a header lying wholly within `msg_controllen` bytes of it, and the kernel
    // wrote each message's data (checked against `cmsg_len` before reading 4 bytes).
    unsafe {
        let data_offset = libc::CMSG_LEN(0) as usize;
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let len = ((*c).cmsg_len as usize).saturating_sub(data_offset);
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if len >= 4 {
                let data = libc::CMSG_DATA(c);
                if level == SOL_UDP && kind == UDP_GRO {
                    let size = ptr::read_unaligned(data.cast::<c_int>());
                    meta.gro_segment = u16::try_from(size).ok().filter(|&s| s > 0);
                } else if level == libc::SOL_SOCKET && kind == libc::SO_RXQ_OVFL {
                    meta.drops = Some(ptr::read_unaligned(data.cast::<u32>()));
                }
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
}

pub(super) fn enable_gro(fd: BorrowedFd<'_>) -> bool {
    setsockopt_int(fd, SOL_UDP, UDP_GRO, 1).is_ok()
}

pub(super) fn enable_drop_counter(fd: BorrowedFd<'_>) -> bool {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok()
}

pub(super) fn kernel_drops(fd: BorrowedFd<'_>) -> Option<u64> {
    let mut mem = [0u32; SK_MEMINFO_VARS];
    let mut len = size_of_val(&mem) as libc::socklen_t;
    // SAFETY: `mem` is an exclusively borrowed array of `len` bytes; any bit pattern is a
    // valid `u32`. `fd` is live for the call.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            mem.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let drops = libc::SK_MEMINFO_DROPS as usize;
    (rc == 0 && len as usize > drops * 4).then(|| u64::from(mem[drops]))
}

pub(super) fn set_udp_buffers(fd: BorrowedFd<'_>, bytes: c_int) -> io::Result<(u64, u64)> {
    let options = [
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
    ];
    let mut granted = [0u64; 2];
    for ((force, plain, name), slot) in options.into_iter().zip(&mut granted) {
        let set = match setsockopt_int(fd, libc::SOL_SOCKET, force, bytes) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                setsockopt_int(fd, libc::SOL_SOCKET, plain, bytes)
            }
            other => other,
        };
        let context = |e: io::Error| io::Error::new(e.kind(), format!("setting {name}: {e}"));
        set.map_err(context)?;
        let got = getsockopt_int(fd, libc::SOL_SOCKET, plain).map_err(context)?;
        *slot = u64::try_from(got).unwrap_or(0);
    }
    Ok((granted[0], granted[1]))
}

pub(super) fn set_timer_slack(nanoseconds: u64) -> Option<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer arguments and only reads the calling
    // thread's slack, which it returns.
    let previous = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
    let previous = u64::try_from(previous).ok()?;
    let value = libc::c_ulong::try_from(nanoseconds.max(1)).ok()?;
    // SAFETY: PR_SET_TIMERSLACK takes the new slack as an integer argument and changes only
    // the calling thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, value) };
    (rc == 0).then_some(previous)
}
