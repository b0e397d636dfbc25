//! Shared state between a session driver and its stream threads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use linerate_proto::ProcessCpu;

use crate::traffic::LoopError;

/// Progress of one stream, written by its thread and read by the sampler.
#[derive(Debug, Default)]
pub struct StreamCounters {
    bytes: AtomicU64,
    /// Requests the answering end of a request/response stream answered (its response
    /// written whole): the server's watchdog counts them as progress (`limits::Progress`).
    transactions: AtomicU64,
    /// Microseconds from test start when the stream finished, plus one (0 = still running).
    end_us_plus_one: AtomicU64,
    error: Mutex<Option<LoopError>>,
    thread_cpu: Mutex<Option<ProcessCpu>>,
    /// Microseconds the thread waited for a CPU, plus one (0 = not known).
    thread_wait_us_plus_one: AtomicU64,
    /// When the stream's first byte moved (written or read) on this end.
    first_byte: OnceLock<Instant>,
}

impl StreamCounters {
    /// Publishes the running byte total (single writer, so a store suffices). The first
    /// non-zero total also notes when the stream's first byte moved (see
    /// [`StreamCounters::first_byte_moves`]): for a receiver, right after its first read.
    pub fn set_bytes(&self, total: u64) {
        self.bytes.store(total, Ordering::Relaxed);
        if total > 0 {
            self.first_byte_moves();
        }
    }

    /// Notes that the stream's first byte moves now, unless one already did: a sender calls
    /// it as its first write begins (a blocking write of a block returns only once the whole
    /// block is in the socket buffer, which on a loaded path takes round trips), a receiver
    /// as its first read returns. A fleet's start skew is the spread of these.
    pub fn first_byte_moves(&self) {
        if self.first_byte.get().is_none() {
            let _ = self.first_byte.set(Instant::now());
        }
    }

    /// When the stream's first byte moved on this end, if one has.
    pub fn first_byte(&self) -> Option<Instant> {
        self.first_byte.get().copied()
    }

    /// Bytes moved so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Publishes the running count of requests answered (single writer, as for bytes).
    pub fn set_transactions(&self, total: u64) {
        self.transactions.store(total, Ordering::Relaxed);
    }

    /// Requests answered so far (0 on every stream that answers none).
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    /// Marks the stream finished `elapsed` after the test start, with an optional error.
    pub fn finish(&self, elapsed: Duration, error: Option<LoopError>) {
        if let Some(e) = error
            && let Ok(mut slot) = self.error.lock()
        {
            *slot = Some(e);
        }
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX - 1);
        self.end_us_plus_one.store(us + 1, Ordering::Release);
    }

    /// When the stream finished (from test start), if it has.
    pub fn end(&self) -> Option<Duration> {
        match self.end_us_plus_one.load(Ordering::Acquire) {
            0 => None,
            n => Some(Duration::from_micros(n - 1)),
        }
    }

    /// Why the stream failed, if it did, in the words its result gives (the tests' view).
    #[cfg(test)]
    pub fn error(&self) -> Option<String> {
        self.error_unless(|_| false)
    }

    /// Why the stream failed, in words, unless `forgiven` says its error is not a failure
    /// (an iperf3 peer's reset at the end of the test). One look at the error, so the words
    /// and the decision are about the same one.
    pub fn error_unless(&self, forgiven: impl Fn(&LoopError) -> bool) -> Option<String> {
        let slot = self.error.lock().ok()?;
        slot.as_ref().filter(|e| !forgiven(e)).map(LoopError::to_string)
    }

    /// Records the CPU the stream's thread used while moving data.
    pub fn set_thread_cpu(&self, cpu: Option<ProcessCpu>) {
        if let Ok(mut slot) = self.thread_cpu.lock() {
            *slot = cpu;
        }
    }

    /// Records how long the stream's thread waited for a CPU while moving data.
    pub fn set_thread_wait(&self, us: Option<u64>) {
        let v = us.map_or(0, |u| u.min(u64::MAX - 1) + 1);
        self.thread_wait_us_plus_one.store(v, Ordering::Release);
    }

    /// How long the stream's thread waited for a CPU, once it has finished.
    pub fn thread_wait_us(&self) -> Option<u64> {
        self.thread_wait_us_plus_one.load(Ordering::Acquire).checked_sub(1)
    }

    /// The CPU the stream's thread used, once it has finished (None where the OS cannot say).
    pub fn thread_cpu(&self) -> Option<ProcessCpu> {
        self.thread_cpu.lock().ok().and_then(|c| *c)
    }
}

