//! The UDP send loop: pace, stamp, send in batches (GSO or `sendmmsg`), count.
//!
//! Per batch: one clock read, `Pacer::allowed` datagrams (at most one GSO call's or one
//! `sendmmsg`'s worth), headers stamped with that time and consecutive sequence numbers, one
//! system call, one publication of the figures. Between batches the thread sleeps until the
//! pacer's next due time, with its timer slack cut to 1 ns while it paces (and restored after).
//!
//! Why sleep and not spin: measured on this project's 2-vCPU VMs (release build, loopback,
//! 1472-byte datagrams at 1 Gbit/s, 2 s), the default 50 µs timer slack gave a gap CV of 2.2,
//! burstiness (peak 1 ms window / ideal) 1.9 and some catch-up skips; 1 ns slack gave CV
//! 0.9–1.0, burstiness 1.18–1.61 and no skips. What remains are wake-ups delayed 0.8–1.8 ms
//! by the scheduler (a few per second when the receiver shares the two vCPUs; most visible
//! at 200 Mbit/s, where the thread sleeps between almost every datagram), which no spin
//! before the due time can avoid short of never sleeping (a whole core burnt to send a
//! fraction of it, which would spoil linerate's cost figures). The pacer's 1 ms catch-up cap
//! bounds their effect to burstiness 2, and longer stalls are skipped and counted, never sent
//! as a burst.
//!
//! Failures that say nothing about the test are retried without counting the datagrams as
//! sent: a full socket buffer (timeout), `ENOBUFS`, and ICMP errors from the peer (counted in
//! `refused`). If nothing at all could be sent for [`STALL_LIMIT`], the stream fails.
//!
//! Must not print or decide rates and sizes; see the parent module.

use std::net::UdpSocket;
use std::ops::Range;
use std::time::{Duration, Instant};

use linerate_proto::udp::{
    BURST_WINDOW, BurstReport, BurstStats, DatagramFormat, DatagramHeader, Pacer,
};

use super::{UdpShared, UdpSnapshot, ensure_timeouts, is_peer_icmp, is_timeout};
use crate::sys::udp::{self, GSO_MAX_BYTES, GSO_MAX_SEGMENTS, MAX_BATCH};
use crate::traffic::{ByteBudget, LoopError, StreamCounters, TrafficControl};

/// A stream that could not send a single datagram for this long has failed.
pub const STALL_LIMIT: Duration = Duration::from_secs(1);
/// Pause before retrying after `ENOBUFS` or a refused send.
const RETRY_WAIT: Duration = Duration::from_micros(50);
/// Longest single sleep, so that a stop is noticed quickly even at very low rates.
const MAX_SLEEP: Duration = super::POLL_TIMEOUT;

/// The sender's pacer: smooth, or in iperf3's burst mode when asked.
fn pacer(opts: &UdpSendOptions<'_>, dg: usize, start: Duration) -> Pacer {
    let p = Pacer::new(opts.bits_per_second, dg as u32, start);
    if opts.burst > 1 { p.with_burst(opts.burst) } else { p }
}

/// How a UDP sender sends.
#[derive(Debug, Clone, Copy)]
pub struct UdpSendOptions<'a> {
    /// UDP payload bytes per datagram, header included (iperf3's `-l`).
    pub datagram_bytes: usize,
    /// Pacing target in bits per second of UDP payload; 0 = as fast as possible.
    pub bits_per_second: u64,
    /// Datagrams per burst (`-b RATE/BURST`); 1 = every datagram paced on its own.
    pub burst: u64,
    /// Shared byte budget of this direction (`-n`), if any. The last datagram is sent whole,
    /// so a stream may overshoot by less than one datagram (as iperf3 does).
    pub budget: Option<&'a ByteBudget>,
    /// The header's layout: sequence width and, on native streams, the test's secret.
    pub format: DatagramFormat,
    /// Header send times are measured from this instant.
    pub epoch: Instant,
    /// Use UDP GSO where the kernel and the route allow it (falls back by itself).
    pub gso: bool,
}

