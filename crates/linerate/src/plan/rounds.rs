//! A mesh's schedule: its ordered pairs in rounds of disjoint pairs, in which every agent
//! takes part in at most one test (as sender or as receiver), so that N agents need about
//! 2(N−1) rounds instead of N(N−1) tests one after the other.
//!
//! **Every ordered pair** (the default) is scheduled by the circle method of round-robin
//! tournaments: agent 0 stays put, the others turn round a circle, and in round r agent 0
//! meets the agent at place r while the places either side of it meet each other. That gives
//! N−1 rounds of N/2 unordered pairs (N even; an odd N adds a "bye" that sits a round out, N
//! rounds), every unordered pair once; each is then run once each way, in two rounds:
//! 2(N−1) rounds for even N, 2N for odd N, the fewest possible for even N.
//!
//! **A subset** (a sample, the pairs a resumed mesh still needs, the pairs `--until-ci` wants
//! again) is scheduled by a greedy matching over the pairs in a seeded order — each round
//! takes every remaining pair whose two agents are still free — or, when that needs more
//! rounds, by the circle method's rounds with the absent pairs left out (at most 2N rounds
//! whatever the subset).
//!
//! `concurrency` caps the pairs of a round (`--concurrency K`; `--serial` is 1): a round with
//! more is cut into rounds of at most K, still disjoint.
//!
//! Pure: no clock, no I/O. 1,000 agents (999,000 pairs) schedule in well under a second.

use std::time::Duration;

use crate::plan::mesh::Pair;

/// What a pair test is allowed beyond its time and warm-up: the requester's connection and
/// handshake with agent A, A's with agent B, the streams' set-up and the record's way back.
/// A pair test of `-t 1` between namespaces took about 2 s in all (a mesh of 20 agents, 257
/// pairs in 540 s one at a time), so 1 s; the progress's estimate, measured on the pairs
/// themselves, takes over once a round has finished.
pub const PAIR_SETUP: Duration = Duration::from_secs(1);

/// What a mesh is about to do, for its plan line: the agents, the pairs, the rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Agents.
    pub agents: usize,
    /// Of which found not reachable at the pre-flight.
    pub unreachable: usize,
    /// Ordered pairs tested.
    pub pairs: usize,
    /// Runs of every pair (`--repeat`).
    pub repeat: u32,
    /// Rounds of one repetition.
    pub rounds: usize,
    /// Pairs at once, at most.
    pub concurrency: usize,
    /// Each test's time (None: a byte count ends it).
    pub time: Option<Duration>,
    /// Each test's omitted warm-up.
    pub omit: Duration,
}

impl Shape {
    /// Whether the pairs run one at a time.
    pub fn serial(&self) -> bool {
        self.concurrency == 1
    }

    /// About how long: every round of every repetition, each as long as one pair test with
    /// its setup; None when a byte count ends the tests.
    pub fn estimate(&self) -> Option<Duration> {
        let round = self.time? + self.omit + PAIR_SETUP;
        Some(round * u32::try_from(self.rounds * self.repeat as usize).unwrap_or(u32::MAX))
    }

    /// What the same runs would take one pair at a time.
    pub fn serial_estimate(&self) -> Option<Duration> {
        let one = self.time? + self.omit + PAIR_SETUP;
        Some(one * u32::try_from(self.pairs * self.repeat as usize).unwrap_or(u32::MAX))
    }
}

/// The rounds of `pairs` (indexes into `n` agents): each round a list of indexes into `pairs`,
/// every index exactly once, no agent twice in a round, at most `concurrency` per round. The
/// rounds' order is shuffled with `seed`.
pub fn schedule(n: usize, pairs: &[Pair], concurrency: usize, seed: u64) -> Vec<Vec<usize>> {
    let concurrency = concurrency.max(1);
    let circle = circle_rounds(n, pairs);
    let rounds = if pairs.len() == n * n.saturating_sub(1) {
        circle
    } else {
        let greedy = greedy_rounds(n, pairs, seed);
        if greedy.len() <= circle.len() { greedy } else { circle }
    };
    let mut capped: Vec<Vec<usize>> = Vec::new();
    for round in rounds {
        for chunk in round.chunks(concurrency) {
            capped.push(chunk.to_vec());
        }
    }
    let order = crate::plan::matrix::shuffled((0..capped.len()).collect(), seed ^ 0x726f_756e);
    order.into_iter().map(|i| std::mem::take(&mut capped[i])).collect()
}

