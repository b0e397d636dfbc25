//! Runs a mesh (`linerate mesh`): its cells are ordered pairs of agents and one run is one
//! pair test: connect to agent A, prove the key, ask it to run the test against agent B
//! (`linerate_proto::pair`), and take the record A sends back. The record is A's own, as if A
//! had run `linerate client B` itself: both ends' figures, costs, environments (each naming
//! its node and zone), verdicts.
//!
//! The requester only talks to agents; data flows from A to B (or back, with `-R`), never
//! through the requester, so a mesh can be driven from a laptop or a Job anywhere that
//! reaches the agents' control ports.
//!
//! **Rounds of disjoint pairs.** The pairs run in rounds (`plan::rounds`): every agent takes
//! part in at most one test at a time, and a round's pairs run at once, one thread and one
//! control connection each. N agents need about 2(N−1) rounds instead of N(N−1) tests one
//! after the other: a 100-node fabric in minutes, not hours. What k8s-netperf and Cilium's
//! perf test do — one pair at a time — is `--serial` (`--concurrency 1`): for fabrics where
//! disjoint pairs still share a bottleneck (a spine, an uplink), so that each figure is the
//! path's alone. Every repetition runs the whole schedule again, its rounds in another seeded
//! order; `--until-ci` adds rounds for the pairs whose interval is still too wide.
//!
//! **Networks.** Agents may name the network they serve on (`server --network`): on
//! Kubernetes a DaemonSet on the pod network (`pod`) and one on each node's own network
//! (`host`), both on every node (`generate kubernetes --mesh --both-networks`). When the agents
//! name two networks or more, pairs stay inside a network (`plan::mesh::network_groups`), the
//! agents are named `node/network`, and agents on one node never test in the same round
//! (`plan::rounds::schedule_on`): a node's pod-to-pod and host-to-host tests run one after the
//! other, each with the node's CPUs and NIC to itself. So one run gives both networks on the
//! same node pairs, at nearly the same time, and the summary says what one costs against the
//! other (`stats::mesh::NetworkCost`). k8s-netperf and Cilium's perf test measure the pod and
//! host networks in separate runs, one pair at a time.
//!
//! **Pre-flight.** Before the first test every agent is greeted at once (`preflight`): an
//! agent that does not answer is reported once, and its pairs are stored as failed ("not
//! reachable at pre-flight") without spending their timeouts; an agent that turns the key
//! down stops the mesh before any test, with one message.
//!
//! **Dead agents.** An agent whose last [`MAX_FAILURES_IN_A_ROW`] pair tests all failed, and
//! that then does not answer a greeting, is taken as gone: its remaining pairs are stored as
//! failed without being run, and the mesh goes on with the others. (A failure counts against
//! both ends of its pair, since which end failed is not always known: the greeting keeps a
//! live agent whose partners failed from being given up, which on a loaded 100-agent mesh
//! cascaded through the agents.) A mesh stops early only when interrupted.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use linerate_proto::pair::{PairConn, PairEvent};

use crate::plan::ClientPlan;
use crate::plan::fleet::Target;
use crate::plan::mesh::{MeshPlan, Pair};
use crate::record::{Failure, FailureKind, Outcome, RunRecord};
use crate::session::grid::{MAX_FAILURES_IN_A_ROW, Slot};
use crate::session::matrix::pending_cells;
use crate::session::pump;
use crate::session::{Clock, ControlChannel, Interrupt, SOFTWARE, client};
use crate::stats::integrity::check_record;

/// Asks the agent at `agent` to run `plan`'s test against `target`; the agent's record, or a
/// failed record saying why not. A record that cannot be true (`stats::integrity::
/// check_record`: another test than asked, ends that disagree, a rate no link has, more bytes
/// than the time the requester measured allows) is kept as a `violation` without its figures,
/// never as completed.
pub fn pair_test(
    agent: &Target,
    target: &Target,
    plan: &ClientPlan,
    interrupt: &Interrupt,
) -> RunRecord {
    let asked = std::time::Instant::now();
    let failure = match ask(agent, target, plan, interrupt) {
        Ok(json) => match serde_json::from_value::<RunRecord>(json) {
            Ok(mut record) => {
                let span = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
                let who = format!("agent {}", agent.label);
                let Err(why) = check_record(&record, &plan.spec, span, &who) else {
                    return record;
                };
                record.client = None;
                record.server_results = None;
                record.outcome = Outcome::failed(Failure::new(FailureKind::Violation, why));
                return record;
            }
            Err(e) => Failure::new(
                FailureKind::Incompatible,
                format!("agent {}: its record does not read: {e}", agent.label),
            ),
        },
        Err(e) => Failure::new(FailureKind::of(&e), format!("agent {}: {e:#}", agent.label)),
    };
    let to_target = ClientPlan { host: target.host.clone(), port: target.port, ..plan.clone() };
    let mut record = client::new_record(&to_target);
    record.outcome = Outcome::failed(failure);
    record
}

