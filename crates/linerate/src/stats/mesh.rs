//! A mesh's figures: each pair's statistics (the matrix's, one pair being one cell), the
//! place of every agent as its records name it (node and zone, each end stamping its own), the
//! pairs grouped by zone, and findings in words.
//!
//! **Where agents are.** Each pair's record holds both ends' environments; the requesting
//! agent stamps its node and zone into the client's, the target into the server's
//! (`server --node-name/--zone`). An agent's place is what its records say; one that never
//! completed a run has none.
//!
//! **Findings.** Pair means are compared, never single runs:
//! - by zone direction (`zone b -> zone a`), when every agent names a zone and there are two
//!   directions or more: a direction is reported slow when its pairs' mean is at least
//!   [`SLOW_SHARE`] below the mean of the fastest direction's pairs *and* its fastest pair is
//!   slower than the slowest of those (no overlap), so that one bad pair does not condemn a
//!   zone. The fastest direction is the reference, not all other pairs, because a slow link
//!   between two zones slows both directions across it;
//! - by network, when the agents name two networks or more on the same nodes (`server
//!   --network`: a pod-network and a host-network agent on every node): for every ordered
//!   node pair tested on both, each network's pair mean against the reference network's (the
//!   one named `host` if there is one — the path without the pod network's overlay, bridges
//!   and policies — else the first by name), with whether the two pairs' 95 % intervals are
//!   apart ([`NetworkCost`]); one finding per network: "pod-to-pod is 22 % below host-to-host
//!   on node-a -> node-b". A cost within the intervals is said to be within the noise; with
//!   one run a pair there is no interval, and the finding says so;
//! - otherwise (or besides, for pairs inside a zone direction not reported) by pair: a pair
//!   whose 95 % interval lies wholly below [`SLOW_SHARE`] under the median pair mean.
//!   A reported group or pair names the verdict its runs gave when they all agree (each
//!   pair's most common verdict), and says so when they do not: a cause is named only with
//!   that evidence.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::plan::matrix::Cell;
use crate::plan::mesh::Pair;
use crate::record::RunRecord;
use crate::stats::matrix::{CellSummary, summarize_matrix};

/// How much slower than the rest a zone direction or a pair must be to be reported.
pub const SLOW_SHARE: f64 = 0.10;

/// Where one agent is, as its records said.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentPlace {
    /// Its label.
    pub label: String,
    /// `--node-name`, if it said.
    pub node: Option<String>,
    /// `--zone`, if it said.
    pub zone: Option<String>,
    /// `--network`, if it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
}

/// Some of a mesh's pairs: a zone direction (`zone a -> zone b`), or a relation (`same node`,
/// `cross node`, `same zone`, `cross zone`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairGroup {
    /// What the pairs have in common.
    pub name: String,
    /// Pairs with completed runs.
    pub pairs: usize,
    /// Mean of those pairs' means, bit/s.
    pub mean_bits_per_second: f64,
    /// The slowest pair mean.
    pub min_bits_per_second: f64,
    /// The fastest pair mean.
    pub max_bits_per_second: f64,
}

