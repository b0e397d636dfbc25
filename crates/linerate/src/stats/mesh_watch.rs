//! A mesh's pairs against the meshes before it: "node-c -> node-f: fresh drop: the last 2
//! meshes after a stable 12: −40.0 %". Each pair's series is its mean rate in each of the last
//! [`WATCHED_MESHES`] meshes stored with the same test (protocol, direction, streams, block,
//! window, rate), oldest first, this mesh last; the signals are `stats::drift`'s, with their
//! false-alarm budget. A pair that failed in this mesh has no figure to set against the others
//! (its failure is in the mesh's table); a mesh with fewer than 5 earlier ones finds nothing.
//!
//! Cost: a mesh of 100 agents has 9,900 pairs. The step test (999 permutations a pair) is run
//! only when a drift or a drop is a candidate (`drift::watch`), so the watch stays linear in
//! the pairs.

use serde::Serialize;

use crate::stats::change_point::Method;
use crate::stats::drift::{Drift, FreshDrop};
use crate::stats::trend::SeriesKey;

/// Meshes a pair's series reaches back, this one included.
pub const WATCHED_MESHES: usize = 32;

/// One stored pair test, as the watch reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRun {
    /// The mesh (group) it belongs to.
    pub group: i64,
    /// When that mesh began, milliseconds since the Unix epoch.
    pub group_started_unix_ms: u64,
    /// The pair's label, `A -> B`.
    pub cell: String,
    /// The test, its server left empty (the label names both ends).
    pub key: SeriesKey,
    /// Its receiver rate when it completed.
    pub bits_per_second: Option<f64>,
}

/// What one pair's series says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairWatch {
    /// `A -> B`.
    pub pair: String,
    /// Meshes in its series (this one included).
    pub meshes: usize,
    /// Its mean in this mesh, bit/s.
    pub bits_per_second: f64,
    /// The last one or two meshes far below the ones before.
    pub fresh_drop: Option<FreshDrop>,
    /// A steady decline or rise over the meshes.
    pub drift: Option<Drift>,
}

/// A mesh's watch over its pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeshWatch {
    /// Earlier meshes with any pair of this one (at most [`WATCHED_MESHES`] − 1).
    pub meshes_before: usize,
    /// Pairs with a finding, the largest drop first.
    pub pairs: Vec<PairWatch>,
}

/// The watch of mesh `group` over `runs` (its own and the earlier meshes' pair tests).
pub fn watch(group: i64, runs: &[PairRun], m: &Method) -> MeshWatch {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    // This mesh's test per pair.
    let own: HashMap<&str, &SeriesKey> =
        runs.iter().filter(|r| r.group == group).map(|r| (r.cell.as_str(), &r.key)).collect();
    // (pair) -> (mesh start, mesh) -> rates.
    let mut series: HashMap<&str, BTreeMap<(u64, i64), Vec<f64>>> = HashMap::new();
    let mut earlier: BTreeSet<i64> = BTreeSet::new();
    for r in runs {
        let Some(key) = own.get(r.cell.as_str()) else { continue };
        if r.key != **key {
            continue;
        }
        if r.group != group {
            earlier.insert(r.group);
        }
        let per_mesh = series.entry(r.cell.as_str()).or_default();
        let rates = per_mesh.entry((r.group_started_unix_ms, r.group)).or_default();
        rates.extend(r.bits_per_second);
    }
    let mut pairs: Vec<PairWatch> = series
        .into_iter()
        .filter_map(|(pair, per_mesh)| {
            let last = per_mesh.iter().next_back().filter(|((_, g), _)| *g == group)?;
            if last.1.is_empty() {
                return None;
            }
            let values: Vec<f64> = per_mesh
                .values()
                .filter(|v| !v.is_empty())
                .map(|v| v.iter().sum::<f64>() / v.len() as f64)
                .collect();
            let (fresh_drop, drift) = crate::stats::drift::watch(&values, m);
            (fresh_drop.is_some() || drift.is_some()).then(|| PairWatch {
                pair: pair.to_string(),
                meshes: values.len(),
                bits_per_second: values.last().copied().unwrap_or(0.0),
                fresh_drop,
                drift,
            })
        })
        .collect();
    let worst = |p: &PairWatch| {
        p.fresh_drop.as_ref().map(|f| f.relative).or(p.drift.as_ref().map(|d| d.relative_per_run))
    };
    pairs.sort_by(|a, b| {
        worst(a).unwrap_or(0.0).total_cmp(&worst(b).unwrap_or(0.0)).then(a.pair.cmp(&b.pair))
    });
    MeshWatch { meshes_before: earlier.len(), pairs }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(streams: u32) -> SeriesKey {
        SeriesKey {
            server: String::new(),
            protocol: "tcp".into(),
            direction: "upload".into(),
            streams,
            block_bytes: 131_072,
            window_bytes: None,
            target_bits_per_second: 0,
        }
    }

    fn run(group: i64, cell: &str, streams: u32, bps: Option<f64>) -> PairRun {
        PairRun {
            group,
            group_started_unix_ms: 1000 * group as u64,
            cell: cell.into(),
            key: key(streams),
            bits_per_second: bps,
        }
    }

    #[test]
    fn a_pair_that_dropped_in_the_last_two_meshes_is_named_and_the_others_are_not() {
        let mut runs = Vec::new();
        for g in 1..=14 {
            let wobble = 1.0 + 0.01 * f64::from((g % 3) as u32);
            let fell = if g > 12 { 0.6 } else { 1.0 };
            runs.push(run(g, "c -> f", 1, Some(200e6 * wobble * fell)));
            runs.push(run(g, "a -> b", 1, Some(200e6 * wobble)));
            // Another test of the same pair is another series: left out.
            runs.push(run(g, "a -> b", 4, Some(if g > 12 { 1e6 } else { 800e6 })));
        }
        // This mesh ran one test (1 stream); the 4-stream runs are of other meshes' plans.
        runs.retain(|r| !(r.group == 14 && r.key.streams == 4));
        let w = watch(14, &runs, &Method::default());
        assert_eq!(w.meshes_before, 13);
        assert_eq!(w.pairs.len(), 1, "{w:?}");
        let p = &w.pairs[0];
        assert_eq!((p.pair.as_str(), p.meshes), ("c -> f", 14));
        let f = p.fresh_drop.as_ref().expect("a fresh drop");
        assert_eq!((f.runs, f.before_runs), (2, 12));
        assert!((f.relative + 0.4).abs() < 0.02, "{f:?}");
    }

    #[test]
    fn few_earlier_meshes_or_a_failed_pair_find_nothing() {
        let runs: Vec<PairRun> =
            (1..=3).map(|g| run(g, "a -> b", 1, Some(1e9 / g as f64))).collect();
        assert!(watch(3, &runs, &Method::default()).pairs.is_empty());
        let mut runs: Vec<PairRun> = (1..=14).map(|g| run(g, "a -> b", 1, Some(1e9))).collect();
        runs.push(run(15, "a -> b", 1, None));
        assert!(watch(15, &runs, &Method::default()).pairs.is_empty(), "failed here: no figure");
    }
}
