//! Tests of the history store: round trips, listing, groups, the frozen v1 fixture, and the
//! files it must refuse without touching them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rusqlite::TransactionBehavior;

use linerate_proto::{Flow, SideResults, SocketReport, StreamResult, StreamRole, TestSpec};

use super::*;
use crate::record::{Failure, FailureKind, Outcome};

/// A file under the temp dir with a unique name, removed (with its WAL companions) on drop.
struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir()
            .join(format!("linerate-store-{}-{n}-{nanos}-{name}", std::process::id()));
        TempDb(dir.join("history.sqlite"))
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.0).expect("read the database file")
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn stream(id: u32, role: StreamRole, bytes: u64) -> StreamResult {
    StreamResult {
        id,
        flow: Flow::ClientToServer,
        role,
        bytes,
        omitted_bytes: 0,
        duration_us: 10_000_000,
        omitted_us: 0,
        intervals: vec![],
        socket: SocketReport { send_buffer_bytes: Some(800_000), ..Default::default() },
        retransmits: (role == StreamRole::Sender).then_some(3),
        tcp: None,
        thread_cpu: None,
        thread_wait_us: None,
        udp_sender: None,
        udp_receiver: None,
        error: None,
        latency: None,
    }
}

/// A completed upload of `streams` streams, each receiving 312.5 MB in 10 s: 250 Mbit/s per
/// stream, `streams` × 250 Mbit/s in total.
fn record(server: &str, started_unix_ms: u64, streams: u32) -> RunRecord {
    let side = |software: &str, role| SideResults {
        software: software.into(),
        streams: (1..=streams).map(|id| stream(id, role, 312_500_000)).collect(),
        intervals_dropped: false,
        intervals_per_sample: 1,
        cost: None,
        environment: None,
    };
    let spec = TestSpec { streams, window_bytes: Some(800_000), ..TestSpec::default_tcp() };
    let mut r =
        RunRecord::for_tests(spec, side("c", StreamRole::Sender), side("s", StreamRole::Receiver));
    r.server = server.into();
    r.started_unix_ms = started_unix_ms;
    r.warnings = vec!["a warning the user should see".into()];
    r
}

fn meta(labels: &[&str]) -> RunMeta {
    RunMeta::test(labels.iter().map(|l| l.to_string()).collect())
}

fn err_text(r: Result<impl std::fmt::Debug>) -> String {
    format!("{:#}", r.expect_err("must fail"))
}

