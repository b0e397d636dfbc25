//! Every notice as it reads, where each kind goes in text and JSON mode, and the progress line
//! drawn only on a terminal and cleared before a warning.

use std::path::Path;
use std::time::Duration;

use linerate_proto::TestSpec;

use super::*;

fn every_notice(spec: &TestSpec) -> Vec<Notice<'_>> {
    vec![
        Notice::HistoryUnavailable("cannot open /data/history.db: permission denied".into()),
        Notice::RunNotStored("database is locked".into()),
        Notice::Stored(Stored::Run(12)),
        Notice::Stored(Stored::FailedRun(13)),
        Notice::Stored(Stored::Matrix(3)),
        Notice::Stored(Stored::Campaign(4)),
        Notice::HtmlWritten(Path::new("before-after.html")),
        Notice::DefaultJob { port: 40123 },
        Notice::Selftest { port: 40123, spec },
        Notice::TierStopped {
            tier: "same-l2",
            index: 2,
            tiers: 4,
            why: "3 runs in a row failed (last: cannot connect to 10.0.0.3:5201: connection refused)",
            next: Some("dc-link"),
        },
        Notice::TierStopped { tier: "dc-link", index: 3, tiers: 4, why: "x", next: None },
        Notice::MatrixIncomplete { group: 3 },
        Notice::Calibrating(crate::plan::placement::Shape::OneStream),
        Notice::Calibrated(Box::leak(Box::new(crate::record::Decision {
            placement: crate::record::Placement::Split,
            why: "calibrated on this host on 2026-11-29 (one stream, 3 rounds of 300 ms): split \
                  43.7, system 42.9, pair 38.7 Gbit/s"
                .into(),
        }))),
    ]
}

/// `linerate selftest`'s test: 3 s of one TCP upload stream.
fn spec() -> TestSpec {
    let end = linerate_proto::EndCondition::Duration { duration_ms: 3000 };
    TestSpec { end, ..TestSpec::default_tcp() }
}

#[test]
fn every_notice_reads() {
    let spec = spec();
    let mut out = Vec::new();
    for n in every_notice(&spec) {
        write!(out, "{:<8} ", format!("{:?}", n.kind())).expect("vec");
        n.render(&mut out).expect("vec");
    }
    insta::assert_snapshot!(String::from_utf8(out).expect("utf8"));
}

/// (stdout, stderr) of showing every notice through `console`.
fn shown(console: &Console) -> (String, String) {
    let spec = spec();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for n in every_notice(&spec) {
        console.show_to(&n, &mut out, &mut err);
    }
    (String::from_utf8(out).expect("utf8"), String::from_utf8(err).expect("utf8"))
}

#[test]
fn notes_go_with_text_results_warnings_and_hints_to_stderr_always() {
    let (out, err) = shown(&Console::new(true, None));
    assert_eq!(out.lines().count(), 9, "{out}");
    assert!(out.lines().all(|l| !l.starts_with("warning:")), "{out}");
    assert_eq!(err.lines().count(), 5, "{err}");
    assert!(err.starts_with("warning: results will not be stored"), "{err}");
    // JSON results: standard output holds only the document; stderr is unchanged.
    let (json_out, json_err) = shown(&Console::new(false, None));
    assert_eq!(json_out, "");
    assert_eq!(json_err, err);
}

fn campaign_progress() -> Progress {
    Progress {
        done: 7,
        planned: 40,
        tier: Some(("two-hosts-same-l2".into(), 2, 4)),
        round: None,
        cell: "P=8 w=800k l=128K tcp bidir".into(),
        repetition: 3,
        eta: Some(Duration::from_secs(4000)),
        finished: None,
    }
}

#[test]
fn progress_lines_of_a_matrix_and_a_campaign() {
    let matrix = Progress {
        done: 2,
        planned: 4,
        tier: None,
        round: None,
        cell: "P=2".into(),
        repetition: 1,
        eta: Some(Duration::from_secs(75)),
        finished: None,
    };
    let mut lines = Vec::new();
    for columns in [80, 40] {
        lines.push(format!("{columns:>3} |{}|", matrix.line(columns)));
        lines.push(format!("{columns:>3} |{}|", campaign_progress().line(columns)));
    }
    insta::assert_snapshot!(lines.join("\n"));
}

#[test]
fn progress_is_a_bar_on_a_terminal_only_and_cleared_before_a_warning() {
    let mut err = Vec::new();
    Console::new(true, None).progress_to(&campaign_progress(), &mut err);
    assert!(err.is_empty(), "no terminal: no bar before a run");

    let console = Console::new(true, Some(|| Some(60)));
    console.progress_to(&campaign_progress(), &mut err);
    let drawn = String::from_utf8(err.clone()).expect("utf8");
    assert!(drawn.starts_with("\r\x1b[2K[===>"), "{drawn:?}");
    assert_eq!(drawn.chars().count(), "\r\x1b[2K".chars().count() + 60, "{drawn:?}");
    let mut out = Vec::new();
    console.show_to(&Notice::RunNotStored("disk full".into()), &mut out, &mut err);
    let after = String::from_utf8(err[drawn.len()..].to_vec()).expect("utf8");
    assert_eq!(after, "\r\x1b[2Kwarning: this run was not stored: disk full\n");
    // The bar is gone: the next warning is written as is.
    err.clear();
    console.show_to(&Notice::RunNotStored("disk full".into()), &mut out, &mut err);
    assert_eq!(
        String::from_utf8(err).expect("utf8"),
        "warning: this run was not stored: disk full\n"
    );
}

#[test]
fn off_a_terminal_each_finished_run_gets_one_line() {
    let done = |done, eta, finished: &str| Progress {
        done,
        eta,
        finished: Some(finished.into()),
        ..campaign_progress()
    };
    let mut err = Vec::new();
    let log = Console::new(false, None);
    log.progress_to(&done(8, Some(Duration::from_secs(4000)), "9.41 Gbit/s"), &mut err);
    log.progress_to(&done(39, None, "failed: connection refused"), &mut err);
    log.progress_to(&done(40, Some(Duration::from_secs(0)), "912 Mbit/s"), &mut err);
    log.progress_to(&campaign_progress(), &mut err);
    insta::assert_snapshot!(String::from_utf8(err).expect("utf8"));
    // On a terminal a finished run draws nothing: the next run's bar says it.
    let mut drawn = Vec::new();
    Console::new(true, Some(|| Some(60))).progress_to(&done(8, None, "1 Gbit/s"), &mut drawn);
    assert!(drawn.is_empty());
}
