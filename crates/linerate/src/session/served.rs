//! One test as the server sees it, whatever protocol the client speaks: its admission (the
//! per-address place it holds until then, its queue ticket, its slot and requested rate), its
//! number, its streams, both ends' results, the watchdog (no progress, too little progress,
//! `--max-bytes`, `--max-duration`), how many other tests overlapped it, and the notes that
//! open and close it. A doctor session is a `ServedTest` that never gets a number: it holds
//! its address's share and a doctor slot instead. The native session (`native.rs`) and the
//! iperf3 session (`iperf3/server.rs`) each own one and differ only in their control
//! protocol. Nothing here touches the data path: the watchdog reads the counters the sampler
//! already keeps.
//!
//! The progress deadline: besides the idle timeout (no byte and no answered transaction for
//! `--idle-timeout`), every `--idle-timeout` window of a running test must move at least half
//! of `--min-rate` over it (`Limits::progress_refusal`), so a peer trickling a byte a second
//! cannot hold a slot however long it asked for. Progress is `limits::Progress`: bytes, and
//! the requests a request/response test's streams answered, each worth
//! `limits::TRANSACTION_BITS` more, so a latency test moving few bytes by design is not cut
//! while one whose client asks (almost) nothing still is.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use linerate_proto::limits::{Progress, TRANSACTION_FDS_PER_STREAM, TestCost, requested_rate};
use linerate_proto::{Machine, RUN_GRACE, Refusal, SideResults, TestSpec};

use crate::session::admission::{Expected, Pending, Place, Share, Ticket, Transactions};
use crate::session::frame_budget::{FrameGate, Gate};
use crate::session::metrics::refusal_reason;
use crate::session::pump::{self, Turn, Wait};
use crate::session::server_note::ServerNote;
use crate::session::shared::{Admitted, DoctorSlot, Shared};
use crate::session::slots::{CHEAP_PERIOD, CHEAP_RATE};
use crate::session::test_log::TestLogLine;
use crate::session::{Clock, ControlChannel, SOFTWARE, StreamSet};

/// A slot held this briefly costs nothing (a test refused or failed at once): cycling such
/// tests is bounded by the per-address test rate, 2 a second, so 4 addresses keep at most
/// 2 slots busy with them.
const FREE_HOLD: Duration = Duration::from_millis(250);

/// A served test's state.
pub(crate) struct ServedTest {
    pub(crate) shared: Arc<Shared>,
    /// Server-local number; 0 until the test is accepted.
    pub(crate) test: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) streams: Option<StreamSet>,
    pub(crate) server_results: Option<SideResults>,
    pub(crate) client_results: Option<SideResults>,
    /// When progress was last made, and the count then.
    progress: (Instant, Progress),
    /// Where the current progress window began and the count then.
    window: (Instant, Progress),
    /// Where the current rate period began (`slots::CHEAP_PERIOD`) and the count then.
    pace: (Instant, Progress),
    /// The most other tests seen running at once during this one.
    overlap: u32,
    /// Counts this connection against its address until the test is admitted.
    pending: Option<Pending>,
    /// Its place in the exclusive queue while it waits.
    ticket: Option<Ticket>,
    /// One of its address's test places, held from the request to the end.
    share: Option<Share>,
    /// A doctor session's slot.
    doctor: Option<DoctorSlot>,
    /// Lets its data connections past the per-address cap until the test starts.
    expected: Option<Expected>,
    /// `--crr`: lets its transaction connections past the per-address cap while it runs.
    transactions: Option<Transactions>,
    /// For the log line: the client's software, its spec and when it was admitted.
    software: String,
    spec: Option<TestSpec>,
    admitted: Instant,
    /// The rate it asked for, counted against `--max-total-bitrate` while it runs.
    rate: u64,
    /// What it takes from the server's totals while it runs.
    cost: TestCost,
    /// The watchdog ended it for moving too little (or nothing).
    starved: bool,
    /// Set when a later test preempted it before it started (its slot is that test's now).
    preempted: Arc<std::sync::atomic::AtomicBool>,
    /// Its slot, rate and cost were given back (`finish`, or the drop of a test whose
    /// session never ran).
    ended: bool,
    /// Memory for the client's large results frame, from the server's frame budget.
    frames: FrameGate,
    /// Its data connections, counted in the metrics' active streams while it holds a slot.
    connections: u32,
    /// An agent's pair test: the target it runs against (it has no streams of its own here).
    pair: Option<String>,
}

impl Drop for ServedTest {
    fn drop(&mut self) {
        // Only a test whose session never ran ends here: it is counted as failed.
        self.end(true);
    }
}

