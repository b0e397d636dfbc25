//! Request/response stream bodies (`--rr`): the client's request loop, which times every
//! transaction, and the server's answer loop. What the two loops mean (closed and open loop,
//! coordinated omission) is in `linerate_proto::latency`.
//!
//! Neither end frames anything: TCP delivers the requests in order, so the server answers each
//! whole `request_bytes` it has read with `response_bytes`, and the client takes every whole
//! `response_bytes` as the answer to its oldest outstanding request. Both read whatever has
//! arrived in one call and answer or time everything it completes, so a burst of in-flight
//! transactions costs one system call each way, not one per transaction.
//!
//! Timing: the client reads the clock once per read, after it returns, and once before each
//! batch of requests it writes; a transaction's latency is the first minus the second (closed
//! loop) or minus the request's intended send time (open loop). Latencies go into a shared
//! [`RrRecorder`] (one uncontended lock per read), which the session's sampler reads once per
//! interval.
//!
//! Like the bulk loops, both rely on the socket's short timeouts (closed loop, server) or wait
//! with `sys::wait_readable` until the next request is due (open loop), so a stop or abort is
//! noticed within 250 ms. TCP_NODELAY is on on both ends (the spec asks for it), as in
//! netperf's TCP_RR: Nagle's algorithm would hold a request back until the previous response
//! is acknowledged.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use linerate_proto::histogram::DurationHistogram;
use linerate_proto::latency::{CrrPhases, LatencyResult, RrIntervalSample, RrSpec};

use crate::traffic::{LoopError, StreamCounters, TrafficControl};

/// How long a stopped client waits for the responses still outstanding; what has not arrived
/// by then is counted as unanswered.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// The longest a wait for a response lasts before the loop looks at stop and abort again.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(250);
/// The largest read of responses (or of requests on the server).
const READ_LIMIT: usize = 1 << 20;

/// What a request stream measured, shared between its thread and the sampler.
#[derive(Debug)]
pub struct RrRecorder {
    tally: Mutex<Tally>,
    from_intended_send: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Every latency since the last interval sample (warm-up included: the live lines show it).
    interval: DurationHistogram,
    /// The latencies after the warm-up: the result.
    measured: DurationHistogram,
    omitted: u64,
    pub(crate) unanswered: u64,
    pub(crate) lost: u64,
    late: u64,
    /// `--crr`: the phases of the measured transactions.
    phases: Option<CrrPhases>,
}

impl RrRecorder {
    /// An empty recorder for a stream of `rr`.
    pub fn new(rr: &RrSpec) -> Self {
        Self { tally: Mutex::default(), from_intended_send: rr.open_loop() }
    }

    pub(crate) fn with(&self, f: impl FnOnce(&mut Tally)) {
        if let Ok(mut t) = self.tally.lock() {
            f(&mut t);
        }
    }

    /// Whether a stopped loop is done: nothing outstanding, or [`DRAIN_LIMIT`] past the stop;
    /// then the requests still outstanding are recorded as unanswered.
    pub(crate) fn drained(&self, ctl: &TrafficControl, now: Instant, outstanding: usize) -> bool {
        let late = ctl.stopped_at().is_some_and(|s| now.saturating_duration_since(s) > DRAIN_LIMIT);
        let done = outstanding == 0 || late;
        if done {
            self.with(|t| t.unanswered = outstanding as u64);
        }
        done
    }

    /// Records the transactions that completed at `now`, each started at one of `started`
    /// (its write, or its intended send time); after the warm-up when `measured`. One lock
    /// for the lot.
    pub(crate) fn completed(
        &self,
        now: Instant,
        started: impl Iterator<Item = Instant>,
        measured: bool,
    ) {
        self.with(|t| {
            for from in started {
                let ns = u64::try_from(now.saturating_duration_since(from).as_nanos())
                    .unwrap_or(u64::MAX);
                t.interval.record_ns(ns, 1);
                if measured {
                    t.measured.record_ns(ns, 1);
                } else {
                    t.omitted += 1;
                }
            }
        });
    }

    /// Records one `--crr` transaction: its latency as [`Self::completed`] does, and its
    /// connect, first-byte and close phases when `measured`.
    pub(crate) fn completed_crr(&self, p: crate::traffic::rr_crr::Phases, measured: bool) {
        let [t0, t1, t2, t3, t4] = p.times;
        self.completed(t4, std::iter::once(p.from), measured);
        if measured {
            let ns = |a: Instant, b: Instant| {
                u64::try_from(b.saturating_duration_since(a).as_nanos()).unwrap_or(u64::MAX)
            };
            self.with(|t| {
                let phases = t.phases.get_or_insert_with(CrrPhases::default);
                phases.connect.record_ns(ns(t0, t1), 1);
                phases.first_byte.record_ns(ns(t1, t2), 1);
                phases.close.record_ns(ns(t3, t4), 1);
            });
        }
    }

    /// The transactions completed since the previous call, for an interval sample.
    pub fn take_interval(&self) -> RrIntervalSample {
        let mut sample = RrIntervalSample::of(&DurationHistogram::new());
        self.with(|t| {
            sample = RrIntervalSample::of(&t.interval);
            t.interval.reset();
        });
        sample
    }