impl PairGroup {
    /// The group `name` of pairs whose means are `m` (at least one).
    fn of(name: String, m: &[f64]) -> Self {
        PairGroup {
            name,
            pairs: m.len(),
            mean_bits_per_second: mean(m),
            min_bits_per_second: m.iter().copied().fold(f64::INFINITY, f64::min),
            max_bits_per_second: m.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// What a stored mesh's report needs besides its cells: its agents' labels and its pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshShape {
    /// The agents' labels, in order.
    pub agents: Vec<String>,
    /// The pairs, in cell order.
    pub pairs: Vec<Pair>,
}

/// Everything a mesh shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeshSummary {
    /// The agents, in order.
    pub agents: Vec<AgentPlace>,
    /// Each pair's agents, in cell order.
    pub pairs: Vec<Pair>,
    /// Each pair's statistics, in cell order.
    pub cells: Vec<CellSummary>,
    /// The pairs by zone direction (empty unless every agent named a zone).
    pub zones: Vec<PairGroup>,
    /// Same node against cross node (when some pair's ends share a node), same zone against
    /// cross zone (when every agent named a zone and both kinds of pair exist).
    pub relations: Vec<PairGroup>,
    /// Each network against the reference network on the same node pairs (empty unless the
    /// agents name two networks or more).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub networks: Vec<NetworkCost>,
    /// Conclusions in words.
    pub findings: Vec<String>,
}

/// One ordered node pair tested on two networks: the network's pair against the reference's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkCost {
    /// The node pair, `node-a -> node-b`.
    pub nodes: String,
    /// The network set against the reference (`pod`).
    pub network: String,
    /// The reference (`host`).
    pub reference: String,
    /// The network's pair mean, bit/s.
    pub bits_per_second: f64,
    /// The reference's pair mean, bit/s.
    pub reference_bits_per_second: f64,
    /// How much the network delivers more (+) or less (−) than the reference, percent.
    pub change_percent: f64,
    /// Whether the two pairs' 95 % intervals are apart: None when either pair has no interval
    /// (one run).
    pub beyond_noise: Option<bool>,
}

/// Summarises a mesh of `labels` agents, its `pairs` (cells) and runs `(cell, record)`.
pub fn summarize_mesh<R: std::borrow::Borrow<RunRecord>>(
    labels: &[String],
    pairs: &[Pair],
    cells: &[Cell],
    runs: &[(usize, R)],
    until_ci: Option<f64>,
) -> MeshSummary {
    let matrix = summarize_matrix(cells, runs, until_ci);
    let mut agents: Vec<AgentPlace> =
        labels.iter().map(|l| AgentPlace { label: l.clone(), ..Default::default() }).collect();
    for (cell, record) in runs {
        let record: &RunRecord = std::borrow::Borrow::borrow(record);
        let Some(p) = pairs.get(*cell) else { continue };
        let env = |side: Option<&linerate_proto::SideResults>| {
            side.and_then(|s| s.environment.as_deref()).cloned()
        };
        for (agent, env) in
            [(p.from, env(record.client.as_ref())), (p.to, env(record.server_results.as_ref()))]
        {
            if let (Some(a), Some(e)) = (agents.get_mut(agent), env) {
                a.node = a.node.take().or(e.node);
                a.zone = a.zone.take().or(e.zone);
                a.network = a.network.take().or(e.network);
            }
        }
    }
    let means: Vec<Option<f64>> =
        matrix.cells.iter().map(|c| c.bits_per_second.as_ref().map(|s| s.mean)).collect();
    let zones = zone_groups(&agents, pairs, &means);
    let relations = relations(&agents, pairs, &means);
    let networks = network_costs(&agents, pairs, &matrix.cells);
    let mut findings = Vec::new();
    let mut explained = vec![false; pairs.len()];
    // The reference: the fastest zone direction (by its pairs' mean).
    let fastest =
        zones.iter().max_by(|a, b| a.mean_bits_per_second.total_cmp(&b.mean_bits_per_second));
    if let (true, Some(reference)) = (zones.len() >= 2, fastest) {
        let members = |name: &str| -> Vec<usize> {
            (0..pairs.len())
                .filter(|i| means[*i].is_some())
                .filter(|i| zone_name(&agents, pairs[*i]).as_deref() == Some(name))
                .collect()
        };
        let outside = members(&reference.name);
        for g in zones.iter().filter(|g| g.name != reference.name) {
            let inside = members(&g.name);
            if let Some(f) =
                slow_group(&g.name, &reference.name, &inside, &outside, &means, &matrix.cells)
            {
                findings.push(f);
                for i in inside {
                    explained[i] = true;
                }
            }
        }
    }
    // Pairs are set against the pairs of their own network: another network's are not peers.
    let network_of = |p: &Pair| agents.get(p.from).and_then(|a| a.network.clone());
    let mut by_network: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        by_network.entry(network_of(p)).or_default().push(i);
    }
    for members in by_network.values() {
        findings.extend(slow_pairs(&matrix.cells, members, &explained));
    }
    if findings.is_empty() && means.iter().flatten().count() >= 2 {
        let others = if by_network.len() > 1 { "the others of its network" } else { "the others" };
        findings.push(format!(
            "no pair is {:.0} % or more slower than {others} with its whole 95 % interval below \
             them: the pairs deliver alike",
            SLOW_SHARE * 100.0
        ));
    }
    if !networks.is_empty() {
        findings.splice(0..0, network_findings(&networks));
    }
    MeshSummary {
        agents,
        pairs: pairs.to_vec(),
        cells: matrix.cells,
        zones,
        relations,
        networks,
        findings,
    }
}

