//! What every session of one server shares ([`Shared`]): the cookie registries that route
//! data connections to their tests, the admission state (tests, slots, the server's totals,
//! the exclusive queue), the operator's access rules and place, the notes' sink and the
//! metrics. `server.rs` makes one per server; the front door, the sessions and the metrics
//! endpoint hold it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use linerate_proto::iperf3::COOKIE_LEN;
use linerate_proto::limits::{Budgets, Resources, TestCost, client_key, requested_rate, test_cost};
use linerate_proto::{LimitKind, Refusal, TestSpec};

use crate::plan::ServerPlan;
use crate::plan::server::Access;
use crate::session::admission::{Admission, Place, Ticket};
use crate::session::frame_budget::{FrameBudget, SERVER_FRAME_MEMORY};
use crate::session::log_limit::{LogLimit, Verdict, bounding};
use crate::session::metrics::ServerMetrics;
use crate::session::server_note::{NoteSink, NoteText, Notes, ServerNote};
use crate::session::slots::Slots;
use crate::sys;

/// A data stream presented to the session that owns its cookie.
pub(crate) enum DataSock {
    /// A TCP data connection (its hello already read).
    Tcp(TcpStream),
    /// A UDP stream hello from this client address, received by the acceptor.
    Udp(SocketAddr),
}

pub(crate) type DataConn = (u32, DataSock);

/// An iperf3 data connection and its place in the server's accept order.
pub(crate) type Iperf3Conn = (u64, TcpStream);

/// What every session of one server shares.
pub(crate) struct Shared {
    pub(crate) registry: Mutex<HashMap<[u8; 16], Sender<DataConn>>>,
    pub(crate) iperf3: Mutex<HashMap<[u8; COOKIE_LEN], Sender<Iperf3Conn>>>,
    /// iperf3 UDP tests opening their streams, by client address.
    pub(crate) iperf3_udp: Mutex<HashMap<IpAddr, Sender<SocketAddr>>>,
    shutting_down: AtomicBool,
    signal_name: Mutex<&'static str>,
    next_test: AtomicU64,
    /// Slots held: tests accepted and not yet ended, and doctor sessions.
    held_slots: AtomicU32,
    /// Tests accepted and not yet ended.
    active_tests: AtomicU32,
    /// Doctor sessions holding a slot.
    doctors: AtomicU32,
    /// The requested rates of those tests, summed (for `--max-total-bitrate`).
    committed_bps: AtomicU64,
    /// Why UDP tests cannot be served, if they cannot.
    udp_unavailable: Option<String>,
    /// The operator's limits and per-address counts.
    pub(crate) admission: Arc<Admission>,
    /// The server's totals (connections, memory, threads, descriptors), fixed at start.
    pub(crate) budgets: Budgets,
    /// What admitted tests take from them now.
    used: Mutex<TestCost>,
    /// Who holds the slots, and which a full server may take back (`slots.rs`).
    slots: Slots,
    /// Who may connect (allow-list, pre-shared key).
    pub(crate) access: Access,
    /// The node and zone sent with every environment (`--node-name`, `--zone`).
    pub(crate) place: crate::plan::server::Place,
    /// When the server began serving (its doctor's answers say how long ago).
    pub(crate) serving_since: Instant,
    /// `--agent`: runs pair tests (`native.rs`) for clients with the key.
    pub(crate) agent: bool,
    /// `--pair-allow`: where those pair tests may go.
    pub(crate) pair_allow: Vec<crate::plan::server::PairTarget>,
    log_limit: LogLimit,
    /// The listening port (UDP streams use the same number).
    pub(crate) port: u16,
    pub(crate) notes: NoteSink,
    /// Notes as log text (`--get-server-output`).
    pub(crate) note_text: NoteText,
    /// Memory for clients' large results frames (`frame_budget.rs`).
    pub(crate) frames: Arc<FrameBudget>,
    /// What `--metrics` serves (`metrics.rs`); counted whether or not it is served.
    pub(crate) metrics: ServerMetrics,
}

