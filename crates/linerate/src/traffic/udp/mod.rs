//! UDP stream bodies: the paced send loop and the receive loop, one thread each.
//!
//! The accounting (header codec, loss/reorder/duplicate tracking, jitter, pacing, burstiness)
//! lives in the sans-IO `linerate_proto::udp`; this module owns the socket and the clock and
//! feeds it. The syscalls (batches, GSO, GRO, the kernel drop counter) come from
//! `sys::udp`.
//!
//! * Sender ([`udp_send_loop`]): a token bucket ([`linerate_proto::udp::Pacer`]) says how many
//!   datagrams may go; the loop stamps that many (sequence numbers from 1, send time since
//!   the options' epoch, then an incompressible filler) and sends them with one GSO `sendmsg`
//!   or one `sendmmsg`, then sleeps until the next one is due. A late wake-up sends at most
//!   1 ms worth at once; anything further behind is skipped and counted, never sent as a
//!   burst.
//! * Receiver ([`udp_receive_loop`]): `recvmmsg` batches (GRO super-datagrams are split by
//!   their segment size), one clock read per batch, and the kernel's drop counter so that
//!   "the receiving socket overflowed" is told apart from loss on the path.
//!
//! Both loops publish progress once per batch: the byte total in [`StreamCounters`] and a
//! [`UdpSnapshot`] in [`UdpShared`] (a `try_lock`, so a sampler holding the lock never stalls
//! the data path; the final figures are always published). Sockets are blocking with a short
//! timeout (set to [`POLL_TIMEOUT`] by the loops when the session set none), so a stop or an
//! abort is noticed within that time.
//!
//! This module must not print, talk the control protocol or decide policy (rates, sizes,
//! whether to use offloads): callers pass those in and get figures back.

mod receive;
mod send;
#[cfg(test)]
mod tests;

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::Mutex;
use std::time::Duration;

use linerate_proto::udp::TrackerCounts;

use crate::traffic::LoopError;

pub use receive::{UdpReceiveFinal, UdpReceiveOptions, udp_receive_loop};
pub use send::{UdpSendFinal, UdpSendOptions, udp_send_loop};

/// Socket timeout the loops set when the session set none: how quickly they notice flags.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(20);

/// The first bytes of a native data hello (`wire::DATA_MAGIC`): a peer re-sends its hello
/// until the server answers, so some may arrive on the data path. They are not test data.
const HELLO_PREFIX: [u8; 4] = [
    linerate_proto::wire::DATA_MAGIC[0],
    linerate_proto::wire::DATA_MAGIC[1],
    linerate_proto::wire::DATA_MAGIC[2],
    linerate_proto::wire::DATA_MAGIC[3],
];

/// Progress of one UDP stream as the sampler sees it; a sender fills the first two fields, a
/// receiver the others.
#[derive(Debug, Clone, Copy, Default)]
pub struct UdpSnapshot {
    /// Datagrams the sender handed to the kernel.
    pub datagrams_sent: u64,
    /// Datagrams the sender's pacer gave up because the sender fell behind (never sent).
    pub send_skipped: u64,
    /// The receiver's sequence accounting.
    pub counts: TrackerCounts,
    /// The receiver's RFC 3550 jitter estimate, seconds.
    pub jitter_seconds: f64,
    /// The receiving socket's cumulative kernel drop count (buffer overflow); None where the
    /// OS cannot say.
    pub kernel_drops: Option<u64>,
}

/// Shared between a UDP stream's thread and the interval sampler (locked once per batch, never
/// per datagram).
#[derive(Debug, Default)]
pub struct UdpShared {
    inner: Mutex<UdpSnapshot>,
}

impl UdpShared {
    /// The latest published figures.
    pub fn snapshot(&self) -> UdpSnapshot {
        match self.inner.lock() {
            Ok(g) => *g,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// Publishes unless the sampler holds the lock right now (the next batch will).
    fn offer(&self, s: UdpSnapshot) {
        if let Ok(mut g) = self.inner.try_lock() {
            *g = s;
        }
    }

    /// Publishes, waiting for the lock: the final figures must not be lost.
    fn publish(&self, s: UdpSnapshot) {
        match self.inner.lock() {
            Ok(mut g) => *g = s,
            Err(poisoned) => *poisoned.into_inner() = s,
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// An ICMP error reported on a connected UDP socket (the peer's port is closed, or the route
/// went away): it belongs to an earlier datagram and must not end the test.
fn is_peer_icmp(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable
    )
}

/// Sets [`POLL_TIMEOUT`] on the socket's reads and writes where the session set no timeout.
fn ensure_timeouts(sock: &UdpSocket) -> Result<(), LoopError> {
    let set = |r: std::io::Result<()>| r.map_err(LoopError::doing("setting a socket timeout"));
    if sock.read_timeout().ok().flatten().is_none() {
        set(sock.set_read_timeout(Some(POLL_TIMEOUT)))?;
    }
    if sock.write_timeout().ok().flatten().is_none() {
        set(sock.set_write_timeout(Some(POLL_TIMEOUT)))?;
    }
    Ok(())
}