/// The conversation with one agent: the record as JSON.
fn ask(
    agent: &Target,
    target: &Target,
    plan: &ClientPlan,
    interrupt: &Interrupt,
) -> Result<serde_json::Value> {
    let key = plan.psk.clone().context("a mesh needs the agents' key (--psk-file)")?;
    let addrs = client::resolve(&agent.host, agent.port, plan)?;
    let (stream, _): (TcpStream, SocketAddr) = client::connect_any(&addrs, plan)?;
    let mut ctrl = ControlChannel::new(stream)?;
    let clock = Clock::new();
    let addr = crate::plan::host::format_host_port(&target.host, target.port);
    let mut conn = PairConn::new(
        &addr,
        plan.spec.clone(),
        SOFTWARE,
        key,
        crate::session::random_nonce()?,
        clock.now(),
    )?;
    loop {
        if interrupt.count() > 0 {
            bail!("interrupted by {}", interrupt.last_name());
        }
        match pump::next_event(&mut ctrl, &clock, &mut conn, Duration::from_millis(100), None)? {
            Some(PairEvent::Running) => {}
            Some(PairEvent::Result(json)) => return Ok(json),
            None => return Err(anyhow!("the agent closed the connection without a record")),
        }
    }
}

/// What the pre-flight heard of each agent: its node and zone, or why it did not answer (and
/// whether it turned the requester down).
pub type Greeted = Vec<Result<crate::session::agents::Heard, crate::session::agents::Unheard>>;

/// Greets every agent with the plan's key (`session::agents::greet_all`: many at once), each
/// bounded by the connect timeout and the handshake's. An agent that did not answer (as
/// opposed to one that turned the requester down) is greeted once more, [`REGREET_AFTER`]
/// later, before it is called unreachable: on a real two-node cluster a mesh Job lost every
/// pair of an agent it had heard a second earlier, to one greeting that went unanswered for
/// its whole connect timeout.
pub fn preflight(agents: &[Target], plan: &ClientPlan) -> Greeted {
    let greet = |a: &Target| crate::session::agents::greet(a, plan);
    let mut greeted = crate::session::agents::greet_all(agents, &greet);
    let again: Vec<usize> =
        (0..agents.len()).filter(|&i| matches!(&greeted[i], Err(u) if !u.refused)).collect();
    if again.is_empty() {
        return greeted;
    }
    std::thread::sleep(REGREET_AFTER);
    let retry: Vec<Target> = again.iter().map(|&i| agents[i].clone()).collect();
    for (i, heard) in again.into_iter().zip(crate::session::agents::greet_all(&retry, &greet)) {
        greeted[i] = heard;
    }
    greeted
}

/// How long the pre-flight waits before greeting an agent that did not answer a second time.
pub const REGREET_AFTER: Duration = Duration::from_secs(1);

/// The agents named by the nodes they reported at the pre-flight (`server --node-name`, the
/// DaemonSet's), when those that answered name distinct, printable nodes; by node and network
/// (`node-a/pod`, `node-a/host`: `server --network`) when only those are distinct; else as
/// they were. Pairs then read `node-a -> node-b` whatever addresses the agents have, so a mesh
/// over the pod network and one over the host network compare pair by pair (`compare nA nB`),
/// and a mesh over both sets them side by side itself (`stats::mesh::NetworkCost`).
pub fn named_by_node(agents: &[Target], greeted: &Greeted) -> Vec<Target> {
    let heard: Vec<Option<&crate::session::agents::Heard>> =
        greeted.iter().map(|g| g.as_ref().ok()).collect();
    let answered = heard.iter().flatten().count();
    for with_network in [false, true] {
        let names: Vec<Option<String>> = heard
            .iter()
            .map(|h| {
                let h = (*h)?;
                let node = h.node.clone()?;
                Some(match (&h.network, with_network) {
                    (Some(net), true) => format!("{node}/{net}"),
                    _ => node,
                })
            })
            .collect();
        let distinct: std::collections::HashSet<&String> = names.iter().flatten().collect();
        if answered > 0 && distinct.len() == answered {
            return agents
                .iter()
                .zip(names)
                .map(|(a, name)| Target {
                    label: name.unwrap_or_else(|| a.label.clone()),
                    ..a.clone()
                })
                .collect();
        }
    }
    agents.to_vec()
}

