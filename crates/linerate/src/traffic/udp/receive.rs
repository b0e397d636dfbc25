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
//! Batched wake-ups (unpaced tests only). A receiver blocked in `recvmmsg` is woken by the
//! sender's kernel path once per arriving (GRO) packet: on loopback that wake-up cost the
//! sender a fifth of its CPU (`sock_def_readable` in a profile of `-u -b 0 -l 1472`), and
//! the sender is the bound. So when the sender is unpaced (`-b 0`) and a read finds the
//! socket drained, the receiver sleeps for a short *nap* before reading again instead of
//! blocking: nobody waits on the socket, the sender's kernel path wakes no one, and the next
//! read takes many packets at once. The nap is an eighth of the receive buffer's worth of
//! the rate measured over the last 50 ms (`RateWindow`), at most [`MAX_NAP`] (so the
//! queue cannot fill during it; UDP charges a packet's whole buffer against `SO_RCVBUF`,
//! about twice its bytes), and none below [`MIN_NAP`] or before a rate is known. Measured on
//! loopback at 1472 B: 37.7 → 64 Gbit/s delivered (median of 4 interleaved runs, naps of
//! 100–200 µs). Paced tests never nap: there the arrival times are the measurement (jitter,
//! transit variation), and a nap would stamp a batch with one time. Unpaced tests' arrival
//! times are quantized by the naps, which the result says (`nap_us_max`).
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
use crate::traffic::follow::RateWindow;
use crate::traffic::{LoopError, StreamCounters, TrafficControl};

/// How long past `finishing() + quiet` a receiver keeps reading a peer that does not stop.
pub const FINISH_LIMIT: Duration = Duration::from_secs(1);
/// The longest nap between drained reads (module docs); with the kernel's default 50 µs of
/// timer slack a nap may last up to that much longer.
pub const MAX_NAP: Duration = Duration::from_micros(200);
/// Naps shorter than this are not taken (the buffer is too small for the rate).
pub const MIN_NAP: Duration = Duration::from_micros(20);
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
    /// The sender is unpaced (`-b 0`): batch wake-ups with naps (module docs).
    pub nap: bool,
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
    /// The longest nap taken between drained reads (None = none taken).
    pub nap_max: Option<Duration>,
}

/// Receives until aborted (an error) or until quiet after `finishing()` (see the module docs).
pub fn udp_receive_loop(
    sock: &UdpSocket,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    shared: &UdpShared,
    opts: UdpReceiveOptions,
) -> Result<UdpReceiveFinal, LoopError> {
    ensure_timeouts(sock)?;
    let gro = opts.gro && udp::enable_gro(sock);
    let drop_counter = udp::enable_drop_counter(sock);
    let (count, len) =
        if gro { (GRO_BATCH, GRO_BUF) } else { (MAX_BATCH, opts.datagram_bytes.max(MIN_BUF)) };
    let mut bufs = vec![vec![0u8; len]; count];
    // Only an unpaced receiver naps, so only it needs its buffer's size.
    let buffer = opts.nap.then(|| crate::sys::socket::socket_facts(sock).recv_buffer_bytes);
    let naps = Naps::new(buffer.flatten(), Instant::now());
    let mut r = Receiver::new(opts.format, opts.epoch, drop_counter, naps);
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
        nap_max: r.naps.longest,
    })
}

/// Batched wake-ups of an unpaced receiver (module docs).
#[derive(Debug)]
struct Naps {
    /// The receive buffer as read back (Linux's doubled figure); None = never nap.
    buffer: Option<u64>,
    window: RateWindow,
    /// The nap the last window's rate asks for (zero = none).
    nap: Duration,
    longest: Option<Duration>,
}

impl Naps {
    fn new(buffer: Option<u64>, now: Instant) -> Self {
        Self { buffer, window: RateWindow::new(now), nap: Duration::ZERO, longest: None }
    }

    /// After a read of `n` of `batch` buffers with `total` bytes received so far: the nap to
    /// take now, if any (only when the read left the socket drained).
    fn after_read(&mut self, n: usize, batch: usize, total: u64, now: Instant) -> Option<Duration> {
        let buffer = self.buffer?;
        if let Some((bytes, elapsed)) = self.window.sample(total, now) {
            self.nap = nap_for(buffer, bytes, elapsed);
        }
        if n >= batch || self.nap.is_zero() {
            return None;
        }
        self.longest = self.longest.max(Some(self.nap));
        Some(self.nap)
    }
}

/// The nap that lets `bytes` in `elapsed` fill an eighth of a `buffer`-byte receive buffer,
/// at most [`MAX_NAP`]; zero below [`MIN_NAP`] or without data.
fn nap_for(buffer: u64, bytes: u64, elapsed: Duration) -> Duration {
    if bytes == 0 {
        return Duration::ZERO;
    }
    let nap = elapsed.mul_f64((buffer / 8) as f64 / bytes as f64).min(MAX_NAP);
    if nap < MIN_NAP { Duration::ZERO } else { nap }
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
    naps: Naps,
}

impl Receiver {
    fn new(format: DatagramFormat, epoch: Instant, drop_counter: bool, naps: Naps) -> Self {
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
            naps,
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
    ) -> Result<(), LoopError> {
        let mut metas = [RecvMeta::default(); MAX_BATCH];
        let mut next_poll = Instant::now();
        loop {
            if ctl.aborted() {
                return Err(LoopError::Aborted);
            }
            let now = match udp::recv_batch(sock, bufs, &mut metas) {
                Ok(n) => {
                    let now = Instant::now();
                    self.on_batch(&bufs[..n], &metas[..n], now);
                    if let Some(nap) = self.naps.after_read(n, bufs.len(), self.bytes, now) {
                        std::thread::sleep(nap);
                    }
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
                Err(e) => return Err(LoopError::io("receive failed", e)),
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

#[cfg(test)]
mod nap_tests {
    use super::*;
    use crate::traffic::follow::RateFollower;

    #[test]
    fn a_nap_lets_an_eighth_of_the_buffer_fill_within_bounds() {
        let ms50 = Duration::from_millis(50);
        // 5 GB/s into a 16 MiB buffer: an eighth fills in 419 µs, so the cap holds.
        assert_eq!(nap_for(16 << 20, 250_000_000, ms50), MAX_NAP);
        // 1 GB/s into 1 MiB: an eighth in 131 µs.
        let nap = nap_for(1 << 20, 50_000_000, ms50);
        assert!(nap > Duration::from_micros(130) && nap < Duration::from_micros(132), "{nap:?}");
        // 5 GB/s into the 416 KiB default: 10 µs is too short to be worth a sleep.
        assert_eq!(nap_for(425_984, 250_000_000, ms50), Duration::ZERO);
        assert_eq!(nap_for(16 << 20, 0, ms50), Duration::ZERO, "no data, no rate");
    }

    #[test]
    fn naps_come_only_after_a_drained_read_once_a_rate_is_known() {
        let t0 = Instant::now();
        let mut naps = Naps::new(Some(16 << 20), t0);
        assert_eq!(naps.after_read(1, 8, 1_000_000, t0), None, "no rate yet");
        let t1 = t0 + RateFollower::WINDOW;
        assert_eq!(naps.after_read(8, 8, 250_000_000, t1), None, "a full batch: read again");
        assert_eq!(naps.after_read(3, 8, 250_000_000, t1), Some(MAX_NAP));
        assert_eq!(naps.longest, Some(MAX_NAP));
        let mut off = Naps::new(None, t0);
        assert_eq!(off.after_read(1, 8, 250_000_000, t1), None, "paced: never");
        assert_eq!(off.longest, None);
    }
}
