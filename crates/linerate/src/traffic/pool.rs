//! The pooled data plane: a few worker threads, each moving the bytes of many TCP streams
//! through one epoll set.
//!
//! Why: a thread per stream is the fastest design for a few streams (each thread blocks in its
//! own `read`/`write` and the kernel wakes exactly the right one), but at hundreds of streams
//! the threads compete for two cores, each holds a stack and a buffer of its own (`-P 1024`
//! took 150 MB per end, nearly all of it per-stream buffers), and a thread the scheduler
//! forgets leaves its stream idle. A worker here owns one send and one receive buffer for all
//! its streams, and serves whichever of them are ready: the neper design.
//!
//! How a worker serves a stream, so that the figures mean what the thread-per-stream loops'
//! figures mean ([`super::tcp`]):
//! - Sockets are non-blocking and watched level-triggered. A ready socket gets at most
//!   [`OPS_PER_TURN`] calls per turn, then the next ready socket its turn: no stream can hold
//!   a worker, and one stopped short of `EAGAIN` is reported again by the next wait.
//! - A sender claims a block from the `-n` budget, writes it whole across as many turns as it
//!   takes, and checks the stop only between blocks, as `send_loop` does. Its time ends at the
//!   stop request (or its last write, if earlier); its write side is then shut.
//! - A paced sender that is ahead of its rate is taken off the write interest until its next
//!   block is due (a timer), so pacing costs no busy wait.
//! - A receiver reads until `EAGAIN` or its turn's end, keeps the adaptive `SO_RCVLOWAT` of
//!   [`super::tcp::WakeBatcher`] (epoll honours it: fewer wake-ups per byte), and ends on
//!   end-of-stream with the time of its last byte; on `finish` it reads what is buffered and
//!   ends there, as `receive_loop` does.
//! - Stop, finish and abort are flags, not file descriptors: a worker waits at most
//!   [`MAX_WAIT`] so it notices them promptly even when none of its sockets is ready.
//!
//! What a worker cannot give is a stream's own CPU time or scheduler wait: streams share the
//! worker's thread. Those are reported per worker instead ([`WorkerFigures`]), never divided
//! up among the streams as if they were measured.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::StreamRole;

use crate::sys::ZeroCopySource;
use crate::sys::epoll::{self, Epoll};
use crate::traffic::tcp::WakeBatcher;
use crate::traffic::{ByteBudget, LoopError, StreamCounters, TrafficControl};

/// System calls one ready socket gets per turn before the worker moves on.
pub const OPS_PER_TURN: usize = 8;
/// Longest wait for readiness: how late a worker may notice stop, finish or abort.
pub const MAX_WAIT: Duration = Duration::from_millis(20);
/// Events taken per wait.
const BATCH: usize = 256;

/// One stream handed to a worker. The socket is shared, not duplicated, with the sampler that
/// reads its `TCP_INFO`: at 10,000 streams a second descriptor each would exhaust the open-file
/// limit.
#[derive(Debug, Clone)]
pub struct PoolStream {
    /// The data socket (made non-blocking by the worker).
    pub sock: Arc<TcpStream>,
    /// Sender or receiver.
    pub role: StreamRole,
    /// Where the stream's progress is published.
    pub counters: Arc<StreamCounters>,
}

/// Streams waiting to be taken by a worker.
#[derive(Debug, Default)]
pub struct Inbox {
    streams: Mutex<Vec<PoolStream>>,
    pending: AtomicBool,
}

impl Inbox {
    /// Hands `s` to the worker (before or after the start).
    pub fn push(&self, s: PoolStream) {
        if let Ok(mut v) = self.streams.lock() {
            v.push(s);
            self.pending.store(true, Ordering::Release);
        }
    }

    fn take(&self) -> Vec<PoolStream> {
        if !self.pending.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        self.streams.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }
}

