//! Which ordered pairs a mesh tests: every one, a balanced sample, or a sample by zone.
//!
//! N agents have N(N−1) ordered pairs: 9,900 for 100, 999,000 for 1,000. Rounds of disjoint
//! pairs (`plan::rounds`) make every pair of 100 nodes a matter of minutes; past that, a
//! sample gives the picture in the time of a smaller mesh:
//!
//! - **`--sample N`, balanced.** About N pairs in which every agent sends and receives about
//!   equally (N/agents each way, give or take one). A uniform draw of pairs would leave some
//!   agents out and test others many times; here the agents are shuffled with the seed and
//!   every agent sends to the agents a seeded set of distances further along that order
//!   (a circulant design: each distance is a permutation, so every agent sends once and
//!   receives once per distance). Seeded: the same seed, the same pairs.
//! - **`--sample zones[:R]`, Pingmesh's.** Guo et al. (SIGCOMM 2015) keep every pair inside a
//!   rack and test between racks through a few representatives: every ordered pair of agents
//!   in the same zone, and between zones every ordered pair of R representatives of each
//!   (default 2; reachable agents first, then a seeded choice). The zones are those the agents
//!   report when greeted (`server --zone`; on Kubernetes the node's zone label); an agent
//!   that reports none is in the zone "unknown". Inside-zone pairs of different zones share no
//!   agent, so they run in the same rounds: ten zones of 100 agents with two representatives
//!   each, 99,360 pairs, take 236 rounds (a representative alone is in 234 tests), where every
//!   pair of 100 agents takes 198 and every pair of the 1,000 would take 1,998.
//!
//! Pure: the zones come in as data.

use crate::plan::mesh::Pair;

/// Representatives per zone for `--sample zones` without `:R`.
pub const DEFAULT_REPRESENTATIVES: usize = 2;
/// The most representatives per zone.
pub const MAX_REPRESENTATIVES: usize = 64;
/// The zone of an agent that reports none, for `--sample zones`.
pub const NO_ZONE: &str = "unknown";

/// `--sample`: which pairs of the agents a mesh tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sample {
    /// Every ordered pair (no `--sample`).
    #[default]
    Every,
    /// About this many pairs, every agent sending and receiving about equally.
    Balanced(usize),
    /// Every pair inside a zone, and between zones this many representatives of each.
    Zones(usize),
}

impl Sample {
    /// Whether the pairs depend on the agents' zones (known once they are greeted).
    pub fn by_zone(self) -> bool {
        matches!(self, Sample::Zones(_))
    }
}

/// Parses `--sample`: `N` (a balanced sample of about N pairs) or `zones[:R]`.
pub fn parse(s: &str) -> Result<Sample, String> {
    let fix = "give N (a balanced sample of about N pairs) or zones[:R] (every pair inside a \
               zone, R representatives of each zone between zones)";
    if let Some(rest) = s.strip_prefix("zones") {
        let r = match rest.strip_prefix(':') {
            None if rest.is_empty() => DEFAULT_REPRESENTATIVES,
            Some(r) => r
                .parse::<usize>()
                .ok()
                .filter(|r| (1..=MAX_REPRESENTATIVES).contains(r))
                .ok_or_else(|| {
                    format!(
                        "--sample {s}: R must be a whole number from 1 to {MAX_REPRESENTATIVES}"
                    )
                })?,
            None => return Err(format!("--sample {s}: {fix}")),
        };
        return Ok(Sample::Zones(r));
    }
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_SAMPLE).contains(&n) => Ok(Sample::Balanced(n)),
        Ok(_) => Err(format!("--sample {s}: N must be from 1 to {MAX_SAMPLE}")),
        Err(_) => Err(format!("--sample {s}: {fix}")),
    }
}

/// The largest balanced sample asked for.
pub const MAX_SAMPLE: usize = 4_000_000;

/// Every ordered pair of `n` agents, by sender then receiver.
pub fn every_pair(n: usize) -> Vec<Pair> {
    (0..n)
        .flat_map(|from| (0..n).filter(move |to| *to != from).map(move |to| Pair { from, to }))
        .collect()
}

/// The pairs `sample` picks among `n` agents with `seed`, by sender then receiver. `zones`
/// (one per agent, None: reported none or did not answer) and `reachable` matter only to
/// [`Sample::Zones`]. An error when a zone sample meets agents of which none has a zone.
pub fn pairs(
    n: usize,
    sample: Sample,
    seed: u64,
    zones: &[Option<String>],
    reachable: &[bool],
) -> Result<Vec<Pair>, String> {
    pairs_within(&[(0..n).collect()], sample, seed, zones, reachable)
}

