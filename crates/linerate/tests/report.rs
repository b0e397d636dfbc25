//! `linerate report`: snapshots of every format from frozen fixtures (tests/fixtures/reports,
//! real loopback runs with their timestamps, boot ids and process ids fixed by `freeze.py`),
//! the JSON documents against docs/JSON.md, a report read back from its own JSON, and a report
//! of a matrix stored in the history agreeing with what the matrix printed.
//!
//! Snapshots live in tests/snapshots; under CI=true insta fails instead of writing a missing one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::util::{Server, run};

pub fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reports")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `linerate report <args>`, asserting exit 0.
pub fn report(args: &[&str]) -> String {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    let out = run(&all, Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{all:?}: {}\n{}", out.stderr, out.stdout);
    out.stdout
}

#[test]
fn text_and_markdown_of_a_matrix_a_campaign_and_runs() {
    for (name, file) in [
        ("matrix", "matrix.json"),
        ("campaign", "campaign.json"),
        ("run", "run.json"),
        ("failed_run", "failed.json"),
    ] {
        insta::assert_snapshot!(format!("{name}_text"), report(&[&fixture(file)]));
        insta::assert_snapshot!(format!("{name}_md"), report(&[&fixture(file), "-f", "md"]));
    }
}

/// A fleet (8 hosts × 5 flows, one shaped lower) and a scaling curve, frozen from network
/// namespaces behind a 1 Gbit/s link and stored in a history: text, Markdown, CSV and JSON of
/// `report fN`. Every row of a fleet's CSV has as many fields as the header.
#[test]
fn text_markdown_and_csv_of_a_stored_fleet_and_curve() {
    let db = crate::util::test_dir("report-fleet").join("h.sqlite");
    let mut store = linerate::store::Store::open(&db).expect("history");
    let fleet = crate::chart_layout::store_fleet(&mut store, "fleet.json");
    let curve = crate::chart_layout::store_fleet(&mut store, "fleet-scale.json");
    drop(store);
    let db = db.to_string_lossy().into_owned();
    for (name, group) in [("fleet", fleet), ("fleet_scale", curve)] {
        let which = format!("f{group}");
        insta::assert_snapshot!(format!("{name}_text"), report(&[&which, "--db", &db]));
        insta::assert_snapshot!(format!("{name}_md"), report(&[&which, "--db", &db, "-f", "md"]));
        let csv = report(&[&which, "--db", &db, "-f", "csv"]);
        let mut lines = csv.split("\r\n").filter(|l| !l.is_empty());
        let n = lines.next().expect("header").split(',').count();
        assert!(lines.all(|l| l.split(',').count() == n), "{csv}");
        insta::assert_snapshot!(format!("{name}_csv"), csv);
        let json: Value = serde_json::from_str(&report(&[&which, "--db", &db, "-f", "json"]))
            .expect("fleet JSON");
        insta::assert_json_snapshot!(format!("{name}_json"), json);
    }
}

/// A stored mesh of three agents, every ordered pair once, each pair's record a real loopback
/// run of one stream (the P=1 runs of the frozen matrices), stored as `linerate mesh` stores
/// them: text and JSON of `report nN`, so that what a mesh's report says stays as it was.
#[test]
fn text_and_json_of_a_stored_mesh() {
    use linerate::plan::mesh::{MeshIdentity, Pair, pair_label};
    use linerate::record::RunRecord;
    use linerate::store::{GroupKind, GroupParams, RunKind, RunMeta};
    let records: Vec<RunRecord> = ["matrix.json", "matrix-b.json"]
        .iter()
        .flat_map(|f| {
            let doc: Value =
                serde_json::from_str(&std::fs::read_to_string(fixture(f)).expect("fixture"))
                    .expect("JSON");
            doc["runs"].as_array().expect("runs").clone()
        })
        .filter(|r| r["record"]["spec"]["streams"] == 1)
        .map(|r| serde_json::from_value(r["record"].clone()).expect("record"))
        .collect();
    let agents: Vec<linerate::plan::fleet::Target> = ["a", "b", "c"]
        .iter()
        .zip(5201u16..)
        .map(|(label, port)| linerate::plan::fleet::Target {
            host: "127.0.0.1".into(),
            port,
            label: (*label).into(),
        })
        .collect();
    let pairs: Vec<Pair> = (0..3)
        .flat_map(|from| (0..3).filter(move |to| *to != from).map(move |to| Pair { from, to }))
        .collect();
    assert!(records.len() >= pairs.len(), "{} records", records.len());
    let identity = MeshIdentity {
        agents: agents.clone(),
        pairs: pairs.clone(),
        spec: records[0].spec.clone(),
        rounds: linerate::plan::StoredRounds { repeat: 1, until_ci: None, max_repeat: None },
    };
    let db = crate::util::test_dir("report-mesh").join("h.sqlite");
    let mut store = linerate::store::Store::open(&db).expect("history");
    let params = GroupParams::new(&identity, Some(7)).expect("params");
    let group = store.begin_group(GroupKind::Mesh, None, &params).expect("group");
    for (pair, record) in pairs.iter().zip(&records) {
        let meta = RunMeta {
            kind: RunKind::MeshPair,
            group: Some(group),
            cell: Some(pair_label(&agents, *pair)),
            repetition: Some(1),
            labels: Vec::new(),
        };
        store.insert_run(record, &meta).expect("store");
    }
    store.finish_group(group).expect("finish");
    drop(store);
    let (which, db) = (format!("n{group}"), db.to_string_lossy().into_owned());
    insta::assert_snapshot!("mesh_text", report(&[&which, "--db", &db]));
    let json: Value =
        serde_json::from_str(&report(&[&which, "--db", &db, "-f", "json"])).expect("mesh JSON");
    insta::assert_json_snapshot!("mesh_json", json);
}

#[test]
fn csv_of_cells_and_of_intervals() {
    let cells = report(&[&fixture("campaign.json"), "-f", "csv"]);
    insta::assert_snapshot!("campaign_cells_csv", cells);
    let intervals = report(&[&fixture("run.json"), "-f", "csv", "--csv-kind", "intervals"]);
    insta::assert_snapshot!("run_intervals_csv", intervals);
    // Every row has as many fields as the header (no field holds a comma here); no number is
    // negative (a rate's interval stops at 0) or longer than what was measured.
    for doc in [&cells, &intervals] {
        let mut lines = doc.split("\r\n").filter(|l| !l.is_empty());
        let n = lines.next().expect("header").split(',').count();
        for l in lines {
            assert_eq!(l.split(',').count(), n, "{l}");
            for f in l.split(',').filter(|f| f.parse::<f64>().is_ok()) {
                assert!(!f.starts_with('-'), "negative {f} in {l}");
                let decimals = f.split_once('.').map_or(0, |(_, d)| d.len());
                assert!(decimals <= 6, "{f} is more precise than measured: {l}");
            }
        }
    }
}

#[test]
fn json_of_a_failed_run_and_of_a_matrix_summary() {
    let failed: Value = serde_json::from_str(&report(&[&fixture("failed.json"), "-f", "json"]))
        .expect("failed run JSON");
    assert_eq!(failed["record"]["outcome"]["status"], "failed");
    insta::assert_json_snapshot!("failed_run_json", failed);
    let matrix: Value = serde_json::from_str(&report(&[&fixture("matrix.json"), "-f", "json"]))
        .expect("matrix JSON");
    insta::assert_json_snapshot!("matrix_summary_json", matrix["summary"]);
}

/// A report's JSON read back gives the same report: nothing is lost on the way.
#[test]
fn a_report_reads_back_from_its_own_json() {
    let dir = crate::util::data_home().join("report-roundtrip");
    std::fs::create_dir_all(&dir).expect("dir");
    let files = ["matrix.json", "campaign.json", "run.json", "failed.json", "rr.json"];
    for file in files.into_iter().chain(["under-load.json", "matrix-rr.json"]) {
        let saved = dir.join(file);
        let saved_s = saved.to_string_lossy().into_owned();
        report(&[&fixture(file), "-f", "json", "-o", &saved_s]);
        for format in ["text", "csv", "json"] {
            assert_eq!(
                report(&[&saved_s, "-f", format]),
                report(&[&fixture(file), "-f", format]),
                "{file} as {format}"
            );
        }
    }
}

/// Per table under `## heading` of JSON.md: the backticked key names of its first column.
fn documented_tables(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let section = doc.split("\n## ").find(|s| s.starts_with(heading)).expect("section");
    let mut tables: Vec<Vec<String>> = Vec::new();
    let mut in_table = false;
    for line in section.lines() {
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        if !in_table {
            tables.push(Vec::new());
            in_table = true;
        }
        let first = line.split('|').nth(1).unwrap_or("");
        for part in first.split('`').skip(1).step_by(2) {
            let key = part.trim_start_matches('…').replace("[]", "");
            tables.last_mut().expect("table").push(key);
        }
    }
    tables
}

/// Every key docs/JSON.md lists for `record` and `summary` is in the document, where the table
/// says it is; a key the code drops or renames fails here.
#[test]
fn json_documents_have_the_keys_docs_json_md_lists() {
    let md =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/JSON.md"))
            .expect("docs/JSON.md");
    let doc: Value =
        serde_json::from_str(&report(&[&fixture("run.json"), "-f", "json"])).expect("JSON");
    assert_eq!(doc["schema_version"], 1);
    let record = documented_tables(&md, "`record`");
    assert_eq!(record.len(), 3, "the record, cost and environment tables: {record:?}");
    // The environment table against a real one (this host's, from the doctor).
    let doctor = run(&["doctor", "-J"], Duration::from_secs(20));
    assert_eq!(doctor.code, Some(0), "{}", doctor.stderr);
    let env = &doctor.json()["local"];
    for key in &record[2] {
        assert!(env.get(key).is_some(), "environment.{key} documented but missing: {env}");
    }
    assert!(record[0].len() > 10, "{record:?}");
    // `outcome.kind`-style keys exist only when the run failed: looked up in a live failure
    // (a port nothing listens on).
    let port = crate::util::free_port().to_string();
    let failed =
        run(&["client", "127.0.0.1", "-p", &port, "-J", "--no-store"], Duration::from_secs(10));
    let failed = failed.json();
    // `server_output` exists only against iperf3 servers, `probes` only under load (checked
    // on a live run in `latency.rs`), `placement` only on loopback (checked in `loopback.rs`).
    let live_only = ["server_output", "probes", "placement"];
    for key in record[0].iter().filter(|k| !live_only.contains(&k.as_str())) {
        let found = match key.split_once('.') {
            Some((top, inner)) => failed["record"][top].get(inner).is_some(),
            None => doc["record"].get(key).is_some(),
        };
        assert!(found, "record.{key} documented but missing");
    }
    for key in &record[1] {
        let cost = &doc["record"]["client"]["cost"];
        assert!(cost.get(key).is_some(), "cost.{key} documented but missing: {cost}");
    }
    let summary = documented_tables(&md, "`summary`").concat();
    let receiver = &doc["summary"]["directions"][0]["receiver"];
    let sender = &doc["summary"]["directions"][0]["sender"];
    // `udp`, `latency` and `under_load` exist only for UDP, request/response and under-load
    // runs; `udp.rs` and `latency.rs` check them on live runs of those kinds.
    for key in summary.iter().filter(|k| !["udp", "latency", "under_load"].contains(&k.as_str())) {
        let (top, nested) = match key.split_once('.') {
            Some((t, n)) => (t, Some(n)),
            None => (key.as_str(), None),
        };
        let found = match (top, nested) {
            ("directions" | "", Some(n)) => doc["summary"]["directions"][0].get(n).is_some(),
            (k, None) if doc["summary"].get(k).is_some() => true,
            // `…bytes` style keys live in each end's figures.
            (k, None) => receiver.get(k).is_some() || sender.get(k).is_some(),
            _ => false,
        };
        assert!(found, "summary key {key:?} documented but missing");
    }
}

/// Runs a 2-cell matrix (`--parallel 1,2`, two runs each) stored in `db`; returns its
/// JSON document.
pub fn stored_matrix(port: &str, db: &str, seed: &str, seconds: &str) -> Value {
    let args = [
        "matrix",
        "127.0.0.1",
        "-p",
        port,
        "-t",
        seconds,
        "-i",
        "0",
        "--parallel",
        "1,2",
        "--repeat",
        "2",
        "--seed",
        seed,
        // No placement calibration: the matrices are the history's groups m1, m2, … .
        "-A",
        "none",
        "--db",
        db,
        "-J",
    ];
    let out = run(&args, Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.json()
}

/// A matrix stored in the history reports the same cells and figures the matrix printed.
#[test]
fn a_stored_matrix_reports_what_the_matrix_printed() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&["-B", "127.0.0.1"]);
    let db: PathBuf = crate::util::data_home().join("report-matrix.sqlite");
    let _ = std::fs::remove_file(&db);
    let (db_s, port) = (db.to_string_lossy().into_owned(), srv.port.to_string());
    let printed = stored_matrix(&port, &db_s, "3", "0.3");
    let stored: Value =
        serde_json::from_str(&report(&["m1", "--db", &db_s, "-f", "json"])).expect("JSON");
    assert_eq!(stored["summary"], printed["summary"]);
    assert_eq!(stored["seed"], 3);
    let text = report(&["m1", "--db", &db_s]);
    assert!(text.contains("linerate report: matrix m1"), "{text}");
    for cell in printed["summary"]["cells"].as_array().expect("cells") {
        let median = cell["bits_per_second"]["median"].as_f64().expect("median");
        let row = text
            .lines()
            .find(|l| l.starts_with(cell["label"].as_str().expect("label")))
            .unwrap_or_else(|| panic!("no row for {cell}:\n{text}"));
        assert!(row.contains(&format!("{:.2}", median / 1e9)), "{row} lacks the median");
    }
    let csv = report(&["m1", "--db", &db_s, "-f", "csv"]);
    assert_eq!(csv.lines().count(), 3, "{csv}");
    let bad = run(&["report", "m99", "--db", &db_s], Duration::from_secs(10));
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("no group 99"), "{}", bad.stderr);
}

