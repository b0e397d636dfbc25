//! The UDP receive loop: `recvmmsg` batches into the sequence tracker and the jitter meter.
//!
//! One clock read per batch gives every datagram of the batch the same arrival time (they
//! were queued within microseconds of each other). GRO super-datagrams are split by their
//! segment size. Datagrams starting with the data-hello magic are a peer's re-sent hellos
//! and are skipped; datagrams too short for a header count as invalid, and so do native
//! datagrams without the test's secret (off-path spoofing, see `udp::DatagramFormat`): they
//! add no bytes, no sequence number, no jitter sample and do not move the last arrival.
//!
//! The end: an abort ends the loop at once with an error. Once the control connection says
//! the test is over (`finishing()`), the loop keeps receiving, so that datagrams in flight at
//! the end are counted rather than called lost, and returns once `quiet` has passed since
//! then and a read found the socket empty. A peer that never stops sending is cut off
//! [`FINISH_LIMIT`] after that.
//!
//! Must not print or decide policy; see the parent module.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use linerate_proto::udp::{
    Arrival, DatagramFormat, Decoded, JitterMeter, JitterSummary, SeqWidth, SequenceTracker,
    TrackerCounts, Unwrapper,
};

use super::{HELLO_PREFIX, UdpShared, UdpSnapshot, ensure_timeouts, is_peer_icmp, is_timeout};
use crate::sys::udp::{self, MAX_BATCH, RecvMeta};
use crate::traffic::{StreamCounters, TrafficControl};

/// How long past `finishing() + quiet` a receiver keeps reading a peer that does not stop.
pub const FINISH_LIMIT: Duration = Duration::from_secs(1);
/// How often the kernel drop count is read with `SO_MEMINFO` while data flows.
const DROPS_POLL: Duration = Duration::from_millis(100);
/// Buffers per `recvmmsg` when GRO is on (each takes a 64 KiB super-datagram).
const GRO_BATCH: usize = linerate_proto::spec::UDP_GRO_BATCH as usize;
/// Bytes of one buffer when GRO is on: the largest UDP datagram fits.
const GRO_BUF: usize = linerate_proto::spec::UDP_GRO_BUFFER as usize;
/// Smallest buffer without GRO, so that a peer's larger datagrams are not cut.
const MIN_BUF: usize = linerate_proto::spec::UDP_MIN_RECEIVE_BUFFER as usize;
// The spec's memory bound counts this many buffers per stream.
const _: () = assert!(MAX_BATCH as u64 == linerate_proto::spec::UDP_RECEIVE_BATCH);

/// How a UDP receiver receives.
#[derive(Debug, Clone, Copy)]
pub struct UdpReceiveOptions {
    /// Expected datagram size (buffers are at least this large).
    pub datagram_bytes: usize,
    /// The header's layout: sequence width and, on native streams, the test's secret.
    pub format: DatagramFormat,
    /// Arrival times are measured from this instant (only differences matter for jitter).
    pub epoch: Instant,
    /// After `finishing()`: end once this long has passed with the socket drained.
    pub quiet: Duration,
    /// Ask the kernel to coalesce datagrams (`UDP_GRO`) where it can.
    pub gro: bool,
}

/// What a UDP receiver saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpReceiveFinal {
    /// Sequence accounting (settle it against the sender's count).
    pub counts: TrackerCounts,
    /// Jitter and packet delay variation.
    pub jitter: JitterSummary,
    /// The socket's cumulative kernel drop count (receive buffer overflow); None where the
    /// OS cannot say. Counted in packets: with `gro` one drop may be up to 64 coalesced
    /// datagrams (see `sys::udp::kernel_drops`), so it says *that* the socket
    /// overflowed, not how many datagrams that cost.
    pub kernel_drops: Option<u64>,
    /// Whether `UDP_GRO` was enabled on the socket.
    pub gro: bool,
    /// When the last test datagram arrived (None if none did).
    pub last: Option<Instant>,
}

/// Receives until aborted (an error) or until quiet after `finishing()` (see the module docs).
pub fn udp_receive_loop(
    sock: &UdpSocket,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    shared: &UdpShared,
    opts: UdpReceiveOptions,
) -> Result<UdpReceiveFinal, String> {
    ensure_timeouts(sock)?;
    let gro = opts.gro && udp::enable_gro(sock);
    let drop_counter = udp::enable_drop_counter(sock);
    let (count, len) =
        if gro { (GRO_BATCH, GRO_BUF) } else { (MAX_BATCH, opts.datagram_bytes.max(MIN_BUF)) };
    let mut bufs = vec![vec![0u8; len]; count];
    let mut r = Receiver::new(opts.format, opts.epoch, drop_counter);
    let result = r.run(sock, ctl, counters, shared, &mut bufs, opts.quiet);
    r.meminfo_drops = udp::kernel_drops(sock);
    counters.set_bytes(r.bytes);
    shared.publish(r.snapshot());
    result.map(|()| UdpReceiveFinal {
        counts: r.tracker.snapshot(),
        jitter: r.jitter.summary(),
        kernel_drops: r.kernel_drops(),
        gro,
        last: r.last,
    })
}

