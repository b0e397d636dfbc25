//! The fleet figures from fixture runs placed at chosen starts.

use std::time::Duration;

use super::{HostFigures, HostInput, outlier_reason, summarize_fleet};
use crate::record::{Failure, FailureKind, Outcome, RunRecord};

/// The upload fixture (two streams, 2 s, 0.5 s samples), its receivers' bytes scaled.
fn host(scale: f64) -> RunRecord {
    let json = include_str!("../../tests/fixtures/records/tcp_upload.json");
    let mut r: RunRecord = serde_json::from_str(json).expect("fixture");
    let server = r.server_results.as_mut().expect("server side");
    for s in &mut server.streams {
        s.bytes = (s.bytes as f64 * scale) as u64;
        for i in &mut s.intervals {
            i.bytes = (i.bytes as f64 * scale) as u64;
        }
    }
    r
}

fn at<'a>(label: &'a str, record: &'a RunRecord, ms: u64) -> HostInput<'a> {
    HostInput { label, record, started: Some(Duration::from_millis(ms)), first_byte: None }
}

#[test]
fn totals_shares_spread_and_the_outlier() {
    let (a, b, c) = (host(1.0), host(1.0), host(0.5));
    let s = summarize_fleet(&[at("a", &a, 0), at("b", &b, 2), at("c", &c, 5)]);
    assert_eq!((s.hosts_planned, s.hosts_measured), (3, 3));
    let skew = s.skew.expect("every host started");
    assert!((skew.start_seconds - 0.005).abs() < 1e-9, "{skew:?}");
    assert_eq!(skew.start_of, super::StartOf::StreamStart, "no first bytes known");
    // Inside every host's first and last 0.5 s sample: from c's first sample's end (5 ms +
    // 501.008 ms) to a's last sample's start (1501.176 ms).
    let (from, to) = s.window.expect("a shared window");
    assert!((from - 0.506_008).abs() < 1e-9 && (to - 1.501_176).abs() < 1e-9, "{from}..{to}");
    let d = &s.directions[0];
    assert_eq!(d.hosts.len(), 3);
    let sum: f64 = d.hosts.iter().map(|h| h.bits_per_second).sum();
    assert!((d.total_bits_per_second - sum).abs() < 1.0);
    // c received half of a's bytes in every sample, so half the rate and a fifth of the total.
    let (ra, rc) = (d.hosts[0].bits_per_second, d.hosts[2].bits_per_second);
    assert!((rc / ra - 0.5).abs() < 0.01, "{ra} {rc}");
    assert!((d.hosts[2].share - 0.2).abs() < 0.01, "{}", d.hosts[2].share);
    assert!(d.hosts.iter().all(|h| h.flows.len() == 2 && !h.whole_test));
    let across = d.across_hosts.as_ref().expect("three hosts");
    assert_eq!(across.n, 3);
    let jain = across.jain.expect("defined");
    assert!(jain < 0.95 && jain > 0.85, "{jain}");
    assert_eq!(d.across_flows.as_ref().map(|f| f.n), Some(6));
    assert_eq!(d.outliers.len(), 1, "{:?}", d.outliers);
    assert_eq!(d.outliers[0].label, "c");
    assert!((d.outliers[0].against_median_percent + 50.0).abs() < 1.0);
    assert!(!d.outliers[0].reason.is_empty(), "every outlier says why");
    // The window rate of an even host agrees with its whole-test figure within the skew.
    let whole = d.hosts[0].whole_test_bits_per_second.expect("whole");
    assert!((ra / whole - 1.0).abs() < 0.02, "{ra} vs {whole}");
}

#[test]
fn failed_hosts_are_named_not_counted_and_samples_are_optional() {
    let a = host(1.0);
    let mut bare = host(1.0);
    for s in &mut bare.server_results.as_mut().expect("server").streams {
        s.intervals.clear();
    }
    let mut down = host(1.0);
    down.outcome = Outcome::failed(Failure::new(FailureKind::Network, "cannot connect"));
    let s = summarize_fleet(&[at("a", &a, 0), at("bare", &bare, 1), at("down", &down, 0)]);
    assert_eq!((s.hosts_planned, s.hosts_measured), (3, 2));
    assert_eq!(s.not_measured, vec![("down".to_string(), "cannot connect".to_string())]);
    let d = &s.directions[0];
    assert_eq!(d.hosts.len(), 2);
    assert!(!d.hosts[0].whole_test && d.hosts[1].whole_test);
    assert!(d.hosts[1].bits_per_second > 0.0);
}

