//! Charts that read: every kind of HTML page (a run, a bidirectional run, a run of 12
//! streams, a request/response run, a test under load, a matrix, a request/response matrix,
//! a 30-cell matrix, a
//! campaign, `compare`, a fleet, a scaling curve), made from frozen fixtures and
//! loaded in headless Chromium, in a 1400 px window and at the width of a printed page. The
//! test appends `layout_check.js` to a copy of each page; the browser lays the page out and
//! the script measures every chart's text: none may overlap another, stick out of its chart,
//! lie on the plotted data or be under 12 px; every chart spans the page and every plotted
//! value carries its figure on hover. Chromium loads only the `file://` pages written here.
//!
//! `LINERATE_CHART_SHOTS=docs/charts cargo test -p linerate --test integration
//! every_report_page_reads` also writes the screenshots docs/REPORTS.md shows.

use std::path::{Path, PathBuf};

use linerate::record::RunRecord;
use linerate::store::{GroupKind, GroupParams, RunKind, RunMeta, Store};
use serde_json::{Value, json};

use crate::report::{fixture, report};
use crate::report_html::{chromium_or_skip, run_chromium};

/// Stores a frozen matrix document as a finished matrix group; returns its id.
pub fn store_matrix(store: &mut Store, file: &str) -> i64 {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(file)).expect("fixture"))
            .expect("JSON");
    let params = GroupParams::read(json!({ "seed": doc["seed"] })).expect("params");
    let group = store.begin_group(GroupKind::Matrix, None, &params).expect("group");
    let cells = doc["summary"]["cells"].as_array().expect("cells");
    for run in doc["runs"].as_array().expect("runs") {
        let record: RunRecord = serde_json::from_value(run["record"].clone()).expect("record");
        let cell = run["cell"].as_u64().expect("cell") as usize;
        let meta = RunMeta {
            kind: RunKind::MatrixCell,
            group: Some(group),
            cell: Some(cells[cell]["label"].as_str().expect("label").to_string()),
            repetition: run["repetition"].as_u64().map(|r| r as u32),
            labels: Vec::new(),
        };
        store.insert_run(&record, &meta).expect("store");
    }
    store.finish_group(group).expect("finish");
    group
}

/// Stores a frozen fleet (`fleet.json`: its hosts' runs) or scaling curve (`fleet-scale.json`:
/// its fleet runs) as the fleet command stores them: one group of kind "fleet", each host run
/// as cell LABEL (a fleet) or `k=K` with its repetition (a curve). Returns the group's id.
pub fn store_fleet(store: &mut Store, file: &str) -> i64 {
    let doc = fixture_json(file);
    let curve = doc["runs"].as_array();
    let scale: Vec<u64> = curve.map_or(Vec::new(), |runs| {
        let mut k: Vec<u64> = runs.iter().filter_map(|r| r["hosts"].as_u64()).collect();
        k.sort_unstable();
        k.dedup();
        k
    });
    let params = GroupParams::read(json!({ "scale": scale, "seed": doc["seed"] })).expect("params");
    let group = store.begin_group(GroupKind::Fleet, None, &params).expect("group");
    let runs: Vec<(Option<u64>, u64, &Value)> = match curve {
        Some(runs) => runs
            .iter()
            .flat_map(|r| {
                let hosts = r["records"].as_array().expect("records");
                hosts
                    .iter()
                    .map(|h| (r["hosts"].as_u64(), r["repetition"].as_u64().unwrap_or(1), h))
            })
            .collect(),
        None => doc["hosts"].as_array().expect("hosts").iter().map(|h| (None, 1, h)).collect(),
    };
    for (k, rep, host) in runs {
        let record: RunRecord = serde_json::from_value(host["record"].clone()).expect("record");
        let cell = k.map_or_else(
            || host["label"].as_str().expect("label").to_string(),
            |k| format!("k={k}"),
        );
        let meta = RunMeta {
            kind: RunKind::FleetHost,
            group: Some(group),
            cell: Some(cell),
            repetition: Some(rep as u32),
            labels: Vec::new(),
        };
        store.insert_run(&record, &meta).expect("store");
    }
    store.finish_group(group).expect("finish");
    group
}