/// A mesh to run: the plan, the agents, the pairs in cell order and their labels, and the
/// agents found dead before the first test (why, by agent).
#[derive(Debug)]
pub struct Pairs<'a> {
    /// The plan (the test, the rounds).
    pub plan: &'a MeshPlan,
    /// The agents, resolved.
    pub agents: &'a [Target],
    /// The pairs, in cell order.
    pub pairs: &'a [Pair],
    /// Their labels, in cell order.
    pub labels: &'a [String],
    /// By agent: why it is not tested (not reachable at pre-flight), if so.
    pub dead: Vec<Option<String>>,
    /// By agent: its host (`plan::rounds::hosts`): agents on one node never test in the same
    /// round.
    pub hosts: Vec<usize>,
}

/// What a mesh ran: the grid's outcome (runs in the order finished), and the agents taken as
/// gone (label, why), in the order found.
#[derive(Debug)]
pub struct MeshOutcome {
    /// `prior`, then every new run.
    pub grid: crate::session::grid::Outcome<RunRecord>,
    /// Agents not tested, or no longer: at pre-flight, or after failing in a row.
    pub dead: Vec<(String, String)>,
    /// Whether some round of the walk held two pairs or more (else nothing ran beside
    /// anything, and there is no interference to check).
    pub shared_rounds: bool,
}

impl Pairs<'_> {
    /// A failed record for `slot`'s pair, not run, saying why.
    fn not_run(&self, slot: Slot, why: &str) -> RunRecord {
        let p = self.pairs[slot.cell];
        let target = &self.agents[p.to];
        let to_target =
            ClientPlan { host: target.host.clone(), port: target.port, ..self.plan.base.clone() };
        let mut record = client::new_record(&to_target);
        record.outcome = Outcome::failed(Failure::new(FailureKind::Network, why.to_string()));
        record
    }

    /// The first dead agent of `slot`'s pair, and why.
    fn dead_end(&self, slot: Slot) -> Option<String> {
        let p = self.pairs[slot.cell];
        [p.from, p.to].into_iter().find_map(|a| {
            self.dead[a].as_ref().map(|why| format!("agent {} {why}", self.agents[a].label))
        })
    }
}