/// What a UDP sender did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpSendFinal {
    /// Datagrams handed to the kernel.
    pub datagrams: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// How smooth the sending was.
    pub burst: BurstReport,
    /// How many times the sender fell more than the pacer's burst cap behind.
    pub fell_behind: u64,
    /// Datagrams given up because of that (never sent).
    pub skipped: u64,
    /// Whether GSO carried the datagrams (false: `sendmmsg`).
    pub gso: bool,
    /// When the last datagram went (None if none did).
    pub last: Option<Instant>,
    /// Sends refused because of ICMP errors from the peer (port unreachable and the like).
    pub refused: u64,
}

/// Sends until told to stop or the budget is spent, pacing from `start`. Returns the sender's
/// figures, or an error text if the stream failed (a send error other than the transient ones
/// in the module docs, nothing sent for [`STALL_LIMIT`], or an abort).
pub fn udp_send_loop(
    sock: &UdpSocket,
    start: Instant,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    shared: &UdpShared,
    opts: UdpSendOptions<'_>,
) -> Result<UdpSendFinal, LoopError> {
    let dg = opts.datagram_bytes;
    let min = opts.format.header_bytes();
    if !(min..=GSO_MAX_BYTES).contains(&dg) {
        return Err(LoopError::Failed(format!(
            "datagram size {dg} bytes is outside {min}..={GSO_MAX_BYTES}"
        )));
    }
    ensure_timeouts(sock)?;
    let slack = (opts.bits_per_second > 0).then(|| udp::set_timer_slack(1)).flatten();
    let mut s = Sender::new(sock, &opts, start);
    let result = s.run(ctl, counters, shared, opts.budget);
    if let Some(previous) = slack {
        udp::set_timer_slack(previous);
    }
    counters.set_bytes(s.bytes);
    shared.publish(s.snapshot());
    match result {
        Ok(()) if ctl.aborted() => Err(LoopError::Aborted),
        Ok(()) => Ok(s.finish()),
        Err(e) => Err(e),
    }
}

/// One sender's state; the buffer holds `cap` datagrams back to back.
struct Sender<'s> {
    sock: &'s UdpSocket,
    dg: usize,
    format: DatagramFormat,
    epoch: Instant,
    buf: Vec<u8>,
    cap: usize,
    gso: bool,
    gso_sends: u64,
    next_seq: u64,
    pacer: Pacer,
    burst: BurstStats,
    datagrams: u64,
    bytes: u64,
    refused: u64,
    last: Option<Instant>,
    last_progress: Instant,
}

