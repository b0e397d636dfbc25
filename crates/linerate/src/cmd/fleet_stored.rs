//! A stored fleet group read back: whether it is a scaling curve, its host runs, and a
//! curve's fleet runs as they ran (`report fN`, `compare fA fB`, `fleet --resume`).
//!
//! **Attempts.** A curve stores each host run as cell `k=K` with its repetition. A resumed
//! curve runs a (k, repetition) again when its earlier attempt was partial (a host not
//! measured or interrupted), so one (k, repetition) can hold several attempts, told apart by
//! the one rule a campaign's fleet tier uses too (`stats::fleet::split_attempts`). An attempt
//! with fewer than k stored runs (the process was killed while storing it) stays partial: it
//! is planned as k hosts, not read as a smaller fleet.
//!
//! Reads only; never writes the history.

use anyhow::Result;
use serde_json::Value;

use super::fleet::{labelled, stored_label};
use crate::record::RunRecord;
use crate::stats::fleet::{FleetSummary, split_attempts, summarize_planned};
use crate::store::Store;

/// Each host's label and run, in one fleet run.
pub(super) type Hosts = Vec<(String, RunRecord)>;

/// One stored fleet run of a curve: its host count, repetition and host runs.
#[derive(Debug, Clone)]
pub(super) struct Attempt {
    /// Hosts planned (k).
    pub hosts: usize,
    /// Its repetition.
    pub repetition: u32,
    /// Each host's label and run, as stored.
    pub records: Hosts,
    /// Each host run's id in the history, in the order of `records`.
    pub ids: Vec<i64>,
}

/// The plan a fleet group was stored with: under `"plan"` (since resuming), or the params
/// themselves (groups stored before).
pub(super) fn stored_plan(params: &Value) -> &Value {
    if params["plan"].is_object() { &params["plan"] } else { params }
}

/// Whether a fleet group's params are those of a scaling curve.
pub(super) fn is_curve(params: &Value) -> bool {
    stored_plan(params)["scale"].as_array().is_some_and(|s| !s.is_empty())
}

/// The figures of one fleet run of a curve: planned as its k hosts, however many were stored.
pub(super) fn summarize_attempt(hosts: usize, records: &Hosts) -> FleetSummary {
    summarize_planned(hosts, &labelled(records))
}

/// Every host run of a single fleet, labelled.
pub(super) fn fleet_hosts(store: &Store, id: i64) -> Result<Hosts> {
    Ok(store.group_runs(id)?.into_iter().map(|(_, _, r)| (stored_label(&r), r)).collect())
}

/// Every fleet run of a curve, in the order their first host was stored.
pub(super) fn curve_attempts(store: &Store, id: i64) -> Result<Vec<Attempt>> {
    let mut runs: Vec<(usize, u32, i64, String, RunRecord)> = Vec::new();
    for (run, meta, record) in store.group_runs(id)? {
        let k = meta.cell.as_deref().and_then(|c| c.strip_prefix("k=")?.parse().ok());
        let (Some(k), Some(rep)) = (k, meta.repetition) else { continue };
        runs.push((k, rep, run, stored_label(&record), record));
    }
    let split =
        split_attempts(runs.iter().map(|(k, rep, _, label, _)| ((*k, *rep), *k, label.as_str())));
    let mut attempts: Vec<Attempt> = Vec::new();
    for (n, (k, rep, run, label, record)) in split.into_iter().zip(runs) {
        if n == attempts.len() {
            attempts.push(Attempt {
                hosts: k,
                repetition: rep,
                records: Vec::new(),
                ids: Vec::new(),
            });
        }
        attempts[n].records.push((label, record));
        attempts[n].ids.push(run);
    }
    Ok(attempts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;
    use crate::store::{RunKind, RunMeta};

    fn host(label: &str, outcome: Outcome) -> RunRecord {
        use linerate_proto::{SideResults, StreamRole, TestSpec};
        let side = |role| SideResults {
            software: "t".into(),
            streams: vec![RunRecord::test_stream(role, 1_000_000)],
            ..Default::default()
        };
        let (client, server) = (side(StreamRole::Sender), side(StreamRole::Receiver));
        let mut r = RunRecord::for_tests(TestSpec::default_tcp(), client, server);
        let place = crate::record::FleetPlace {
            label: label.into(),
            started_us: Some(0),
            first_byte_us: None,
        };
        r.fleet = Some(place);
        r.outcome = outcome;
        r
    }

    #[test]
    fn attempts_of_one_point_are_told_apart_in_stored_order() {
        let dir = std::env::temp_dir().join(format!("linerate-attempts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut store = Store::open(&dir.join("h.sqlite")).expect("store");
        let g = store.begin_group("fleet", None, &serde_json::json!({})).expect("group");
        let keep = |store: &mut Store, k: usize, rep: u32, r: RunRecord| {
            let meta = RunMeta {
                kind: RunKind::FleetHost,
                group: Some(g),
                cell: Some(format!("k={k}")),
                repetition: Some(rep),
                labels: vec![],
            };
            store.insert_run(&r, &meta).expect("insert");
        };
        let done = || Outcome::Completed;
        // k=2 rep 1: an interrupted attempt, then a whole one; k=1 rep 1 whole; k=2 rep 2
        // cut short after one stored host.
        keep(&mut store, 2, 1, host("a", done()));
        keep(&mut store, 2, 1, host("b", Outcome::Interrupted));
        keep(&mut store, 1, 1, host("a", done()));
        keep(&mut store, 2, 1, host("a", done()));
        keep(&mut store, 2, 1, host("b", done()));
        keep(&mut store, 2, 2, host("b", done()));
        let got = curve_attempts(&store, g).expect("read");
        let shape: Vec<(usize, u32, usize, bool)> = got
            .iter()
            .map(|a| {
                (
                    a.hosts,
                    a.repetition,
                    a.records.len(),
                    a.records.iter().all(|(_, r)| r.outcome == done()),
                )
            })
            .collect();
        assert_eq!(shape, [(2, 1, 2, false), (1, 1, 1, true), (2, 1, 2, true), (2, 2, 1, true)]);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
