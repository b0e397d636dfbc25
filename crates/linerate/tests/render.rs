//! Snapshots of what people read, rendered from frozen fixture records (tests/fixtures/records:
//! real loopback runs frozen by fixtures/reports/freeze.py): the client's end-of-run summary,
//! its live interval lines, `history`, `show`, `doctor` and the server's log lines, as text and
//! as JSON where there is a JSON form. No clock and no fact of the machine running the test is
//! read, so the snapshots are the same everywhere. Snapshots live in tests/snapshots.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use linerate::record::RunRecord;
use linerate::report;
use linerate::report::text::LivePrinter;
use linerate::session::server_note::ServerNote;
use linerate::session::test_log::TestLogLine;
use linerate::session::{IntervalRow, LiveEvent, Observer};
use linerate::stats::doctor::{DoctorReport, RemoteFacts, diagnose};
use linerate::store::{GroupKind, GroupParams, ListFilter, RunKind, RunMeta, Store};
use linerate_proto::{Environment, Fact};

/// The fixtures, in the order they ran: TCP upload with two streams, download (-R), bidir, UDP
/// up at 200 Mbit/s, an upload whose server was killed after a second (a failed run with the
/// client's partial figures), and UDP down (-R) at 200 Mbit/s.
const RECORDS: [&str; 6] =
    ["tcp_upload", "tcp_download", "tcp_bidir", "udp_upload", "tcp_failed", "udp_download"];

fn record(name: &str) -> RunRecord {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let text = match name {
        // A client that never reached a server: no figures at all.
        "tcp_refused" => {
            let doc = std::fs::read_to_string(dir.join("reports/failed.json")).expect("fixture");
            let doc: serde_json::Value = serde_json::from_str(&doc).expect("JSON");
            doc["record"].to_string()
        }
        _ => std::fs::read_to_string(dir.join(format!("records/{name}.json"))).expect("fixture"),
    };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: not a RunRecord: {e}"))
}

/// What `f` writes, as text.
fn written(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    f(&mut out).expect("writes to a Vec");
    String::from_utf8(out).expect("UTF-8")
}

fn environment(record: &RunRecord, server: bool) -> Environment {
    let side = if server { &record.server_results } else { &record.client };
    let env = side.as_ref().and_then(|s| s.environment.as_deref());
    env.cloned().expect("the fixture has both ends' environments")
}

#[test]
fn client_summary_of_each_kind_of_run() {
    for name in RECORDS.iter().copied().chain(["tcp_refused"]) {
        let text = written(|out| report::text::render_run(&record(name), out));
        insta::assert_snapshot!(format!("summary_{name}"), text);
    }
}

/// The rows of every interval the client recorded, one event per interval, as the session
/// hands them to its observer.
fn interval_rows(record: &RunRecord) -> Vec<Vec<IntervalRow>> {
    let streams = &record.client.as_ref().expect("client figures").streams;
    let n = streams.iter().map(|s| s.intervals.len()).max().unwrap_or(0);
    (0..n)
        .map(|i| {
            streams
                .iter()
                .filter_map(|s| {
                    let sample = *s.intervals.get(i)?;
                    Some(IntervalRow { id: s.id, flow: s.flow, role: s.role, sample })
                })
                .collect()
        })
        .collect()
}