/// The pages: (name, file), written into `dir`.
fn pages(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut out = Vec::new();
    for (name, file) in [
        ("run", "run.json"),
        ("matrix", "matrix.json"),
        ("campaign", "campaign.json"),
        ("rr", "rr.json"),
        ("under-load", "under-load.json"),
        ("matrix-rr", "matrix-rr.json"),
    ] {
        let page = dir.join(format!("{name}.html"));
        report(&[&fixture(file), "-f", "html", "-o", &page.to_string_lossy()]);
        out.push((name, page));
    }
    // A bidirectional run: two directions' streams on one time axis.
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records/tcp_bidir.json"),
        )
        .expect("record"),
    )
    .expect("JSON");
    let doc = dir.join("bidir.json");
    let wrapped = json!({ "schema_version": 1, "kind": "linerate.run", "record": record });
    std::fs::write(&doc, wrapped.to_string()).expect("write");
    let page = dir.join("bidir.html");
    report(&[&doc.to_string_lossy(), "-f", "html", "-o", &page.to_string_lossy()]);
    out.push(("bidir", page));
    // A wide matrix (30 cells, two runs each, records reused) and a run of 12 streams: more
    // labels, lines and legend entries than the fixtures have.
    for (name, doc) in [("wide", wide_matrix()), ("streams", many_streams())] {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, doc.to_string()).expect("write");
        let page = dir.join(format!("{name}.html"));
        report(&[&file.to_string_lossy(), "-f", "html", "-o", &page.to_string_lossy()]);
        out.push((name, page));
    }
    // compare: the same matrix run by a release build (A) and a debug build (B).
    let db = dir.join("history.sqlite");
    let _ = std::fs::remove_file(&db);
    let mut store = Store::open(&db).expect("history");
    let (a, b) =
        (store_matrix(&mut store, "matrix.json"), store_matrix(&mut store, "matrix-b.json"));
    drop(store);
    let page = dir.join("compare.html");
    let (a, b) = (format!("m{a}"), format!("m{b}"));
    let args =
        ["compare", &a, &b, "--db", &db.to_string_lossy(), "--html", &page.to_string_lossy()];
    let run = crate::util::run(&args, std::time::Duration::from_secs(30));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    out.push(("compare", page));
    // compare of two request/response runs and of two tests under load (their CDFs).
    let latency_db = crate::report_latency::latency_history("chart-layout-latency");
    for (name, a, b) in [("compare-rr", "1", "2"), ("compare-under-load", "3", "4")] {
        let page = dir.join(format!("{name}.html"));
        let args = ["compare", a, b, "--db", &latency_db, "--html", &page.to_string_lossy()];
        let run = crate::util::run(&args, std::time::Duration::from_secs(30));
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        out.push(("compare", page));
    }
    // A fleet of 8 hosts × 5 flows, one of them shaped lower, and a scaling curve (both from
    // network namespaces behind a 1 Gbit/s link, like tests/fleet.rs), from the history.
    let mut store = Store::open(&db).expect("history");
    let groups =
        [store_fleet(&mut store, "fleet.json"), store_fleet(&mut store, "fleet-scale.json")];
    drop(store);
    for (group, file) in groups.iter().zip(["fleet.html", "fleet-scale.html"]) {
        let page = dir.join(file);
        let which = format!("f{group}");
        report(&[
            &which,
            "--db",
            &db.to_string_lossy(),
            "-f",
            "html",
            "-o",
            &page.to_string_lossy(),
        ]);
        out.push(("fleet", page));
    }
    out
}

pub fn fixture_json(file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(file)).expect("fixture")).expect("JSON")
}