impl Shared {
    /// The state of a server serving `plan` on `port` (UDP refused for `udp_unavailable`),
    /// its notes going to `notes`.
    pub(crate) fn new(
        plan: &ServerPlan,
        udp_unavailable: Option<String>,
        port: u16,
        notes: Notes,
    ) -> Shared {
        Shared {
            registry: Mutex::new(HashMap::new()),
            iperf3: Mutex::new(HashMap::new()),
            iperf3_udp: Mutex::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
            signal_name: Mutex::new("a stop request"),
            next_test: AtomicU64::new(1),
            held_slots: AtomicU32::new(0),
            active_tests: AtomicU32::new(0),
            doctors: AtomicU32::new(0),
            committed_bps: AtomicU64::new(0),
            udp_unavailable,
            admission: Admission::new(plan.limits.clone()),
            budgets: Budgets::derive(&plan.limits, resources()),
            used: Mutex::new(TestCost::default()),
            slots: Slots::default(),
            access: plan.access.clone(),
            place: plan.place.clone(),
            serving_since: Instant::now(),
            agent: plan.agent,
            pair_allow: plan.pair_allow.clone(),
            log_limit: LogLimit::new(),
            port,
            notes: bounding(notes.sink),
            note_text: notes.text,
            frames: Arc::new(FrameBudget::new(SERVER_FRAME_MEMORY)),
            metrics: ServerMetrics::new(),
        }
    }

