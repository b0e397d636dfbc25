//! UDP request/response (`--rr -u`, netperf's UDP_RR): the client's request loop and the
//! server's answer loop over one connected UDP socket each.
//!
//! Unlike TCP, UDP neither orders nor delivers reliably, so every request carries the native
//! datagram header (send time, 64-bit sequence number and the test's secret, 24 bytes: the
//! smallest request or response), the server answers each request of this test with a
//! response that starts with the request's header, and the client matches responses to
//! outstanding requests by sequence number, whatever order they come in. A request with no
//! response after [`LOSS_TIMEOUT`] is counted as lost (its request or its response was) and
//! its slot freed, so a closed loop goes on after a loss instead of stalling for ever as
//! netperf's UDP_RR does. A response that comes after that, or twice, is ignored. Datagrams
//! without the test's secret are ignored by both ends.
//!
//! Timing and the closed and open loops are those of the TCP loops (`traffic::rr`).

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use linerate_proto::latency::RrSpec;
use linerate_proto::udp::{DatagramFormat, DatagramHeader, Decoded};

use crate::traffic::rr::{RequestOptions, RrRecorder, Schedule, WAIT_SLICE};
use crate::traffic::{LoopError, StreamCounters, TrafficControl};

/// A request unanswered this long is lost.
pub const LOSS_TIMEOUT: Duration = Duration::from_secs(1);
/// The largest datagram a UDP loop reads.
const DATAGRAM_LIMIT: usize = 65_536;

/// What a UDP request loop needs besides [`RequestOptions`].
#[derive(Debug, Clone, Copy)]
pub struct UdpRequestOptions {
    /// Sizes, in flight, rate, warm-up.
    pub rr: RequestOptions,
    /// The test's datagram header (with its secret).
    pub format: DatagramFormat,
    /// Time base of the send times written into requests.
    pub epoch: Instant,
}

/// The client's side of one UDP stream: sends requests, matches responses by sequence number
/// and times them, counts a request unanswered after [`LOSS_TIMEOUT`] as lost. Returns when
/// the last response arrived (None if none did).
pub fn udp_request_loop(
    sock: &UdpSocket,
    start: Instant,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    opts: UdpRequestOptions,
    rec: &RrRecorder,
) -> Result<Option<Instant>, LoopError> {
    let rr = opts.rr.rr;
    let mut request = crate::traffic::pattern(rr.request_bytes as usize);
    let mut buf = vec![0u8; (rr.response_bytes as usize).clamp(2048, DATAGRAM_LIMIT)];
    let mut schedule = Schedule::new(start, rr.rate_per_second);
    let mut outstanding: VecDeque<(u64, Instant)> = VecDeque::new();
    let mut due: VecDeque<Instant> = VecDeque::new();
    let (mut seq, mut written, mut last) = (0u64, 0u64, None);
    counters.first_byte_moves();
    loop {
        let now = Instant::now();
        if ctl.aborted() {
            return Err(LoopError::Aborted);
        }
        if !ctl.stopping() {
            let room = rr.in_flight - outstanding.len() as u32;
            schedule.take_due(now, room, &mut due, rec);
            for from in due.drain(..) {
                seq += 1;
                let h =
                    DatagramHeader { send_time: now.saturating_duration_since(opts.epoch), seq };
                opts.format
                    .encode(&h, &mut request)
                    .map_err(|e| LoopError::Failed(e.to_string()))?;
                match sock.send(&request) {
                    Ok(n) => written += n as u64,
                    // A full buffer or an ICMP error for an earlier datagram: this request is
                    // not on its way; it will time out as lost.
                    Err(e) if transient(&e) => {}
                    Err(e) => return Err(LoopError::io("send failed", e)),
                }
                outstanding.push_back((seq, from));
            }
            counters.set_bytes(written);
        } else if rec.drained(ctl, now, outstanding.len()) {
            return Ok(last);
        }
        let expired = outstanding
            .iter()
            .take_while(|(_, from)| now.saturating_duration_since(*from) >= LOSS_TIMEOUT)
            .count();
        if expired > 0 {
            outstanding.drain(..expired);
            rec.with(|t| t.lost += expired as u64);
        }
        let next_loss = outstanding.front().map(|(_, from)| *from + LOSS_TIMEOUT);
        let mut wait =
            if ctl.stopping() || !rr.open_loop() { WAIT_SLICE } else { schedule.wait(now) };
        if let Some(at) = next_loss {
            wait = wait.min(at.saturating_duration_since(now));
        }
        let readable = crate::sys::wait_readable(sock, wait)
            .map_err(LoopError::doing("waiting for a response failed"))?;
        if !readable {
            continue;
        }
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if transient(&e) => continue,
            Err(e) => return Err(LoopError::io("receive failed", e)),
        };
        let now = Instant::now();
        let Decoded::Ours(h) = opts.format.decode(&buf[..n]) else { continue };
        let Some(at) = outstanding.iter().position(|(s, _)| *s == h.seq) else { continue };
        let Some((_, from)) = outstanding.remove(at) else { continue };
        rec.completed(now, std::iter::once(from), now >= opts.rr.measured_from);
        last = Some(now);
    }
}

/// The server's side of one UDP stream: answers every request of this test with a response
/// that starts with the request's header, until the test is finishing and the socket has
/// been quiet for `quiet`. Returns when the last request arrived (None if none did). Its two
/// buffers hold a datagram each (at most 64 KiB, within `RrSpec::answer_buffers`); each
/// response sent counts as a transaction answered, for the server's watchdog.
pub fn udp_answer_loop(
    sock: &UdpSocket,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    rr: RrSpec,
    format: DatagramFormat,
    quiet: Duration,
) -> Result<Option<Instant>, LoopError> {
    let mut buf = vec![0u8; (rr.request_bytes as usize).clamp(2048, DATAGRAM_LIMIT)];
    let mut response = crate::traffic::pattern(rr.response_bytes as usize);
    let header = format.header_bytes();
    let (mut got, mut answered, mut last) = (0u64, 0u64, None);
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                if !matches!(format.decode(&buf[..n]), Decoded::Ours(_)) {
                    continue;
                }
                last = Some(Instant::now());
                got += n as u64;
                counters.set_bytes(got);
                response[..header].copy_from_slice(&buf[..header]);
                match sock.send(&response) {
                    Ok(_) => {
                        answered += 1;
                        counters.set_transactions(answered);
                    }
                    Err(e) if transient(&e) => {}
                    Err(e) => return Err(LoopError::io("send failed", e)),
                }
            }
            Err(e) if transient(&e) => {
                if ctl.aborted() {
                    return Err(LoopError::Aborted);
                }
                if let Some(end) = ctl.finishing() {
                    let since = last.map_or(end, |l: Instant| l.max(end));
                    if since.elapsed() >= quiet {
                        return Ok(last);
                    }
                }
            }
            Err(e) => return Err(LoopError::io("receive failed", e)),
        }
    }
}

/// A timeout, a full buffer, an interrupt or an ICMP error that belongs to an earlier
/// datagram: none ends a UDP request/response stream.
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock
            | ErrorKind::TimedOut
            | ErrorKind::Interrupted
            | ErrorKind::ConnectionRefused
            | ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable
    ) || crate::sys::udp::is_no_buffer_space(e)
}