impl ServedTest {
    /// A connection from `peer` that has not asked for a test yet.
    pub(crate) fn new(shared: Arc<Shared>, peer: SocketAddr, pending: Pending) -> Self {
        let shared_frames = shared.frames.clone();
        Self {
            shared,
            test: 0,
            peer,
            streams: None,
            server_results: None,
            client_results: None,
            progress: (Instant::now(), Progress::default()),
            window: (Instant::now(), Progress::default()),
            pace: (Instant::now(), Progress::default()),
            overlap: 0,
            pending: Some(pending),
            ticket: None,
            share: None,
            doctor: None,
            expected: None,
            transactions: None,
            software: String::new(),
            spec: None,
            admitted: Instant::now(),
            rate: 0,
            frames: FrameGate::new(shared_frames),
            cost: TestCost::default(),
            starved: false,
            preempted: Arc::default(),
            ended: false,
            connections: 0,
            pair: None,
        }
    }

    /// Gives back the admitted test's slot, rate and cost, once, and counts how it ended.
    fn end(&mut self, failed: bool) {
        if self.test != 0 && !std::mem::replace(&mut self.ended, true) {
            let slot = !self.preempted.load(std::sync::atomic::Ordering::SeqCst);
            self.shared.end_test(self.test, self.rate, self.cost, slot);
            let results = self.server_results.as_ref();
            self.shared.metrics.ended(self.connections, self.held(), failed, results);
        }
    }

    /// Checks the request against the server's limits and takes a slot (numbering the test)
    /// before anything is allocated for it; or, for a client that `can_queue` on an exclusive
    /// server, returns its place in the queue (call again until it runs). A refusal is
    /// counted by its reason.
    pub(crate) fn admit(
        &mut self,
        spec: &TestSpec,
        can_queue: bool,
    ) -> Result<Option<Place>, Refusal> {
        let admitted = self.take_slot(spec, can_queue);
        self.count_refusal(admitted.as_ref().err());
        admitted
    }

    fn count_refusal(&self, refusal: Option<&Refusal>) {
        if let Some(r) = refusal {
            self.shared.metrics.refused(refusal_reason(r.kind));
        }
    }

    fn take_slot(&mut self, spec: &TestSpec, can_queue: bool) -> Result<Option<Place>, Refusal> {
        if self.test != 0 {
            return Ok(None);
        }
        if self.share.is_none() {
            // A full server says so first: the share matters only while slots are free.
            let share = self.shared.admission.take_share(self.peer.ip());
            self.share = Some(share.map_err(|r| self.shared.busy_now().unwrap_or(r))?);
        }
        match self.shared.admit(spec, self.peer.ip(), &mut self.ticket, can_queue)? {
            Admitted::Run(test, cost, preempted) => {
                self.test = test;
                self.cost = cost;
                self.preempted = preempted;
                // The progress floor counts from here: a test pays for its slot from the
                // moment it takes it, whether or not it has started.
                self.admitted = Instant::now();
                self.window = (self.admitted, Progress::default());
                self.rate = requested_rate(spec).unwrap_or(0);
                self.pending = None;
                self.connections = spec.connection_count();
                self.shared.metrics.admitted(self.connections);
                Ok(None)
            }
            Admitted::Wait(place) => Ok(Some(place)),
        }
    }

    /// Admits a doctor session (its share, a test token, a doctor slot) or says why not
    /// (counted by its reason).
    pub(crate) fn admit_doctor(&mut self) -> Result<(), Refusal> {
        let admitted = self.take_doctor_slot();
        self.count_refusal(admitted.as_ref().err());
        admitted
    }

    fn take_doctor_slot(&mut self) -> Result<(), Refusal> {
        if self.doctor.is_some() {
            return Ok(());
        }
        let share = self.shared.admission.take_share(self.peer.ip())?;
        self.doctor = Some(self.shared.admit_doctor(self.peer.ip())?);
        self.share = Some(share);
        self.pending = None;
        Ok(())
    }

    /// The admitted test is accepted: keeps its streams and says so.
    pub(crate) fn begin(&mut self, streams: StreamSet, client: String, spec: TestSpec) {
        self.streams = Some(streams);
        let adm = &self.shared.admission;
        self.expected = Some(adm.expect(self.peer.ip(), spec.connection_count()));
        if spec.rr.is_some_and(|rr| rr.connect_each) {
            let n = spec.connection_count().saturating_mul(TRANSACTION_FDS_PER_STREAM);
            self.transactions = Some(adm.allow_transactions(self.peer.ip(), n));
        }
        (self.software, self.spec) = (client.clone(), Some(spec.clone()));
        (self.shared.notes)(&ServerNote::TestAccepted {
            test: self.test,
            peer: self.peer,
            client,
            spec,
        });
    }

