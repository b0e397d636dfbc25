//! Runs a fleet: one test against many `linerate server`s at once, started together.
//!
//! Every target gets its own client session on its own thread (the same driver as
//! `linerate client`, see [`client::run_gated`]), asking its server for a *held start*: the
//! server connects every data stream, says `ready`, and waits. Each session prepares what is
//! slow, encodes its `go` and hands it, with its control connection and its streams' gate, to
//! the fleet's [`Gate`]. When every host is ready (or has failed, or the setup deadline
//! passed), the coordinator's own thread writes every `go` back to back and then opens every
//! host's stream gate at one instant ([`start_all`]): no session thread has to be scheduled
//! for the fleet to start, and every `go` is on the wire before any data, so none waits in a
//! shared link's queue behind another host's upload. Each server starts on its `go`.
//!
//! What skew remains is measured, not assumed: each host's first data byte (written or read)
//! is kept on the coordinator's one clock, and the start skew is their spread
//! (benches/fleet-skew.py measures it over 16 namespaces).
//!
//! A host that cannot be reached, refuses, is not ready in time or dies mid-test does not
//! stop the others: its record holds its error like any failed client run.
//!
//! Why threads: a fleet's sessions are the client driver unchanged, so everything a client
//! run measures (both ends' cost, TCP_INFO, verdicts) comes with every host. The cost is a
//! thread per host and per stream on the coordinator; file descriptors are the bound that
//! matters (checked by the command before it starts).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::plan::fleet::{FleetPlan, Target};
use crate::record::RunRecord;
use crate::session::client::{self, HeldStart, StartGate};
use crate::session::{Interrupt, Quiet};

/// The longest the coordinator waits for every host to be ready, counted from the start of
/// setup; kept below the servers' own wait for `go` ([`linerate_proto::HELD_TIMEOUT`]), so a
/// server never gives up on a fleet that is still gathering.
pub const SETUP_LIMIT: Duration = Duration::from_secs(9);

/// How often the coordinator looks at the interrupt counter while hosts get ready.
const POLL: Duration = Duration::from_millis(20);

/// One host's part of a fleet run.
#[derive(Debug)]
pub struct HostRun {
    /// The target as planned.
    pub target: Target,
    /// Its test, as `linerate client` would have recorded it.
    pub record: RunRecord,
    /// When its streams started, after the fleet's go (None: it never started).
    pub started: Option<Duration>,
    /// When its first data byte moved on the coordinator (sent or received), after the go.
    pub first_byte: Option<Duration>,
}

/// What a fleet run produced.
#[derive(Debug)]
pub struct FleetRun {
    /// One per target, in the plan's order.
    pub hosts: Vec<HostRun>,
    /// Why the gate opened without every host (a deadline or an interrupt), if it did.
    pub gate_note: Option<String>,
}

/// Where the gathering hosts wait.
#[derive(Debug, Default)]
struct GateState {
    /// Hosts neither ready nor failed yet.
    pending: usize,
    /// What the coordinator needs to start each host waiting at the gate.
    held: Vec<HeldStart>,
    /// Set when the gate opens: true = go, false = the fleet was abandoned.
    open: Option<bool>,
}