#[test]
fn hosts_that_never_started_leave_no_window() {
    let a = host(1.0);
    let s =
        summarize_fleet(&[HostInput { label: "a", record: &a, started: None, first_byte: None }]);
    assert_eq!((s.skew, s.window), (None, None));
    assert!(s.directions[0].hosts[0].whole_test);
    assert!(s.directions[0].across_hosts.as_ref().is_some_and(|h| h.jain.is_none()));
}

/// With every host's first data byte known, the start skew is their spread (not the streams'
/// starts); the shared window still places each host's samples at its streams' start.
#[test]
fn start_skew_is_the_spread_of_first_bytes_when_known() {
    let (a, b) = (host(1.0), host(1.0));
    let first = |ms| Some(Duration::from_micros(ms));
    let hosts = [
        HostInput { first_byte: first(300), ..at("a", &a, 0) },
        HostInput { first_byte: first(2_100), ..at("b", &b, 2) },
    ];
    let s = summarize_fleet(&hosts);
    let skew = s.skew.expect("both started");
    assert_eq!(skew.start_of, super::StartOf::FirstByte);
    assert!((skew.start_seconds - 0.0018).abs() < 1e-9, "{skew:?}");
    let (from, _) = s.window.expect("a shared window");
    assert!((from - 0.503_008).abs() < 1e-9, "after every first sample: {from}");
    // One host without a first byte: the streams' starts are used for all.
    let hosts = [hosts[0], HostInput { first_byte: None, ..hosts[1] }];
    let skew = summarize_fleet(&hosts).skew.expect("both started");
    assert_eq!(skew.start_of, super::StartOf::StreamStart);
    assert!((skew.start_seconds - 0.002).abs() < 1e-9, "{skew:?}");
}

/// A host's receivers end at `duration_us` after its start, `-O` included (not after it):
/// the window must not run past the test. What the window leaves out is counted apart.
#[test]
fn omit_does_not_stretch_the_window_and_the_rest_is_counted_apart() {
    let (mut a, b) = (host(1.0), host(1.0));
    for s in &mut a.server_results.as_mut().expect("server side").streams {
        s.omitted_us = 500_000;
    }
    let s = summarize_fleet(&[at("a", &a, 0), at("b", &b, 4)]);
    let (from, to) = s.window.expect("a shared window");
    assert!(to < 2.1 && from > 0.0, "{from}..{to}");
    let (before, after) = s.unshared_seconds.expect("outside the window");
    assert!((before - 0.505_008).abs() < 1e-9 && after >= 0.0, "{before} {after}");
    let d = &s.directions[0];
    let outside = d.outside_window_bytes.expect("both hosts were windowed");
    assert!(outside > 0.0, "{outside}");
    let share = d.outside_window_share.expect("a share");
    assert!(share > 0.4 && share < 0.6, "the first and last samples of 2 s: {share}");
    // What is inside plus what is outside is every byte the samples hold.
    let inside: f64 = d.hosts.iter().map(|h| h.bits_per_second / 8.0 * (to - from)).sum();
    let all = inside + outside;
    assert!((outside / all - share).abs() < 1e-9, "{outside} {all} {share}");
}

/// With a named link (`--link-speed`), every direction carries its TCP goodput, so reports
/// can say what share of it the total reached; without one, nothing is invented.
#[test]
fn a_named_link_gives_its_goodput_and_none_is_invented() {
    let (mut a, mut b) = (host(1.0), host(1.0));
    let s = summarize_fleet(&[at("a", &a, 0), at("b", &b, 1)]);
    assert_eq!(s.directions[0].link_goodput_bits_per_second, None);
    let link = crate::record::LinkAssumption { bits_per_second: 1_000_000_000, mtu_bytes: 1500 };
    a.link = Some(link);
    b.link = Some(link);
    let s = summarize_fleet(&[at("a", &a, 0), at("b", &b, 1)]);
    let goodput = s.directions[0].link_goodput_bits_per_second.expect("a link was named");
    // 1448 payload bytes per 1538 on the wire (IPv4, Ethernet framing).
    assert!((goodput - 1e9 * 1448.0 / 1538.0).abs() < 1.0, "{goodput}");
}

#[test]
fn attempts_split_where_a_fleet_run_is_full_or_a_label_comes_round_again() {
    let k2 = |rep: u32, label: &'static str| ((2, rep), 2, label);
    // Two whole attempts of (2, 1), then (2, 2) with one host stored (killed) and a new
    // attempt of (2, 2).
    let runs = [k2(1, "a"), k2(1, "b"), k2(1, "a"), k2(1, "b"), k2(2, "a"), k2(2, "a"), k2(2, "b")];
    assert_eq!(super::split_attempts(runs), [0, 0, 1, 1, 2, 3, 3]);
    // The cap: a third host of a 2-host fleet run opens a new attempt, whatever its label.
    assert_eq!(super::split_attempts([k2(1, "a"), k2(1, "b"), k2(1, "c")]), [0, 0, 1]);
    // Other keys interleaved do not close an attempt.
    let runs = [k2(1, "a"), ((1, 1), 1, "a"), k2(1, "b")];
    assert_eq!(super::split_attempts(runs), [0, 1, 0]);
}