    /// The stream's result so far.
    pub fn result(&self) -> LatencyResult {
        let mut r = LatencyResult {
            transactions: 0,
            omitted_transactions: 0,
            unanswered: 0,
            lost: 0,
            from_intended_send: self.from_intended_send,
            late_requests: 0,
            histogram: DurationHistogram::new(),
            phases: None,
        };
        self.with(|t| {
            r.transactions = t.measured.count();
            r.omitted_transactions = t.omitted;
            r.unanswered = t.unanswered;
            r.lost = t.lost;
            r.late_requests = t.late;
            r.histogram = t.measured.clone();
            r.phases = t.phases.clone().map(Box::new);
        });
        r
    }
}

/// What a request loop needs besides its socket.
#[derive(Debug, Clone, Copy)]
pub struct RequestOptions {
    /// Sizes, transactions in flight, rate.
    pub rr: RrSpec,
    /// Transactions that complete before this instant are the warm-up (`-O`).
    pub measured_from: Instant,
}

/// The client's side of one stream: sends requests and times their responses until told to
/// stop, then waits up to [`DRAIN_LIMIT`] for the outstanding ones. Returns when the last
/// response arrived (None if none did), so the stream's time ends with its last transaction.
pub fn request_loop(
    mut sock: &TcpStream,
    start: Instant,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    opts: RequestOptions,
    rec: &RrRecorder,
) -> Result<Option<Instant>, LoopError> {
    let rr = opts.rr;
    let (req, resp, most) = (rr.request_bytes as usize, rr.response_bytes as usize, rr.in_flight);
    let requests = crate::traffic::pattern(req * most as usize);
    let mut buf = vec![0u8; (resp * most as usize).clamp(4096, READ_LIMIT)];
    let mut schedule = Schedule::new(start, rr.rate_per_second);
    // When each outstanding request's latency starts: its write, or its intended time.
    let mut outstanding: VecDeque<Instant> = VecDeque::with_capacity(most as usize);
    let (mut partial, mut written, mut last) = (0usize, 0u64, None);
    counters.first_byte_moves();
    loop {
        let now = Instant::now();
        if !ctl.stopping() {
            let room = most - outstanding.len() as u32;
            let due = schedule.take_due(now, room, &mut outstanding, rec);
            if due > 0 {
                write_all(sock, &requests[..due as usize * req], ctl)?;
                written += (due as usize * req) as u64;
                counters.set_bytes(written);
            }
        } else if rec.drained(ctl, now, outstanding.len()) {
            return Ok(last);
        }
        if ctl.aborted() {
            return Err(LoopError::Aborted);
        }
        // An open loop waits for a response only until the next request is due (a stopped
        // one for a slice); a closed loop blocks in the read, up to the socket's timeout.
        if rr.open_loop() {
            let wait = if ctl.stopping() { WAIT_SLICE } else { schedule.wait(now) };
            let readable = crate::sys::wait_readable(sock, wait)
                .map_err(LoopError::doing("waiting for a response failed"))?;
            if !readable {
                continue;
            }
        }
        let n = match sock.read(&mut buf) {
            Ok(0) => {
                return Err(LoopError::Failed(format!(
                    "the server closed the connection with {} request(s) unanswered",
                    outstanding.len()
                )));
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(LoopError::io("receive failed", e)),
        };
        let now = Instant::now();
        partial += n;
        let done = partial / resp;
        partial %= resp;
        if done > outstanding.len() {
            return Err(LoopError::Failed(
                "the server sent more responses than there were requests".into(),
            ));
        }
        rec.completed(now, outstanding.drain(..done), now >= opts.measured_from);
        if done > 0 {
            last = Some(now);
        }
    }
}

/// When requests are due: at once (closed loop) or at even intervals from the start.
pub(crate) struct Schedule {
    /// Open loop: nanoseconds between intended send times; None for a closed loop.
    interval_ns: Option<u64>,
    start: Instant,
    /// Requests issued so far (open loop: the index of the next intended time).
    issued: u64,
}

impl Schedule {
    pub(crate) fn new(start: Instant, rate_per_second: u64) -> Self {
        let interval_ns = (rate_per_second > 0).then(|| (1_000_000_000 / rate_per_second).max(1));
        Self { interval_ns, start, issued: 0 }
    }

    /// The intended send time of request `k` (open loop).
    fn intended(&self, k: u64) -> Instant {
        self.start + Duration::from_nanos(self.interval_ns.unwrap_or(0).saturating_mul(k))
    }

    /// Issues up to `room` requests due at `now`, appending the instants their latencies run
    /// from; counts requests sent more than an interval late. Returns how many to write.
    pub(crate) fn take_due(
        &mut self,
        now: Instant,
        room: u32,
        outstanding: &mut VecDeque<Instant>,
        rec: &RrRecorder,
    ) -> u32 {
        let Some(iv) = self.interval_ns.map(Duration::from_nanos) else {
            outstanding.extend(std::iter::repeat_n(now, room as usize));
            self.issued += u64::from(room);
            return room;
        };
        let (mut n, mut late) = (0, 0);
        while n < room {
            let at = self.intended(self.issued);
            if at > now {
                break;
            }
            if now.saturating_duration_since(at) > iv {
                late += 1;
            }
            outstanding.push_back(at);
            self.issued += 1;
            n += 1;
        }
        if late > 0 {
            rec.with(|t| t.late += late);
        }
        n
    }

    /// Open loop: how long to wait for a response before the next request is due (at most
    /// a slice, so stop and abort are seen).
    pub(crate) fn wait(&self, now: Instant) -> Duration {
        self.intended(self.issued).saturating_duration_since(now).min(WAIT_SLICE)
    }
}

/// The server's side of one stream: answers every whole request with a response until the
/// client closes its side. Returns when the last request arrived (None if none did).
///
/// Its buffers are bounded whatever the client asked for (`RrSpec::answer_buffers`, at most
/// 256 KiB each): the bytes owed are written from one pattern as many times as they need, so
/// a client that asks for 1 MiB responses 1024 at a time and never reads them holds 256 KiB
/// of the server's memory, not 1 GiB (what `--max-test-memory` counts: `limits::test_memory`).
/// Each request counts as answered once its response is written whole, for the server's
/// watchdog (`StreamCounters::transactions`).
pub fn answer_loop(
    mut sock: &TcpStream,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    rr: RrSpec,
) -> Result<Option<Instant>, LoopError> {
    let (req, resp) = (rr.request_bytes as usize, rr.response_bytes as usize);
    let (read_size, pattern_size) = rr.answer_buffers();
    let responses = crate::traffic::pattern(pattern_size);
    let mut buf = vec![0u8; read_size];
    let (mut partial, mut got, mut answered, mut last) = (0usize, 0u64, 0u64, None);
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return Ok(last),
            Ok(n) => {
                last = Some(Instant::now());
                got += n as u64;
                counters.set_bytes(got);
                partial += n;
                let requests = partial / req;
                partial %= req;
                let mut owed = requests * resp;
                while owed > 0 {
                    let chunk = owed.min(responses.len());
                    write_all(sock, &responses[..chunk], ctl)?;
                    owed -= chunk;
                }
                answered += requests as u64;
                counters.set_transactions(answered);
            }
            Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {
                if ctl.aborted() {
                    return Err(LoopError::Aborted);
                }
                if ctl.finishing().is_some() {
                    return Ok(last);
                }
            }
            Err(e) => return Err(LoopError::io("receive failed", e)),
        }
    }
}

