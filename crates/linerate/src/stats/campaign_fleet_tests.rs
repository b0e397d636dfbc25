//! A fleet tier's figures from fixture host runs: attempts, what a resume keeps, the curve.

use super::*;
use crate::record::{Failure, FailureKind, FleetPlace, LinkAssumption};

/// The upload fixture as host `label` of a fleet, its receivers' bytes scaled.
fn host(label: &str, scale: f64) -> RunRecord {
    let json = include_str!("../../tests/fixtures/records/tcp_upload.json");
    let mut r: RunRecord = serde_json::from_str(json).expect("fixture");
    for s in &mut r.server_results.as_mut().expect("server side").streams {
        s.bytes = (s.bytes as f64 * scale) as u64;
        for i in &mut s.intervals {
            i.bytes = (i.bytes as f64 * scale) as u64;
        }
    }
    r.fleet = Some(FleetPlace { label: label.into(), started_us: Some(1000), first_byte_us: None });
    r
}

fn failed(label: &str) -> RunRecord {
    let mut r = host(label, 1.0);
    r.outcome = Outcome::failed(Failure::new(FailureKind::Network, "cannot connect"));
    r
}

/// Scale [1, 2], one repetition; k=2's first attempt lost host b and was run again.
fn curve_runs() -> Vec<(usize, u32, RunRecord)> {
    vec![
        (1, 1, host("a", 1.0)),
        (1, 1, failed("b")),
        (0, 1, host("a", 1.0)),
        (1, 1, host("a", 1.0)),
        (1, 1, host("b", 0.5)),
    ]
}

const SHAPE: FleetShape = FleetShape { targets: 2, scale: Vec::new() };

#[test]
fn an_attempt_ends_where_a_host_label_comes_round_again() {
    let mut runs = curve_runs();
    // k=2 repetition 2 cut short after one stored host: one partial attempt of 2 hosts.
    runs.push((1, 2, host("b", 1.0)));
    let curve = FleetShape { targets: 2, scale: vec![1, 2] };
    let got = fleet_runs(&curve, &runs);
    let keys: Vec<_> = got.iter().map(|r| (r.hosts, r.repetition, r.records.clone())).collect();
    assert_eq!(keys, [(2, 1, vec![0, 1]), (1, 1, vec![2]), (2, 1, vec![3, 4]), (2, 2, vec![5])]);
    let attempts: Vec<_> = got.iter().map(|r| (r.attempt, r.attempts, r.counts)).collect();
    assert_eq!(attempts, [(1, 2, false), (1, 1, true), (2, 2, true), (1, 1, true)]);
    let last = &got[3].summary;
    assert_eq!(
        (last.hosts_planned, last.hosts_measured),
        (2, 1),
        "planned as k, not a smaller fleet"
    );
}

#[test]
fn a_resume_keeps_only_fleet_runs_that_measured_every_host() {
    let curve = FleetShape { targets: 2, scale: vec![1, 2] };
    let kept = completed_fleet_runs(&curve, &curve_runs());
    let labels: Vec<(usize, &str)> =
        kept.iter().map(|(i, _, r)| (*i, HostInput::placed(r).label)).collect();
    assert_eq!(labels, [(0, "a"), (1, "a"), (1, "b")], "the retry, not the partial attempt");
    // Without the retry, k=2 is not done: only k=1 is kept.
    let first = &curve_runs()[..3];
    assert_eq!(completed_fleet_runs(&curve, first).len(), 1);
    // A whole attempt is not kept twice.
    let mut twice = curve_runs();
    twice.extend([(1, 1, host("a", 1.0)), (1, 1, host("b", 1.0))]);
    assert_eq!(completed_fleet_runs(&curve, &twice).len(), 3);
}

#[test]
fn the_figures_count_the_whole_attempt_and_the_curve_finds_its_points() {
    let curve = FleetShape { targets: 2, scale: vec![1, 2] };
    let f = fleet_figures(&curve, &curve_runs());
    let runs: Vec<(usize, u32, usize, usize)> = f
        .counted()
        .map(|r| (r.hosts, r.repetition, r.attempts, r.summary.hosts_measured))
        .collect();
    assert_eq!(runs, [(1, 1, 1, 1), (2, 1, 2, 2)]);
    assert_eq!(f.runs.len(), 3, "the partial attempt is listed too");
    let d = &f.curve.directions[0];
    let hosts: Vec<usize> = d.points.iter().map(|p| p.hosts).collect();
    assert_eq!(hosts, [1, 2]);
    let (one, two) = (d.points[0].total.as_ref(), d.points[1].total.as_ref());
    let ratio = two.expect("k=2").mean / one.expect("k=1").mean;
    assert!((ratio - 1.5).abs() < 0.02, "a + half of a: {ratio}");
}

#[test]
fn a_fleet_tier_summary_reads_against_its_link_and_names_what_it_found() {
    let place = TierPlace {
        name: "fair".into(),
        server: "2 hosts (a, b)".into(),
        link: Some(LinkAssumption { bits_per_second: 100_000_000_000, mtu_bytes: 1500 }),
    };
    let runs = vec![(0, 1, host("a", 1.0)), (0, 1, host("b", 0.5))];
    let t = summarize_fleet_place(place, false, &SHAPE, &runs, None);
    let f = t.fleet.as_ref().expect("fleet figures");
    let total = f.runs[0].summary.directions[0].total_bits_per_second;
    assert_eq!(t.best_bits_per_second, Some(total));
    assert_eq!(t.best_cell.as_deref(), Some("2 hosts, to the hosts"));
    let share = t.share_of_link_goodput.expect("a stated link");
    assert!((share - total / t.link_goodput_bits_per_second.expect("goodput")).abs() < 1e-12);
    assert_eq!((t.runs, t.failed), (2, 0));
    assert!(t.summary.cells.is_empty());
    let finding = &t.summary.findings[0];
    assert!(finding.starts_with("data to the hosts at 2 hosts: total "), "{finding}");
    assert!(finding.contains("Jain 0.9"), "{finding}");
    // Without a scale, the run's own text names its outliers: no finding repeats them.
    assert_eq!(t.summary.findings.len(), 1, "{:?}", t.summary.findings);
    let curve = FleetShape { targets: 2, scale: vec![1, 2] };
    let place = TierPlace { name: "c".into(), server: "x".into(), link: None };
    let t = summarize_fleet_place(place, false, &curve, &curve_runs(), Some("stopped"));
    assert!(t.summary.findings.iter().any(|f| f.contains("b got 33% less than the median")));
    assert_eq!((t.runs, t.failed, t.stopped.as_deref()), (3, 1, Some("stopped")));
}
