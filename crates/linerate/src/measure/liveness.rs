//! Dead-peer detection on control connections: TCP keepalive and `TCP_USER_TIMEOUT`.
//!
//! A control connection is quiet for the whole test, so a peer whose link vanished (no FIN,
//! no RST) would otherwise be noticed only by the test's own deadlines — iperf3 3.12 kept
//! such a test for 98 s. With keepalive probes every second and a user timeout of a few
//! seconds, the kernel fails the connection's next read with `ETIMEDOUT` soon after the last
//! packet from the peer, whatever the requested test duration. Linux drops a connection
//! when probes are unanswered for the user timeout (it overrides the probe count), so
//! [`CONTROL_DEAD_AFTER`] is the figure that matters.
//!
//! Lives in `measure/` because the options are OS-specific; it sets options and reports
//! what failed, and decides nothing else.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

/// How long a control peer may be silent at the TCP level (no ACK, no probe answer) before
/// its connection is declared dead.
pub const CONTROL_DEAD_AFTER: Duration = Duration::from_secs(4);
/// The same while a test's streams run. With thousands of streams a host's kernel TCP memory
/// (`net.ipv4.tcp_mem`) runs out and the kernel drops packets of every connection, the
/// control's too, whose retransmissions back off past [`CONTROL_DEAD_AFTER`] although both
/// ends are alive (measured: `-P 10000` on loopback). Meanwhile a vanished peer is also
/// noticed by its streams: they stop moving data (the server's `--idle-timeout`).
/// Only tests of more than [`LOADED_ABOVE_STREAMS`] streams relax: with fewer, the kernel's
/// TCP memory holds (measured: `-P 1024` keeps its control connection at the 4 s limit), and
/// a vanished peer is still noticed within seconds.
pub const LOADED_DEAD_AFTER: Duration = Duration::from_secs(30);
/// The stream count above which [`LOADED_DEAD_AFTER`] applies.
pub const LOADED_ABOVE_STREAMS: usize = 1024;
/// Keepalive: first probe after this much idleness, then one per interval.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Turns on keepalive probes and the user timeout on a control connection. Options the OS
/// lacks are skipped (keepalive alone still works, only slower).
pub fn watch_control(stream: &TcpStream) -> io::Result<()> {
    let sock = socket2::SockRef::from(stream);
    let ka = socket2::TcpKeepalive::new().with_time(PROBE_EVERY).with_interval(PROBE_EVERY);
    imp::finish(&sock, ka)
}

/// Relaxes dead-peer detection on a control connection to [`LOADED_DEAD_AFTER`] once its
/// test's streams run.
pub fn loaded(stream: &TcpStream) -> io::Result<()> {
    socket2::SockRef::from(stream).set_tcp_user_timeout(Some(LOADED_DEAD_AFTER))
}

/// True when a read error means the kernel declared the peer dead (keepalive or user
/// timeout), as opposed to a socket read timeout expiring.
pub fn is_peer_dead(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ETIMEDOUT)
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{CONTROL_DEAD_AFTER, PROBE_EVERY};

    pub(super) fn finish(
        sock: &socket2::SockRef<'_>,
        ka: socket2::TcpKeepalive,
    ) -> std::io::Result<()> {
        let retries = (CONTROL_DEAD_AFTER.as_secs() / PROBE_EVERY.as_secs()).max(1) as u32;
        sock.set_tcp_keepalive(&ka.with_retries(retries))?;
        sock.set_tcp_user_timeout(Some(CONTROL_DEAD_AFTER))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn finish(
        sock: &socket2::SockRef<'_>,
        ka: socket2::TcpKeepalive,
    ) -> std::io::Result<()> {
        sock.set_tcp_keepalive(&ka)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_set_on_a_connected_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        watch_control(&c).expect("options accepted");
        assert!(socket2::SockRef::from(&c).keepalive().expect("read back"));
        #[cfg(target_os = "linux")]
        assert_eq!(
            socket2::SockRef::from(&c).tcp_user_timeout().expect("read back"),
            Some(CONTROL_DEAD_AFTER)
        );
    }

    #[test]
    fn etimedout_is_death_and_eagain_is_not() {
        assert!(is_peer_dead(&io::Error::from_raw_os_error(libc::ETIMEDOUT)));
        assert!(!is_peer_dead(&io::Error::from_raw_os_error(libc::EAGAIN)));
    }
}