/// The meeting point of a fleet's sessions.
#[derive(Debug)]
pub struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    /// A gate for `hosts` sessions.
    pub fn new(hosts: usize) -> Self {
        Self {
            state: Mutex::new(GateState { pending: hosts, ..GateState::default() }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        // A panicking session thread cannot leave the counts half-updated (each update is a
        // single assignment), so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A session that ended before reaching the gate (it failed) stops being waited for.
    fn leave(&self) {
        let mut s = self.lock();
        s.pending = s.pending.saturating_sub(1);
        self.changed.notify_all();
    }

    /// Waits until every host is ready or gone, `limit` passes, or an interrupt arrives; then
    /// opens the gate. Returns the go instant (None: nobody was ready, or interrupted) and a
    /// note when hosts were left behind.
    pub fn open_when_ready(
        &self,
        limit: Duration,
        interrupt: &Interrupt,
    ) -> (Option<Instant>, Option<String>) {
        let until = Instant::now() + limit;
        let mut s = self.lock();
        let mut note = None;
        while s.pending > 0 {
            if interrupt.count() > 0 {
                note = Some(format!("interrupted by {} before the start", interrupt.last_name()));
                break;
            }
            let now = Instant::now();
            if now >= until {
                note = Some(format!(
                    "{} host(s) were not ready within {} s and were left out",
                    s.pending,
                    limit.as_secs()
                ));
                break;
            }
            s = self
                .changed
                .wait_timeout(s, POLL.min(until - now))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let go = (!s.held.is_empty() && interrupt.count() == 0).then(|| start_all(&mut s.held));
        s.held.clear();
        s.open = Some(go.is_some());
        self.changed.notify_all();
        (go, note)
    }
}

/// Starts every ready host at once: writes each one's `go` (a few microseconds each, on
/// idle control connections), then opens every host's stream gate at one instant. Every `go`
/// is out before any data, so none waits behind another host's data in a shared link's
/// queue; and no host's thread has to be scheduled in between. Returns when the first `go`
/// was written: the fleet's go.
fn start_all(held: &mut [HeldStart]) -> Instant {
    let go = Instant::now();
    for h in held.iter_mut() {
        // A host whose control connection broke fails on its own: its server never starts,
        // and its session gives up waiting for the `start`.
        let _ = h.control.write_all(&h.go);
    }
    let at = Instant::now();
    for h in held.iter() {
        h.streams.open(at);
    }
    go
}

/// One session's view of the gate.
struct HostGate<'g> {
    gate: &'g Gate,
    arrived: AtomicBool,
    /// When its streams' gate opened, and when its first data byte moved.
    times: Mutex<(Option<Instant>, Option<Instant>)>,
}

impl<'g> HostGate<'g> {
    fn new(gate: &'g Gate) -> Self {
        Self { gate, arrived: AtomicBool::new(false), times: Mutex::new((None, None)) }
    }

    fn times(&self) -> std::sync::MutexGuard<'_, (Option<Instant>, Option<Instant>)> {
        self.times.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session ended: a host that never reached the gate stops being waited for.
    fn ended(&self) {
        if !self.arrived.load(Ordering::Relaxed) {
            self.gate.leave();
        }
    }
}

impl StartGate for HostGate<'_> {
    fn arrive(&self, held: HeldStart) -> bool {
        let streams = held.streams.clone();
        let mut s = self.gate.lock();
        if s.open.is_some() {
            return false; // too late: the fleet started (or was abandoned) without us
        }
        self.arrived.store(true, Ordering::Relaxed);
        s.pending = s.pending.saturating_sub(1);
        s.held.push(held);
        self.gate.changed.notify_all();
        while s.open.is_none() {
            s = self.gate.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        let go = s.open == Some(true);
        drop(s);
        self.times().0 = streams.started();
        go
    }

    fn first_byte(&self, at: Option<Instant>) {
        self.times().1 = at;
    }
}

/// The plan's targets with `--each-address` applied: names resolved now (the family of
/// `-4`/`-6` respected), one target per address.
pub fn expanded(plan: &FleetPlan) -> Result<Vec<Target>, String> {
    use std::net::ToSocketAddrs;
    if !plan.each_address {
        return Ok(plan.targets.clone());
    }
    crate::plan::fleet::expand_targets(&plan.targets, |host, port| {
        let addrs = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve fleet target {host:?}: {e}"))?;
        Ok(addrs.map(|a| a.ip()).filter(|ip| plan.base.family.allows(ip)).collect())
    })
}

/// Runs the fleet: every target's session at once, held at the gate, released together.
pub fn run_fleet(plan: &FleetPlan, interrupt: &Interrupt) -> FleetRun {
    let gate = Gate::new(plan.targets.len());
    let (results, (go, gate_note)) = std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .targets
            .iter()
            .map(|t| {
                let mut host_plan = plan.plan_for(t);
                // Past the setup limit the fleet starts without this host: waiting longer in
                // a server's queue would only hold the fleet's end (a server that says
                // `queued` for ever, for as long as --queue-timeout).
                host_plan.queue_timeout = host_plan.queue_timeout.min(SETUP_LIMIT);
                let gate = &gate;
                std::thread::Builder::new().name(format!("fleet {}", t.label)).spawn_scoped(
                    scope,
                    move || {
                        let me = HostGate::new(gate);
                        let record =
                            client::run_gated(&host_plan, &mut Quiet, interrupt, Some(&me));
                        me.ended();
                        let times = *me.times();
                        (record, times)
                    },
                )
            })
            .collect();
        for h in &handles {
            if h.is_err() {
                gate.leave(); // never to arrive
            }
        }
        let opened = gate.open_when_ready(SETUP_LIMIT, interrupt);
        let results: Vec<_> = handles
            .into_iter()
            .zip(&plan.targets)
            .map(|(h, t)| match h {
                Ok(h) => h.join().unwrap_or_else(|_| (crashed(plan, t), (None, None))),
                Err(e) => (could_not_spawn(plan, t, &e), (None, None)),
            })
            .collect();
        (results, opened)
    });
    let hosts = plan
        .targets
        .iter()
        .zip(results)
        .map(|(t, (record, (started, first)))| {
            let after_go =
                |at: Option<Instant>| go.zip(at).map(|(g, s)| s.saturating_duration_since(g));
            HostRun {
                target: t.clone(),
                record,
                started: after_go(started),
                first_byte: after_go(first),
            }
        })
        .collect();
    FleetRun { hosts, gate_note }
}

fn failed_record(plan: &FleetPlan, t: &Target, why: String) -> RunRecord {
    let mut record = client::new_record(&plan.plan_for(t));
    record.outcome = crate::record::Outcome::failed(crate::record::Failure::new(
        crate::record::FailureKind::Environment,
        why,
    ));
    record
}

fn crashed(plan: &FleetPlan, t: &Target) -> RunRecord {
    failed_record(plan, t, "the session thread panicked (a bug in linerate)".into())
}

fn could_not_spawn(plan: &FleetPlan, t: &Target, e: &std::io::Error) -> RunRecord {
    failed_record(plan, t, format!("cannot start a thread for this host: {e}"))
}
