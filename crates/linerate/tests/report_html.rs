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

/// The `<svg>…</svg>` of the figure whose caption ends with `caption`.
fn chart<'a>(html: &'a str, caption: &str) -> &'a str {
    let fig = html
        .split("<figure>")
        .find(|f| f.contains(&format!("{caption}</figcaption>")))
        .unwrap_or_else(|| panic!("no chart {caption:?}"));
    let start = fig.find("<svg").expect("svg start");
    let end = fig.find("</svg>").expect("svg end") + "</svg>".len();
    &fig[start..end]
}

#[test]
fn the_html_report_needs_nothing_from_the_network() {
    for file in ["matrix.json", "campaign.json", "run.json", "failed.json"] {
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
    let svg = chart(&html, "cells: median and min–max of the runs");
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
    for caption in [
        "throughput over time per stream (P=2 w=256K #1)",
        "throughput vs parallel streams (-P)",
        "throughput vs socket buffer / window (-w)",
        "CPU per Gbit/s",
        "per-flow fairness",
    ] {
        let svg = chart(&html, caption);
        assert!(svg.contains("Gbit/s") || svg.contains("Jain"), "{caption}: no unit");
    }
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
    })
}

/// Runs Chromium headless with `args` on `page`, killing it after 60 s; returns stdout.
fn run_chromium(bin: &Path, profile: &Path, args: &[&str], page: &Path) -> String {
    let mut child = Command::new(bin)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
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

#[test]
fn chromium_renders_the_report_with_its_tables_and_charts() {
    let Some(bin) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true but no chromium on PATH: .ci/run must `apt-get install -y chromium`"
        );
        eprintln!("skipped: chromium is not installed (apt-get install chromium); CI runs it");
        return;
    };
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
    let svg = chart(&html, "A and B: received throughput per cell, median and min–max");
    for needle in ["A: matrix m1", "B: matrix m2", "P=1 (A: matrix m1)", "P=2 (B: matrix m2)"] {
        assert!(svg.contains(needle), "the chart lacks {needle:?}");
    }
    assert!(!html.contains("<script") && !html.contains("https://"), "not self-contained");
}

#[test]
fn a_campaign_page_sets_each_tier_against_its_link() {
    let html = html_of("campaign.json");
    let svg = chart(&html, "campaign: best cell per tier against its link");
    for needle in ["loopback-10g", "link&apos;s TCP goodput", "received throughput (Gbit/s)"] {
        assert!(svg.contains(needle), "the chart lacks {needle:?}");
    }
    // One whisker chart per tier, named after it.
    for tier in ["loopback", "loopback-10g"] {
        chart(&html, &format!("{tier}: cells: median and min–max of the runs"));
    }
}