    /// The admitted test is an agent's pair test against `target`: it runs from now (it is no
    /// longer one a full server may preempt) and pays for its slot by running.
    pub(crate) fn begin_pair(&mut self, client: String, spec: TestSpec, target: String) {
        (self.software, self.spec, self.pair) = (client, Some(spec), Some(target));
        self.shared.started(self.test);
    }

    /// Seconds since the test was admitted.
    pub(crate) fn held(&self) -> f64 {
        self.admitted.elapsed().as_secs_f64()
    }

    /// Every stream is attached: starts them.
    pub(crate) fn start(&mut self) {
        self.expected = None;
        self.shared.started(self.test);
        self.note_overlap();
        let now = self.streams.as_mut().map_or_else(Instant::now, StreamSet::start);
        self.progress = (now, Progress::default());
        self.pace = self.progress;
    }

    /// The most other tests running at once, so far.
    pub(crate) fn note_overlap(&mut self) -> u32 {
        self.overlap = self.overlap.max(self.shared.others_running());
        self.overlap
    }

    /// True once the streams started and the server's results are not taken yet.
    pub(crate) fn running(&self) -> bool {
        self.server_results.is_none()
            && self.streams.as_ref().is_some_and(|s| s.started().is_some())
    }

    /// Samples the running streams and fails the test if nothing moved for too long.
    pub(crate) fn watch(&mut self) -> Result<()> {
        if !self.running() {
            return Ok(());
        }
        let Some(streams) = self.streams.as_mut() else { return Ok(()) };
        let now = Instant::now();
        streams.sample(now, false);
        let total = streams.progress();
        let limits = &self.shared.admission.limits;
        let ran = streams.started().map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        if let Some(r) =
            limits.bytes_exceeded(total.bytes).or(limits.duration_exceeded(ran, RUN_GRACE))
        {
            return Err(r.into());
        }
        let period = now.saturating_duration_since(self.pace.0);
        if period >= CHEAP_PERIOD {
            let bits = total.since(self.pace.1).bits() as f64;
            self.shared.moving(self.test, bits / period.as_secs_f64() < CHEAP_RATE as f64);
            self.pace = (now, total);
        }
        let window = now.saturating_duration_since(self.window.0);
        if window >= limits.idle_timeout {
            if !streams.all_done()
                && let Some(r) = limits.progress_refusal(total.since(self.window.1), window)
            {
                self.starved = true;
                return Err(r.into());
            }
            self.window = (now, total);
        }
        if total != self.progress.1 {
            self.progress = (now, total);
        } else if !streams.all_done() && now.duration_since(self.progress.0) >= limits.idle_timeout
        {
            self.starved = true;
            bail!(
                "no data moved on any stream for {:.1} s (--idle-timeout)",
                limits.idle_timeout.as_secs_f64()
            );
        }
        Ok(())
    }

    /// Takes the final sample and this end's results (kept, and returned: pass them through
    /// [`for_peer`] before they leave the host).
    pub(crate) fn take_results(&mut self) -> Option<SideResults> {
        let overlap = self.note_overlap();
        let streams = self.streams.as_mut()?;
        streams.sample(Instant::now(), true);
        let results = streams.results(SOFTWARE, overlap);
        self.server_results = Some(results.clone());
        Some(results)
    }

    /// False if the test held its slot without paying for it: it never started (a held start
    /// whose `go` never came, streams that never all connected, a preempted test) and held
    /// its slot [`FREE_HOLD`] or longer, or the watchdog cut it for moving too little or
    /// nothing (the floor counts from admission). A test that ran and ended otherwise paid,
    /// whatever its rate: what it moved while running is the watchdog's business. See
    /// `Admission::penalize` for what an unpaid hold costs its client.
    fn paid(&self) -> bool {
        let started = self.streams.as_ref().is_some_and(|s| s.started().is_some());
        let started = started || self.pair.is_some();
        !self.starved && (started || self.admitted.elapsed() < FREE_HOLD)
    }

    /// Ends the test however it went: stops the streams, keeps partial figures and reports;
    /// then what the session freed goes back to the system (`heap.rs`).
    pub(crate) fn finish(self, result: Result<()>) {
        self.conclude(result);
        crate::session::heap::after_session();
    }

