//! Runs a mesh (`linerate mesh`): a grid (`grid.rs`) whose cells are ordered pairs of agents
//! and whose run is one pair test: connect to agent A, prove the key, ask it to run the test
//! against agent B (`linerate_proto::pair`), and take the record A sends back. The record is
//! A's own, as if A had run `linerate client B` itself: both ends' figures, costs,
//! environments (each naming its node and zone), verdicts.
//!
//! The requester only talks to agents; data flows from A to B (or back, with `-R`), never
//! through the requester, so a mesh can be driven from a laptop or a Job anywhere that
//! reaches the agents' control ports.
//!
//! One pair runs at a time: a mesh measures what each path delivers on its own, as
//! k8s-netperf does; a fleet measures what paths deliver together.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use linerate_proto::pair::{PairConn, PairEvent};

use crate::plan::ClientPlan;
use crate::plan::fleet::Target;
use crate::plan::mesh::{MeshPlan, Pair};
use crate::record::{Failure, FailureKind, Outcome, RunRecord};
use crate::session::grid::{Executor, Grid, Slot};
use crate::session::matrix::pending_cells;
use crate::session::pump;
use crate::session::{Clock, ControlChannel, Interrupt, SOFTWARE, client};

/// Asks the agent at `agent` to run `plan`'s test against `target`; the agent's record, or a
/// failed record saying why not.
pub fn pair_test(agent: &Target, target: &Target, plan: &ClientPlan, interrupt: &Interrupt) -> RunRecord {
    let failure = match ask(agent, target, plan, interrupt) {
        Ok(json) => match serde_json::from_value::<RunRecord>(json) {
            Ok(record) => return record,
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
fn ask(agent: &Target, target: &Target, plan: &ClientPlan, interrupt: &Interrupt) -> Result<serde_json::Value> {
    let key = plan.psk.clone().context("a mesh needs the agents' key (--psk-file)")?;
    let addrs = client::resolve(&agent.host, agent.port, plan)?;
    let (stream, _): (TcpStream, SocketAddr) = client::connect_any(&addrs, plan)?;
    let mut ctrl = ControlChannel::new(stream)?;
    let clock = Clock::new();
    let addr = crate::plan::host::format_host_port(&target.host, target.port);
    let mut conn =
        PairConn::new(&addr, plan.spec.clone(), SOFTWARE, key, crate::session::random_nonce()?, clock.now())?;
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

/// The agents named by the nodes they report (`server --node-name`, the DaemonSet's), when
/// every one answers with a distinct, printable node name; else as they were. Pairs then read
/// `node-a -> node-b` whatever addresses the agents have, so a mesh over the pod network and
/// one over the host network compare pair by pair (`compare nA nB`).
pub fn named_by_node(agents: &[Target], plan: &ClientPlan) -> Vec<Target> {
    let doctor = crate::plan::DoctorPlan {
        host: None,
        port: 0,
        bind: plan.bind,
        family: plan.family,
        json: false,
        link_bits_per_second: None,
        connect_timeout: plan.connect_timeout,
        psk: plan.psk.clone(),
    };
    let nodes: Vec<Option<String>> = std::thread::scope(|s| {
        let asked: Vec<_> = agents
            .iter()
            .map(|a| {
                let d = crate::plan::DoctorPlan { port: a.port, ..doctor.clone() };
                s.spawn(move || {
                    let env = crate::session::doctor::environment_of(&d, &a.host).ok()?;
                    env.node.filter(|n| n.len() <= 253 && !n.chars().any(char::is_control))
                })
            })
            .collect();
        asked.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    let distinct: std::collections::HashSet<&String> = nodes.iter().flatten().collect();
    if distinct.len() != agents.len() {
        return agents.to_vec();
    }
    agents
        .iter()
        .zip(nodes)
        .map(|(a, node)| Target { label: node.unwrap_or_else(|| a.label.clone()), ..a.clone() })
        .collect()
}

/// A mesh's pairs as a grid's executor: one pair test per run.
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
}

impl Executor for Pairs<'_> {
    type Run = RunRecord;

    fn run(&mut self, slot: Slot, interrupt: &Interrupt) -> RunRecord {
        let p = self.pairs[slot.cell];
        pair_test(&self.agents[p.from], &self.agents[p.to], &self.plan.base, interrupt)
    }

    fn failure(&self, run: &RunRecord) -> Option<String> {
        run.outcome.failure().map(|f| f.message)
    }

    fn pending(&self, runs: &[(Slot, RunRecord)]) -> Vec<usize> {
        let cells = crate::plan::mesh::cells(self.labels);
        let runs = runs.iter().map(|(s, r)| (s.cell, r));
        pending_cells(self.plan.until_ci, self.plan.max_repeat, &cells, runs)
    }

    fn stop_message(&self, failures: u32, last: &str) -> String {
        format!("{failures} pair tests in a row failed (last: {last}); stopping the mesh")
    }
}

/// Runs the mesh's pairs after `prior` (completed runs of an interrupted attempt, not run
/// again). `progress` hears before and after each run; `each` sees each new run (to store it).
pub fn run_mesh(
    mut mesh: Pairs<'_>,
    prior: Vec<(Slot, RunRecord)>,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(crate::session::grid::Progress<'_, RunRecord>),
    each: &mut dyn FnMut(Slot, &RunRecord),
) -> crate::session::grid::Outcome<RunRecord> {
    let grid = Grid { cells: mesh.pairs.len(), repeat: mesh.plan.repeat, seed: mesh.plan.seed };
    grid.run(&mut mesh, prior, interrupt, progress, each)
}