/// The live lines of `record` as the client printed them, with `-T title` if given.
fn live(record: &RunRecord, title: Option<&str>, extra: &[LiveEvent<'_>]) -> String {
    written(|out| {
        let mut printer = LivePrinter::new(&mut *out, title.map(String::from));
        printer.on_event(LiveEvent::Accepted {
            local: record.local_address.clone().expect("fixture"),
            remote: record.remote_address.clone().expect("fixture"),
            server_software: record.server_software.as_deref().expect("fixture"),
        });
        for e in extra {
            printer.on_event(e.clone());
        }
        let streams = record.client.as_ref().map_or(0, |c| c.streams.len());
        printer.on_event(LiveEvent::Started { streams });
        for rows in interval_rows(record) {
            printer.on_event(LiveEvent::Interval(&rows));
        }
        Ok(())
    })
}

#[test]
fn live_interval_lines() {
    // Two upload streams (with their SUM line), after a wait in the server's queue.
    let queued = [
        LiveEvent::Queued { position: 2, wait: Some(Duration::from_secs(14)) },
        LiveEvent::Queued { position: 1, wait: None },
    ];
    insta::assert_snapshot!("live_tcp_upload", live(&record("tcp_upload"), None, &queued));
    // Both directions at once, titled (-T).
    insta::assert_snapshot!("live_tcp_bidir", live(&record("tcp_bidir"), Some("lab"), &[]));
    // UDP: the sender's datagram counts, and the receiver's losses, reordering and jitter.
    insta::assert_snapshot!("live_udp_upload", live(&record("udp_upload"), None, &[]));
    insta::assert_snapshot!("live_udp_download", live(&record("udp_download"), None, &[]));
    // A notice between intervals (Ctrl-C), as the session sends it.
    let text = written(|out| {
        let mut printer = LivePrinter::new(&mut *out, None);
        let rows = interval_rows(&record("tcp_download"));
        printer.on_event(LiveEvent::Interval(&rows[0]));
        printer.on_event(LiveEvent::Notice(
            "interrupted: stopping early and collecting results (press Ctrl-C again to abort)",
        ));
        printer.on_event(LiveEvent::Interval(&rows[1]));
        Ok(())
    });
    insta::assert_snapshot!("live_notice", text);
}

/// Stores fixture `name` as a run of `kind`, in `group` as `cell` (repetition 1).
fn put(store: &mut Store, name: &str, (kind, group): (RunKind, Option<i64>), cell: &str) {
    let labels = match name {
        "tcp_upload" => vec!["baseline".to_string()],
        "tcp_failed" => vec!["baseline".to_string(), "nightly".to_string()],
        _ => Vec::new(),
    };
    let cell = (!cell.is_empty()).then(|| cell.to_string());
    let meta = RunMeta { kind, group, repetition: cell.as_ref().map(|_| 1), cell, labels };
    store.insert_run(&record(name), &meta).expect("stored");
}

/// A history holding every fixture: two single tests, and runs of a matrix, a campaign and a
/// `--find-max` search.
fn history() -> Store {
    let mut store = Store::open_in_memory().expect("an in-memory history");
    let mut group = |kind: &str, name| {
        let params = GroupParams::read(serde_json::json!({})).expect("params");
        store.begin_group(GroupKind::of(kind), name, &params).map(Some).expect("group")
    };
    let (matrix, campaign, search) =
        (group("matrix", None), group("campaign", Some("lab")), group("find_max", None));
    put(&mut store, "tcp_upload", (RunKind::Test, None), "");
    put(&mut store, "tcp_download", (RunKind::MatrixCell, matrix), "recv");
    put(&mut store, "tcp_bidir", (RunKind::CampaignCell, campaign), "loopback/bidir");
    put(&mut store, "udp_upload", (RunKind::FindMaxTrial, search), "b=200000000");
    put(&mut store, "tcp_failed", (RunKind::Test, None), "");
    put(&mut store, "udp_download", (RunKind::Test, None), "");
    store
}

#[test]
fn history_list_as_text_and_json() {
    let rows = history().list(&ListFilter { limit: Some(20), ..ListFilter::default() });
    let rows = rows.expect("listed");
    assert_eq!(rows.len(), RECORDS.len());
    let text = written(|out| report::history::render_list(&rows, false, out));
    insta::assert_snapshot!("history_list", text);
    let json = written(|out| report::history::render_list(&rows, true, out));
    insta::assert_snapshot!("history_list_json", json);
}

#[test]
fn show_prints_the_summary_and_both_environments() {
    let store = history();
    for (id, name) in [(1, "tcp_upload"), (5, "tcp_failed")] {
        let (_, record) = store.run(id).expect("read").expect("stored");
        assert_eq!(record, self::record(name), "the history gives back what was stored");
        let text = written(|out| {
            report::text::render_run(&record, out)?;
            report::environment::render_ends(&record, out)
        });
        insta::assert_snapshot!(format!("show_{name}"), text);
    }
}

/// A doctor report on the fixture's two environments, with the path facts given.
fn doctor(server: &str, (rtt_us, mtu): (Fact<u32>, Fact<u32>), link: Option<u64>) -> DoctorReport {
    let run = record("tcp_upload");
    let reached = rtt_us.value().is_some();
    let remote = RemoteFacts {
        server: server.into(),
        software: if reached {
            Fact::Value("linerate 0.1.0".into())
        } else {
            Fact::NA(UNREACHABLE.into())
        },
        environment: if reached {
            Fact::Value(environment(&run, true))
        } else {
            Fact::NA(UNREACHABLE.into())
        },
        rtt_us,
        path_mtu_bytes: mtu,
        searched_up_to_bytes: 9216,
    };
    diagnose(DoctorReport {
        local: environment(&run, false),
        remote: Some(remote),
        link_bits_per_second: link,
        link_source: link.map(|_| "--link-speed".into()),
        recommendations: Vec::new(),
        notes: Vec::new(),
    })
}

const UNREACHABLE: &str = "cannot connect to 192.0.2.10:5201: connection timed out";

#[test]
fn doctor_as_text_and_json() {
    let value = |v: u32| Fact::Value(v);
    let reports = [
        // Loopback, as measured: no link rate, so the buffer checks are a note.
        ("loopback", doctor("127.0.0.1:5201", (value(25), value(9216)), None)),
        // A long fat path (10 Gbit/s, 20 ms): the buffers are far below the BDP.
        (
            "long_path",
            doctor("192.0.2.10:5201", (value(20_000), value(1500)), Some(10_000_000_000)),
        ),
        // A server that cannot be reached: what is known of this host, and why the rest is n/a.
        (
            "unreachable",
            doctor(
                "192.0.2.10:5201",
                (Fact::NA(UNREACHABLE.into()), Fact::NA(UNREACHABLE.into())),
                None,
            ),
        ),
    ];
    for (name, r) in &reports {
        insta::assert_snapshot!(
            format!("doctor_{name}"),
            written(|o| report::doctor::render(r, false, o))
        );
    }
    let (_, long) = &reports[1];
    assert!(!long.recommendations.is_empty(), "a 25 MB BDP over 4 MiB buffers is flagged");
    insta::assert_snapshot!(
        "doctor_long_path_json",
        written(|o| report::doctor::render(long, true, o))
    );
}

/// One note of every kind, as a server logs them.
fn server_notes() -> Vec<ServerNote> {
    let addr = |s: &str| -> SocketAddr { s.parse().expect("address") };
    let ended = |test, name: &str, seconds, error: Option<&str>| {
        let r = record(name);
        let failed = error.is_some();
        let server = r.server_results.clone();
        let summary = TestLogLine::new(
            "linerate 0.1.0".into(),
            Some(r.spec.clone()),
            seconds,
            server.as_ref(),
            failed,
        );
        ServerNote::TestEnded {
            test,
            peer: addr(r.local_address.as_deref().expect("fixture")),
            server,
            client: r.client.clone().filter(|_| !failed),
            error: error.map(String::from),
            summary,
        }
    };
    let upload = record("tcp_upload");
    vec![
        ServerNote::Listening { addr: addr("[::]:5201") },
        ServerNote::TestAccepted {
            test: 1,
            peer: addr(upload.local_address.as_deref().expect("fixture")),
            client: "linerate 0.1.0".into(),
            spec: upload.spec.clone(),
        },
        ended(1, "tcp_upload", 2.1, None),
        ended(2, "tcp_download", 2.0, None),
        ended(3, "tcp_bidir", 2.0, None),
        ended(4, "udp_upload", 2.3, None),
        ended(
            5,
            "tcp_failed",
            1.2,
            Some("the client closed the control connection during the test"),
        ),
        ServerNote::DoctorAnswered {
            peer: addr("127.0.0.1:56476"),
            client: "linerate 0.1.0".into(),
        },
        ServerNote::Rejected {
            peer: addr("203.0.113.7:51022"),
            reason: "not in the allow-list (--allow)".into(),
        },
        ServerNote::Suppressed { count: 17 },
        ServerNote::ShuttingDown { signal: "SIGTERM", running: 1 },
    ]
}

#[test]
fn server_log_lines_as_text_and_json() {
    let notes = server_notes();
    let text =
        written(|out| notes.iter().try_for_each(|n| report::text::render_server_note(n, out)));
    insta::assert_snapshot!("server_log", text);
    // `--get-server-output` returns the same text.
    assert_eq!(report::text::server_notes_text(&notes), text);
    // JSON lines (`-J` / `--json-stream` on a server): each line one object with its event.
    let json = written(|out| notes.iter().try_for_each(|n| report::json::render_line(n, out)));
    for line in json.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
        assert!(v["event"].is_string(), "{line}");
    }
    insta::assert_snapshot!("server_log_json", json);
}