/// One receiver's accounting state.
struct Receiver {
    format: DatagramFormat,
    epoch: Instant,
    unwrapper: Unwrapper,
    tracker: SequenceTracker,
    jitter: JitterMeter,
    bytes: u64,
    drop_counter: bool,
    cmsg_drops: Option<u64>,
    meminfo_drops: Option<u64>,
    last: Option<Instant>,
}

impl Receiver {
    fn new(format: DatagramFormat, epoch: Instant, drop_counter: bool) -> Self {
        Self {
            format,
            epoch,
            unwrapper: Unwrapper::new(),
            tracker: SequenceTracker::new(),
            jitter: JitterMeter::new(),
            bytes: 0,
            drop_counter,
            cmsg_drops: None,
            meminfo_drops: None,
            last: None,
        }
    }

    fn run(
        &mut self,
        sock: &UdpSocket,
        ctl: &TrafficControl,
        counters: &StreamCounters,
        shared: &UdpShared,
        bufs: &mut [Vec<u8>],
        quiet: Duration,
    ) -> Result<(), String> {
        let mut metas = [RecvMeta::default(); MAX_BATCH];
        let mut next_poll = Instant::now();
        loop {
            if ctl.aborted() {
                return Err("aborted".into());
            }
            let now = match udp::recv_batch(sock, bufs, &mut metas) {
                Ok(n) => {
                    let now = Instant::now();
                    self.on_batch(&bufs[..n], &metas[..n], now);
                    if let Some(end) = ctl.finishing()
                        && now >= end + quiet + FINISH_LIMIT
                    {
                        return Ok(());
                    }
                    now
                }
                Err(e) if is_timeout(&e) => {
                    let now = Instant::now();
                    if let Some(end) = ctl.finishing()
                        && now >= end + quiet
                    {
                        return Ok(());
                    }
                    now
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted || is_peer_icmp(&e) => {
                    continue;
                }
                Err(e) => return Err(format!("receive failed: {e}")),
            };
            if now >= next_poll {
                self.meminfo_drops = udp::kernel_drops(sock);
                next_poll = now + DROPS_POLL;
            }
            counters.set_bytes(self.bytes);
            shared.offer(self.snapshot());
        }
    }

    /// Accounts one `recvmmsg` batch received at `now`.
    fn on_batch(&mut self, bufs: &[Vec<u8>], metas: &[RecvMeta], now: Instant) {
        let arrival = now.saturating_duration_since(self.epoch);
        let mut data = false;
        for (buf, meta) in bufs.iter().zip(metas) {
            if let Some(d) = meta.drops {
                self.cmsg_drops = self.cmsg_drops.max(Some(u64::from(d)));
            }
            let msg = buf.get(..meta.len).unwrap_or(buf);
            if msg.is_empty() {
                self.tracker.on_malformed();
                continue;
            }
            let segment = meta.gro_segment.map_or(msg.len(), usize::from).max(1);
            for d in msg.chunks(segment) {
                data |= self.on_datagram(d, arrival);
            }
        }
        if data {
            self.last = Some(now);
        }
    }

    /// Accounts one datagram; false if it was not test data (a hello, or not from the test's
    /// sender).
    fn on_datagram(&mut self, d: &[u8], arrival: Duration) -> bool {
        if d.starts_with(&HELLO_PREFIX) {
            return false;
        }
        let h = match self.format.decode(d) {
            Decoded::Ours(h) => h,
            Decoded::Malformed => {
                self.tracker.on_malformed();
                return true;
            }
            Decoded::Spoofed => {
                self.tracker.on_malformed();
                return false;
            }
        };
        self.bytes += d.len() as u64;
        let seq = match self.format.width {
            // The wire field is 32 bits wide, so the value fits.
            SeqWidth::Bits32 => self.unwrapper.extend(h.seq as u32),
            SeqWidth::Bits64 => h.seq,
        };
        if let Arrival::InOrder { .. } = self.tracker.on_seq(seq) {
            self.jitter.on_in_order(h.send_time, arrival);
        }
        true
    }

    /// The larger of the two drop readings; "0" when the counter is on but said nothing.
    fn kernel_drops(&self) -> Option<u64> {
        match self.cmsg_drops.max(self.meminfo_drops) {
            None if self.drop_counter => Some(0),
            other => other,
        }
    }

    fn snapshot(&self) -> UdpSnapshot {
        UdpSnapshot {
            counts: self.tracker.snapshot(),
            jitter_seconds: self.jitter.jitter_seconds(),
            kernel_drops: self.kernel_drops(),
            ..UdpSnapshot::default()
        }
    }
}