#[test]
fn a_run_round_trips_with_its_meta_and_labels() {
    let mut s = Store::open_in_memory().expect("open");
    let g = s
        .begin_group(GroupKind::Matrix, Some("windows"), &params(serde_json::json!({"P": [1, 4]})))
        .expect("group");
    let rec = record("lab-b:5201", 1_700_000_000_000, 4);
    let m = RunMeta {
        kind: RunKind::MatrixCell,
        group: Some(g),
        cell: Some("P=4 w=800k".into()),
        repetition: Some(2),
        labels: vec!["after-tuning".into(), "lab".into(), "after-tuning".into()],
    };
    let id = s.insert_run(&rec, &m).expect("insert");
    let (m2, rec2) = s.run(id).expect("read").expect("present");
    assert_eq!(rec2, rec);
    assert_eq!(m2, RunMeta { labels: vec!["after-tuning".into(), "lab".into()], ..m });
    let rows = s.list(&ListFilter::default()).expect("list");
    let row = &rows[0];
    assert_eq!(
        (row.id, row.started_unix_ms, row.kind, row.group),
        (id, rec.started_unix_ms, RunKind::MatrixCell, Some(g))
    );
    assert_eq!(row.cell.as_deref(), Some("P=4 w=800k"));
    assert_eq!(
        (row.server.as_str(), row.protocol.as_str(), row.direction.as_str()),
        ("lab-b:5201", "tcp", "upload")
    );
    assert_eq!((row.streams, row.outcome.as_str()), (4, "completed"));
    assert_eq!(row.bits_per_second, Some(1e9));
    assert_eq!(row.labels, vec!["after-tuning", "lab"]);
    let cols: (i64, Option<i64>, i64, i64) = s
        .conn
        .query_row(
            "SELECT block_bytes, window_bytes, bits_per_second_target, record_schema_version FROM runs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("columns");
    assert_eq!(cols, (128 * 1024, Some(800_000), 0, 1));
}

#[test]
fn a_failed_run_with_no_results_is_stored_without_a_rate() {
    let mut s = Store::open_in_memory().expect("open");
    let mut rec = record("h:1", 5, 1);
    rec.client = None;
    rec.server_results = None;
    rec.outcome = Outcome::failed(Failure::new(FailureKind::Network, "connection refused by h:1"));
    let id = s.insert_run(&rec, &meta(&[])).expect("insert");
    let row = &s.list(&ListFilter::default()).expect("list")[0];
    assert_eq!((row.outcome.as_str(), row.bits_per_second), ("failed", None));
    assert_eq!(s.run(id).expect("read").expect("present").1, rec);
    assert!(s.run(id + 1).expect("read").is_none());
    assert!(s.group(77).expect("read").is_none());
}

/// A failed run stored before `outcome.kind` existed (its record JSON has no such key) still
/// reads back, with no kind, and the rest of the record intact.
#[test]
fn a_failed_run_stored_before_failure_kinds_still_reads() {
    let mut s = Store::open_in_memory().expect("open");
    let mut rec = record("h:1", 5, 1);
    rec.outcome = Outcome::failed(Failure::new(FailureKind::Refused, "the server refused"));
    let id = s.insert_run(&rec, &meta(&[])).expect("insert");
    let json: String = s
        .conn
        .query_row("SELECT record_json FROM runs WHERE id = ?1", [id], |r| r.get(0))
        .expect("json");
    let old = json.replace(r#","kind":"refused""#, "");
    assert_ne!(old, json, "the stored JSON had the key: {json}");
    s.conn.execute("UPDATE runs SET record_json = ?1 WHERE id = ?2", (&old, id)).expect("old");
    let (_, back) = s.run(id).expect("read").expect("present");
    assert_eq!(back.outcome, Outcome::Failed { error: "the server refused".into(), kind: None });
    assert_eq!(back.spec, rec.spec);
}

#[test]
fn a_file_store_survives_reopening_and_is_set_up_as_documented() {
    let db = TempDb::new("reopen");
    let rec = record("h:1", 42, 2);
    let id = {
        let mut s = Store::open(db.path()).expect("open creates parent dirs and the schema");
        let mode: String = s.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).expect("mode");
        let fk: i64 = s.conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0)).expect("fk");
        assert_eq!((mode.as_str(), fk), ("wal", 1));
        s.insert_run(&rec, &meta(&["x"])).expect("insert")
    };
    let s = Store::open(db.path()).expect("reopen");
    assert_eq!(s.run(id).expect("read").expect("present"), (meta(&["x"]), rec));
    let raw = Connection::open(db.path()).expect("raw");
    let app: i32 = raw.query_row("PRAGMA application_id", [], |r| r.get(0)).expect("id");
    let ver: u32 = raw.query_row("PRAGMA user_version", [], |r| r.get(0)).expect("ver");
    assert_eq!((app, ver), (super::schema::APPLICATION_ID, super::schema::STORE_SCHEMA_VERSION));
}

#[test]
fn list_filters_by_label_server_and_group_newest_first() {
    let mut s = Store::open_in_memory().expect("open");
    let g =
        s.begin_group(GroupKind::Campaign, None, &params(serde_json::json!({}))).expect("group");
    let mut add = |server: &str, started: u64, labels: &[&str], group: Option<i64>| {
        let m = RunMeta { group, ..meta(labels) };
        s.insert_run(&record(server, started, 1), &m).expect("insert")
    };
    let a = add("a:1", 300, &["before"], None);
    let b = add("b:1", 100, &["before", "vm"], Some(g));
    let c = add("a:1", 200, &["after"], Some(g));
    let d = add("a:1", 300, &[], None); // same start as `a`: the later id comes first
    let ids = |f: ListFilter| s.list(&f).expect("list").iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(ListFilter::default()), vec![d, a, c, b]);
    assert_eq!(ids(ListFilter { label: Some("before".into()), ..Default::default() }), vec![a, b]);
    assert_eq!(
        ids(ListFilter {
            server: Some(crate::plan::host::ServerMatch::Exact("a:1".into())),
            ..Default::default()
        }),
        vec![d, a, c]
    );
    assert_eq!(ids(ListFilter { group: Some(g), ..Default::default() }), vec![c, b]);
    assert_eq!(ids(ListFilter { limit: Some(2), ..Default::default() }), vec![d, a]);
    assert_eq!(ids(ListFilter { limit: Some(0), ..Default::default() }), Vec::<i64>::new());
    let both = ListFilter {
        server: Some(crate::plan::host::ServerMatch::Exact("a:1".into())),
        group: Some(g),
        ..Default::default()
    };
    assert_eq!(ids(both), vec![c]);
    assert_eq!(
        ids(ListFilter { label: Some("nope".into()), ..Default::default() }),
        Vec::<i64>::new()
    );
}