/// Writes all of `data`, riding out the socket's short timeouts until an abort.
fn write_all(mut sock: &TcpStream, mut data: &[u8], ctl: &TrafficControl) -> Result<(), LoopError> {
    while !data.is_empty() {
        match sock.write(data) {
            Ok(0) => return Err(crate::traffic::tcp::stopped_accepting()),
            Ok(n) => data = &data[n..],
            Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {
                if ctl.aborted() {
                    return Err(LoopError::Aborted);
                }
            }
            Err(e) => return Err(LoopError::io("send failed", e)),
        }
    }
    Ok(())
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_loop_issues_what_is_due_and_counts_late_requests() {
        let start = Instant::now();
        let rr = RrSpec { rate_per_second: 1000, in_flight: 4, ..RrSpec::default_rr() };
        let rec = RrRecorder::new(&rr);
        let mut s = Schedule::new(start, rr.rate_per_second);
        let mut out = VecDeque::new();
        // At 2.5 ms requests 0, 1 and 2 are due; 0 is 2.5 ms late, 1 is 1.5 ms late.
        let n = s.take_due(start + Duration::from_micros(2500), 4, &mut out, &rec);
        assert_eq!(n, 3);
        assert_eq!(
            out,
            [start, start + Duration::from_millis(1), start + Duration::from_millis(2)]
        );
        assert_eq!(rec.result().late_requests, 2);
        // Room for one only: the next due request waits, its intended time unchanged.
        let n = s.take_due(start + Duration::from_millis(10), 1, &mut out, &rec);
        assert_eq!((n, out.back().copied()), (1, Some(start + Duration::from_millis(3))));
        assert_eq!(s.wait(start + Duration::from_millis(10)), Duration::ZERO);
        assert_eq!(s.wait(start), Duration::from_millis(4));
        assert!(rec.result().from_intended_send);
    }

    #[test]
    fn a_closed_loop_fills_the_room_at_once() {
        let start = Instant::now();
        let rr = RrSpec { in_flight: 8, ..RrSpec::default_rr() };
        let rec = RrRecorder::new(&rr);
        let mut s = Schedule::new(start, 0);
        let mut out = VecDeque::new();
        let now = start + Duration::from_secs(1);
        assert_eq!(s.take_due(now, 8, &mut out, &rec), 8);
        assert!(out.iter().all(|t| *t == now));
        assert!(!rec.result().from_intended_send);
    }
}