/// Flags every stream thread of one test watches.
#[derive(Debug, Default)]
pub struct TrafficControl {
    /// Senders finish their current block and stop (normal end of a timed test).
    pub stop: AtomicBool,
    /// When `stop` was requested (set by [`TrafficControl::request_stop`]).
    pub stop_at: std::sync::OnceLock<std::time::Instant>,
    /// Everyone stops at once (error, shutdown); receivers stop without waiting for EOF.
    pub abort: AtomicBool,
    /// When the control connection said the test is over (iperf3 clients never close their
    /// sending side): receivers stop cleanly once their socket has been quiet for a moment.
    pub finish_at: std::sync::OnceLock<std::time::Instant>,
}

impl TrafficControl {
    /// Have senders been told to stop (or everything aborted)?
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.aborted()
    }

    /// Tells senders to stop, remembering when (the first call wins).
    pub fn request_stop(&self, at: std::time::Instant) {
        let _ = self.stop_at.set(at);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// When a stop was requested: a sender's time ends there even if noticing took longer
    /// (a write blocked on a full socket buffer returns only at its timeout).
    pub fn stopped_at(&self) -> Option<std::time::Instant> {
        self.stop_at.get().copied()
    }

    /// Has the test been aborted?
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// When receivers were told to end at their next quiet moment, if they were.
    pub fn finishing(&self) -> Option<std::time::Instant> {
        self.finish_at.get().copied()
    }
}

/// Holds stream threads until the test starts, then tells them the common start instant.
#[derive(Debug, Default)]
pub struct StartGate {
    start: OnceLock<Instant>,
    lock: Mutex<bool>,
    cv: Condvar,
}

impl StartGate {
    /// Opens the gate at `start`; a second call is ignored.
    pub fn open(&self, start: Instant) {
        let _ = self.start.set(start);
        self.release();
    }

    /// Releases waiting threads without a start (the test was aborted before starting).
    pub fn release(&self) {
        if let Ok(mut opened) = self.lock.lock() {
            *opened = true;
        }
        self.cv.notify_all();
    }

    /// Blocks until the gate opens; None if it was released without a start.
    pub fn wait(&self) -> Option<Instant> {
        let mut opened = self.lock.lock().ok()?;
        while !*opened {
            opened = self.cv.wait(opened).ok()?;
        }
        self.start.get().copied()
    }

    /// The start instant, once open.
    pub fn started(&self) -> Option<Instant> {
        self.start.get().copied()
    }
}

/// A byte budget shared by all sending streams of one direction (`-n`).
#[derive(Debug)]
pub struct ByteBudget {
    remaining: AtomicU64,
}

impl ByteBudget {
    /// A budget of `total` bytes.
    pub fn new(total: u64) -> Self {
        Self { remaining: AtomicU64::new(total) }
    }

    /// Claims up to `want` bytes; returns how many were granted (0 = budget spent).
    pub fn claim(&self, want: u64) -> u64 {
        let mut granted = 0;
        let _ = self.remaining.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            granted = left.min(want);
            Some(left - granted)
        });
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn budget_is_never_overspent_across_threads() {
        let b = Arc::new(ByteBudget::new(1_000_003));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let mut got = 0;
                    loop {
                        let n = b.claim(4096);
                        if n == 0 {
                            return got;
                        }
                        got += n;
                    }
                })
            })
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().expect("thread")).sum();
        assert_eq!(total, 1_000_003);
    }

    #[test]
    fn gate_releases_waiters_with_start_or_none() {
        let g = Arc::new(StartGate::default());
        let g2 = g.clone();
        let t = std::thread::spawn(move || g2.wait());
        let start = Instant::now();
        g.open(start);
        assert_eq!(t.join().expect("thread"), Some(start));
        let g = StartGate::default();
        g.release();
        assert_eq!(g.wait(), None);
    }

    #[test]
    fn counters_report_end_and_error() {
        let c = StreamCounters::default();
        assert_eq!(c.end(), None);
        c.set_bytes(42);
        c.finish(Duration::from_micros(0), Some(LoopError::Failed("reset".into())));
        assert_eq!(c.end(), Some(Duration::ZERO));
        assert_eq!(c.bytes(), 42);
        assert_eq!(c.error().as_deref(), Some("reset"));
    }
}