/// How every stream of a test is sent.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Bytes per write call; receivers read up to this much per call.
    pub block: usize,
    /// Pacing target per stream in bits per second; 0 = as fast as possible.
    pub bits_per_second: u64,
    /// Blocks per burst (`-b RATE/BURST`), as [`super::tcp::SendOptions::burst`].
    pub burst: u64,
    /// Shared byte budget of the sending direction (`-n`), if any.
    pub budget: Option<Arc<ByteBudget>>,
    /// Send with sendfile(2) from this memory file instead of write(2).
    pub zerocopy: Option<Arc<ZeroCopySource>>,
}

/// What one worker measured of itself (filled in by its thread's owner).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerFigures {
    /// Streams it served.
    pub streams: u32,
    /// Its thread's CPU time while streams ran.
    pub cpu: Option<linerate_proto::ProcessCpu>,
    /// Time its thread waited for a CPU while streams ran.
    pub wait_us: Option<u64>,
    /// Wall time from the start to its last stream's end.
    pub wall_us: u64,
}

struct Slot {
    s: PoolStream,
    /// Bytes of the claimed block still to write (senders).
    left: usize,
    /// Bytes written or read so far.
    moved: u64,
    last: Option<Instant>,
    batcher: WakeBatcher,
    /// Off the write interest until this instant (a paced sender ahead of its rate).
    paced_until: Option<Instant>,
    done: bool,
}

enum Step {
    /// Stopped short of `EAGAIN` (its turn ended) or blocked: wait for readiness.
    Wait,
    /// A paced sender is ahead: resume at this instant.
    Due(Instant),
    /// The stream ended, with why if it failed.
    End(Result<(), LoopError>),
}

/// Serves streams from `inbox` from `start` until every one has ended (or the test is
/// aborted). `send` is the pattern senders write (at least `opts.block` long unless zero-copy),
/// `recv` the buffer receivers read into. Returns the number of streams served.
pub fn worker_loop(
    inbox: &Inbox,
    start: Instant,
    ctl: &TrafficControl,
    opts: &PoolOptions,
    send: &[u8],
    recv: &mut [u8],
) -> u32 {
    let ep = match Epoll::new(BATCH) {
        Ok(e) => e,
        Err(e) => {
            // Without a readiness set no stream can move: each says why.
            let why = LoopError::io("cannot create an epoll set for the data plane", e);
            let mut n = 0;
            for s in inbox.take() {
                s.counters.finish(start.elapsed(), Some(why.clone()));
                n += 1;
            }
            return n;
        }
    };
    let mut w = Worker { ep, slots: Vec::new(), live: 0, timers: BinaryHeap::new(), start, ctl };
    loop {
        for s in inbox.take() {
            w.take(s);
        }
        if ctl.aborted() {
            w.end_all(|_| true, || Err(LoopError::Aborted));
            return w.slots.len() as u32;
        }
        if let Some(at) = ctl.finishing() {
            for i in 0..w.slots.len() {
                let slot = &mut w.slots[i];
                if !slot.done && slot.s.role == StreamRole::Receiver {
                    drain(slot, recv);
                    slot.last = slot.last.map(|t| t.min(at));
                    w.end(i, Ok(()));
                }
            }
        }
        if ctl.stopping() {
            // Between blocks, or without a budget to finish, a sender ends at the stop even
            // if its socket never becomes writable again (a peer that stopped reading).
            let unbudgeted = opts.budget.is_none();
            w.end_all(|s| s.s.role == StreamRole::Sender && (s.left == 0 || unbudgeted), || Ok(()));
        }
        if w.live == 0 && !inbox.pending.load(Ordering::Acquire) {
            return w.slots.len() as u32;
        }
        let now = Instant::now();
        w.resume_due(now);
        let wait = w
            .timers
            .peek()
            .map_or(MAX_WAIT, |Reverse((at, _))| at.saturating_duration_since(now).min(MAX_WAIT));
        let n = match w.ep.wait(wait) {
            Ok(n) => n,
            Err(e) => {
                let why = LoopError::io("waiting for socket readiness failed", e);
                w.end_all(|_| true, || Err(why.clone()));
                return w.slots.len() as u32;
            }
        };
        for k in 0..n {
            let r = w.ep.ready(k);
            let i = r.token as usize;
            let Some(slot) = w.slots.get_mut(i).filter(|s| !s.done) else { continue };
            let step = match slot.s.role {
                StreamRole::Sender
                    if slot.paced_until.is_some() && r.events & epoll::BROKEN == 0 =>
                {
                    continue;
                }
                StreamRole::Sender => send_turn(slot, start, ctl, opts, send),
                StreamRole::Receiver => receive_turn(slot, recv),
            };
            w.settle(i, step);
        }
    }
}