/// A zone sample needs some agent to report a zone.
fn check(sample: Sample, zones: &[Option<String>]) -> Result<(), String> {
    if sample.by_zone() && !zones.iter().any(Option::is_some) {
        return Err("--sample zones: no agent reported a zone; start the agents with --zone (on \
                    Kubernetes the node's topology.kubernetes.io/zone label gives it), or give \
                    --sample N for a balanced sample"
            .into());
    }
    Ok(())
}

/// [`pairs`] without its check.
fn pick(n: usize, sample: Sample, seed: u64, zones: &[Option<String>], r: &[bool]) -> Vec<Pair> {
    match sample {
        Sample::Every => every_pair(n),
        Sample::Balanced(k) => balanced(n, k, seed),
        Sample::Zones(reps) => by_zone(n, reps, seed, zones, r),
    }
}

/// The pairs of `sample` inside each of `groups` (indexes of agents: one network's agents,
/// `plan::mesh::network_groups`), each group sampled as a mesh of its own: a balanced
/// sample's N is shared by the groups in proportion to their pairs, a zone sample is taken in
/// each. By sender then receiver; no pair crosses groups.
pub fn pairs_within(
    groups: &[Vec<usize>],
    sample: Sample,
    seed: u64,
    zones: &[Option<String>],
    reachable: &[bool],
) -> Result<Vec<Pair>, String> {
    // The check on all agents: a group whose agents name no zone is one zone, "unknown".
    check(sample, zones)?;
    let all: usize = groups.iter().map(|g| g.len() * g.len().saturating_sub(1)).sum();
    let mut out = Vec::new();
    for g in groups.iter().filter(|g| g.len() >= 2) {
        let own = g.len() * (g.len() - 1);
        let sample = match sample {
            Sample::Balanced(k) => Sample::Balanced((k * own).div_ceil(all.max(1)).max(1)),
            other => other,
        };
        fn of<T: Clone + Default>(g: &[usize], v: &[T]) -> Vec<T> {
            g.iter().map(|&i| v.get(i).cloned().unwrap_or_default()).collect()
        }
        let (zones, reachable) = (of(g, zones), of(g, reachable));
        for p in pick(g.len(), sample, seed, &zones, &reachable) {
            out.push(Pair { from: g[p.from], to: g[p.to] });
        }
    }
    out.sort_unstable_by_key(|p| (p.from, p.to));
    Ok(out)
}

/// About `k` ordered pairs of `n` agents in which every agent sends and receives `k / n`
/// times, give or take one (see the module's doc).
fn balanced(n: usize, k: usize, seed: u64) -> Vec<Pair> {
    let all = n * n.saturating_sub(1);
    if k >= all {
        return every_pair(n);
    }
    let order = crate::plan::matrix::shuffled((0..n).collect::<Vec<usize>>(), seed ^ 0x6261_6c61);
    let distances =
        crate::plan::matrix::shuffled((1..n).collect::<Vec<usize>>(), seed ^ 0x6469_7374);
    let mut chosen = Vec::with_capacity(k);
    'all: for d in distances {
        for j in 0..n {
            if chosen.len() == k {
                break 'all;
            }
            chosen.push(Pair { from: order[j], to: order[(j + d) % n] });
        }
    }
    chosen.sort_unstable_by_key(|p| (p.from, p.to));
    chosen
}