    /// Sessions are to end now: the server is shutting down, on `signal` if one came.
    pub(crate) fn shut_down(&self, signal: Option<&'static str>) {
        if let Some(name) = signal {
            *self.signal_name.lock().unwrap_or_else(|e| e.into_inner()) = name;
        }
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Why sessions must end now, if the server is shutting down.
    pub(crate) fn shutdown_reason(&self) -> Option<String> {
        self.shutting_down.load(Ordering::SeqCst).then(|| {
            let signal = *self.signal_name.lock().unwrap_or_else(|e| e.into_inner());
            format!("the server is shutting down ({signal}); run the test again when it is back")
        })
    }

    /// A numbered test that asked for `rate` bit/s in total and took `cost` ended; `slot`:
    /// it still held its slot (a preempted test's slot went to the test that preempted it).
    pub(crate) fn end_test(&self, test: u64, rate: u64, cost: TestCost, slot: bool) {
        self.slots.ended(test);
        self.active_tests.fetch_sub(1, Ordering::SeqCst);
        if slot {
            self.held_slots.fetch_sub(1, Ordering::SeqCst);
        }
        self.committed_bps.fetch_sub(rate, Ordering::SeqCst);
        self.give_back(cost);
    }

    /// Gives `cost` back to the server's totals.
    fn give_back(&self, cost: TestCost) {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.minus(cost);
    }

    /// Takes `spec`'s cost from the server's totals, or says which total it would exceed.
    fn take_cost(&self, spec: &TestSpec) -> Result<TestCost, Refusal> {
        let cost = test_cost(spec, self.admission.limits.layout);
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = self.budgets.refusal(*used, cost) {
            return Err(r);
        }
        *used = used.plus(cost);
        Ok(cost)
    }

    /// Admits a doctor session from `peer` like a test without a spec: the address's test
    /// token, a slot (never queued: the doctor cannot wait), and one of the doctor places
    /// ([`linerate_proto::Limits::doctor_slots`]). The slot is held until the guard drops.
    pub(crate) fn admit_doctor(self: &Arc<Self>, peer: IpAddr) -> Result<DoctorSlot, Refusal> {
        let adm = &self.admission;
        adm.take_test_token(peer, Instant::now())?;
        let limits = &adm.limits;
        self.doctors
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                limits.doctors_busy(n).is_none().then_some(n + 1)
            })
            .map_err(|n| limits.doctors_busy(n).unwrap_or_else(|| busy_fallback(n)))?;
        let slot = if adm.queue_empty() { self.take_slot() } else { Err(u32::MAX) };
        if let Err(running) = slot {
            self.doctors.fetch_sub(1, Ordering::SeqCst);
            let running = running.min(limits.slots());
            return Err(limits.busy(running).unwrap_or_else(|| busy_fallback(running)));
        }
        Ok(DoctorSlot { shared: self.clone() })
    }

    /// Counts `spec`'s requested rate against `--max-total-bitrate`, or says why not.
    fn commit_rate(&self, spec: &TestSpec) -> Result<(), Refusal> {
        let limits = &self.admission.limits;
        let asked = requested_rate(spec);
        let rate = asked.unwrap_or(0);
        self.committed_bps
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                limits.total_rate_refusal(used, asked).is_none().then_some(used + rate)
            })
            .map(|_| ())
            .map_err(|used| {
                limits.total_rate_refusal(used, asked).unwrap_or_else(|| busy_fallback(0))
            })
    }

    /// Tests admitted and not yet ended.
    pub(crate) fn active_tests(&self) -> u32 {
        self.active_tests.load(Ordering::SeqCst)
    }

    /// How many other tests run now, besides the caller's.
    pub(crate) fn others_running(&self) -> u32 {
        self.active_tests.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// Routes a datagram that reached the UDP port's unconnected socket: a linerate hello by
    /// its cookie, an iperf3 connect by the client's address (iperf3 sends no cookie on UDP).
    pub(crate) fn route_udp(&self, datagram: &[u8], from: SocketAddr) {
        if let Some(h) = crate::session::udp::native_hello(datagram) {
            let tx = self.registry.lock().ok().and_then(|r| r.get(&h.cookie.0).cloned());
            if let Some(tx) = tx {
                let _ = tx.send((h.stream_id, DataSock::Udp(from)));
            }
        } else if crate::session::udp::is_iperf3_connect(datagram) {
            let ip = crate::record::canonical(from).ip();
            let tx = self.iperf3_udp.lock().ok().and_then(|r| r.get(&ip).cloned());
            if let Some(tx) = tx {
                let _ = tx.send(from);
            }
        }
    }

    /// Admits a requested test, queues it (`--exclusive`, for clients that can wait) or says
    /// why not: the protocol the server can serve and the operator's limits (pure checks and
    /// the client's rate on the first call, then the slots). A running test is numbered and
    /// counted until [`Shared::end_test`]. Call again with the same `ticket` while it waits.
    pub(crate) fn admit(
        &self,
        spec: &TestSpec,
        peer: IpAddr,
        ticket: &mut Option<Ticket>,
        can_queue: bool,
    ) -> Result<Admitted, Refusal> {
        let adm = &self.admission;
        let now = Instant::now();
        if ticket.is_none() {
            self.check_request(spec)?;
            adm.take_test_token(peer, now)?;
        }
        let my_turn = match ticket {
            Some(t) => adm.is_next(t),
            None => adm.queue_empty(),
        };
        let client = client_key(peer, &adm.limits);
        let slot = match (my_turn, adm.limits.exclusive) {
            (false, _) => Err(u32::MAX),
            (true, false) => self.take_slot().or_else(|n| self.slots.preempt(client, now).ok_or(n)),
            (true, true) => self.take_slot(),
        };
        match slot {
            Ok(()) => {
                let cost = match self.take_cost(spec) {
                    Ok(cost) => cost,
                    Err(r) => {
                        self.held_slots.fetch_sub(1, Ordering::SeqCst);
                        return Err(r);
                    }
                };
                if let Err(r) = self.commit_rate(spec) {
                    self.held_slots.fetch_sub(1, Ordering::SeqCst);
                    self.give_back(cost);
                    return Err(r);
                }
                self.active_tests.fetch_add(1, Ordering::SeqCst);
                *ticket = None;
                adm.running(expected_length(spec), now);
                let test = self.next_test.fetch_add(1, Ordering::SeqCst);
                let preempted = self.slots.admitted(test, client, now);
                Ok(Admitted::Run(test, cost, preempted))
            }
            Err(running) if !adm.limits.exclusive || (ticket.is_none() && !can_queue) => {
                Err(adm.limits.busy(running).unwrap_or_else(|| busy_fallback(running)))
            }
            Err(_) => {
                let t = match ticket.take() {
                    Some(t) => t,
                    None => adm.join_queue(expected_length(spec))?,
                };
                Ok(Admitted::Wait(adm.place(ticket.insert(t), now)))
            }
        }
    }

    /// The checks that need no state: what this server can serve and its limits.
    fn check_request(&self, spec: &TestSpec) -> Result<(), Refusal> {
        if spec.protocol == linerate_proto::Protocol::Udp
            && let Some(why) = &self.udp_unavailable
        {
            let why = format!("this server cannot serve UDP tests: {why}");
            return Err(Refusal::new(LimitKind::NotAllowed, why));
        }
        self.admission.limits.check(spec)?;
        match policy_refusal(spec) {
            Some(why) => Err(Refusal::new(LimitKind::NotAllowed, why)),
            None => Ok(()),
        }
    }

    /// The busy refusal, if every slot is held now (never with `--exclusive`, where later
    /// tests queue rather than hear "busy").
    pub(crate) fn busy_now(&self) -> Option<Refusal> {
        let limits = &self.admission.limits;
        (!limits.exclusive).then(|| limits.busy(self.held_slots.load(Ordering::SeqCst)))?
    }

    /// Test `test` started: it can no longer be preempted for not starting.
    pub(crate) fn started(&self, test: u64) {
        self.slots.started(test);
    }

    /// Test `test` moved less than `slots::CHEAP_RATE` in its last second (`cheap`), or not.
    pub(crate) fn moving(&self, test: u64, cheap: bool) {
        self.slots.moving(test, cheap);
    }

    /// Takes a slot, or returns how many tests and doctors hold them.
    fn take_slot(&self) -> Result<(), u32> {
        let max = self.admission.limits.slots();
        self.held_slots
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .map(|_| ())
    }

    /// Reports a connection dropped before it became part of a test.
    /// Rate-limited (see `log_limit.rs`): a flood of bad connections is summarized.
    pub(crate) fn reject(&self, peer: SocketAddr, reason: String) {
        match self.log_limit.admit(Instant::now()) {
            Verdict::Suppress => {}
            Verdict::Log { suppressed_before } => {
                if suppressed_before > 0 {
                    (self.notes)(&ServerNote::Suppressed { count: suppressed_before });
                }
                (self.notes)(&ServerNote::Rejected { peer, reason });
            }
        }
    }
}

