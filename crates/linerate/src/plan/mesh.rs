//! The typed plan of `linerate mesh`: agents (`linerate server --agent`) test each other,
//! every ordered pair, in rounds of disjoint pairs (`plan::rounds`; one pair at a time with
//! `--serial`, what k8s-netperf does between nodes), with repetitions and confidence
//! intervals per pair.
//!
//! A mesh's cells are ordered pairs of agents: `A -> B` is agent A sending to agent B (the
//! test's direction flag turns it round as for any test). Every ordered pair by default;
//! `--sample` takes a balanced or a by-zone sample of them (`plan::sample`), for large meshes
//! (n agents have n(n-1) pairs). One pair is one cell with the grid's slots (`session::grid`), so repetitions,
//! `--until-ci`, the shuffled order and `--resume` work as for a matrix.
//!
//! Pure: parsing, pairs and identities only. Names are resolved when the mesh runs.

use serde::{Deserialize, Serialize};

use crate::plan::ClientPlan;
use crate::plan::fleet::Target;

/// The fewest agents a mesh takes.
pub const MIN_AGENTS: usize = 2;
/// The most agents: 2,048 agents are 4,192,256 ordered pairs, 4,094 rounds of disjoint
/// pairs (`plan::rounds`); past a few hundred, sample pairs (`--sample`).
pub const MAX_AGENTS: usize = 2048;

/// The most pairs one requester runs at once: each is a thread and a control connection
/// (two file descriptors with its name lookup) in the requester, and the agents' own data
/// connections are theirs. Past it, `--concurrency` is refused with this bound.
pub const MAX_CONCURRENCY: usize = 512;

/// `linerate mesh`.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshPlan {
    /// The agents, in the order given (names resolved with `--each-address` when it runs).
    pub agents: Vec<Target>,
    /// The test every pair runs (its host and port are the target agent's).
    pub base: ClientPlan,
    /// `--sample`: every ordered pair, a balanced sample, or a sample by zone.
    pub sample: crate::plan::sample::Sample,
    /// `--each-address`: a name resolving to several addresses is one agent per address.
    pub each_address: bool,
    /// `--wait-agents`, `--expect`.
    pub agent_wait: crate::plan::fleet::AgentWait,
    /// Pairs at once: `--concurrency K`, 1 with `--serial`; by default every pair of a round
    /// (`plan::rounds`), up to [`MAX_CONCURRENCY`].
    pub concurrency: usize,
    /// `--dry-run`: print the plan and exit, testing nothing.
    pub dry_run: bool,
    /// `--interference-sample N`: pairs run again alone after the rounds, to tell whether the
    /// pairs of a round disturbed each other (0: no check).
    pub interference: usize,
    /// `--repeat`: runs per pair in the first round.
    pub repeat: u32,
    /// `--until-ci`.
    pub until_ci: Option<f64>,
    /// `--max-repeat`.
    pub max_repeat: u32,
    /// The seed of the run order (and of the pair sample).
    pub seed: u64,
    /// `--resume`.
    pub resume: Option<Option<i64>>,
    /// Hidden `--stop-after N`.
    pub stop_after: Option<usize>,
    /// `--every`, `--slip`: whole meshes on a schedule, each its own group.
    pub every: Option<crate::plan::Schedule>,
    /// Where the key came from (`--psk-file`), for messages about it.
    pub key_file: Option<std::path::PathBuf>,
}

/// Pairs the interference check runs again alone, by default: at `-t 1` about 16 s more.
pub const DEFAULT_INTERFERENCE_SAMPLE: usize = 8;

/// The cells the interference check samples: up to `k` of `completed` (cells with completed
/// runs), chosen with `seed`, in cell order.
pub fn interference_sample(completed: &[usize], k: usize, seed: u64) -> Vec<usize> {
    let mut chosen: Vec<usize> =
        crate::plan::matrix::shuffled(completed.to_vec(), seed ^ 0x696e_7466)
            .into_iter()
            .take(k)
            .collect();
    chosen.sort_unstable();
    chosen
}

/// One ordered pair: indexes into the agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// The agent that runs the test (the client).
    pub from: usize,
    /// The agent it tests (the server).
    pub to: usize,
}

/// Whether the user named some agent (`HOST=LABEL`): an agent given without one is called by
/// its address as written (`parse_target`). Named agents keep their names; otherwise a mesh
/// names them by the nodes they report.
pub fn labelled(agents: &[Target]) -> bool {
    let written = |t: &Target| {
        t.label == t.host || t.label == crate::plan::host::format_host_port(&t.host, t.port)
    };
    agents.iter().any(|t| !written(t))
}