/// Every ordered pair inside a zone, and every ordered pair between `r` representatives of
/// each zone and those of the others (see the module's doc).
fn by_zone(
    n: usize,
    r: usize,
    seed: u64,
    zones: &[Option<String>],
    reachable: &[bool],
) -> Vec<Pair> {
    let zone = |a: usize| zones.get(a).and_then(Option::as_deref).unwrap_or(NO_ZONE);
    let mut members: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for a in 0..n {
        members.entry(zone(a)).or_default().push(a);
    }
    let mut representative = vec![false; n];
    for (name, agents) in &members {
        let salt = name.bytes().fold(seed ^ 0x7a6f_6e65, |h, b| h.rotate_left(5) ^ u64::from(b));
        let mut picked = crate::plan::matrix::shuffled(agents.clone(), salt);
        // Reachable agents first: a dead representative would cut its zone off.
        picked.sort_by_key(|a| !reachable.get(*a).copied().unwrap_or(true));
        for a in picked.into_iter().take(r) {
            representative[a] = true;
        }
    }
    every_pair(n)
        .into_iter()
        .filter(|p| zone(p.from) == zone(p.to) || (representative[p.from] && representative[p.to]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ways(n: usize, ps: &[Pair]) -> (Vec<usize>, Vec<usize>) {
        let (mut sent, mut got) = (vec![0; n], vec![0; n]);
        for p in ps {
            sent[p.from] += 1;
            got[p.to] += 1;
        }
        (sent, got)
    }

    #[test]
    fn a_balanced_sample_has_every_agent_send_and_receive_about_equally() {
        for (n, k) in [(10, 25), (100, 1000), (7, 41), (1000, 20_000), (5, 3)] {
            let ps = pairs(n, Sample::Balanced(k), 9, &[], &[]).expect("balanced");
            assert_eq!(ps.len(), k, "{n} agents, {k} pairs");
            let distinct: std::collections::HashSet<(usize, usize)> =
                ps.iter().map(|p| (p.from, p.to)).collect();
            assert_eq!(distinct.len(), k, "no pair twice");
            assert!(ps.iter().all(|p| p.from != p.to && p.from < n && p.to < n));
            let (sent, got) = ways(n, &ps);
            let spread = |v: &[usize]| v.iter().max().unwrap() - v.iter().min().unwrap();
            assert!(spread(&sent) <= 1 && spread(&got) <= 1, "{n}/{k}: {sent:?} {got:?}");
            assert!(ps.windows(2).all(|w| (w[0].from, w[0].to) < (w[1].from, w[1].to)));
        }
        let a = pairs(20, Sample::Balanced(50), 1, &[], &[]).unwrap();
        assert_eq!(a, pairs(20, Sample::Balanced(50), 1, &[], &[]).unwrap(), "seeded");
        assert_ne!(a, pairs(20, Sample::Balanced(50), 2, &[], &[]).unwrap());
        assert_eq!(pairs(4, Sample::Balanced(12), 1, &[], &[]).unwrap(), every_pair(4));
        assert_eq!(pairs(4, Sample::Balanced(99), 1, &[], &[]).unwrap(), every_pair(4));
    }

    #[test]
    fn a_zone_sample_keeps_every_pair_inside_a_zone_and_representatives_between() {
        // Zones a (0..5), b (5..9), c (9..12); agent 12 reports none; agent 0 is dead.
        let z = |a: usize| match a {
            0..5 => Some("a".to_string()),
            5..9 => Some("b".to_string()),
            9..12 => Some("c".to_string()),
            _ => None,
        };
        let zones: Vec<Option<String>> = (0..13).map(z).collect();
        let reachable: Vec<bool> = (0..13).map(|a| a != 0).collect();
        let ps = pairs(13, Sample::Zones(2), 5, &zones, &reachable).expect("zones");
        let name = |a: usize| z(a).unwrap_or_else(|| NO_ZONE.into());
        let inside = ps.iter().filter(|p| name(p.from) == name(p.to)).count();
        assert_eq!(inside, 5 * 4 + 4 * 3 + 3 * 2, "every pair inside each zone");
        let between: Vec<&Pair> = ps.iter().filter(|p| name(p.from) != name(p.to)).collect();
        let mut reps: std::collections::BTreeMap<String, std::collections::BTreeSet<usize>> =
            Default::default();
        for p in &between {
            reps.entry(name(p.from)).or_default().insert(p.from);
            reps.entry(name(p.to)).or_default().insert(p.to);
        }
        assert_eq!(reps["a"].len(), 2);
        assert!(!reps["a"].contains(&0), "a dead agent is not its zone's representative");
        assert_eq!(reps["unknown"].len(), 1, "the zone of an agent naming none");
        // Each representative sends to every representative of every other zone.
        assert_eq!(between.len(), 7 * 7 - (2 * 2 + 2 * 2 + 2 * 2 + 1));
        assert_eq!(ps, pairs(13, Sample::Zones(2), 5, &zones, &reachable).unwrap(), "seeded");
        let none = pairs(3, Sample::Zones(2), 5, &[None, None, None], &[true; 3]);
        assert!(none.unwrap_err().contains("--zone"));
    }

    #[test]
    fn ten_zones_of_a_hundred_take_about_the_rounds_of_one() {
        let zones: Vec<Option<String>> = (0..1000).map(|a| Some(format!("z{}", a / 100))).collect();
        let ps = pairs(1000, Sample::Zones(2), 3, &zones, &[true; 1000]).expect("zones");
        assert_eq!(ps.len(), 10 * 100 * 99 + 20 * 18);
        let rounds = crate::plan::rounds::schedule(1000, &ps, usize::MAX, 3);
        eprintln!(
            "ten zones of 100, 2 representatives each: {} pairs in {} rounds",
            ps.len(),
            rounds.len()
        );
        assert!(rounds.len() <= 2 * 100 + 2 * 20, "{} rounds", rounds.len());
    }

    #[test]
    fn sample_flags_parse_or_say_what_to_give() {
        assert_eq!(parse("500"), Ok(Sample::Balanced(500)));
        assert_eq!(parse("zones"), Ok(Sample::Zones(DEFAULT_REPRESENTATIVES)));
        assert_eq!(parse("zones:3"), Ok(Sample::Zones(3)));
        for bad in ["0", "zones:0", "zones:65", "zone", "zonesx", "-3", "many", "zones:"] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.contains("--sample") && (e.contains("zones") || e.contains("N")),
                "{bad}: {e}"
            );
        }
    }
}
