//! The HTML report: self-contained (nothing to fetch), one SVG chart pinned by a snapshot, and
//! the page opened in headless Chromium — its screenshot must show something (non-white
//! pixels, decoded from the PNG) and its DOM must hold the tables and the charts.
//!
//! Without Chromium the browser test is skipped with a reason, except under CI=true (CI
//! installs Debian's `chromium`), where its absence is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::report::{fixture, report};

fn html_of(file: &str) -> String {
    report(&[&fixture(file), "-f", "html"])
}

/// The `<svg>…</svg>` of the chart titled `title`.
pub fn chart<'a>(html: &'a str, title: &str) -> &'a str {
    let label = format!("aria-label=\"{}\"", title.replace('\'', "&#39;"));
    let at = html.find(&label).unwrap_or_else(|| panic!("no chart {title:?}"));
    let start = html[..at].rfind("<svg").expect("svg start");
    let end = at + html[at..].find("</svg>").expect("svg end") + "</svg>".len();
    &html[start..end]
}

/// The hover texts (`<title>`s) of a chart.
fn hovers(svg: &str) -> Vec<&str> {
    svg.split("<title>").skip(1).filter_map(|t| t.split("</title>").next()).collect()
}

#[test]
fn the_html_report_needs_nothing_from_the_network() {
    for file in ["matrix.json", "campaign.json", "run.json", "failed.json", "rr.json"] {
        let html = html_of(file);
        assert!(html.starts_with("<!DOCTYPE html>"), "{file}");
        for banned in ["<script", "<link", "<img", "src=", "url(", "@import", "https://"] {
            assert!(!html.contains(banned), "{file} holds {banned:?}");
        }
        // The only http:// is the SVG namespace name, which is never fetched.
        let others = html.matches("http://").count() - html.matches("http://www.w3.org/").count();
        assert_eq!(others, 0, "{file} links somewhere");
        assert!(html.trim_end().ends_with("</html>"), "{file}");
    }
}

#[test]
fn charts_are_titled_with_date_hosts_and_settings_and_label_their_axes() {
    let html = html_of("matrix.json");
    let svg = chart(&html, "Received throughput per cell: median, min–max and each run");
    insta::assert_snapshot!("matrix_cells_whiskers_svg", svg);
    for needle in [
        "2026-11-22 06:00:00 UTC",
        "127.0.0.1:5391 (linerate 0.1.0)",
        "TCP upload (client sends)",
        "received throughput (Gbit/s)",
        "P=2 w=256K",
    ] {
        assert!(svg.contains(needle), "the chart lacks {needle:?}");
    }
    for (title, unit) in [
        ("Throughput over time of every run, one panel per cell", "(s)"),
        ("Mean throughput against parallel streams (-P)", "(Gbit/s)"),
        ("Mean throughput against socket buffer / window (-w)", "(Gbit/s)"),
        ("CPU per Gbit/s received", "cores busy per Gbit/s"),
        ("Per-flow fairness", "(no unit; 1 = equal shares)"),
    ] {
        assert!(chart(&html, title).contains(unit), "{title}: no unit {unit:?}");
    }
}

/// Every chart has a one-sentence caption, every plotted value its figure on hover, and only
/// the Okabe–Ito colours and greys are used (no red against green).
#[test]
fn charts_have_captions_hover_figures_and_a_colour_blind_safe_palette() {
    const SAFE: [&str; 8] =
        ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"];
    for file in ["matrix.json", "campaign.json", "run.json", "rr.json", "under-load.json"] {
        let html = html_of(file);
        let figures: Vec<&str> = html.split("<figure class=\"chart\"").skip(1).collect();
        assert!(!figures.is_empty(), "{file}: no chart");
        for fig in figures {
            let caption =
                fig.split("<figcaption>").nth(1).and_then(|c| c.split("</figcaption>").next());
            let caption = caption.unwrap_or_else(|| panic!("{file}: a chart without a caption"));
            assert!(caption.len() > 40 && caption.ends_with('.'), "{file}: caption {caption:?}");
            assert_eq!(caption.matches(". ").count(), 0, "{file}: one sentence: {caption:?}");
            assert!(!hovers(fig).is_empty(), "{file}: a chart without hover figures");
            for colour in fig.split("=\"#").skip(1).map(|c| &c[..6]) {
                let grey = colour[..2] == colour[2..4] && colour[2..4] == colour[4..6];
                assert!(grey || SAFE.contains(&format!("#{colour}").as_str()), "{file}: #{colour}");
            }
        }
    }
}