#[test]
fn list_filters_by_outcome_and_names_each_failure() {
    let mut s = Store::open_in_memory().expect("open");
    let done = s.insert_run(&record("a:1", 100, 1), &meta(&[])).expect("insert");
    let error = "cannot connect to a:1: connection refused".to_string();
    let bad = RunRecord {
        outcome: Outcome::Failed { error: error.clone(), kind: None },
        ..record("a:1", 200, 1)
    };
    let failed = s.insert_run(&bad, &meta(&[])).expect("insert");
    let rows = |outcome| s.list(&ListFilter { outcome, ..Default::default() }).expect("list");
    let failures = rows(Some("failed"));
    assert_eq!(failures.iter().map(|r| r.id).collect::<Vec<_>>(), vec![failed]);
    assert_eq!(failures[0].error.as_deref(), Some(error.as_str()));
    let completed = rows(Some("completed"));
    assert_eq!(
        completed.iter().map(|r| (r.id, r.error.clone())).collect::<Vec<_>>(),
        vec![(done, None)]
    );
    assert_eq!(rows(None).len(), 2);
}

#[test]
fn groups_record_their_runs_and_whether_they_finished() {
    let mut s = Store::open_in_memory().expect("open");
    let plan = serde_json::json!({"streams": [1, 2, 4], "repetitions": 3});
    let m =
        s.begin_group(GroupKind::Matrix, Some("P sweep"), &params(plan.clone())).expect("matrix");
    let f =
        s.begin_group(GroupKind::FindMax, None, &params(serde_json::json!({}))).expect("find_max");
    let runs: Vec<i64> = (1..=3)
        .map(|p| {
            let meta = RunMeta {
                kind: RunKind::MatrixCell,
                group: Some(m),
                cell: Some(format!("P={p}")),
                repetition: Some(1),
                labels: vec![],
            };
            s.insert_run(&record("h:1", 10 - u64::from(p), p), &meta).expect("insert")
        })
        .collect();
    s.finish_group(m).expect("finish");
    s.finish_group(m).expect("finishing twice is harmless");
    let g = s.group(m).expect("read").expect("present");
    assert_eq!(
        (g.kind.as_str(), g.name.as_deref(), g.params.plan_json(), g.finished),
        ("matrix", Some("P sweep"), &plan, true)
    );
    assert!(!s.group(f).expect("read").expect("present").finished, "never finished = interrupted");
    assert_eq!(s.groups(10).expect("groups").iter().map(|g| g.id).collect::<Vec<_>>(), vec![f, m]);
    assert_eq!(s.groups(1).expect("groups").len(), 1);
    let got = s.group_runs(m).expect("runs");
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), runs, "in the order they ran");
    assert_eq!(got[2].1.cell.as_deref(), Some("P=3"));
    assert_eq!(got[2].2.spec.streams, 3);
    assert!(s.group_runs(f).expect("runs").is_empty());
}

#[test]
fn group_mistakes_are_refused_and_store_nothing() {
    let mut s = Store::open_in_memory().expect("open");
    let sweep = GroupKind::of("sweep");
    let e = err_text(s.begin_group(sweep, None, &params(serde_json::json!({}))));
    assert!(e.contains("\"sweep\"") && e.contains("a bug"), "{e}");
    let e = err_text(s.finish_group(9));
    assert!(e.contains("group 9 does not exist"), "{e}");
    let m = RunMeta { group: Some(9), ..meta(&["x"]) };
    let e = err_text(s.insert_run(&record("h:1", 1, 1), &m));
    assert!(e.contains("group 9 does not exist"), "{e}");
    assert!(s.list(&ListFilter::default()).expect("list").is_empty());
    let labels: i64 =
        s.conn.query_row("SELECT count(*) FROM run_labels", [], |r| r.get(0)).expect("count");
    assert_eq!(labels, 0);
}