    fn conclude(mut self, result: Result<()>) {
        let overlap = self.note_overlap();
        if let Some(s) = self.streams.as_mut() {
            s.abort();
            if self.server_results.is_none() && s.started().is_some() {
                self.server_results = Some(s.results(SOFTWARE, overlap));
            }
        }
        if self.test == 0 {
            if let Err(e) = result {
                self.shared.reject(self.peer, format!("{e:#}"));
            }
            return;
        }
        self.end(result.is_err());
        if !self.paid() {
            self.shared.admission.penalize(self.peer.ip(), Instant::now());
        }
        if let Some(target) = self.pair.take() {
            let error = result.err().map(|e| format!("{e:#}"));
            let note = ServerNote::PairTested { test: self.test, peer: self.peer, target, error };
            (self.shared.notes)(&note);
            return;
        }
        let summary = TestLogLine::new(
            std::mem::take(&mut self.software),
            self.spec.take(),
            self.held(),
            self.server_results.as_ref(),
            result.is_err(),
        );
        (self.shared.notes)(&ServerNote::TestEnded {
            test: self.test,
            peer: self.peer,
            server: self.server_results.take(),
            client: self.client_results.take(),
            error: result.err().map(|e| format!("{e:#}")),
            summary,
        });
    }
}

/// What a client may see of the server's results: everything but the names and process ids
/// of other processes on the server's host (`foreign_top`), which stay in the operator's log
/// (`ServerNote::TestEnded` carries the full results). The client still gets the share of a
/// core they used (`foreign_us`), which is what its verdict and warning need.
pub(crate) fn for_peer(mut results: SideResults) -> SideResults {
    if let Some(c) = results.cost.as_mut() {
        c.foreign_top.clear();
    }
    results
}

impl ServedTest {
    /// One turn of a server session's loop: flushes the machine's output, stops on shutdown,
    /// waits for control input (or the next sample tick) and feeds it in. Returns false once
    /// the machine has finished. `eager` shortens the wait (while data connections arrive).
    ///
    /// A large results frame is read only while it holds memory from the server's frame
    /// budget (`frame_budget.rs`); while it waits, the turn leaves the connection unread.
    pub(crate) fn turn(
        &mut self,
        ctrl: &mut ControlChannel,
        m: &mut impl Machine,
        clock: &Clock,
        eager: bool,
    ) -> Result<bool> {
        if let Some(why) = self.shared.shutdown_reason()
            && !m.is_finished()
        {
            pump::flush(ctrl, m);
            bail!("{why}");
        }
        if self.preempted.load(std::sync::atomic::Ordering::SeqCst) {
            if self.running() {
                bail!(
                    "preempted: every slot of the server was held and this test moved less than \
                     {} Mbit/s in its last second; the slot went to a client from a network \
                     holding fewer such slots (a test moving that much or more is never taken \
                     back)",
                    CHEAP_RATE / 1_000_000
                );
            }
            bail!(
                "preempted: every slot of the server was held and this test had held one for \
                 {:.1} s without starting (its streams never all connected, or a held start's \
                 go never came); the slot went to a test that was ready to run",
                self.held()
            );
        }
        if let Some(set) = &self.streams {
            ctrl.streams_running(set.len());
        }
        let tick = self.streams.as_ref().and_then(StreamSet::next_tick);
        let gate = self.frames.check(m, clock.now())?;
        let cap = Duration::from_millis(match gate {
            // A granted frame may have been decoded already: its events come first.
            Gate::Granted => 0,
            // Memory frees when another session's frame is decoded: look again soon.
            Gate::Wait => 10,
            Gate::Open if eager => 5,
            Gate::Open => 50,
        });
        let wait = Wait { tick, deadlines: &[], cap };
        let turned = if gate == Gate::Wait {
            pump::pause(ctrl, clock, m, wait).map_err(|e| {
                e.context("the client's results frame was waiting for the server's frame memory")
            })?
        } else {
            pump::turn(ctrl, clock, m, wait, None)?
        };
        Ok(turned != Turn::Finished)
    }
}

/// A connection admitted as a test (or queued), leaving the door for a thread of its own.
pub(crate) struct Greeted<M: Machine> {
    /// The control connection, blocking again.
    pub(crate) sock: TcpStream,
    /// Its session's machine, greeting done.
    pub(crate) machine: M,
    /// The machine's clock.
    pub(crate) clock: Clock,
    /// The admitted (or queued) test.
    pub(crate) test: ServedTest,
    /// The event that asked for it, for the session to act on first.
    pub(crate) event: M::Event,
    /// Output the door could not write yet.
    pub(crate) unsent: Vec<u8>,
}