/// "throughput over time" shows every run of a matrix (not one chosen run), each interval
/// with its figure, and a run's streams with their sum; fairness stays on Jain's 0–1 scale and
/// says why P=1 has no index.
#[test]
fn every_run_is_drawn_over_time_and_fairness_stays_between_0_and_1() {
    let html = html_of("matrix.json");
    let svg = chart(&html, "Throughput over time of every run, one panel per cell");
    let points = hovers(svg);
    for cell in ["P=1 w=default", "P=1 w=256K", "P=2 w=default", "P=2 w=256K"] {
        for rep in [1, 2] {
            let run = format!("{cell} #{rep}, client → server, ");
            let n = points.iter().filter(|t| t.starts_with(&run)).count();
            assert_eq!(n, 2, "{run}: one figure per interval (2 intervals), got {n}");
        }
    }
    assert!(points.iter().any(|t| t.contains("0–0.5 s: ") && t.contains(" Gbit/s")), "{points:?}");
    // A single run: each stream and their sum, interval by interval.
    let run = html_of("run.json");
    let points = hovers(chart(&run, "Throughput over time of run.json"));
    let gbit = |prefix: &str| -> f64 {
        let t = points.iter().find(|t| t.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix}"));
        t.rsplit(": ")
            .next()
            .and_then(|v| v.strip_suffix(" Gbit/s"))
            .expect("Gbit/s")
            .parse()
            .expect("a number")
    };
    let (one, two) =
        (gbit("stream 1 (client → server), 0–0.5 s"), gbit("stream 2 (client → server), 0–0.5 s"));
    let sum = gbit("sum of its 2 streams (client → server), 0–0.5 s");
    assert!((sum - (one + two)).abs() < 0.15, "{sum} is not {one} + {two}");
    let svg = chart(&html, "Per-flow fairness");
    let ticks: Vec<&str> = svg
        .split("text-anchor=\"middle\" fill=\"#222222\">")
        .skip(1)
        .filter_map(|t| t.split("</text>").next())
        .filter(|t| t.parse::<f64>().is_ok())
        .collect();
    assert_eq!(ticks, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"], "the index's axis");
    assert_eq!(svg.matches(">n/a: one stream</text>").count(), 2, "P=1 cells say why");
    assert!(hovers(svg).iter().any(|t| t.starts_with("P=2 w=256K: Jain&#39;s index ")));
}

/// The Chromium on PATH, if any.
fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
    })
}

/// Runs Chromium headless with `args` on `page` (a `file://` page the test wrote), killing it
/// after 60 s; returns stdout. Chromium's own background traffic (component updates, sync,
/// field trials) is switched off: it loads the page and nothing else.
pub fn run_chromium(bin: &Path, profile: &Path, args: &[&str], page: &Path) -> String {
    let mut child = Command::new(bin)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "chromium {args:?} failed: {status}");
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {args:?} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("reader")
}

/// Share of pixels that are not (near) white in a PNG.
fn ink(png_path: &Path) -> f64 {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("open screenshot"),
    ));
    let mut reader = decoder.read_info().expect("PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("PNG frame");
    let channels = info.color_type.samples();
    assert!(channels >= 3, "unexpected colour type {:?}", info.color_type);
    let pixels = buf[..info.buffer_size()].chunks(channels);
    let total = (info.width * info.height) as f64;
    pixels.filter(|p| p[..3].iter().any(|&c| c < 235)).count() as f64 / total
}

