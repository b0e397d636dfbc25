//! epoll(7): one readiness set per data-plane worker (`traffic::pool`).
//!
//! Level-triggered only: a worker that stops short of `EAGAIN` on a socket (to be fair to the
//! others) is told again on its next wait, so it keeps no "still ready" list of its own.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Readable (or end-of-stream, or an error).
pub const READABLE: u32 = libc::EPOLLIN as u32;
/// Writable (or an error).
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;
/// Error or hang-up: always reported, whatever the interest.
pub const BROKEN: u32 = (libc::EPOLLERR | libc::EPOLLHUP) as u32;

/// One readiness event: the token the socket was added with and what it is ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    /// The caller's token.
    pub token: u64,
    /// Bit set of [`READABLE`], [`WRITABLE`], [`BROKEN`].
    pub events: u32,
}

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
    buf: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new instance that returns at most `batch` events per wait.
    pub fn new(batch: usize) -> io::Result<Self> {
        // SAFETY: epoll_create1 takes only flags; a non-negative result is a new fd we own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let empty = libc::epoll_event { events: 0, u64: 0 };
        Ok(Self { fd, buf: vec![empty; batch.max(1)] })
    }

    fn ctl(&self, op: libc::c_int, sock: &impl AsFd, token: u64, interest: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: interest, u64: token };
        let raw = sock.as_fd().as_raw_fd();
        // SAFETY: both fds are open for the duration of the call; `ev` is a valid event.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, raw, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Watches `sock` for `interest` ([`READABLE`], [`WRITABLE`] or both; 0 for errors only).
    pub fn add(&self, sock: &impl AsFd, token: u64, interest: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, sock, token, interest)
    }

    /// Changes what `sock` is watched for.
    pub fn modify(&self, sock: &impl AsFd, token: u64, interest: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, sock, token, interest)
    }

    /// Stops watching `sock`.
    pub fn remove(&self, sock: &impl AsFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, sock, 0, 0)
    }

    /// Waits up to `timeout` for readiness; returns how many events [`Epoll::ready`] holds
    /// (0 on timeout or signal).
    pub fn wait(&mut self, timeout: Duration) -> io::Result<usize> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        let cap = self.buf.len().min(i32::MAX as usize) as libc::c_int;
        // SAFETY: `buf` holds `cap` events and outlives the call.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), self.buf.as_mut_ptr(), cap, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
        }
        Ok(n as usize)
    }

    /// Event `i` of the last [`Epoll::wait`].
    pub fn ready(&self, i: usize) -> Ready {
        let e = self.buf[i];
        Ready { token: e.u64, events: e.events }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn reports_readable_then_writable_by_token() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let mut a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (b, _) = l.accept().expect("accept");
        let mut ep = Epoll::new(8).expect("epoll");
        ep.add(&b, 7, READABLE).expect("add");
        assert_eq!(ep.wait(Duration::from_millis(10)).expect("wait"), 0, "nothing yet");
        a.write_all(b"x").expect("write");
        assert_eq!(ep.wait(Duration::from_secs(2)).expect("wait"), 1);
        assert_eq!(ep.ready(0).token, 7);
        assert_ne!(ep.ready(0).events & READABLE, 0);
        ep.modify(&b, 9, WRITABLE).expect("modify");
        assert_eq!(ep.wait(Duration::from_secs(2)).expect("wait"), 1);
        assert_eq!((ep.ready(0).token, ep.ready(0).events & WRITABLE), (9, WRITABLE));
        ep.remove(&b).expect("remove");
        assert_eq!(ep.wait(Duration::from_millis(10)).expect("wait"), 0);
    }
}