/// One worker's streams and readiness set.
struct Worker<'a> {
    ep: Epoll,
    slots: Vec<Slot>,
    /// Streams not yet ended.
    live: usize,
    /// Paced senders off the write interest, by the instant their next block is due.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    start: Instant,
    ctl: &'a TrafficControl,
}

impl Worker<'_> {
    /// Adds a stream to the readiness set.
    fn take(&mut self, s: PoolStream) {
        let i = self.slots.len();
        let interest = match s.role {
            StreamRole::Sender => epoll::WRITABLE,
            StreamRole::Receiver => epoll::READABLE,
        };
        let setup =
            s.sock.set_nonblocking(true).and_then(|()| self.ep.add(&*s.sock, i as u64, interest));
        if s.role == StreamRole::Sender {
            s.counters.first_byte_moves();
        }
        self.slots.push(Slot {
            s,
            left: 0,
            moved: 0,
            last: None,
            batcher: WakeBatcher::new(Instant::now()),
            paced_until: None,
            done: false,
        });
        self.live += 1;
        if let Err(e) = setup {
            self.end(i, Err(LoopError::io("cannot watch the socket", e)));
        }
    }

    /// Paced senders whose next block is due go back on the write interest.
    fn resume_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, i))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let slot = &mut self.slots[i];
            if slot.done || slot.paced_until != Some(at) {
                continue;
            }
            slot.paced_until = None;
            let _ = self.ep.modify(&*slot.s.sock, i as u64, epoll::WRITABLE);
        }
    }

    /// Applies a turn's outcome.
    fn settle(&mut self, i: usize, step: Step) {
        match step {
            Step::Wait => {}
            Step::Due(at) => {
                let slot = &mut self.slots[i];
                slot.paced_until = Some(at);
                let _ = self.ep.modify(&*slot.s.sock, i as u64, 0);
                self.timers.push(Reverse((at, i)));
            }
            Step::End(r) => self.end(i, r),
        }
    }

    /// Ends every live stream `which` selects, with `why`'s outcome.
    fn end_all(&mut self, which: impl Fn(&Slot) -> bool, why: impl Fn() -> Result<(), LoopError>) {
        for i in 0..self.slots.len() {
            if !self.slots[i].done && which(&self.slots[i]) {
                self.end(i, why());
            }
        }
    }

    /// Ends a live stream: its time, its error, and for a sender the shut write side.
    fn end(&mut self, i: usize, r: Result<(), LoopError>) {
        let slot = &mut self.slots[i];
        if slot.done {
            return;
        }
        slot.done = true;
        self.live -= 1;
        let _ = self.ep.remove(&*slot.s.sock);
        let now = Instant::now();
        let elapsed = match slot.s.role {
            StreamRole::Sender => {
                let _ = slot.s.sock.shutdown(Shutdown::Write);
                self.ctl.stopped_at().map_or(now, |s| s.min(now))
            }
            StreamRole::Receiver => slot.last.unwrap_or(now),
        };
        slot.s.counters.finish(elapsed.saturating_duration_since(self.start), r.err());
    }
}