/// Hosts for the outlier rule: `a`..`d` at 60 Mbit/s, `slow` at 20; each with a verdict id,
/// retransmits and server CPU.
fn hosts_with(slow: (&str, u64, f64), others: (&str, u64, f64)) -> Vec<HostFigures> {
    let host = |label: &str, rate: f64, (limit, retr, cpu): (&str, u64, f64)| HostFigures {
        retransmits: Some(retr),
        limit: Some(limit.to_string()),
        limit_summary: Some(format!("{limit}: its words")),
        server_cpu_percent: Some(cpu),
        ..HostFigures::for_tests(label, rate, vec![rate])
    };
    let mut out: Vec<HostFigures> =
        ["a", "b", "c", "d"].iter().map(|l| host(l, 60e6, others)).collect();
    out.push(host("slow", 20e6, slow));
    out
}

/// Issue 46: a busy coordinator gave one host the verdict "limited by client CPU" while its
/// own path dropped thousands of packets; it was named for the CPU. Its own evidence comes
/// first now, and a verdict about the client end is named as the coordinator's.
#[test]
fn a_hosts_own_evidence_wins_over_the_coordinators_condition_and_both_are_said() {
    let reason = |hosts: &[HostFigures]| outlier_reason(&hosts[4], hosts);
    let mut hosts = hosts_with(("cpu(client)", 4210, 20.0), ("path", 12, 20.0));
    hosts[0].retransmits = Some(0);
    assert_eq!(
        reason(&hosts),
        "4210 retransmits against 0–12 on the other hosts: its path dropped packets theirs did \
         not; its run's verdict also says cpu(client): its words, a condition of the \
         coordinator, where the client end of every host runs"
    );
    // Its round-trip time and window, against every other host's.
    let mut hosts = hosts_with(("path", 40, 20.0), ("path", 40, 20.0));
    for (h, (rtt, cwnd)) in hosts.iter_mut().zip([(200, 80), (300, 90), (250, 85), (900, 60)]) {
        (h.rtt_us, h.cwnd_segments) = (Some(rtt), Some(cwnd));
    }
    (hosts[4].rtt_us, hosts[4].cwnd_segments) = (Some(12_000), Some(10));
    assert_eq!(
        reason(&hosts),
        "its flows' round-trip time was 12.0 ms against 0.2–0.9 ms on the other hosts: a queue \
         on its own path; its congestion window ended at 10 segments against 60–90 on the \
         other hosts"
    );
    // Not apart when one other host lacks the figure, or is close.
    hosts[3].rtt_us = Some(4_000);
    hosts[0].cwnd_segments = None;
    assert!(reason(&hosts).starts_with("no cause found"), "{}", reason(&hosts));
}

#[test]
fn an_outliers_reason_is_what_sets_it_apart_from_the_other_hosts() {
    let reason = |hosts: &[HostFigures]| outlier_reason(&hosts[4], hosts);
    // Every host "starved" (a busy coordinator): that verdict explains none of them; its
    // 5,613 retransmits against 26–49 do.
    let mut hosts = hosts_with(("starved", 5613, 20.0), ("starved", 49, 20.0));
    hosts[0].retransmits = Some(26);
    assert_eq!(
        reason(&hosts),
        "5613 retransmits against 26–49 on the other hosts: its path dropped packets theirs did not"
    );
    // Its own verdict, when the others gave another one.
    let hosts = hosts_with(("path", 40, 20.0), ("starved", 40, 20.0));
    assert_eq!(reason(&hosts), "path: its words");
    // Its server at a full core, every other under half of one.
    let hosts = hosts_with(("starved", 40, 99.0), ("starved", 40, 30.0));
    assert!(reason(&hosts).starts_with("its server used 99% of a core"), "{}", reason(&hosts));
    // Nothing sets it apart: said, with the verdict it shares.
    let hosts = hosts_with(("starved", 40, 20.0), ("starved", 40, 20.0));
    assert_eq!(
        reason(&hosts),
        "no cause found: its run's verdict (starved: its words) is that of 4 of the other 4 hosts \
         too, and no figure sets it apart"
    );
}
