//! TCP stream bodies: the send loop and the receive loop.
//!
//! Both loops rely on the socket having short send/receive timeouts (set by the session), so a
//! blocked call returns often enough to notice `stop`/`abort` without a busy wait.
//!
//! The receiver batches its wake-ups with an adaptive `SO_RCVLOWAT` ([`WakeBatcher`]). On a
//! fast path, waking the reader for every arriving segment costs the *sending* CPU a
//! cross-CPU wake-up per segment; on this project's 2-vCPU machines that halved loopback
//! throughput (26.9 vs 63.1 Gbit/s median, docs/PERFORMANCE.md). Every byte is still copied
//! to user space: this is a real application receiver, not a discard mode. The low-water mark
//! follows about 1 ms of the observed rate, so slow links keep fine-grained interval counts.
//!
//! The sender writes [`SendOptions::block`] bytes a call, and up to [`SendOptions::grow_to`]
//! as its own rate allows ([`WriteSizer`]): the spec's write size (`TestSpec::write_size`),
//! 1 MiB for an unpaced bulk test without `-l`. Under the unsent-queue limit
//! ([`crate::traffic::unsent`]) one 1 MiB call moved 2.4–3× the bytes of eight 128 KiB calls
//! between two namespaces over a veth pair, at about half the CPU per GB (docs/PERFORMANCE.md,
//! "Writing in 1 MiB"); why the kernel does so much better with the larger call is not
//! established. A slow flow gains nothing from it and lost much: 16 hosts × 5 flows through a
//! 1 Gbit/s `tbf` (12 Mbit/s a flow, so one 1 MiB call held 0.7 s of it) fell 10–26 % short
//! of the link in 3 of 20 one-second fleets, where 128 and 256 KiB calls never did. So a call
//! holds at most [`WriteSizer::SPAN`] of the flow's measured rate, at least a block: 1 MiB
//! from about 4 Gbit/s a stream. A paced sender writes [`WriteSizer::PACED_STEP`] of its target
//! rate a wake-up (iperf3's pacing timer), so at 10 Gbit/s it wakes about 1,200 times a second
//! instead of 9,500 for 128 KiB blocks: its CPU per GB fell to 0.63–0.84 of the block-sized
//! pacer's, and `-P 4 -b 10G` pinned reached 40 Gbit/s where that one reached 23–26
//! (docs/PERFORMANCE.md, "Paced in 1 ms steps"). `-b RATE/N` keeps bursts of blocks.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::sys::ZeroCopySource;
use crate::traffic::follow::RateFollower;
use crate::traffic::unsent::UnsentLimit;
use crate::traffic::{ByteBudget, LoopError, StreamCounters, TrafficControl};

/// How a sender sends.
#[derive(Debug, Clone, Copy)]
pub struct SendOptions<'a> {
    /// Bytes per write call at the start, and the least a call asks for.
    pub block: usize,
    /// The most bytes per write call as the sender's rate allows ([`WriteSizer`]); at most
    /// `buf`'s length. `block` (or less) keeps every call at `block`.
    pub grow_to: usize,
    /// Pacing target in bits per second; 0 = as fast as possible.
    pub bits_per_second: u64,
    /// iperf3's burst (`-b RATE/BURST`): blocks written back to back before the pacing
    /// waits for all of them; 1 = every block paced on its own.
    pub burst: u64,
    /// Shared byte budget of this direction (`-n`), if any.
    pub budget: Option<&'a ByteBudget>,
    /// Send with sendfile(2) from this memory file instead of write(2) from `buf`.
    pub zerocopy: Option<&'a ZeroCopySource>,
    /// The end's unsent-queue limit ([`crate::traffic::unsent`]); None leaves the socket's.
    pub unsent: Option<&'a UnsentLimit>,
}