/// matrix.json with 6 × 5 cells (P=1…32 × five windows), its records reused two per cell.
fn wide_matrix() -> Value {
    let mut doc = fixture_json("matrix.json");
    let runs = doc["runs"].as_array().expect("runs").clone();
    let (mut cells, mut wide) = (Vec::new(), Vec::new());
    let windows = [Value::Null, json!(65536), json!(262144), json!(1048576), json!(4194304)];
    for p in [1, 2, 4, 8, 16, 32] {
        for w in &windows {
            let index = cells.len();
            let values =
                [json!({"axis": "parallel", "value": p}), json!({"axis": "window", "value": w})];
            cells.push(json!({ "index": index, "values": values }));
            for rep in 1..=2 {
                let mut run = runs[(2 * index + rep) % runs.len()].clone();
                run["cell"] = json!(index);
                run["repetition"] = json!(rep);
                wide.push(run);
            }
        }
    }
    doc["summary"]["cells"] = json!(cells);
    doc["runs"] = json!(wide);
    doc
}

/// run.json with its two streams repeated as 12 (ids 1…12) at both ends.
fn many_streams() -> Value {
    let mut doc = fixture_json("run.json");
    for end in ["client", "server_results"] {
        let streams = doc["record"][end]["streams"].as_array().expect("streams").clone();
        let many: Vec<Value> = (0..12)
            .map(|i| {
                let mut s = streams[i % streams.len()].clone();
                s["id"] = json!(i + 1);
                s
            })
            .collect();
        doc["record"][end]["streams"] = json!(many);
    }
    doc
}

/// What `layout_check.js` found on `page` in a window `width` px wide.
fn layout(bin: &Path, profile: &Path, page: &Path, width: u32) -> Value {
    let html = std::fs::read_to_string(page).expect("page");
    let script = include_str!("layout_check.js");
    let checked = html.replace("</body>", &format!("<script>\n{script}</script>\n</body>"));
    let copy = page.with_extension("check.html");
    std::fs::write(&copy, checked).expect("write");
    let size = format!("--window-size={width},1000");
    let dom = run_chromium(bin, profile, &["--dump-dom", &size], &copy);
    let start = dom.rfind("<pre id=\"layout-check\">").unwrap_or_else(|| {
        panic!("{}: the check wrote nothing (did the script run?)", page.display())
    }) + "<pre id=\"layout-check\">".len();
    let end = start + dom[start..].find("</pre>").expect("end of the check");
    serde_json::from_str(&dom[start..end]).expect("the check's JSON")
}

/// Every layout problem `layout_check.js` finds on `page` in both windows (each named with
/// the window), and the kinds of chart it draws; None (skipped, saying why) without Chromium.
pub fn check_page(page: &Path) -> Option<(Vec<String>, Vec<String>)> {
    let bin = chromium_or_skip()?;
    // A browser is a heavy, many-process load: keep it away from the timing-sensitive tests.
    let _serial = crate::util::exclusive();
    let profile = page.with_extension("profile");
    let (mut problems, mut kinds) = (Vec::new(), Vec::new());
    for (width, window) in WINDOWS {
        let found = layout(&bin, &profile, page, width);
        for p in found["problems"].as_array().expect("problems") {
            problems.push(format!("{window}: {}", p.as_str().unwrap_or_default()));
        }
        for kind in found["charts"].as_array().expect("charts").iter() {
            kinds.push(kind["kind"].as_str().unwrap_or_default().to_string());
        }
    }
    Some((problems, kinds))
}

/// The windows the pages are checked in: a 1400 px screen, and one whose page body is as
/// wide as the printable width of an A4 landscape page (297 − 2 × 12 mm = 1032 CSS px; the
/// page prints landscape without margins around the body, see `report::html`).
const WINDOWS: [(u32, &str); 2] = [(1400, "1400 px"), (1032 + 64 + 15, "paper")];