/// Each network's pairs against the reference network's on the same ordered node pairs (see
/// the module's doc); empty unless two networks or more are named.
fn network_costs(agents: &[AgentPlace], pairs: &[Pair], cells: &[CellSummary]) -> Vec<NetworkCost> {
    let names: std::collections::BTreeSet<&str> =
        agents.iter().filter_map(|a| a.network.as_deref()).collect();
    if names.len() < 2 {
        return Vec::new();
    }
    let reference = if names.contains("host") {
        "host"
    } else {
        names.iter().next().copied().unwrap_or_default()
    };
    // (network, from node, to node) -> the pair's rate, for measured pairs of one network on
    // two nodes.
    let mut by = BTreeMap::new();
    for (p, cell) in pairs.iter().zip(cells) {
        let (Some(a), Some(b)) = (agents.get(p.from), agents.get(p.to)) else { continue };
        let (Some(na), Some(nb)) = (a.network.as_deref(), b.network.as_deref()) else { continue };
        let (Some(from), Some(to)) = (a.node.as_deref(), b.node.as_deref()) else { continue };
        if let (true, true, Some(rate)) = (na == nb, from != to, cell.bits_per_second.as_ref()) {
            by.insert((na, from, to), rate);
        }
    }
    let mut out = Vec::new();
    for (&(network, from, to), x) in &by {
        if network == reference {
            continue;
        }
        let Some(r) = by.get(&(reference, from, to)).filter(|r| r.mean > 0.0) else { continue };
        let beyond_noise = match (x.ci95, r.ci95) {
            (Some((xl, xh)), Some((rl, rh))) => Some(xh < rl || rh < xl),
            _ => None,
        };
        out.push(NetworkCost {
            nodes: format!("{from} -> {to}"),
            network: network.to_string(),
            reference: reference.to_string(),
            bits_per_second: x.mean,
            reference_bits_per_second: r.mean,
            change_percent: (x.mean / r.mean - 1.0) * 100.0,
            beyond_noise,
        });
    }
    out
}

/// One finding per network set against the reference: how much its pairs deliver below (or
/// above) the reference's on the same node pairs, the node pairs named (the three furthest
/// first), and whether that is beyond the runs' noise.
fn network_findings(costs: &[NetworkCost]) -> Vec<String> {
    let mut by: BTreeMap<&str, Vec<&NetworkCost>> = BTreeMap::new();
    for c in costs {
        by.entry(c.network.as_str()).or_default().push(c);
    }
    let words = |c: &NetworkCost| {
        let way = if c.change_percent < 0.0 { "below" } else { "above" };
        format!("{:.0} % {way} on {}", c.change_percent.abs(), c.nodes)
    };
    by.into_iter()
        .map(|(network, mut v)| {
            let reference = v[0].reference.clone();
            v.sort_by(|a, b| a.change_percent.abs().total_cmp(&b.change_percent.abs()).reverse());
            let named: Vec<String> = v.iter().take(3).map(|c| words(c)).collect();
            let mut changes: Vec<f64> = v.iter().map(|c| c.change_percent).collect();
            changes.sort_by(f64::total_cmp);
            let median = crate::stats::sample::median_of_sorted(&changes);
            let more = match v.len() {
                1..=3 => String::new(),
                n => format!(
                    " and {} more node pairs; the median of {n}: {:.0} % {}",
                    n - 3,
                    median.abs(),
                    if median < 0.0 { "below" } else { "above" }
                ),
            };
            let noise = match (
                v.iter().filter(|c| c.beyond_noise == Some(true)).count(),
                v.iter().filter(|c| c.beyond_noise.is_some()).count(),
            ) {
                (_, 0) => "one run a pair: no interval to tell it from the noise".to_string(),
                (apart, judged) if apart == judged => {
                    "every pair's 95 % interval apart from its reference's".to_string()
                }
                (apart, judged) => format!(
                    "{apart} of {judged} node pairs with 95 % intervals apart, {} within the noise",
                    judged - apart
                ),
            };
            format!(
                "{network}-to-{network} is {}{more}, against {reference}-to-{reference} on the same \
                 node pairs ({noise})",
                named.join(", ")
            )
        })
        .collect()
}