/// Sends until told to stop or the budget is spent. Returns why if the stream failed; the
/// caller records it and shuts the write side down.
pub fn send_loop(
    mut sock: &TcpStream,
    start: Instant,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    opts: SendOptions<'_>,
    buf: &[u8],
) -> Result<(), LoopError> {
    let mut sent: u64 = 0;
    let begun = Instant::now();
    let mut limiter = opts.unsent.and_then(|u| u.start(sock, begun));
    let mut sizer = WriteSizer::new(&opts, begun);
    counters.first_byte_moves();
    while !ctl.stopping() {
        let size = sizer.size();
        let want = match opts.budget {
            Some(b) => b.claim(size as u64) as usize,
            None => size,
        };
        if want == 0 {
            break;
        }
        pace(start, burst_start(sent, size, opts.burst), opts.bits_per_second, ctl);
        let mut left = want;
        while left > 0 {
            let r = match opts.zerocopy {
                Some(z) => z.send(sock, left),
                None => sock.write(&buf[..left.min(buf.len())]),
            };
            match r {
                Ok(0) => return Err(stopped_accepting()),
                Ok(n) => {
                    left -= n;
                    sent += n as u64;
                    counters.set_bytes(sent);
                    // One clock read serves both followers of the sender's rate.
                    let now = Instant::now();
                    if let Some(l) = limiter.as_mut() {
                        l.observe(sock, sent, now);
                    }
                    sizer.observe(sent, now);
                }
                Err(e) if is_timeout(&e) => {
                    if ctl.aborted() {
                        return Err(LoopError::Aborted);
                    }
                    if ctl.stopping() && opts.budget.is_none() {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return send_failed(e, ctl),
            }
        }
    }
    Ok(())
}

/// What a failed write means for the stream. A peer that closes (a reset or a broken pipe)
/// after this sender was told to stop took away only bytes past the end of the test: not a
/// failure. iperf3 servers close their data connections as soon as TEST_END arrives, often
/// with a reset while a write is still blocked; any other error, or one before the stop, is.
pub(crate) fn send_failed(e: std::io::Error, ctl: &TrafficControl) -> Result<(), LoopError> {
    match LoopError::io("send failed", e) {
        LoopError::PeerClosed { .. } if ctl.stopped_at().is_some() && !ctl.aborted() => Ok(()),
        e => Err(e),
    }
}

/// A write that took no bytes: the peer no longer accepts data.
pub(crate) fn stopped_accepting() -> LoopError {
    LoopError::Failed("the peer stopped accepting data (write returned 0)".into())
}

/// Receives until end-of-stream (the peer's sender finished), until the socket is quiet after
/// `finish`, or until abort. Returns when the last byte arrived (None if none did), so a
/// receiver's duration ends with its data, not with the wait that noticed the end.
pub fn receive_loop(
    mut sock: &TcpStream,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    buf: &mut [u8],
) -> Result<Option<Instant>, LoopError> {
    let mut got: u64 = 0;
    let mut last = None;
    let mut batcher = WakeBatcher::new(Instant::now());
    loop {
        match sock.read(buf) {
            Ok(0) => return Ok(last),
            Ok(n) => {
                let now = Instant::now();
                got += n as u64;
                last = Some(now);
                counters.set_bytes(got);
                if let Some(lowat) = batcher.observe(got, now) {
                    // Best effort: without it the receiver is only slower, never wrong.
                    let _ = crate::sys::set_recv_lowat(sock, lowat);
                }
            }
            Err(e) if is_timeout(&e) => {
                if ctl.aborted() {
                    return Err(LoopError::Aborted);
                }
                if let Some(end) = ctl.finishing() {
                    // Bytes below the low-water mark may still sit in the buffer; they were
                    // sent before the end, so the stream's time ends there at the latest (a
                    // read held by the low-water mark returns late, not when they arrived).
                    let _ = crate::sys::set_recv_lowat(sock, 1);
                    let last = drain_now(sock, counters, buf, got, last);
                    return Ok(last.map(|t| t.min(end)));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(LoopError::io("receive failed", e)),
        }
    }
}

/// Reads what is already buffered (without waiting) and ends the stream.
fn drain_now(
    mut sock: &TcpStream,
    counters: &StreamCounters,
    buf: &mut [u8],
    mut got: u64,
    mut last: Option<Instant>,
) -> Option<Instant> {
    if sock.set_nonblocking(true).is_err() {
        return last;
    }
    while let Ok(n @ 1..) = sock.read(buf) {
        got += n as u64;
        last = Some(Instant::now());
        counters.set_bytes(got);
    }
    last
}

/// Chooses the receive low-water mark from the observed receive rate.
#[derive(Debug)]
pub struct WakeBatcher(RateFollower);

impl WakeBatcher {
    /// Largest low-water mark: beyond 512 KiB throughput did not improve on loopback.
    pub const MAX_LOWAT: u32 = 512 * 1024;
    /// Wake the reader about once per this much data time.
    pub const TARGET_WAKE: Duration = Duration::from_millis(1);

    /// A batcher starting with the kernel default (wake for every byte).
    pub fn new(now: Instant) -> Self {
        Self(RateFollower::new(now, 1, Self::TARGET_WAKE, 1, Self::MAX_LOWAT))
    }

    /// Feeds the running byte total; returns a new low-water mark when it should change
    /// (by more than a quarter, to avoid a setsockopt per read). Setting it is best effort,
    /// so the mark counts as set.
    pub fn observe(&mut self, total: u64, now: Instant) -> Option<u32> {
        let target = self.0.propose(total, now)?;
        self.0.keep(target);
        Some(target)
    }
}

/// How many bytes a sender's next write call asks for, between its block and its largest
/// write size ([`SendOptions::grow_to`]). Unpaced: [`WriteSizer::SPAN`] of its rate measured
/// over [`RateFollower::WINDOW`], starting at the block. Paced: [`WriteSizer::PACED_STEP`] of
/// its target rate, fixed, so the pacer wakes once per step.
#[derive(Debug)]
pub struct WriteSizer {
    size: usize,
    follower: Option<RateFollower>,
}

impl WriteSizer {
    /// How much of the flow's rate one unpaced call holds: 1 MiB from 4.2 Gbit/s, a 128 KiB
    /// block below 524 Mbit/s; a 12 Mbit/s flow's call stays far below an interval's time.
    pub const SPAN: Duration = Duration::from_millis(2);
    /// How much of its target rate a paced sender writes per wake-up: iperf3's default pacing
    /// timer (`--pacing-timer 1000`), so the bursts are no longer than iperf3's.
    pub const PACED_STEP: Duration = Duration::from_millis(1);

    /// The sizer of a sender sending by `opts`.
    pub fn new(opts: &SendOptions<'_>, now: Instant) -> Self {
        let (block, grow_to) = (opts.block, opts.grow_to.max(opts.block));
        if opts.bits_per_second > 0 {
            let step = opts.bits_per_second as f64 / 8.0 * Self::PACED_STEP.as_secs_f64();
            let size = (step as usize).clamp(block, grow_to);
            return Self { size, follower: None };
        }
        let (min, max) = (to_u32(block), to_u32(grow_to));
        let follower = (max > min).then(|| RateFollower::new(now, min, Self::SPAN, min, max));
        Self { size: block, follower }
    }

    /// Bytes the next call asks for.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Feeds the running byte total; an unpaced size follows once a window is over.
    pub fn observe(&mut self, total: u64, now: Instant) {
        if let Some(f) = self.follower.as_mut()
            && let Some(target) = f.propose(total, now)
        {
            f.keep(target);
            self.size = target as usize;
        }
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// The bytes the pacing waits for before the next write: all that was sent, or with a burst of
/// `burst` blocks (`-b RATE/BURST`) only up to the start of the current burst, so a whole
/// burst goes back to back and the next waits until the rate has caught up with it.
pub(crate) fn burst_start(sent: u64, block: usize, burst: u64) -> u64 {
    if burst <= 1 {
        return sent;
    }
    let burst_bytes = (block as u64).saturating_mul(burst).max(1);
    sent / burst_bytes * burst_bytes
}

/// Sleeps until `sent` bytes are due at `bits_per_second` since `start`. Sleeps in slices so a
/// stop is noticed within 50 ms even at very low rates.
fn pace(start: Instant, sent: u64, bits_per_second: u64, ctl: &TrafficControl) {
    if bits_per_second == 0 {
        return;
    }
    let due_secs = sent as f64 * 8.0 / bits_per_second as f64;
    let due = start + Duration::from_secs_f64(due_secs.min(1e9));
    loop {
        let now = Instant::now();
        if now >= due || ctl.stopping() {
            return;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (b, _) = l.accept().expect("accept");
        (a, b)
    }

    #[test]
    fn budget_bound_sender_delivers_exact_bytes_then_eof() {
        let (tx, rx) = pair();
        let ctl = TrafficControl::default();
        let budget = ByteBudget::new(1_000_001);
        let sc = StreamCounters::default();
        let rc = StreamCounters::default();
        std::thread::scope(|s| {
            let r = s.spawn(|| {
                let mut buf = vec![0u8; 4096];
                receive_loop(&rx, &ctl, &rc, &mut buf)
            });
            let opts = SendOptions {
                block: 65536,
                grow_to: 65536,
                bits_per_second: 0,
                burst: 1,
                budget: Some(&budget),
                zerocopy: None,
                unsent: None,
            };
            let buf = vec![7u8; 65536];
            send_loop(&tx, Instant::now(), &ctl, &sc, opts, &buf).expect("send");
            tx.shutdown(std::net::Shutdown::Write).expect("shutdown");
            r.join().expect("join").expect("receive");
        });
        assert_eq!(sc.bytes(), 1_000_001);
        assert_eq!(rc.bytes(), 1_000_001);
    }

    /// iperf3 clients never close their sending side: `finish` must end the receiver with
    /// every byte counted (also those below the low-water mark) and the time of the last one.
    #[test]
    fn finish_ends_a_receiver_whose_peer_stays_open() {
        let (mut tx, rx) = pair();
        rx.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
        crate::sys::set_recv_lowat(&rx, 1 << 20).expect("lowat");
        let ctl = TrafficControl::default();
        let rc = StreamCounters::default();
        tx.write_all(&[1u8; 3000]).expect("write");
        let sent_at = Instant::now();
        std::thread::scope(|s| {
            let r = s.spawn(|| {
                let mut buf = vec![0u8; 4096];
                receive_loop(&rx, &ctl, &rc, &mut buf)
            });
            std::thread::sleep(Duration::from_millis(300));
            let end = Instant::now();
            ctl.finish_at.set(end).expect("first finish");
            let last = r.join().expect("join").expect("clean end");
            let last = last.expect("data arrived");
            assert!(last <= end, "never later than the end");
            assert!(last.duration_since(sent_at) < Duration::from_millis(250), "last byte time");
        });
        assert_eq!(rc.bytes(), 3000);
        drop(tx);
    }

    /// A blocked sender whose peer closes with unread data (a reset, as iperf3 servers do at
    /// TEST_END): after the stop that is the end of the test, before it a failure.
    fn sender_meets_a_reset(stop_first: bool) -> (Result<(), String>, Duration) {
        let (tx, rx) = pair();
        // A bound on the test: a write never blocks longer than this.
        tx.set_write_timeout(Some(Duration::from_secs(3))).expect("timeout");
        let ctl = TrafficControl::default();
        let sc = StreamCounters::default();
        let opts = SendOptions {
            block: 65536,
            grow_to: 65536,
            bits_per_second: 0,
            burst: 1,
            budget: None,
            zerocopy: None,
            unsent: None,
        };
        let buf = vec![7u8; 65536];
        std::thread::scope(|s| {
            let sender = s.spawn(|| send_loop(&tx, Instant::now(), &ctl, &sc, opts, &buf));
            // Until the buffers are full and the write blocks.
            let mut last = u64::MAX;
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(20));
                if sc.bytes() == last {
                    break;
                }
                last = sc.bytes();
            }
            if stop_first {
                ctl.request_stop(Instant::now());
            }
            let closed = Instant::now();
            drop(rx);
            let r = sender.join().expect("join").map_err(|e| e.to_string());
            (r, closed.elapsed())
        })
    }

    #[test]
    fn a_reset_after_the_stop_is_the_end_not_a_failure() {
        let (r, took) = sender_meets_a_reset(true);
        assert_eq!(r, Ok(()));
        assert!(took < Duration::from_secs(2), "ended by the reset, not the timeout: {took:?}");
        let (r, _) = sender_meets_a_reset(false);
        let e = r.expect_err("a reset during the test is a failure");
        assert!(e.starts_with("send failed"), "{e}");
    }

    #[test]
    fn wake_batcher_follows_rate_and_caps() {
        let t0 = Instant::now();
        let mut b = WakeBatcher::new(t0);
        assert_eq!(b.observe(1 << 30, t0 + Duration::from_millis(10)), None, "window not over");
        // 10 Gbit/s = 1.25 GB/s: 1 ms of data is 1.25 MB, capped at 512 KiB.
        let t1 = t0 + Duration::from_millis(50);
        assert_eq!(b.observe(62_500_000, t1), Some(WakeBatcher::MAX_LOWAT));
        // 10 Mbit/s: 1 ms of data is 1250 bytes.
        let t2 = t1 + Duration::from_millis(100);
        assert_eq!(b.observe(62_500_000 + 125_000, t2), Some(1250));
        // A similar rate does not cause another setsockopt.
        let t3 = t2 + Duration::from_millis(100);
        assert_eq!(b.observe(62_500_000 + 125_000 + 130_000, t3), None);
        // A stall drops back to waking for every byte.
        let t4 = t3 + Duration::from_millis(100);
        assert_eq!(b.observe(62_500_000 + 255_000, t4), Some(1));
    }

    #[test]
    fn write_size_follows_the_rate_between_block_and_largest() {
        let t0 = Instant::now();
        let opts = |bits_per_second, grow_to| SendOptions {
            block: 131_072,
            grow_to,
            bits_per_second,
            burst: 1,
            budget: None,
            zerocopy: None,
            unsent: None,
        };
        let mut w = WriteSizer::new(&opts(0, 131_072), t0);
        w.observe(62_500_000, t0 + Duration::from_millis(50));
        assert_eq!(w.size(), 131_072, "nothing to grow to");
        let mut w = WriteSizer::new(&opts(0, 1 << 20), t0);
        assert_eq!(w.size(), 131_072, "starts at the block");
        // 10 Gbit/s: 2 ms of it is 2.5 MB, capped at the largest size.
        let t1 = t0 + Duration::from_millis(50);
        w.observe(62_500_000, t1);
        assert_eq!(w.size(), 1 << 20);
        // 1 Gbit/s: 2 ms is 250 kB.
        let t2 = t1 + Duration::from_millis(100);
        w.observe(62_500_000 + 12_500_000, t2);
        assert_eq!(w.size(), 250_000);
        // 12 Mbit/s (a fleet's flow through a shared 1 Gbit/s link): back to the block.
        let t3 = t2 + Duration::from_millis(100);
        w.observe(62_500_000 + 12_500_000 + 150_000, t3);
        assert_eq!(w.size(), 131_072);
        // Paced: 1 ms of the target, fixed; at least a block, at most the largest size.
        let mut w = WriteSizer::new(&opts(4_000_000_000, 1 << 20), t0);
        assert_eq!(w.size(), 500_000, "4 Gbit/s: 500 kB a wake-up");
        w.observe(1 << 30, t1);
        assert_eq!(w.size(), 500_000, "the target, not the measured rate");
        assert_eq!(WriteSizer::new(&opts(10_000_000_000, 1 << 20), t0).size(), 1 << 20);
        assert_eq!(WriteSizer::new(&opts(100_000_000, 1 << 20), t0).size(), 131_072);
        assert_eq!(WriteSizer::new(&opts(10_000_000_000, 131_072), t0).size(), 131_072, "-l");
    }

    #[test]
    fn a_burst_is_paced_from_its_first_block() {
        assert_eq!(super::burst_start(5000, 1000, 1), 5000, "no burst: every byte paced");
        assert_eq!(super::burst_start(4999, 1000, 5), 0, "inside the first burst: no wait");
        assert_eq!(super::burst_start(5000, 1000, 5), 5000, "the next burst waits for all");
        assert_eq!(super::burst_start(9999, 1000, 5), 5000);
    }

    #[test]
    fn paced_sender_holds_its_rate() {
        let (tx, rx) = pair();
        let ctl = TrafficControl::default();
        let sc = StreamCounters::default();
        let rc = StreamCounters::default();
        // 40 Mbit/s for 0.5 s = 2.5 MB; 8 KiB blocks keep the granularity fine.
        let start = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut buf = vec![0u8; 65536];
                let _ = receive_loop(&rx, &ctl, &rc, &mut buf);
            });
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(500));
                ctl.request_stop(Instant::now());
            });
            let opts = SendOptions {
                block: 8192,
                grow_to: 8192,
                bits_per_second: 40_000_000,
                burst: 1,
                budget: None,
                zerocopy: None,
                unsent: None,
            };
            send_loop(&tx, start, &ctl, &sc, opts, &[1u8; 8192]).expect("send");
            tx.shutdown(std::net::Shutdown::Write).expect("shutdown");
        });
        let secs = start.elapsed().as_secs_f64();
        let rate = sc.bytes() as f64 * 8.0 / secs;
        assert!((rate - 40e6).abs() / 40e6 < 0.10, "paced at {rate} bit/s over {secs} s");
    }
}