/// The screenshots under docs/charts/ (docs/REPORTS.md): (page, chart kind). Every kind a
/// page draws must have one.
const SHOTS: [(&str, &str); 15] = [
    ("run", "over-time"),
    ("run", "streams"),
    ("matrix", "over-time"),
    ("matrix", "cells"),
    ("matrix", "vs-axis"),
    ("matrix", "cpu"),
    ("matrix", "fairness"),
    ("campaign", "tiers"),
    ("compare", "compare"),
    ("fleet", "fairness"),
    ("fleet", "scaling"),
    ("rr", "latency-cdf"),
    ("rr", "latency-over-time"),
    ("under-load", "latency-over-time"),
    ("matrix-rr", "latency-cells"),
];

#[test]
fn every_report_page_reads_on_a_screen_and_on_paper() {
    let Some(bin) = chromium_or_skip() else { return };
    let _serial = crate::util::exclusive();
    let dir = crate::util::test_dir("chart-layout");
    let profile = dir.join("profile");
    let shots = std::env::var_os("LINERATE_CHART_SHOTS").map(PathBuf::from);
    let mut problems = Vec::new();
    for (name, page) in pages(&dir) {
        for (width, window) in WINDOWS {
            let found = layout(&bin, &profile, &page, width);
            let charts = found["charts"].as_array().expect("charts");
            assert!(!charts.is_empty(), "{name}: no chart on the page");
            for p in found["problems"].as_array().expect("problems") {
                problems.push(format!("{name} ({window}): {}", p.as_str().unwrap_or_default()));
            }
            for kind in charts.iter().filter_map(|c| c["kind"].as_str()) {
                assert!(
                    SHOTS.iter().any(|(_, k)| *k == kind),
                    "chart kind {kind:?} has no screenshot in SHOTS and docs/REPORTS.md"
                );
            }
            if let (Some(to), 1400) = (&shots, width) {
                screenshots(&bin, &profile, (name, &page), charts, to);
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} layout problems:\n{}",
        problems.len(),
        problems.iter().take(200).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The screenshots docs/REPORTS.md shows are committed under docs/charts/, and it lists them.
#[test]
fn the_docs_show_a_screenshot_of_every_chart_kind() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/REPORTS.md")).expect("docs/REPORTS.md");
    for (page, kind) in SHOTS {
        let file = format!("charts/{page}-{kind}.png");
        assert!(doc.contains(&file), "docs/REPORTS.md does not show {file}");
        let png =
            std::fs::read(root.join("docs").join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(png.starts_with(b"\x89PNG"), "{file} is not a PNG");
    }
}

/// The first chart of each kind in SHOTS for `page`, alone (the page's head and that one
/// figure), as `to/PAGE-KIND.png`, 1400 px wide.
fn screenshots(
    bin: &Path,
    profile: &Path,
    (name, page): (&str, &Path),
    charts: &[Value],
    to: &Path,
) {
    std::fs::create_dir_all(to).expect("screenshot dir");
    let html = std::fs::read_to_string(page).expect("page");
    let head = &html[..html.find("<body>").expect("body") + "<body>".len()];
    let mut done: Vec<&str> = Vec::new();
    for (i, fig) in html.split("<figure").skip(1).enumerate() {
        let fig = &fig[..fig.find("</figure>").expect("figure end") + "</figure>".len()];
        let Some(kind) = charts.get(i).and_then(|c| c["kind"].as_str()) else { continue };
        if done.contains(&kind) || !SHOTS.contains(&(name, kind)) {
            continue;
        }
        done.push(kind);
        let alone = page.with_extension(format!("{kind}.html"));
        std::fs::write(&alone, format!("{head}\n<figure{fig}\n</body></html>")).expect("write");
        let height = charts[i]["height"].as_u64().unwrap_or(800) + 140;
        let png = to.join(format!("{name}-{kind}.png"));
        let args =
            [format!("--screenshot={}", png.display()), format!("--window-size=1400,{height}")];
        run_chromium(bin, profile, &[&args[0], &args[1]], &alone);
    }
}