/// The agents by network, when those heard name two networks or more (`server --network`:
/// on Kubernetes a pod-network and a host-network agent on every node): each group the
/// agents of one network, in order, then those that named none or were not heard (a group
/// of their own). A mesh pairs agents inside a group only: a pod-network agent against a
/// host-network one measures neither. None: one network or none named, every pair possible.
pub fn network_groups(networks: &[Option<String>]) -> Option<Vec<Vec<usize>>> {
    let mut by: std::collections::BTreeMap<Option<&str>, Vec<usize>> = Default::default();
    for (i, n) in networks.iter().enumerate() {
        by.entry(n.as_deref()).or_default().push(i);
    }
    if by.keys().flatten().count() < 2 {
        return None;
    }
    // Named networks first (BTreeMap puts None first).
    let unnamed = by.remove(&None);
    Some(by.into_values().chain(unnamed).collect())
}

/// The cell label of a pair: `A -> B`, by the agents' labels.
pub fn pair_label(agents: &[Target], p: Pair) -> String {
    let name = |i: usize| agents.get(i).map_or("?", |t| t.label.as_str());
    format!("{} -> {}", name(p.from), name(p.to))
}

/// The grid cells of pairs labelled `labels`: each known by its label alone (a pair has no
/// axis values).
pub fn cells(labels: &[String]) -> Vec<crate::plan::matrix::Cell> {
    labels
        .iter()
        .enumerate()
        .map(|(index, l)| crate::plan::matrix::Cell {
            index,
            values: Vec::new(),
            stored_as: Some(l.clone()),
        })
        .collect()
}

/// What identifies a mesh in the history: the agents (as resolved), the pairs, the test and
/// the rounds. `--resume` continues only a mesh with the same identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshIdentity {
    /// The agents, as the mesh resolved them.
    pub agents: Vec<Target>,
    /// The pairs run, in cell order.
    pub pairs: Vec<Pair>,
    /// The test.
    pub spec: linerate_proto::TestSpec,
    /// `--repeat`, `--until-ci`, `--max-repeat`.
    #[serde(flatten)]
    pub rounds: super::StoredRounds,
}

impl MeshIdentity {
    /// The cell labels, in cell order.
    pub fn labels(&self) -> Vec<String> {
        self.pairs.iter().map(|p| pair_label(&self.agents, *p)).collect()
    }
}

/// Checks the agents of a mesh: how many, and no agent twice.
pub fn check_agents(agents: &[Target]) -> Result<(), String> {
    if agents.len() < MIN_AGENTS {
        return Err(format!(
            "a mesh needs at least {MIN_AGENTS} agents (it has {}): name them, or a name that \
             resolves to several with --each-address",
            agents.len()
        ));
    }
    if agents.len() > MAX_AGENTS {
        return Err(format!(
            "a mesh takes at most {MAX_AGENTS} agents ({} given); sample pairs of smaller meshes",
            agents.len()
        ));
    }
    crate::plan::fleet::check_targets(agents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_given_without_labels_are_told_from_named_ones() {
        let parse = |t: &[&str]| -> Vec<Target> {
            t.iter().map(|t| crate::plan::fleet::parse_target(t, 5201).expect(t)).collect()
        };
        assert!(!labelled(&parse(&["a", "b:5202", "10.0.0.1:5201", "[fd00::2]:5203", "::1"])));
        assert!(labelled(&parse(&["a", "b:5202=db"])));
    }

    #[test]
    fn agents_are_grouped_by_network_only_when_two_are_named() {
        let n = |v: &[Option<&str>]| v.iter().map(|s| s.map(String::from)).collect::<Vec<_>>();
        assert_eq!(network_groups(&n(&[None, None])), None);
        assert_eq!(network_groups(&n(&[Some("pod"), Some("pod"), None])), None);
        let groups = network_groups(&n(&[Some("pod"), Some("host"), None, Some("pod")]));
        assert_eq!(groups, Some(vec![vec![1], vec![0, 3], vec![2]]), "host, pod, then unnamed");
        let pairs = crate::plan::sample::pairs_within(
            &groups.expect("groups"),
            crate::plan::sample::Sample::Every,
            1,
            &[],
            &[],
        )
        .expect("pairs");
        assert_eq!(pairs, vec![Pair { from: 0, to: 3 }, Pair { from: 3, to: 0 }]);
    }

    #[test]
    fn a_mesh_needs_two_distinct_agents() {
        let t = |h: &str| Target { host: h.into(), port: 5201, label: h.into() };
        assert!(check_agents(&[t("a")]).unwrap_err().contains("at least 2"));
        assert!(check_agents(&[t("a"), t("a")]).is_err());
        assert!(check_agents(&[t("a"), t("b")]).is_ok());
    }
}