/// Removes a test's cookie from its registry when the session ends, however it ends.
pub(crate) struct Registration<'a, K: std::hash::Hash + Eq, V> {
    registry: &'a Mutex<HashMap<K, V>>,
    cookie: Option<K>,
}

impl<'a, K: std::hash::Hash + Eq + Copy, V> Registration<'a, K, V> {
    /// Nothing registered yet.
    pub(crate) fn new(registry: &'a Mutex<HashMap<K, V>>) -> Self {
        Self { registry, cookie: None }
    }

    /// Routes connections presenting `cookie` to `to` until this registration drops.
    pub(crate) fn register(&mut self, cookie: K, to: V) -> Result<()> {
        self.registry.lock().map_err(|_| anyhow::anyhow!("registry poisoned"))?.insert(cookie, to);
        self.cookie = Some(cookie);
        Ok(())
    }
}

impl<K: std::hash::Hash + Eq, V> Registration<'_, K, V> {
    /// Stops routing: connections presenting the cookie are no longer this session's.
    pub(crate) fn release(&mut self) {
        if let (Some(c), Ok(mut r)) = (self.cookie.take(), self.registry.lock()) {
            r.remove(&c);
        }
    }
}

impl<K: std::hash::Hash + Eq, V> Drop for Registration<'_, K, V> {
    fn drop(&mut self) {
        self.release();
    }
}

/// A doctor session's slot, given back when dropped.
pub(crate) struct DoctorSlot {
    shared: Arc<Shared>,
}

impl Drop for DoctorSlot {
    fn drop(&mut self) {
        self.shared.held_slots.fetch_sub(1, Ordering::SeqCst);
        self.shared.doctors.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What this process may use: its limits (the open-file limit raised to its hard value
/// first) and the machine's memory, for [`Budgets::derive`].
fn resources() -> Resources {
    let threads = match (sys::soft_limit(sys::Limit::Threads), sys::threads_max()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Resources {
        files: sys::raise_fd_limit().unwrap_or(1024),
        address_space: sys::soft_limit(sys::Limit::AddressSpace),
        memory: sys::physical_memory(),
        threads,
    }
}

fn busy_fallback(running: u32) -> Refusal {
    Refusal::new(LimitKind::Busy, format!("server is busy ({running} tests running)"))
}

/// How long a test should hold its slot: its duration and warm-up plus a second of setup;
/// None for byte-bound tests.
fn expected_length(spec: &TestSpec) -> Option<Duration> {
    let ms = spec.duration_ms()?.saturating_add(spec.omit_ms).saturating_add(1000);
    Some(Duration::from_millis(ms))
}

/// What [`Shared::admit`] decided.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// Run now, as this test number, taking this from the server's totals; the flag is set
    /// if a later test preempts it before it starts.
    Run(u64, TestCost, Arc<AtomicBool>),
    /// Wait in the exclusive queue.
    Wait(Place),
}

/// Server-side checks a valid spec can still fail here.
fn policy_refusal(spec: &TestSpec) -> Option<String> {
    let cc = spec.congestion.as_ref()?;
    let available = sys::available_congestion()?;
    (!available.iter().any(|a| a == cc)).then(|| {
        format!(
            "congestion control {cc:?} is not available on the server (available: {})",
            available.join(" ")
        )
    })
}