#[test]
fn bad_sources_are_refused_with_the_fix() {
    let out = run(&["report", "no-such-thing.json"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("no file of that name exists"), "{}", out.stderr);
    let dir = crate::util::data_home();
    std::fs::create_dir_all(&dir).expect("dir");
    let junk = dir.join("junk.json");
    std::fs::write(&junk, r#"{"kind": "something.else"}"#).expect("write");
    let out = run(&["report", &junk.to_string_lossy()], Duration::from_secs(10));
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("reads linerate.run, linerate.matrix"), "{}", out.stderr);
    std::fs::write(&junk, r#"{"kind": "linerate.matrix", "runs": 3}"#).expect("write");
    let out = run(&["report", &junk.to_string_lossy()], Duration::from_secs(10));
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains(r#"its "runs" is missing or not"#), "{}", out.stderr);
    for args in [
        &["matrix", "127.0.0.1", "--json-stream"][..],
        &["client", "127.0.0.1", "-u", "--find-max", "--json-stream"][..],
    ] {
        let out = run(args, Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{args:?}");
        assert!(out.stderr.contains("--json-stream follows one test"), "{}", out.stderr);
    }
}

/// `--json-stream`: every line is JSON, interval lines arrive while the test runs (not all at
/// the end), and the intervals add up to what the final document counts.
#[test]
fn json_stream_writes_one_line_per_interval_while_the_test_runs() {
    use std::io::BufRead;
    let _serial = crate::util::exclusive();
    let srv = Server::start(&["-B", "127.0.0.1"]);
    let port = srv.port.to_string();
    let mut child = std::process::Command::new(crate::util::bin())
        .env("XDG_DATA_HOME", crate::util::data_home())
        .args(["client", "127.0.0.1", "-p", &port, "-t", "1.5", "-i", "0.25", "--json-stream"])
        .args(["--no-store"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn client");
    let stdout = child.stdout.take().expect("stdout");
    let start = std::time::Instant::now();
    let mut lines: Vec<(Duration, Value)> = Vec::new();
    for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        lines.push((start.elapsed(), v));
        assert!(start.elapsed() < Duration::from_secs(30), "client did not finish");
    }
    assert!(child.wait().expect("wait").success());
    let events: Vec<&str> =
        lines.iter().map(|(_, v)| v["event"].as_str().expect("event")).collect();
    assert_eq!(events.first(), Some(&"accepted"), "{events:?}");
    assert_eq!(events.last(), Some(&"end"), "{events:?}");
    let intervals: Vec<&(Duration, Value)> =
        lines.iter().filter(|(_, v)| v["event"] == "interval").collect();
    assert!(intervals.len() >= 5, "{events:?}");
    let (end_at, end) = lines.last().expect("end");
    assert!(*end_at - intervals[0].0 > Duration::from_millis(800), "lines came all at once");
    assert_eq!(end["kind"], "linerate.run");
    let streamed: u64 = intervals
        .iter()
        .flat_map(|(_, v)| v["streams"].as_array().expect("streams").iter())
        .filter(|s| s["role"] == "sender")
        .map(|s| s["bytes"].as_u64().expect("bytes"))
        .sum();
    let counted = end["record"]["client"]["streams"][0]["bytes"].as_u64().expect("bytes");
    assert!(streamed <= counted && streamed * 10 >= counted * 9, "{streamed} vs {counted}");
}

fn all_keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                all_keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| all_keys(x, out)),
        _ => {}
    }
}

/// Every key docs/JSON.md names for a `linerate.matrix` document is in one (as written by
/// `linerate report -f json`), and the document's own top-level keys are all documented.
#[test]
fn the_matrix_document_has_the_keys_docs_json_md_names() {
    let md =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/JSON.md"))
            .expect("docs/JSON.md");
    let start = md.find("* `linerate.matrix`").expect("matrix bullet");
    let bullet = &md[start..];
    let bullet = &bullet[..bullet[2..].find("\n* ").map_or(bullet.len(), |e| e + 2)];
    let named: Vec<&str> = bullet
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            !t.is_empty()
                && t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    assert!(named.len() > 20, "{named:?}");
    let doc: Value =
        serde_json::from_str(&report(&[&fixture("matrix.json"), "-f", "json"])).expect("JSON");
    let mut keys = std::collections::BTreeSet::new();
    all_keys(&doc, &mut keys);
    for k in &named {
        assert!(keys.contains(*k), "docs/JSON.md names {k:?} for linerate.matrix; not in it");
    }
    for top in doc.as_object().expect("object").keys() {
        let documented =
            ["schema_version", "kind"].contains(&top.as_str()) || named.contains(&top.as_str());
        assert!(documented, "top-level key {top:?} is not in docs/JSON.md");
    }
}

/// A campaign stored in the history reports the same tiers, figures and findings the campaign
/// printed, and its text has a table per tier and the cross-tier summary.
#[test]
fn a_stored_campaign_reports_what_the_campaign_printed() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&["-B", "127.0.0.1"]);
    let dir = crate::util::data_home().join("report-campaign");
    std::fs::create_dir_all(&dir).expect("dir");
    let (db, plan) = (dir.join("history.sqlite"), dir.join("plan.toml"));
    let _ = std::fs::remove_file(&db);
    let p = srv.port;
    let toml = format!(
        "name = \"two\"\nseed = 5\n\n[defaults]\nparallel = [1, 2]\nrepeat = 1\ntime = 0.2\n\n\
         [tiers.near]\nhost = \"127.0.0.1\"\nport = {p}\n\n\
         [tiers.far]\nhost = \"127.0.0.1\"\nport = {p}\nlink_speed = \"100G\"\n"
    );
    std::fs::write(&plan, toml).expect("plan");
    let (db_s, plan_s) = (db.to_string_lossy().into_owned(), plan.to_string_lossy().into_owned());
    let out = run(&["campaign", &plan_s, "--db", &db_s, "-J"], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let printed = out.json();
    let group = printed["group"].as_i64().expect("group");
    let which = format!("c{group}");
    let stored: Value =
        serde_json::from_str(&report(&[&which, "--db", &db_s, "-f", "json"])).expect("JSON");
    assert_eq!(stored["kind"], "linerate.campaign");
    assert_eq!(stored["findings"], printed["findings"]);
    for (s, p) in stored["tiers"]
        .as_array()
        .expect("tiers")
        .iter()
        .zip(printed["tiers"].as_array().expect("tiers"))
    {
        for key in ["name", "server", "link", "best_cell", "best_bits_per_second", "summary"] {
            assert_eq!(s[key], p[key], "tier {}: {key}", p["name"]);
        }
    }
    let text = report(&[&which, "--db", &db_s]);
    for needle in ["== Tier near: 127.0.0.1:", "== Tier far: ", "== Campaign summary", "P=2"] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
}