/// `zone a -> zone b` of a pair, when both agents named a zone.
fn zone_name(agents: &[AgentPlace], p: Pair) -> Option<String> {
    let z = |i: usize| agents.get(i).and_then(|a| a.zone.clone());
    Some(format!("zone {} -> zone {}", z(p.from)?, z(p.to)?))
}

fn zone_groups(agents: &[AgentPlace], pairs: &[Pair], means: &[Option<f64>]) -> Vec<PairGroup> {
    if agents.iter().any(|a| a.zone.is_none()) {
        return Vec::new();
    }
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        let (Some(name), Some(m)) = (zone_name(agents, *p), means[i]) else { continue };
        by.entry(name).or_default().push(m);
    }
    by.into_iter().map(|(name, m)| PairGroup::of(name, &m)).collect()
}

/// Same against cross node, and same against cross zone, where both kinds exist and are known.
fn relations(agents: &[AgentPlace], pairs: &[Pair], means: &[Option<f64>]) -> Vec<PairGroup> {
    type Place = fn(&AgentPlace) -> Option<&String>;
    let by: [(Place, [&'static str; 2]); 2] = [
        (|a| a.node.as_ref(), ["same node", "cross node"]),
        (|a| a.zone.as_ref(), ["same zone", "cross zone"]),
    ];
    let mut out = Vec::new();
    for (place, names) in by {
        let mut split: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for (p, m) in pairs.iter().zip(means) {
            let ends = (agents.get(p.from).and_then(place), agents.get(p.to).and_then(place));
            if let (Some(a), Some(b), Some(m)) = (ends.0, ends.1, m) {
                split[usize::from(a != b)].push(*m);
            }
        }
        if split.iter().all(|s| !s.is_empty()) {
            for (name, m) in names.into_iter().zip(&split) {
                out.push(PairGroup::of(name.to_string(), m));
            }
        }
    }
    out
}

/// What the runs of `cells` say limited them: `; every pair's runs were mostly X-limited`,
/// or that they do not agree.
fn cause(cells: &[&CellSummary]) -> String {
    let limits: Vec<&str> = cells.iter().filter_map(|c| c.limit.as_deref()).collect();
    match limits.first() {
        Some(first) if limits.len() == cells.len() && limits.iter().all(|l| l == first) => {
            format!("; the verdict of most runs of every one of its pairs: {first}")
        }
        Some(_) => "; its pairs' verdicts differ, so no one cause is named".into(),
        None => String::new(),
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The finding for a zone direction slower than the fastest one (`reference`), if it is.
fn slow_group(
    name: &str,
    reference: &str,
    inside: &[usize],
    outside: &[usize],
    means: &[Option<f64>],
    cells: &[CellSummary],
) -> Option<String> {
    let of = |ix: &[usize]| ix.iter().filter_map(|i| means[*i]).collect::<Vec<f64>>();
    let (a, b) = (of(inside), of(outside));
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (ma, mb) = (mean(&a), mean(&b));
    let fastest_inside = a.iter().copied().fold(0.0, f64::max);
    let slowest_outside = b.iter().copied().fold(f64::INFINITY, f64::min);
    if ma > mb * (1.0 - SLOW_SHARE) || fastest_inside >= slowest_outside {
        return None;
    }
    let of_cells: Vec<&CellSummary> = inside.iter().filter_map(|i| cells.get(*i)).collect();
    let rate = |v: f64| crate::units::scale::Scale::Auto.rate(v);
    Some(format!(
        "{name} is {:.0} % slower than {reference}, the fastest zone direction: {} against {} \
         (means of {} and {} pairs; its fastest pair, {}, is below the slowest there, {}){}",
        (1.0 - ma / mb) * 100.0,
        rate(ma),
        rate(mb),
        a.len(),
        b.len(),
        rate(fastest_inside),
        rate(slowest_outside),
        cause(&of_cells)
    ))
}

/// Pairs among `members` (indexes of `cells`) not already explained by a zone finding whose
/// 95 % interval lies wholly below the members' median pair mean by [`SLOW_SHARE`].
fn slow_pairs(cells: &[CellSummary], members: &[usize], explained: &[bool]) -> Vec<String> {
    let mut all: Vec<f64> = members
        .iter()
        .filter_map(|&i| cells.get(i)?.bits_per_second.as_ref().map(|s| s.mean))
        .collect();
    if all.len() < 3 {
        return Vec::new();
    }
    all.sort_by(f64::total_cmp);
    let median = crate::stats::sample::median_of_sorted(&all);
    let bar = median * (1.0 - SLOW_SHARE);
    let rate = |v: f64| crate::units::scale::Scale::Auto.rate(v);
    members
        .iter()
        .filter(|&&i| !explained.get(i).copied().unwrap_or(false))
        .filter_map(|&i| cells.get(i))
        .filter_map(|c| {
            let s = c.bits_per_second.as_ref()?;
            let (_, hi) = s.ci95?;
            (hi < bar).then(|| {
                format!(
                    "{} is {:.0} % slower than the median pair: {} (95 % interval up to {}) \
                     against {}{}",
                    c.label,
                    (1.0 - s.mean / median) * 100.0,
                    rate(s.mean),
                    rate(hi),
                    rate(median),
                    cause(&[c])
                )
            })
        })
        .collect()
}

/// How much less a pair must deliver in its round than alone, beyond its interval, to count as
/// disturbed by the pairs beside it.
pub const INTERFERENCE_SHARE: f64 = 0.10;

/// The same for a pair with one run in rounds (no interval to judge by): a single short run
/// varies by several percent on its own (20 agents at `-t 1` on one 2-vCPU host, every node
/// link shaped, nothing shared: 7-12 % less in rounds than alone, the rounds' own start-ups
/// sharing the CPUs), so only a loss well past that counts; a shared link halves a pair.
pub const INTERFERENCE_SHARE_ONE_RUN: f64 = 0.25;

/// One sampled pair of the interference check: its figure in its rounds and alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InterferencePair {
    /// The pair's label.
    pub pair: String,
    /// Its zone direction, when both agents named a zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zones: Option<String>,
    /// The mean of its runs in rounds, bit/s.
    pub in_round_bits_per_second: f64,
    /// Run alone after the rounds, bit/s.
    pub alone_bits_per_second: f64,
    /// What running beside others cost it: 1 − in-round / alone, percent (negative: it did
    /// better in its round).
    pub lost_percent: f64,
    /// Lost more than [`INTERFERENCE_SHARE`] with alone above its interval's upper end, or
    /// with one run in rounds (no interval) more than [`INTERFERENCE_SHARE_ONE_RUN`].
    pub disturbed: bool,
}

/// The interference check (`session::mesh::alone`): a seeded sample of pairs run alone after
/// the rounds, each set against its in-round figure, and what that says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interference {
    /// The sample's seed.
    pub seed: u64,
    /// The sampled pairs.
    pub pairs: Vec<InterferencePair>,
    /// The conclusion in words.
    pub finding: String,
}

/// The interference check of `m`'s cells: `alone` is (cell, its rate run alone).
pub fn interference(m: &MeshSummary, alone: &[(usize, f64)], seed: u64) -> Interference {
    let pairs: Vec<InterferencePair> = alone
        .iter()
        .filter_map(|&(cell, alone)| {
            let c = m.cells.get(cell)?;
            let stats = c.bits_per_second.as_ref()?;
            let lost = if alone > 0.0 { 1.0 - stats.mean / alone } else { 0.0 };
            let (beyond, share) = match stats.ci95 {
                Some((_, hi)) => (alone > hi, INTERFERENCE_SHARE),
                None => (true, INTERFERENCE_SHARE_ONE_RUN),
            };
            Some(InterferencePair {
                pair: c.label.clone(),
                zones: m.pairs.get(cell).and_then(|p| zone_name(&m.agents, *p)),
                in_round_bits_per_second: stats.mean,
                alone_bits_per_second: alone,
                lost_percent: 100.0 * lost,
                disturbed: lost > share && beyond,
            })
        })
        .collect();
    let finding = interference_words(&pairs);
    Interference { seed, pairs, finding }
}

/// The check's conclusion: by zone direction when the disturbed pairs name zones, else over
/// the sample.
fn interference_words(pairs: &[InterferencePair]) -> String {
    let hit: Vec<&InterferencePair> = pairs.iter().filter(|p| p.disturbed).collect();
    let n = pairs.len();
    if hit.is_empty() {
        return format!(
            "interference check: the {n} sampled pairs run alone delivered what they did in their \
             rounds (none lost more than {:.0} % beyond its interval, or {:.0} % with one run): \
             the pairs of a round did not disturb each other",
            100.0 * INTERFERENCE_SHARE,
            100.0 * INTERFERENCE_SHARE_ONE_RUN
        );
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        crate::stats::sample::median_of_sorted(v)
    };
    let rerun = "rerun with --serial (or a lower --concurrency) for per-path figures";
    if hit.iter().all(|p| p.zones.is_some()) {
        let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for p in &hit {
            by.entry(p.zones.as_deref().unwrap_or_default()).or_default().push(p.lost_percent);
        }
        let parts: Vec<String> = by
            .into_iter()
            .map(|(z, mut lost)| {
                let k = lost.len();
                format!(
                    "pairs crossing {z} lost {:.0} % when run together ({k} sampled)",
                    median(&mut lost)
                )
            })
            .collect();
        let cross = hit.iter().any(|p| {
            p.zones.as_deref().and_then(|z| z.split_once(" -> ")).is_some_and(|(a, b)| a != b)
        });
        let shared = if cross {
            "the fabric between the zones is shared"
        } else {
            "the pairs share part of the fabric"
        };
        return format!("{}: {shared}; {rerun}", parts.join("; "));
    }
    let mut lost: Vec<f64> = hit.iter().map(|p| p.lost_percent).collect();
    format!(
        "{} of {n} sampled pairs lost {:.0} % (median) when run together: disjoint pairs share \
         part of the fabric (a spine, an uplink); {rerun}",
        hit.len(),
        median(&mut lost)
    )
}

#[cfg(test)]
mod tests {
    use linerate_proto::{Environment, SideResults, StreamRole, TestSpec};

    use super::*;
    use crate::plan::mesh::cells;

    /// A run of `from -> to` at `bps`, each end naming its zone.
    fn run(bps: f64, zones: (&str, &str)) -> RunRecord {
        let side = |role, zone: &str| SideResults {
            software: "t".into(),
            streams: vec![RunRecord::test_stream(role, (bps / 8.0) as u64)],
            environment: Some(Box::new(Environment {
                zone: Some(zone.into()),
                ..Default::default()
            })),
            ..Default::default()
        };
        RunRecord::for_tests(
            TestSpec::default_tcp(),
            side(StreamRole::Sender, zones.0),
            side(StreamRole::Receiver, zones.1),
        )
    }

    /// A mesh of four agents (zones a, a, b, b), three runs per pair; `rate` gives each pair's
    /// runs (the agents' zones, the run's index).
    fn mesh(rate: impl Fn(usize, usize, &str, &str, usize) -> f64) -> MeshSummary {
        let zone = ["a", "a", "b", "b"];
        let labels: Vec<String> = (1..=4).map(|i| format!("n{i}")).collect();
        let ps = crate::plan::sample::every_pair(4);
        let names: Vec<String> =
            ps.iter().map(|p| format!("n{} -> n{}", p.from + 1, p.to + 1)).collect();
        let mut runs = Vec::new();
        for (i, p) in ps.iter().enumerate() {
            let (za, zb) = (zone[p.from], zone[p.to]);
            for k in 0..3 {
                runs.push((i, run(rate(p.from, p.to, za, zb, k), (za, zb))));
            }
        }
        summarize_mesh(&labels, &ps, &cells(&names), &runs, None)
    }

    #[test]
    fn a_slow_link_between_zones_is_named_both_ways_and_the_zones_inside_are_not() {
        let m = mesh(|_, _, za, zb, k| if za == zb { 9.4e9 } else { 0.4e9 } + k as f64 * 1e7);
        assert_eq!(m.zones.len(), 4);
        let names: Vec<&str> = m.relations.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["same zone", "cross zone"], "no node named: no node relation");
        assert!(m.relations[0].mean_bits_per_second > 20.0 * m.relations[1].mean_bits_per_second);
        assert_eq!(m.agents[2].zone.as_deref(), Some("b"));
        let f = m.findings.join("\n");
        assert!(f.contains("zone a -> zone b is 9") && f.contains("zone b -> zone a is 9"), "{f}");
        assert!(!f.contains("zone a -> zone a is") && !f.contains("zone b -> zone b is"), "{f}");
    }

    #[test]
    fn one_slow_pair_is_named_and_an_even_mesh_is_called_even() {
        let m = mesh(
            |from, to, _, _, k| if (from, to) == (2, 0) { 5e9 } else { 9.4e9 } + k as f64 * 1e7,
        );
        let f = m.findings.join("\n");
        assert!(f.contains("n3 -> n1 is 47 % slower than the median pair"), "{f}");
        assert!(!f.contains("zone"), "one pair does not condemn a zone direction: {f}");
        let even = mesh(|_, _, _, _, k| 9.4e9 + k as f64 * 1e7);
        assert!(even.findings[0].contains("the pairs deliver alike"), "{:?}", even.findings);
    }

    /// A run of `from -> to` at `bps`, each end naming its node and network.
    fn placed_run(bps: f64, nodes: (&str, &str), network: &str) -> RunRecord {
        let mut r = run(bps, ("z", "z"));
        for (side, node) in [(r.client.as_mut(), nodes.0), (r.server_results.as_mut(), nodes.1)] {
            let env = side.and_then(|s| s.environment.as_mut()).expect("an environment");
            env.node = Some(node.into());
            env.network = Some(network.into());
        }
        r
    }

    /// Two nodes, an agent of each network on each, `runs` runs a pair: the pod network's
    /// pairs at `pod(from, to, k)`, the host network's at 40 Gbit/s (± 0.1).
    fn two_networks(runs: usize, pod: impl Fn(usize, usize, usize) -> f64) -> MeshSummary {
        // Agents: 0 node-a/pod, 1 node-a/host, 2 node-b/pod, 3 node-b/host.
        let node = ["node-a", "node-a", "node-b", "node-b"];
        let net = ["pod", "host", "pod", "host"];
        let labels: Vec<String> = (0..4).map(|i| format!("{}/{}", node[i], net[i])).collect();
        let ps = crate::plan::sample::every_pair(4)
            .into_iter()
            .filter(|p| net[p.from] == net[p.to])
            .collect::<Vec<_>>();
        let names: Vec<String> =
            ps.iter().map(|p| format!("{} -> {}", labels[p.from], labels[p.to])).collect();
        let mut all = Vec::new();
        for (i, p) in ps.iter().enumerate() {
            for k in 0..runs {
                let bps = match net[p.from] {
                    "pod" => pod(p.from, p.to, k),
                    _ => 40e9 + k as f64 * 1e8,
                };
                all.push((i, placed_run(bps, (node[p.from], node[p.to]), net[p.from])));
            }
        }
        summarize_mesh(&labels, &ps, &cells(&names), &all, None)
    }

    #[test]
    fn the_pod_network_is_set_against_the_host_network_on_the_same_node_pairs() {
        let m =
            two_networks(3, |from, _, k| if from == 0 { 31.2e9 } else { 36e9 } + k as f64 * 1e8);
        assert_eq!(m.networks.len(), 2, "{:?}", m.networks);
        let ab = &m.networks[0];
        assert_eq!(
            (ab.nodes.as_str(), ab.network.as_str(), ab.reference.as_str()),
            ("node-a -> node-b", "pod", "host")
        );
        assert!((ab.change_percent + 21.95).abs() < 0.01, "{ab:?}");
        assert_eq!(ab.beyond_noise, Some(true));
        let f = m.findings.join("\n");
        assert!(
            f.contains("pod-to-pod is 22 % below on node-a -> node-b, 10 % below on node-b -> node-a, against host-to-host on the same node pairs (every pair's 95 % interval apart"),
            "{f}"
        );
        // Pairs are peers of their own network only: the pod pairs are not "slower than the
        // median pair" for being on the pod network.
        assert!(!f.contains("median pair"), "{f}");
        assert_eq!(m.agents[0].network.as_deref(), Some("pod"));
        // One run a pair: the cost is said, and that no interval tells it from the noise.
        let once = two_networks(1, |_, _, _| 30e9);
        let f = once.findings.join("\n");
        assert!(
            f.contains("25 % below on node-a -> node-b") && f.contains("one run a pair"),
            "{f}"
        );
        // Within the noise: the same figures as the host network's.
        let same = two_networks(3, |_, _, k| 40e9 + k as f64 * 1e8);
        assert!(same.networks.iter().all(|c| c.beyond_noise == Some(false)), "{:?}", same.networks);
        assert!(same.findings[0].contains("within the noise"), "{:?}", same.findings);
        // One network named: nothing set side by side.
        assert!(mesh(|_, _, _, _, k| 9.4e9 + k as f64 * 1e7).networks.is_empty());
    }

    #[test]
    fn the_interference_check_names_a_shared_link_and_stays_silent_otherwise() {
        // In rounds, cross-zone pairs shared the link between the zones: about 200 Mbit/s each,
        // 400 alone. Inside a zone, as fast in a round as alone.
        let m = mesh(|_, _, za, zb, k| if za == zb { 9.4e9 } else { 0.2e9 } + k as f64 * 1e6);
        let cross: Vec<usize> = (0..m.pairs.len())
            .filter(|&i| m.agents[m.pairs[i].from].zone != m.agents[m.pairs[i].to].zone)
            .collect();
        let same: Vec<usize> = (0..m.pairs.len()).filter(|i| !cross.contains(i)).collect();
        let mut alone: Vec<(usize, f64)> = cross.iter().map(|&c| (c, 0.4e9)).collect();
        alone.extend(same.iter().map(|&c| (c, 9.4e9)));
        let i = interference(&m, &alone, 7);
        assert_eq!(i.pairs.iter().filter(|p| p.disturbed).count(), cross.len());
        assert!(i.finding.contains("pairs crossing zone a -> zone b lost 50 %"), "{}", i.finding);
        assert!(i.finding.contains("the fabric between the zones is shared"), "{}", i.finding);
        assert!(i.finding.contains("--serial"), "{}", i.finding);
        // A non-blocking fabric: alone within the noise of the rounds.
        let even = mesh(|_, _, _, _, k| 9.4e9 + k as f64 * 1e7);
        let alone: Vec<(usize, f64)> = (0..even.pairs.len()).map(|c| (c, 9.42e9)).collect();
        let quiet = interference(&even, &alone, 7);
        assert!(quiet.pairs.iter().all(|p| !p.disturbed), "{:?}", quiet.pairs);
        assert!(quiet.finding.contains("did not disturb each other"), "{}", quiet.finding);
        // 9 % lost is within the rule even beyond the interval.
        let alone: Vec<(usize, f64)> = (0..even.pairs.len()).map(|c| (c, 9.41e9 / 0.91)).collect();
        assert!(interference(&even, &alone, 7).pairs.iter().all(|p| !p.disturbed));
    }
}
