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
//! Fleet runs one after another are a grid (`grid.rs`) whose cells are host counts: a scaling
//! curve's (`fleet --scale`, a campaign's fleet tier), each `repeat` times in the seeded order
//! with `--until-ci` rounds, skipping the fleet runs an earlier, interrupted attempt completed;
//! a single fleet is the grid of one cell, every target once. A fleet run in which no host was
//! measured says nothing of the fleet; after `grid::MAX_FAILURES_IN_A_ROW` of them the curve
//! stops (its servers are gone), as a matrix does. Progress goes to a callback.
//!
//! Why threads: a fleet's sessions are the client driver unchanged, so everything a client
//! run measures (both ends' cost, TCP_INFO, verdicts) comes with every host. The cost is a
//! thread per host and per stream on the coordinator; file descriptors are the bound that
//! matters (checked by the command before it starts).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::plan::fleet::SETUP_LIMIT;
use crate::plan::fleet::{FleetPlan, Target};
use crate::record::{FleetPlace, Outcome, RunRecord};
use crate::session::client::{self, HeldStart, StartGate};
use crate::session::grid::{self, Executor, Grid, MAX_ATTEMPTS_PER_RUN, Slot};
use crate::session::matrix::MatrixOutcome;
use crate::session::{Interrupt, Quiet};
use crate::stats::fleet::{FleetSummary, HostInput, summarize_planned};
use crate::stats::scaling::pending_counts;

/// How often the coordinator looks at the interrupt counter while hosts get ready.
const POLL: Duration = Duration::from_millis(20);

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

/// `targets` with `--each-address` applied, after waiting for the agents when the plan asks
/// (`--wait-agents`, `--expect`: `session::agents`), greeting them with `plan`'s key; a
/// command of `at_least` agents. `status` hears each new line of the wait.
pub fn discover(
    targets: &[Target],
    each_address: bool,
    wait: crate::plan::fleet::AgentWait,
    at_least: usize,
    plan: &crate::plan::ClientPlan,
    interrupt: &Interrupt,
    status: &mut dyn FnMut(&str),
) -> Result<Vec<Target>, crate::session::agents::NotReady> {
    if !wait.awaits() {
        return expand(targets, each_address, plan.family)
            .map_err(crate::session::agents::NotReady::other);
    }
    let resolve = || expand(targets, each_address, plan.family);
    let greet = |t: &Target| crate::session::agents::greet(t, plan);
    crate::session::agents::wait_for(wait, at_least, &resolve, &greet, interrupt, status)
}

/// `targets` with `--each-address` applied (when `each_address`): a name resolving to several
/// addresses of `family` is one target per address. A fleet's hosts, a mesh's agents.
pub fn expand(
    targets: &[Target],
    each_address: bool,
    family: crate::plan::Family,
) -> Result<Vec<Target>, String> {
    use std::net::ToSocketAddrs;
    if !each_address {
        return Ok(targets.to_vec());
    }
    crate::plan::fleet::expand_targets(targets, |host, port| {
        let addrs =
            (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve {host:?}: {e}"))?;
        Ok(addrs.map(|a| a.ip()).filter(|ip| family.allows(ip)).collect())
    })
}

/// Runs the fleet: every target's session at once, held at the gate, released together.
fn run_fleet(plan: &FleetPlan, interrupt: &Interrupt) -> Ran {
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
    let us = |at: Option<Instant>| {
        let after_go = go.zip(at).map(|(g, s)| s.saturating_duration_since(g));
        after_go.map(|d| d.as_micros().try_into().unwrap_or(u64::MAX))
    };
    let hosts = (plan.targets.iter().zip(results))
        .map(|(t, (mut record, (started, first)))| {
            let (started_us, first_byte_us) = (us(started), us(first));
            record.fleet = Some(FleetPlace { label: t.label.clone(), started_us, first_byte_us });
            record
        })
        .collect();
    Ran { hosts, gate_note }
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

/// One fleet run: each host's record, and why its start went ahead without every host, if
/// it did.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Each host's record, in the targets' order, with its place in the fleet (label, measured
    /// start and first byte, microseconds after the go).
    pub hosts: Vec<RunRecord>,
    /// The gate's note (a deadline, an interrupt), if the start did not wait for every host.
    pub gate_note: Option<String>,
}

/// Fleet runs as a grid's executor: cell i is the fleet run of the first `counts[i]` hosts
/// (a scaling curve's host counts; a single fleet's one count, every target).
struct Curve<'a> {
    plan: &'a FleetPlan,
    counts: Vec<usize>,
}