/// The Chromium to test with; None (the test skips, saying why) when there is none outside CI.
pub fn chromium_or_skip() -> Option<PathBuf> {
    let bin = chromium();
    if bin.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true but no chromium on PATH: .ci/run must `apt-get install -y chromium`"
        );
        eprintln!("skipped: chromium is not installed (apt-get install chromium); CI runs it");
    }
    bin
}

#[test]
fn chromium_renders_the_report_with_its_tables_and_charts() {
    let Some(bin) = chromium_or_skip() else { return };
    // A browser is a heavy, many-process load: keep it away from the timing-sensitive tests.
    let _serial = crate::util::exclusive();
    let dir = crate::util::data_home().join("report-html");
    std::fs::create_dir_all(&dir).expect("dir");
    let page = dir.join("matrix.html");
    report(&[&fixture("matrix.json"), "-f", "html", "-o", &page.to_string_lossy()]);
    let shot = dir.join("matrix.png");
    let _ = std::fs::remove_file(&shot);
    let profile = dir.join("profile");
    let size = "--window-size=1200,2000";
    run_chromium(&bin, &profile, &[&format!("--screenshot={}", shot.display()), size], &page);
    let share = ink(&shot);
    assert!(share > 0.02, "the screenshot is blank: {:.4} of its pixels are not white", share);
    let dom = run_chromium(&bin, &profile, &["--dump-dom"], &page);
    assert!(dom.contains("<table>"), "no table in the DOM");
    assert!(dom.contains("P=2 w=256K"), "no cell row in the DOM");
    let charts = dom.matches("<svg").count();
    assert!(charts >= 6, "{charts} charts in the DOM");
    assert!(dom.contains("<polyline") || dom.contains("<path"), "charts hold no lines");
}

/// `compare A B --html`: one page with the comparison table and both matrices' cells on the
/// same axes.
#[test]
fn compare_writes_both_matrices_on_the_same_axes() {
    let _serial = crate::util::exclusive();
    let srv = crate::util::Server::start(&["-B", "127.0.0.1"]);
    let dir = crate::util::data_home().join("report-compare");
    std::fs::create_dir_all(&dir).expect("dir");
    let db = dir.join("history.sqlite");
    let _ = std::fs::remove_file(&db);
    let (db_s, port) = (db.to_string_lossy().into_owned(), srv.port.to_string());
    for seed in ["1", "2"] {
        crate::report::stored_matrix(&port, &db_s, seed, "0.2");
    }
    let page = dir.join("compare.html");
    let page_s = page.to_string_lossy().into_owned();
    let out = crate::util::run(
        &["compare", "m1", "m2", "--db", &db_s, "--html", &page_s],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("HTML comparison written to"), "{}", out.stdout);
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.contains("<table>") && html.contains("A mean"), "no comparison table");
    let svg = chart(&html, "A and B: received throughput per cell");
    for needle in [
        "A: matrix m1: median, min–max",
        "B: matrix m2: median, min–max",
        "A: matrix m1, P=1: median ",
        "B: matrix m2, P=2: median ",
    ] {
        assert!(svg.contains(needle), "the chart lacks {needle:?}");
    }
    assert!(!html.contains("<script") && !html.contains("https://"), "not self-contained");
}

#[test]
fn a_campaign_page_sets_each_tier_against_its_link() {
    let html = html_of("campaign.json");
    let svg = chart(&html, "Each tier's best cell against its link");
    for needle in
        ["loopback-10g", "link&#39;s theoretical TCP goodput", "received throughput (Gbit/s)"]
    {
        assert!(svg.contains(needle), "the chart lacks {needle:?}");
    }
    // One whisker chart per tier, named after it.
    for tier in ["loopback", "loopback-10g"] {
        chart(
            &html,
            &format!("{tier}: Received throughput per cell: median, min–max and each run"),
        );
    }
}