fn send_turn(
    slot: &mut Slot,
    start: Instant,
    ctl: &TrafficControl,
    opts: &PoolOptions,
    buf: &[u8],
) -> Step {
    for _ in 0..OPS_PER_TURN {
        if slot.left == 0 {
            if ctl.stopping() {
                return Step::End(Ok(()));
            }
            if opts.bits_per_second > 0 {
                let paced = super::tcp::burst_start(slot.moved, opts.block, opts.burst);
                let due_secs = paced as f64 * 8.0 / opts.bits_per_second as f64;
                let due = start + Duration::from_secs_f64(due_secs.min(1e9));
                if due > Instant::now() {
                    return Step::Due(due);
                }
            }
            let want = match &opts.budget {
                Some(b) => b.claim(opts.block as u64) as usize,
                None => opts.block,
            };
            if want == 0 {
                return Step::End(Ok(()));
            }
            slot.left = want;
        }
        let sock = &*slot.s.sock;
        let r = match &opts.zerocopy {
            Some(z) => z.send(sock, slot.left),
            None => (&*sock).write(&buf[..slot.left.min(buf.len())]),
        };
        match r {
            Ok(0) => return Step::End(Err(super::tcp::stopped_accepting())),
            Ok(n) => {
                slot.left -= n;
                slot.moved += n as u64;
                slot.s.counters.set_bytes(slot.moved);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                return if ctl.stopping() && opts.budget.is_none() {
                    Step::End(Ok(()))
                } else {
                    Step::Wait
                };
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Step::End(super::tcp::send_failed(e, ctl)),
        }
    }
    Step::Wait
}

fn receive_turn(slot: &mut Slot, buf: &mut [u8]) -> Step {
    for _ in 0..OPS_PER_TURN {
        match (&*slot.s.sock).read(buf) {
            Ok(0) => return Step::End(Ok(())),
            Ok(n) => {
                let now = Instant::now();
                slot.moved += n as u64;
                slot.last = Some(now);
                slot.s.counters.set_bytes(slot.moved);
                if let Some(lowat) = slot.batcher.observe(slot.moved, now) {
                    // Best effort: without it the receiver is only slower, never wrong.
                    let _ = crate::sys::set_recv_lowat(&*slot.s.sock, lowat);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Step::End(Err(LoopError::io("receive failed", e))),
        }
    }
    Step::Wait
}

/// Reads what is already buffered, below the low-water mark too.
fn drain(slot: &mut Slot, buf: &mut [u8]) {
    let _ = crate::sys::set_recv_lowat(&*slot.s.sock, 1);
    while let Ok(n @ 1..) = (&*slot.s.sock).read(buf) {
        slot.moved += n as u64;
        slot.last = Some(Instant::now());
        slot.s.counters.set_bytes(slot.moved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pairs(n: usize) -> Vec<(TcpStream, TcpStream)> {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = l.local_addr().expect("addr");
        (0..n)
            .map(|_| {
                let a = TcpStream::connect(addr).expect("connect");
                let (b, _) = l.accept().expect("accept");
                (a, b)
            })
            .collect()
    }

    fn stream(sock: TcpStream, role: StreamRole) -> PoolStream {
        PoolStream { sock: Arc::new(sock), role, counters: Arc::default() }
    }

    /// 64 streams on one sending and one receiving worker, with a byte budget: every byte
    /// claimed is delivered, every stream ends with its peer's end-of-stream, and the budget
    /// is shared out among them, not taken by one.
    #[test]
    fn two_workers_move_an_exact_budget_over_many_streams() {
        let (tx, rx) = (Inbox::default(), Inbox::default());
        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for (a, b) in pairs(64) {
            let s = stream(a, StreamRole::Sender);
            let r = stream(b, StreamRole::Receiver);
            senders.push(s.counters.clone());
            receivers.push(r.counters.clone());
            tx.push(s);
            rx.push(r);
        }
        let ctl = TrafficControl::default();
        let budget = Arc::new(ByteBudget::new(20_000_001));
        let opts = PoolOptions {
            block: 16384,
            bits_per_second: 0,
            burst: 1,
            budget: Some(budget),
            zerocopy: None,
        };
        let start = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| worker_loop(&rx, start, &ctl, &opts, &[], &mut vec![0u8; 16384]));
            let n = worker_loop(&tx, start, &ctl, &opts, &[5u8; 16384], &mut []);
            assert_eq!(n, 64);
        });
        let sent: u64 = senders.iter().map(|c| c.bytes()).sum();
        let got: u64 = receivers.iter().map(|c| c.bytes()).sum();
        assert_eq!((sent, got), (20_000_001, 20_000_001));
        assert!(receivers.iter().all(|c| c.end().is_some() && c.error().is_none()));
        let busy = senders.iter().filter(|c| c.bytes() > 0).count();
        assert!(busy > 32, "the budget went to {busy} of 64 streams");
    }

    /// A timed test: senders stop at the request with their time ending there; a receiver
    /// whose peer never closes ends on `finish` with every byte counted.
    #[test]
    fn stop_and_finish_end_every_stream() {
        let (tx, rx) = (Inbox::default(), Inbox::default());
        let mut all = Vec::new();
        let mut open = Vec::new();
        for (k, (a, b)) in pairs(8).into_iter().enumerate() {
            let r = stream(b, StreamRole::Receiver);
            all.push(r.counters.clone());
            rx.push(r);
            if k == 0 {
                open.push(a); // never sends, never closes
            } else {
                tx.push(stream(a, StreamRole::Sender));
            }
        }
        let ctl = TrafficControl::default();
        let opts =
            PoolOptions { block: 8192, bits_per_second: 0, burst: 1, budget: None, zerocopy: None };
        let start = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| worker_loop(&rx, start, &ctl, &opts, &[], &mut vec![0u8; 8192]));
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                ctl.request_stop(Instant::now());
                std::thread::sleep(Duration::from_millis(300));
                let _ = ctl.finish_at.set(Instant::now());
            });
            worker_loop(&tx, start, &ctl, &opts, &[1u8; 8192], &mut []);
        });
        let stopped = ctl.stopped_at().expect("stopped").duration_since(start);
        assert!(
            all[1..]
                .iter()
                .all(|c| c.bytes() > 0 && c.end().is_some_and(|e| e <= stopped + MAX_WAIT * 5))
        );
        assert_eq!(all[0].bytes(), 0);
        assert!(all[0].end().is_some() && all[0].error().is_none(), "ended by finish, no error");
        drop(open);
    }

    /// Paced senders hold their rate through the timer, not a busy wait.
    #[test]
    fn paced_senders_hold_their_rate() {
        let (tx, rx) = (Inbox::default(), Inbox::default());
        let mut counters = Vec::new();
        for (a, b) in pairs(4) {
            let s = stream(a, StreamRole::Sender);
            counters.push(s.counters.clone());
            tx.push(s);
            rx.push(stream(b, StreamRole::Receiver));
        }
        let ctl = TrafficControl::default();
        // 4 × 20 Mbit/s for 0.5 s = 1.25 MB each; 4 KiB blocks keep the granularity fine.
        let opts = PoolOptions {
            block: 4096,
            bits_per_second: 20_000_000,
            burst: 1,
            budget: None,
            zerocopy: None,
        };
        let start = Instant::now();
        let cpu0 = crate::measure::counters::thread_cpu();
        std::thread::scope(|s| {
            s.spawn(|| worker_loop(&rx, start, &ctl, &opts, &[], &mut vec![0u8; 65536]));
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(500));
                ctl.request_stop(Instant::now());
            });
            worker_loop(&tx, start, &ctl, &opts, &[1u8; 4096], &mut []);
        });
        let cpu = crate::measure::counters::thread_cpu()
            .zip(cpu0)
            .map(|(b, a)| (b.user_us + b.system_us).saturating_sub(a.user_us + a.system_us));
        let secs = ctl.stopped_at().expect("stopped").duration_since(start).as_secs_f64();
        for c in &counters {
            let rate = c.bytes() as f64 * 8.0 / secs;
            assert!((rate - 20e6).abs() / 20e6 < 0.10, "paced at {rate} bit/s over {secs} s");
        }
        if let Some(us) = cpu {
            assert!(us < 250_000, "pacing took {us} µs of CPU in 0.5 s: a busy wait");
        }
    }
}