impl Executor for Curve<'_> {
    type Run = Ran;

    fn run(&mut self, slot: Slot, interrupt: &Interrupt) -> Self::Run {
        run_fleet(&self.plan.first(self.counts[slot.cell]), interrupt)
    }

    /// A fleet run in which no host was measured says nothing of the fleet.
    fn failure(&self, run: &Self::Run) -> Option<String> {
        let run = &run.hosts;
        if run.iter().any(|r| r.outcome == Outcome::Completed) {
            return None;
        }
        let first = run.iter().find_map(|r| match &r.outcome {
            Outcome::Failed { error, .. } => {
                Some(format!("{}: {error}", HostInput::placed(r).label))
            }
            _ => None,
        });
        Some(first.unwrap_or_else(|| "no host completed".into()))
    }

    /// With `--until-ci`: the host counts whose total's interval is still too wide
    /// (`stats::scaling::pending_counts`).
    fn pending(&self, runs: &[(Slot, Self::Run)]) -> Vec<usize> {
        let Some(target) = self.plan.until_ci else { return Vec::new() };
        let scale = &self.counts;
        let fleets: Vec<(usize, FleetSummary)> = runs
            .iter()
            .map(|(slot, ran)| {
                let k = scale[slot.cell];
                let inputs: Vec<HostInput<'_>> = ran.hosts.iter().map(HostInput::placed).collect();
                (k, summarize_planned(k, &inputs))
            })
            .collect();
        let bounds = (self.plan.max_repeat as usize, MAX_ATTEMPTS_PER_RUN);
        let pending = pending_counts(&fleets, scale, target, bounds);
        (0..scale.len()).filter(|i| pending.contains(&scale[*i])).collect()
    }

    fn stop_message(&self, failures: u32, last: &str) -> String {
        format!(
            "{failures} fleet runs in a row measured no host (last: {last}); stopping the curve"
        )
    }

    /// A curve's cell by its host count, as its host runs are stored: `k=8`.
    fn label(&self, cell: usize) -> String {
        format!("k={}", self.counts[cell])
    }
}

/// Runs `plan`'s curve (every host count of `plan.scale`, `plan.repeat` times, then with
/// `--until-ci` further rounds) as a grid (`grid.rs`) after `prior`: the host runs (index of
/// the host count in `plan.scale`, repetition, record) of the fleet runs an earlier attempt
/// completed, which are not run again. The outcome's runs start with `prior`, then every host
/// run of each new fleet run; `each` sees each new fleet run.
pub fn run_curve_from(
    plan: &FleetPlan,
    prior: Vec<(usize, u32, RunRecord)>,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(grid::Progress<'_, Ran>),
    each: &mut dyn FnMut(usize, u32, &Ran),
) -> MatrixOutcome {
    let counts = plan.counts();
    let grid = Grid { cells: counts.len(), repeat: plan.repeat, seed: plan.seed };
    let mut earlier: Vec<(Slot, Ran)> = Vec::new();
    for (cell, repetition, record) in prior {
        let slot = Slot { cell, repetition };
        match earlier.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, ran)) => ran.hosts.push(record),
            None => earlier.push((slot, Ran { hosts: vec![record], gate_note: None })),
        }
    }
    let mut exec = Curve { plan, counts: counts.clone() };
    let out = grid.run(&mut exec, earlier, interrupt, progress, &mut |slot, ran| {
        each(counts[slot.cell], slot.repetition, ran)
    });
    let runs = out
        .runs
        .into_iter()
        .flat_map(|(s, ran)| ran.hosts.into_iter().map(move |r| (s.cell, s.repetition, r)))
        .collect();
    let planned = out.planned.iter().map(|s| (s.cell, s.repetition)).collect();
    MatrixOutcome { runs, planned, stopped: out.stopped }
}