/// A request/response run's page: its latency CDF on a logarithmic axis with the table's
/// percentiles on hover, and none of the bulk charts (its bytes are requests).
#[test]
fn a_request_response_page_draws_its_latency_cdf_and_no_throughput() {
    let html = html_of("rr.json");
    let kinds: Vec<&str> =
        html.split("data-kind=\"").skip(1).filter_map(|k| k.split('"').next()).collect();
    assert_eq!(kinds, ["latency-over-time", "latency-cdf"], "only the latency's charts");
    // Over time: every stream's transactions of an interval summed, over its length.
    let doc = crate::chart_layout::fixture_json("rr.json");
    let streams = doc["record"]["client"]["streams"].as_array().expect("streams");
    let first = |s: &serde_json::Value, key: &str| s["intervals"][0][key].clone();
    let n: u64 = streams.iter().map(|s| first(s, "rr")["transactions"].as_u64().expect("n")).sum();
    let end = streams.iter().map(|s| first(s, "end_us").as_u64().expect("end")).max();
    let rate = n as f64 / (end.expect("an interval") as f64 / 1e6);
    let over_time = chart(&html, "Transactions and latency over time of rr.json");
    assert!(over_time.contains("latency (ms, logarithmic scale)"), "the latency axis");
    let want = format!("0–1 s: {rate:.0} transactions/s");
    assert!(hovers(over_time).contains(&want.as_str()), "{want}: {:?}", hovers(over_time));
    let svg = chart(&html, "Latency distribution (CDF) of rr.json");
    assert!(svg.contains("latency (µs, logarithmic scale)"), "the latency axis and its unit");
    assert!(svg.contains("transactions at or below that latency (%)"), "the share axis");
    let p99 = crate::report_latency::table_value(&html, "latency p99");
    let points = hovers(svg);
    assert!(
        points.iter().any(|t| t.ends_with(&format!(": p99 {p99} (99 % at or below)"))),
        "{p99}: {points:?}"
    );
    assert_eq!(points.len(), 7, "min, five percentiles and max: {points:?}");
    assert!(points[6].ends_with("(the slowest)"), "{points:?}");
}

/// A test under load's page: throughput above probe latency on one time axis (each loaded
/// interval's median and p99, the idle figures as reference lines) and both phases' CDFs.
#[test]
fn an_under_load_page_sets_probe_latency_under_its_throughput() {
    let html = html_of("under-load.json");
    let svg = chart(&html, "Throughput and probe latency over time of under-load.json");
    for needle in ["received throughput (Gbit/s)", "probe latency (ms)", "time since the start"] {
        assert!(svg.contains(needle), "the chart lacks {needle:?}");
    }
    let points = hovers(svg);
    let doc = crate::chart_layout::fixture_json("under-load.json");
    let loaded = doc["record"]["probes"]["loaded"]["intervals"].as_array().expect("intervals");
    let p50s = points.iter().filter(|t| t.starts_with("loaded probes&#39; p50 per interval"));
    assert_eq!(p50s.count(), loaded.len(), "one figure per loaded interval: {points:?}");
    // The loaded phase starts 1 s into the test: its first interval is 1–2 s.
    assert!(points.iter().any(|t| t.contains("p50 per interval, 1–2 s: ")), "{points:?}");
    let idle = doc["summary"]["under_load"]["idle"]["p50_ns"].as_u64().expect("idle p50");
    let idle = linerate::units::format_latency_ns(idle);
    assert!(
        points.iter().any(|t| *t == format!("idle probes&#39; p50 (before the test): {idle}")),
        "{idle}: {points:?}"
    );
    let cdf = chart(&html, "Probe latency distribution (CDF), idle and loaded, of under-load.json");
    for phase in ["idle: before the test, 2 s", "loaded: beside the test, 4.75 s"] {
        assert!(cdf.contains(phase), "the CDF lacks {phase:?}");
    }
}