/// Runs the mesh's pairs in rounds after `prior` (completed runs of an interrupted attempt,
/// not run again). `progress` hears before each round's first test and after each test;
/// `each` sees each new run (to store it).
pub fn run_mesh(
    mesh: &mut Pairs<'_>,
    prior: Vec<(Slot, RunRecord)>,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(crate::session::grid::Progress<'_, RunRecord>),
    each: &mut dyn FnMut(Slot, &RunRecord),
) -> MeshOutcome {
    let plan = mesh.plan;
    let n = mesh.agents.len();
    let k = plan.concurrency;
    let done: std::collections::HashSet<Slot> = prior.iter().map(|(s, _)| *s).collect();
    let mut out = crate::session::grid::Outcome { runs: prior, planned: Vec::new(), stopped: None };
    let mut dead: Vec<(String, String)> = (0..n)
        .filter_map(|a| mesh.dead[a].clone().map(|why| (mesh.agents[a].label.clone(), why)))
        .collect();
    let mut in_a_row = vec![0u32; n];
    let mut reps = vec![0u32; mesh.pairs.len()];
    // The walk: every repetition's whole schedule, then rounds of the pending pairs.
    let mut walk: Vec<Vec<Slot>> = Vec::new();
    for rep in 1..=plan.repeat {
        let seed = plan.seed ^ u64::from(rep);
        for round in crate::plan::rounds::schedule_on(&mesh.hosts, mesh.pairs, k, seed) {
            walk.push(round.into_iter().map(|cell| Slot { cell, repetition: rep }).collect());
        }
    }
    let (mut next, mut ran, mut extra) = (0usize, 0usize, 0u64);
    let mut planned: usize = walk.iter().map(Vec::len).sum::<usize>();
    let started = std::time::Instant::now();
    let mut skipped_done = 0usize;
    loop {
        if next == walk.len() {
            let cells = crate::plan::mesh::cells(mesh.labels);
            let runs = out.runs.iter().map(|(s, r)| (s.cell, r));
            let alive = |c: &usize| mesh.dead_end(Slot { cell: *c, repetition: 0 }).is_none();
            let pending: Vec<usize> = pending_cells(plan.until_ci, plan.max_repeat, &cells, runs)
                .into_iter()
                .filter(alive)
                .collect();
            if pending.is_empty() {
                break;
            }
            extra += 1;
            let some: Vec<Pair> = pending.iter().map(|&c| mesh.pairs[c]).collect();
            let seed = plan.seed ^ (extra << 32);
            for round in crate::plan::rounds::schedule_on(&mesh.hosts, &some, k, seed) {
                let slots: Vec<Slot> = round
                    .into_iter()
                    .map(|i| {
                        let cell = pending[i];
                        Slot { cell, repetition: reps[cell] + 1 }
                    })
                    .collect();
                planned += slots.len();
                walk.push(slots);
            }
        }
        if interrupt.count() > 0 {
            out.stopped = Some(format!("interrupted by {}", interrupt.last_name()));
            break;
        }
        let round_no = (next + 1, walk.len());
        let slots = walk[next].clone();
        next += 1;
        for s in &slots {
            reps[s.cell] = reps[s.cell].max(s.repetition);
            out.planned.push(*s);
        }
        let todo: Vec<Slot> = slots.iter().copied().filter(|s| !done.contains(s)).collect();
        skipped_done += slots.len() - todo.len();
        if todo.is_empty() {
            continue;
        }
        let finished_before = ran + skipped_done;
        let eta = |ran: usize, left: usize| {
            (ran > 0).then(|| started.elapsed() / ran as u32 * left as u32)
        };
        let left_after = |d: usize| planned.saturating_sub(d);
        progress(crate::session::grid::Progress {
            slot: todo[0],
            cell: mesh.labels[todo[0].cell].clone(),
            done: finished_before,
            planned,
            eta: eta(ran, left_after(finished_before)),
            tier: None,
            round: Some(round_no),
            finished: None,
        });
        // Pairs of dead agents are not run; the others run at once.
        let (live, gone): (Vec<Slot>, Vec<Slot>) =
            todo.iter().partition(|s| mesh.dead_end(**s).is_none());
        let mut results: Vec<(Slot, RunRecord)> = gone
            .iter()
            .map(|s| (*s, mesh.not_run(*s, &mesh.dead_end(*s).unwrap_or_default())))
            .collect();
        let m = &*mesh;
        let tested: Vec<(Slot, RunRecord)> = std::thread::scope(|scope| {
            let handles: Vec<_> = live
                .iter()
                .map(|s| {
                    let p = m.pairs[s.cell];
                    let (a, b) = (&m.agents[p.from], &m.agents[p.to]);
                    (*s, scope.spawn(move || pair_test(a, b, &m.plan.base, interrupt)))
                })
                .collect();
            handles
                .into_iter()
                .map(|(s, h)| {
                    let r =
                        h.join().unwrap_or_else(|_| m.not_run(s, "the pair test's thread failed"));
                    (s, r)
                })
                .collect()
        });
        results.extend(tested);
        for (slot, record) in results {
            // A pair not run (a dead end) says nothing of its other end.
            let was_run = !gone.contains(&slot);
            each(slot, &record);
            ran += 1;
            let finished_now = ran + skipped_done;
            progress(crate::session::grid::Progress {
                slot,
                cell: mesh.labels[slot.cell].clone(),
                done: finished_now,
                planned,
                eta: eta(ran, left_after(finished_now)),
                tier: None,
                round: Some(round_no),
                finished: Some(&record),
            });
            let p = mesh.pairs[slot.cell];
            let failed = record.outcome.failure().map(|f| f.message);
            for a in [p.from, p.to] {
                if mesh.dead[a].is_some() || !was_run {
                    continue;
                }
                in_a_row[a] = if failed.is_some() { in_a_row[a] + 1 } else { 0 };
                // A partner's fault counts against both ends: before giving an agent up, greet
                // it; one that answers is alive, and its count starts again.
                if in_a_row[a] >= MAX_FAILURES_IN_A_ROW
                    && crate::session::agents::greet(&mesh.agents[a], &plan.base).is_ok()
                {
                    in_a_row[a] = 0;
                }
                if in_a_row[a] >= MAX_FAILURES_IN_A_ROW {
                    let last = failed.clone().unwrap_or_default();
                    let why = format!(
                        "failed its last {} pair tests (last: {last}); its other pairs were not run",
                        in_a_row[a]
                    );
                    dead.push((mesh.agents[a].label.clone(), why.clone()));
                    mesh.dead[a] = Some(why);
                }
            }
            out.runs.push((slot, record));
        }
    }
    let shared_rounds = walk.iter().any(|round| round.len() >= 2);
    MeshOutcome { grid: out, dead, shared_rounds }
}

/// The interference check's runs: each of `cells`' pairs once more, alone, one after the
/// other, after the rounds (`stats::mesh::interference` sets them against their in-round
/// figures). Stops at an interruption; the records are not stored.
pub fn alone(mesh: &Pairs<'_>, cells: &[usize], interrupt: &Interrupt) -> Vec<(usize, RunRecord)> {
    let mut out = Vec::new();
    for &cell in cells {
        if interrupt.count() > 0 {
            break;
        }
        let p = mesh.pairs[cell];
        let (a, b) = (&mesh.agents[p.from], &mesh.agents[p.to]);
        out.push((cell, pair_test(a, b, &mesh.plan.base, interrupt)));
    }
    out
}