impl<'s> Sender<'s> {
    fn new(sock: &'s UdpSocket, opts: &UdpSendOptions<'_>, start: Instant) -> Self {
        let dg = opts.datagram_bytes;
        let gso_cap = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / dg);
        let gso = opts.gso && gso_cap >= 2 && udp::gso_supported(sock);
        let cap = if gso { gso_cap } else { MAX_BATCH };
        let pacer_start = start.saturating_duration_since(opts.epoch);
        Self {
            sock,
            dg,
            format: opts.format,
            epoch: opts.epoch,
            buf: filler(cap * dg),
            cap,
            gso,
            gso_sends: 0,
            next_seq: 1,
            pacer: pacer(opts, dg, pacer_start),
            burst: BurstStats::new(BURST_WINDOW),
            datagrams: 0,
            bytes: 0,
            refused: 0,
            last: None,
            last_progress: Instant::now(),
        }
    }

    fn run(
        &mut self,
        ctl: &TrafficControl,
        counters: &StreamCounters,
        shared: &UdpShared,
        budget: Option<&ByteBudget>,
    ) -> Result<(), LoopError> {
        while !ctl.stopping() {
            let now = Instant::now();
            let allowed = self.pacer.allowed(now.saturating_duration_since(self.epoch));
            if allowed == 0 {
                let due = self.epoch + self.pacer.next_send_at();
                if let Some(wait) = due.checked_duration_since(now) {
                    std::thread::sleep(wait.min(MAX_SLEEP));
                }
                continue;
            }
            let mut n = usize::try_from(allowed).unwrap_or(usize::MAX).min(self.cap);
            if let Some(b) = budget {
                let granted = b.claim((n * self.dg) as u64);
                if granted == 0 {
                    return Ok(());
                }
                n = usize::try_from(granted.div_ceil(self.dg as u64)).unwrap_or(n).min(n);
            }
            self.send_datagrams(n, ctl, budget.is_some())?;
            counters.set_bytes(self.bytes);
            shared.offer(self.snapshot());
        }
        Ok(())
    }

    /// Sends the first `n` datagrams of the buffer, retrying partial and transient failures
    /// until all went, or until a stop (unless `must_finish`: budget bytes already claimed).
    fn send_datagrams(
        &mut self,
        n: usize,
        ctl: &TrafficControl,
        must_finish: bool,
    ) -> Result<(), LoopError> {
        let mut done = 0;
        while done < n {
            let now = Instant::now();
            let t = now.saturating_duration_since(self.epoch);
            self.stamp(done..n, t);
            match self.transmit(done..n) {
                Ok(0) => self.on_error(std::io::ErrorKind::WouldBlock.into(), now)?,
                Ok(k) => {
                    let k = k.min(n - done);
                    done += k;
                    self.account(k, now, t);
                }
                Err(e) => self.on_error(e, now)?,
            }
            if ctl.aborted() || (done < n && ctl.stopping() && !must_finish) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Writes the headers of datagrams `range` (sequence numbers continue from the last one
    /// sent), all stamped `t`.
    fn stamp(&mut self, range: Range<usize>, t: Duration) {
        let first = range.start;
        for i in range {
            let seq = self.next_seq + (i - first) as u64;
            if let Some(d) = self.buf.get_mut(i * self.dg..(i + 1) * self.dg) {
                // Cannot fail: the size was checked against the header length.
                let _ = self.format.encode(&DatagramHeader { send_time: t, seq }, d);
            }
        }
    }

    /// One system call for datagrams `range`; returns how many went.
    fn transmit(&mut self, range: Range<usize>) -> std::io::Result<usize> {
        let count = range.len();
        let bytes = self.buf.get(range.start * self.dg..range.end * self.dg).unwrap_or(&[]);
        if self.gso && count > 1 {
            // dg <= GSO_MAX_BYTES < 2^16 (checked before GSO was chosen).
            match udp::send_gso(self.sock, bytes, self.dg as u16) {
                Ok(_) => {
                    self.gso_sends += 1;
                    return Ok(count);
                }
                Err(e) if udp::is_gso_refusal(&e) => self.gso = false,
                Err(e) => return Err(e),
            }
        }
        let mut slices: [&[u8]; MAX_BATCH] = [&[]; MAX_BATCH];
        let mut m = 0;
        for (slot, d) in slices.iter_mut().zip(bytes.chunks_exact(self.dg)) {
            *slot = d;
            m += 1;
        }
        udp::send_batch(self.sock, &slices[..m])
    }

    fn account(&mut self, k: usize, now: Instant, t: Duration) {
        let k64 = k as u64;
        self.next_seq += k64;
        self.datagrams += k64;
        self.bytes += k64 * self.dg as u64;
        self.pacer.on_sent(k64, t);
        self.burst.record(t, k64);
        self.last = Some(now);
        self.last_progress = now;
    }

    /// Decides whether a failed send ends the stream; waits a little before a retry.
    fn on_error(&mut self, e: std::io::Error, now: Instant) -> Result<(), LoopError> {
        if is_peer_icmp(&e) {
            self.refused += 1;
        } else if udp::is_no_buffer_space(&e) {
            std::thread::sleep(RETRY_WAIT);
        } else if !is_timeout(&e) && e.kind() != std::io::ErrorKind::Interrupted {
            return Err(LoopError::io("send failed", e));
        }
        if now.saturating_duration_since(self.last_progress) >= STALL_LIMIT {
            return Err(LoopError::Failed(format!(
                "nothing could be sent for {STALL_LIMIT:?} (last error: {e})"
            )));
        }
        Ok(())
    }

    fn snapshot(&self) -> UdpSnapshot {
        UdpSnapshot {
            datagrams_sent: self.datagrams,
            send_skipped: self.pacer.skipped_datagrams(),
            ..UdpSnapshot::default()
        }
    }

    fn finish(&self) -> UdpSendFinal {
        UdpSendFinal {
            datagrams: self.datagrams,
            bytes: self.bytes,
            burst: self.burst.report(),
            fell_behind: self.pacer.fell_behind(),
            skipped: self.pacer.skipped_datagrams(),
            gso: self.gso_sends > 0,
            last: self.last,
            refused: self.refused,
        }
    }
}

/// `len` bytes of a fixed pseudo-random pattern (xorshift64): incompressible, so links that
/// compress (VPNs, WAN optimisers) cannot make the test look faster than real traffic.
fn filler(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}