/// The v1 schema and one run exactly as linerate 0.1 wrote them. Never edit the fixture: a
/// later schema must still open (migrate) it and read the run back.
#[test]
fn the_frozen_v1_fixture_still_opens_and_reads_back() {
    let db = TempDb::new("fixture-v1");
    std::fs::create_dir_all(db.path().parent().expect("parent")).expect("dir");
    {
        let raw = Connection::open(db.path()).expect("raw");
        raw.execute_batch(include_str!("../../tests/fixtures/store-v1.sql")).expect("load fixture");
    }
    let mut s = Store::open(db.path()).expect("open the v1 file");
    let rows = s.list(&ListFilter::default()).expect("list");
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (row.id, row.kind, row.group, row.server.as_str()),
        (1, RunKind::MatrixCell, Some(1), "lab-b:5201")
    );
    assert_eq!(
        (row.streams, row.bits_per_second, row.labels.clone()),
        (4, Some(1e9), vec!["lab".to_string()])
    );
    let (m, rec) = s.run(1).expect("read").expect("present");
    assert_eq!((m.cell.as_deref(), m.repetition), (Some("P=4 w=800k"), Some(2)));
    assert_eq!(
        (rec.schema_version, rec.spec.streams, rec.spec.window_bytes),
        (1, 4, Some(800_000))
    );
    let summary = crate::stats::summarize(&rec);
    let rate = summary.directions[0].receiver.as_ref().and_then(|r| r.figures.bits_per_second);
    assert_eq!(rate, Some(1e9), "the stored record still yields its summary");
    let g = s.group(1).expect("group").expect("present");
    assert_eq!((g.kind.as_str(), g.finished), ("matrix", true));
    let next = s.insert_run(&record("h:1", 1, 1), &meta(&[])).expect("write after opening");
    assert_eq!(next, 2);
}

#[test]
fn a_newer_schema_is_refused_and_the_file_left_byte_identical() {
    let db = TempDb::new("newer");
    drop(Store::open(db.path()).expect("create"));
    {
        let raw = Connection::open(db.path()).expect("raw");
        raw.pragma_update(None, "user_version", 2).expect("bump");
    }
    let before = db.bytes();
    let e = Store::open(db.path()).expect_err("must refuse");
    assert_eq!(
        e.to_string(),
        format!(
            "{} was written by a newer linerate (store schema 2, this one reads up to 1); \
             upgrade linerate or use --db to pick another file",
            db.path().display()
        )
    );
    assert_eq!(
        e.downcast_ref::<StoreError>(),
        Some(&StoreError::NewerSchema { path: db.path().into(), found: 2 })
    );
    assert!(db.bytes() == before, "the file must not change");
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_untouched() {
    let db = TempDb::new("garbage");
    std::fs::create_dir_all(db.path().parent().expect("parent")).expect("dir");
    let garbage: Vec<u8> =
        b"linerate results, not a database\n".iter().copied().cycle().take(8192).collect();
    std::fs::write(db.path(), &garbage).expect("write");
    let e = Store::open(db.path()).expect_err("must refuse");
    assert!(matches!(e.downcast_ref(), Some(StoreError::NotSqlite { .. })), "{e:#}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{} is not a SQLite database (", db.path().display())),
        "{text}"
    );
    assert!(text.contains("use --db to pick another file"), "{text}");
    assert!(db.bytes() == garbage, "the file must not change");
}

#[test]
fn another_programs_sqlite_file_is_refused_untouched() {
    let db = TempDb::new("foreign");
    std::fs::create_dir_all(db.path().parent().expect("parent")).expect("dir");
    {
        let raw = Connection::open(db.path()).expect("raw");
        raw.execute_batch(
            "CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('ann');",
        )
        .expect("foreign db");
    }
    let before = db.bytes();
    let e = Store::open(db.path()).expect_err("must refuse");
    assert_eq!(
        e.downcast_ref(),
        Some(&StoreError::NotLinerate { path: db.path().into(), application_id: 0 })
    );
    let text = e.to_string();
    assert!(
        text.contains("is a SQLite database of another program, not a linerate history"),
        "{text}"
    );
    assert!(text.contains("use --db to pick another file"), "{text}");
    assert!(db.bytes() == before, "the file must not change");
}