/// A matrix of P=1,2,4 × w=default,256k (the user's words), two runs each.
fn matrix_plan(until_ci: Option<f64>) -> linerate::plan::matrix::MatrixPlan {
    use linerate::plan::matrix::AxisValue;
    let w = linerate::plan::size::Size::spelled("256k").expect("size");
    linerate::plan::matrix::MatrixPlan {
        axes: vec![
            (0..3).map(|p| AxisValue::Parallel(1 << p)).collect(),
            vec![AxisValue::Window(None), AxisValue::Window(Some(w))],
        ],
        repeat: 2,
        until_ci,
        max_repeat: 8,
        seed: 7,
        udp_rate: 1 << 20,
        length_given: false,
    }
}

fn campaign_file(name: &str, text: &str) -> linerate::plan::campaign::CampaignPlan {
    linerate::plan::campaign::parse(text, name, name).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn matrix_and_campaign_say_their_runs_and_duration_up_front() {
    use linerate_proto::{EndCondition, TestSpec};
    let spec = |end| TestSpec { end, omit_ms: 2000, ..TestSpec::default_tcp() };
    let timed = spec(EndCondition::Duration { duration_ms: 4000 });
    let mut text = String::new();
    for (plan, spec, resumed) in [
        (matrix_plan(None), &timed, None),
        (matrix_plan(Some(0.05)), &timed, Some((3, 5))),
        (matrix_plan(None), &spec(EndCondition::Bytes { bytes: 100_000_000 }), None),
    ] {
        text += &written(|out| report::matrix::render_start(&plan, spec, resumed, out));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dc-interconnect.toml");
    let dc = campaign_file("dc.toml", &std::fs::read_to_string(root).expect("example"));
    text += &written(|out| report::campaign::render_start(&dc, 1, None, out));
    let mixed = campaign_file(
        "mixed.toml",
        "[defaults]\nparallel = [1, 2]\ntime = 0.5\nomit = 0.25\n\n[tiers.near]\nhost = \"::1\"\n\n\
         [tiers.far]\nhost = \"127.0.0.1\"\ntime = 30\nrepeat = 5\nuntil_ci = 5\n",
    );
    text += &written(|out| report::campaign::render_start(&mixed, 2, Some((4, &[2, 1])), out));
    insta::assert_snapshot!("plan_lines", text);
}

#[test]
fn campaign_preflight_and_the_tiers_that_did_not_complete() {
    use linerate::session::preflight::{Check, Reached, Unreached};
    use linerate::stats::campaign::summarize_tier;
    let plan = campaign_file(
        "three.toml",
        "[defaults]\nparallel = 2\n\n[tiers.near]\nhost = \"127.0.0.1\"\n\n\
         [tiers.far]\nhost = \"far.example\"\n\n[tiers.dc]\nhost = \"dc.example\"\n",
    );
    let check = |server: &str, result| Check { server: server.into(), result };
    let checks = [
        check("127.0.0.1:5201", Ok(Reached::Linerate("linerate 0.1.0".into()))),
        check("far.example:5201", Ok(Reached::Iperf3)),
        check(
            "dc.example:5201",
            Err((Unreached::Unresolved, "cannot resolve host \"dc.example\"".into())),
        ),
    ];
    let checked: Vec<_> =
        plan.tiers.iter().zip(&checks).enumerate().map(|(i, (t, c))| (i, t, c)).collect();
    let mut text = written(|out| report::campaign::render_preflight(&checked[..2], out));
    let unreached = report::campaign::preflight_unreached(&checked, 3);
    text += &report::campaign::preflight_failure(&unreached, Path::new("three.toml"));
    text += "\n";
    let failed = || record("tcp_failed");
    let summaries = [
        summarize_tier(&plan.tiers[0], &[(0, 1, record("tcp_upload")), (0, 2, failed())], None),
        summarize_tier(
            &plan.tiers[1],
            &[(0, 1, failed()), (0, 2, failed()), (0, 3, failed())],
            Some("3 runs in a row failed (last: the server closed the connection)"),
        ),
        summarize_tier(&plan.tiers[2], &[], Some("not started: interrupted by SIGINT")),
    ];
    text += &written(|out| report::campaign::render_text(&summaries, &[], out));
    insta::assert_snapshot!("campaign_preflight_and_incomplete_tiers", text);
}