/// Each agent's host, as the index of the first agent on it: agents reporting the same node
/// (`server --node-name`) share one, an agent reporting none (or not heard) is a host of its
/// own. Every agent on a node of its own: `[0, 1, 2, …]`.
pub fn hosts(nodes: &[Option<String>]) -> Vec<usize> {
    let mut first: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    nodes
        .iter()
        .enumerate()
        .map(|(i, node)| match node {
            Some(n) => *first.entry(n.as_str()).or_insert(i),
            None => i,
        })
        .collect()
}

/// [`schedule`], with no host in two tests of a round: agents on one node (a pod-network and
/// a host-network agent, `host[agent]` equal) share its CPUs and NIC, so a round holding
/// pairs of both is cut into rounds, one after the other (first fit, in the round's order).
/// With every agent a host of its own, the same as [`schedule`].
pub fn schedule_on(
    hosts: &[usize],
    pairs: &[Pair],
    concurrency: usize,
    seed: u64,
) -> Vec<Vec<usize>> {
    let rounds = schedule(hosts.len(), pairs, concurrency, seed);
    // Every agent a host of its own (`hosts` numbers them in order): nothing to cut.
    if hosts.iter().enumerate().all(|(i, h)| i == *h) {
        return rounds;
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    for round in rounds {
        let mut cut: Vec<(std::collections::HashSet<usize>, Vec<usize>)> = Vec::new();
        for i in round {
            let ends = [pairs[i].from, pairs[i].to].map(|a| hosts.get(a).copied().unwrap_or(a));
            match cut.iter_mut().find(|(busy, _)| ends.iter().all(|h| !busy.contains(h))) {
                Some((busy, pairs)) => {
                    busy.extend(ends);
                    pairs.push(i);
                }
                None => cut.push((ends.into_iter().collect(), vec![i])),
            }
        }
        out.extend(cut.into_iter().map(|(_, r)| r));
    }
    out
}

/// The circle method's rounds, keeping only `pairs` (a round left empty is dropped).
fn circle_rounds(n: usize, pairs: &[Pair]) -> Vec<Vec<usize>> {
    if n < 2 {
        return Vec::new();
    }
    // Where each ordered pair is in `pairs`: a dense table for up to a few thousand agents.
    let mut index = vec![u32::MAX; n * n];
    for (i, p) in pairs.iter().enumerate() {
        if p.from < n && p.to < n {
            index[p.from * n + p.to] = u32::try_from(i).unwrap_or(u32::MAX);
        }
    }
    let m = if n % 2 == 0 { n } else { n + 1 }; // with a bye (agent n) when odd
    let mut one_way: Vec<Vec<usize>> = Vec::with_capacity(m - 1);
    let mut other_way: Vec<Vec<usize>> = Vec::with_capacity(m - 1);
    // Places 1..m hold the turning agents; in round r, place k holds agent ((k - 1 + r) % (m - 1)) + 1.
    let at = |k: usize, r: usize| (k - 1 + r) % (m - 1) + 1;
    for r in 0..m - 1 {
        let mut there = Vec::with_capacity(m / 2);
        let mut back = Vec::with_capacity(m / 2);
        let mut meet = |a: usize, b: usize| {
            if a >= n || b >= n {
                return; // the bye
            }
            // Alternate which way runs first, so neither end is always the sender first.
            let (x, y) = if r % 2 == 0 { (a, b) } else { (b, a) };
            if index[x * n + y] != u32::MAX {
                there.push(index[x * n + y] as usize);
            }
            if index[y * n + x] != u32::MAX {
                back.push(index[y * n + x] as usize);
            }
        };
        meet(0, at(1, r));
        for k in 1..m / 2 {
            meet(at(1 + k, r), at(m - k, r));
        }
        one_way.push(there);
        other_way.push(back);
    }
    one_way.into_iter().chain(other_way).filter(|r| !r.is_empty()).collect()
}

/// Rounds by greedy matching over `pairs` in a seeded order.
fn greedy_rounds(n: usize, pairs: &[Pair], seed: u64) -> Vec<Vec<usize>> {
    let mut left: Vec<usize> =
        crate::plan::matrix::shuffled((0..pairs.len()).collect(), seed ^ 0x6772_6565);
    let mut busy = vec![u32::MAX; n];
    let mut rounds = Vec::new();
    let mut round_no = 0u32;
    while !left.is_empty() {
        let mut round = Vec::new();
        let mut rest = Vec::with_capacity(left.len());
        for i in left {
            let p = pairs[i];
            if p.from < n && p.to < n && busy[p.from] != round_no && busy[p.to] != round_no {
                busy[p.from] = round_no;
                busy[p.to] = round_no;
                round.push(i);
            } else {
                rest.push(i);
            }
        }
        if round.is_empty() {
            break; // only pairs naming agents past n: none can run
        }
        rounds.push(round);
        left = rest;
        round_no += 1;
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::sample::{Sample, every_pair};

    /// Every pair exactly once, no agent twice in a round, at most `k` per round.
    fn check(n: usize, p: &[Pair], rounds: &[Vec<usize>], k: usize) {
        let mut seen = vec![0u32; p.len()];
        for r in rounds {
            assert!(!r.is_empty() && r.len() <= k, "a round of {} pairs (cap {k})", r.len());
            let mut agents = std::collections::HashSet::new();
            for &i in r {
                seen[i] += 1;
                assert!(agents.insert(p[i].from), "agent {} twice in a round", p[i].from);
                assert!(agents.insert(p[i].to), "agent {} twice in a round", p[i].to);
                assert!(p[i].from < n && p[i].to < n);
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "every ordered pair exactly once");
    }

    #[test]
    fn every_ordered_pair_once_in_at_most_2n_rounds_of_disjoint_pairs() {
        for n in 2..=24 {
            let all = every_pair(n);
            let rounds = schedule(n, &all, usize::MAX, 7);
            check(n, &all, &rounds, usize::MAX);
            assert!(rounds.len() <= 2 * n, "{n} agents: {} rounds", rounds.len());
            if n % 2 == 0 {
                assert_eq!(rounds.len(), 2 * (n - 1), "{n} agents: the fewest rounds");
            }
        }
    }

    #[test]
    fn a_cap_cuts_rounds_and_serial_is_one_pair_at_a_time() {
        let all = every_pair(10);
        let capped = schedule(10, &all, 3, 1);
        check(10, &all, &capped, 3);
        let serial = schedule(10, &all, 1, 1);
        check(10, &all, &serial, 1);
        assert_eq!(serial.len(), 90);
    }

    #[test]
    fn subsets_keep_the_rules_and_the_bound() {
        for (n, k, seed) in [(7, 10, 1), (12, 50, 2), (30, 200, 3), (5, 20, 4)] {
            let some =
                crate::plan::sample::pairs(n, Sample::Balanced(k), seed, &[], &[]).expect("sample");
            let rounds = schedule(n, &some, usize::MAX, seed);
            check(n, &some, &rounds, usize::MAX);
            assert!(rounds.len() <= 2 * n, "{n} agents, {k} pairs: {} rounds", rounds.len());
        }
        assert!(schedule(3, &[], 4, 1).is_empty());
    }

    #[test]
    fn agents_on_one_node_never_share_a_round() {
        // Three nodes, each with a pod-network and a host-network agent (agents 0-2 pod,
        // 3-5 host, agent i and i + 3 on node i); pairs inside each network only.
        let nodes: Vec<Option<String>> = (0..6).map(|i| Some(format!("node-{}", i % 3))).collect();
        let hosts = hosts(&nodes);
        assert_eq!(hosts, vec![0, 1, 2, 0, 1, 2]);
        let pairs: Vec<Pair> =
            every_pair(6).into_iter().filter(|p| (p.from < 3) == (p.to < 3)).collect();
        assert_eq!(pairs.len(), 12);
        let rounds = schedule_on(&hosts, &pairs, usize::MAX, 5);
        check(6, &pairs, &rounds, usize::MAX);
        for r in &rounds {
            let mut busy = std::collections::HashSet::new();
            for &i in r {
                for a in [pairs[i].from, pairs[i].to] {
                    assert!(busy.insert(hosts[a]), "node {} twice in a round {r:?}", hosts[a]);
                }
            }
        }
        // Three nodes: a node pair at a time, each network's test in a round of its own.
        assert_eq!(rounds.len(), 12);
        // Agents of no named node are hosts of their own: the schedule is the plain one.
        let alone = super::hosts(&[None, None, Some("a".into()), None]);
        assert_eq!(alone, vec![0, 1, 2, 3]);
        let all = every_pair(4);
        assert_eq!(schedule_on(&alone, &all, 2, 3), schedule(4, &all, 2, 3));
    }

    #[test]
    fn the_seed_orders_the_rounds() {
        let all = every_pair(8);
        assert_eq!(schedule(8, &all, 4, 9), schedule(8, &all, 4, 9));
        assert_ne!(schedule(8, &all, 4, 9), schedule(8, &all, 4, 10));
    }

    #[test]
    fn a_thousand_agents_schedule_at_once() {
        let all = every_pair(1000);
        assert_eq!(all.len(), 999_000);
        let rounds = schedule(1000, &all, usize::MAX, 3);
        assert_eq!(rounds.len(), 1998);
        assert_eq!(rounds.iter().map(Vec::len).sum::<usize>(), 999_000);
    }
}