#[test]
fn a_corrupted_database_is_named_as_such() {
    let db = TempDb::new("corrupt");
    {
        let mut s = Store::open(db.path()).expect("create");
        s.insert_run(&record("h:1", 1, 1), &meta(&["x"])).expect("insert");
    }
    let mut bytes = db.bytes();
    // Page 1 holds the schema's b-tree; its header starts at byte 100 (byte 100 = page type).
    bytes[100..108].copy_from_slice(&[0xEE; 8]);
    std::fs::write(db.path(), &bytes).expect("corrupt");
    let e = Store::open(db.path()).expect_err("must refuse");
    assert!(matches!(e.downcast_ref(), Some(StoreError::Corrupt { .. })), "{e:#}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{} is a damaged SQLite database (", db.path().display())),
        "{text}"
    );
    assert!(text.contains(".recover") && text.contains("--db"), "{text}");
    assert!(db.bytes() == bytes, "a damaged file found at open is not written to");
}

#[test]
fn an_unreadable_record_is_reported_for_its_run_alone() {
    let mut s = Store::open_in_memory().expect("open");
    let g =
        s.begin_group(GroupKind::Campaign, None, &params(serde_json::json!({}))).expect("group");
    let in_group = RunMeta { group: Some(g), ..meta(&[]) };
    let bad = s.insert_run(&record("h:1", 1, 1), &in_group).expect("insert");
    let good = s.insert_run(&record("h:1", 2, 1), &in_group).expect("insert");
    let newer = s.insert_run(&record("h:1", 3, 1), &meta(&[])).expect("insert");
    s.conn
        .execute(
            "UPDATE runs SET record_json = '{\"schema_version\": 1, \"soft' WHERE id = ?1",
            [bad],
        )
        .expect("damage");
    s.conn
        .execute("UPDATE runs SET record_schema_version = 7 WHERE id = ?1", [newer])
        .expect("bump");
    let e = err_text(s.run(bad));
    assert!(e.starts_with(&format!("run {bad}: stored record cannot be read (")), "{e}");
    let e = err_text(s.run(newer));
    assert!(
        e.starts_with(&format!("run {newer}: stored record cannot be read (record schema 7")),
        "{e}"
    );
    assert!(e.contains("upgrade linerate"), "{e}");
    assert!(s.run(good).expect("the others still read").is_some());
    assert_eq!(s.list(&ListFilter::default()).expect("listing reads no JSON").len(), 3);
    let trend = s.trend_runs(&ListFilter::default()).expect("a trend reads past a damaged record");
    assert_eq!(trend.len(), 3);
    let e = err_text(s.group_runs(g));
    assert!(e.starts_with(&format!("run {bad}: stored record cannot be read")), "{e}");
}

#[test]
fn a_damaged_kind_names_the_run_in_the_listing() {
    let mut s = Store::open_in_memory().expect("open");
    let id = s.insert_run(&record("h:1", 1, 1), &meta(&[])).expect("insert");
    s.conn.execute("UPDATE runs SET kind = 'mystery'", []).expect("damage");
    let e = err_text(s.list(&ListFilter::default()));
    assert!(
        e.starts_with(&format!("run {id}: stored record cannot be read (unknown run kind")),
        "{e}"
    );
}

#[test]
fn run_kind_names_match_their_serde_names() {
    for k in RunKind::ALL {
        assert_eq!(serde_json::to_value(k).expect("ser"), serde_json::json!(k.as_str()));
        assert_eq!(RunKind::parse(k.as_str()), Some(k));
    }
    assert_eq!(RunKind::parse("Test"), None);
}

#[test]
fn the_default_path_follows_xdg_then_home() {
    let p =
        |x: Option<&str>, h: Option<&str>| default_path_from(x.map(Into::into), h.map(Into::into));
    let want = |d: &str| Some(PathBuf::from(d).join("linerate/history.sqlite"));
    assert_eq!(p(Some("/x/data"), Some("/home/u")), want("/x/data"));
    assert_eq!(p(Some("relative"), Some("/home/u")), want("/home/u/.local/share"));
    assert_eq!(p(Some(""), Some("/home/u")), want("/home/u/.local/share"));
    assert_eq!(p(None, Some("/home/u")), want("/home/u/.local/share"));
    assert_eq!(p(None, None), None);
    assert_eq!(p(None, Some("")), None);
}

mod opening;

/// Group parameters of `plan` with no seed.
fn params(plan: serde_json::Value) -> GroupParams {
    GroupParams::new(&plan, None).expect("params")
}
