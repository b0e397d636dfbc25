//! A fleet run as people read it (text, and Markdown for a stored one) and as programs read
//! it (JSON, docs/JSON.md "linerate.fleet"; a scaling curve's "linerate.fleet_scale").
//!
//! Text ends with the answer, like a client run: per direction each host (its rate, share,
//! flows, retransmits and what limited it), the spread across hosts and flows and the
//! outliers; then the hosts that were not measured and why; last the totals. One function
//! per section serves text and Markdown (`style::Style`), and the HTML page
//! (`html`) reuses its tables and sentences.
//!
//! A stored fleet or curve is a report like any other (`model::ReportKind::Fleet`, one fleet
//! tier, rendered by `report::render`); its body and JSON document are written here from the
//! model, and the live `fleet` command writes the same JSON from the same figures.

use std::io::Write;

use linerate_proto::{Direction, EndCondition, Flow};
use serde_json::{Value, json};

use crate::plan::fleet::FleetPlan;
use crate::record::{Outcome, RunRecord, SCHEMA_VERSION};
use crate::report::model::Report;
use crate::report::style::{Style, md_escape};
use crate::report::table::{Table, verdict_words};
use crate::report::words::{fleet_result, place_words};
use crate::stats::campaign_fleet::{FleetRun, FleetTierFigures};
use crate::stats::fleet::{FleetDirection, FleetSummary, Spread};
use crate::stats::fleet::{HostInput, summarize_fleet};
use crate::stats::scaling::{PLATEAU, ScaleDirection, ScaleSummary};
use crate::stats::summarize;
use crate::store::GroupKind;
use crate::units::peer_text::escape;
use crate::units::{ByteCount, count_of, format_bits_per_second, rate_unit, three_figures};

/// Which way data went, as the fleet reports say it.
pub fn flow_words(flow: Flow) -> &'static str {
    match flow {
        Flow::ClientToServer => "to the hosts (upload)",
        Flow::ServerToClient => "from the hosts (download, -R)",
    }
}

fn rate(bps: f64, unit: (&str, f64)) -> String {
    three_figures(bps / unit.1)
}

fn percent(x: f64) -> String {
    format!("{}%", three_figures(x * 100.0))
}

/// The per-host table of one direction, in one unit.
pub fn host_table(d: &FleetDirection) -> Table {
    let unit = rate_unit(d.hosts.iter().map(|h| h.bits_per_second).fold(0.0, f64::max));
    let mut t = Table::new(&[
        "host",
        &format!(">{}", unit.0),
        ">share",
        &format!(">flows min–max ({})", unit.0),
        ">retr",
        ">server CPU",
        ">server mem",
        "limited by",
    ]);
    for h in &d.hosts {
        let lo = h.flows.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = h.flows.iter().copied().fold(0.0, f64::max);
        let flows = match h.flows.len() {
            0 => "n/a".to_string(),
            1 => rate(hi, unit),
            _ => format!("{}–{}", rate(lo, unit), rate(hi, unit)),
        };
        let mut label = h.label.clone();
        if let Some(place) = place_words(h.node.as_deref(), h.zone.as_deref()) {
            label = format!("{label} ({place})");
        }
        if h.whole_test {
            label.push_str(" *");
        }
        t.rows.push(vec![
            label,
            rate(h.bits_per_second, unit),
            percent(h.share),
            flows,
            h.retransmits.map_or("n/a".into(), |r| r.to_string()),
            h.server_cpu_percent.map_or("n/a".into(), |c| format!("{}%", three_figures(c))),
            h.server_peak_rss_bytes.map_or("n/a".into(), |b| ByteCount(b).iec()),
            h.limit.as_deref().map_or("n/a".into(), |id| verdict_words(id).0),
        ]);
    }
    t
}

/// A fleet of request/response tests: each host's transactions and latency.
pub fn latency_table(l: &crate::stats::fleet::FleetLatency) -> Table {
    let lat = |v: Option<u64>| v.map_or("n/a".into(), crate::units::format_latency_ns);
    let mut t = Table::new(&["host", ">transactions/s", ">p50", ">p99", ">max"]);
    for h in &l.hosts {
        t.rows.push(vec![
            h.label.clone(),
            h.transactions_per_second.map_or("n/a".into(), |r| format!("{r:.0}")),
            lat(h.p50_ns),
            lat(h.p99_ns),
            lat(h.max_ns),
        ]);
    }
    t
}

/// The fleet's request/response total in one sentence.
pub fn latency_total(l: &crate::stats::fleet::FleetLatency) -> String {
    let lat = |v: Option<u64>| v.map_or("n/a".into(), crate::units::format_latency_ns);
    format!(
        "Fleet transactions: {:.0} per second over {} host(s) (Jain {} across hosts); every transaction: p50 {}, p99 {}, p99.9 {}, max {} (each host over its whole test)",
        l.transactions_per_second,
        l.hosts.len(),
        l.jain.map_or("n/a".into(), |j| format!("{j:.3}")),
        lat(l.p50_ns),
        lat(l.p99_ns),
        lat(l.p99_9_ns),
        lat(l.max_ns)
    )
}

/// Jain's index of a spread to three decimals, or n/a with the reason.
pub fn jain_text(s: &Spread) -> String {
    match s.jain {
        Some(j) => format!("{j:.3}"),
        None if s.n < 2 => "n/a (one value)".into(),
        None => "n/a (nothing moved)".into(),
    }
}

/// One line of the spread across hosts or flows: n, mean, σ (and CV), min–max, Jain.
pub fn spread_line(what: &str, s: &Spread) -> String {
    let sd = match (s.stddev, s.cv) {
        (Some(sd), Some(cv)) => {
            format!("σ {} ({} of the mean)", format_bits_per_second(sd), percent(cv))
        }
        _ => "σ n/a (one value)".to_string(),
    };
    let jain = jain_text(s);
    format!(
        "across {what} (n={}): mean {}, {sd}, min–max {}–{}, Jain {jain}",
        s.n,
        format_bits_per_second(s.mean),
        format_bits_per_second(s.min),
        format_bits_per_second(s.max),
    )
}

/// The first line of a fleet run: what is about to happen.
pub fn render_start(plan: &FleetPlan, out: &mut dyn Write) -> std::io::Result<()> {
    let spec = &plan.base.spec;
    let how = match (&spec.rr, spec.direction) {
        (Some(rr), _) => format!(
            "request/response ({}: {}-byte requests, {}-byte responses)",
            if rr.connect_each { "--crr, a connection each" } else { "--rr" },
            rr.request_bytes,
            rr.response_bytes
        ),
        (None, Direction::Upload) => "upload (this host sends)".into(),
        (None, Direction::Download) => "download (-R: the hosts send)".into(),
        (None, Direction::Bidirectional) => "both ways (--bidir)".into(),
    };
    let length = match spec.end {
        EndCondition::Duration { duration_ms } => {
            format!("{} s", three_figures(duration_ms as f64 / 1e3))
        }
        EndCondition::Bytes { bytes } => format!("{} per stream", ByteCount(bytes).iec()),
    };
    writeln!(
        out,
        "Fleet: {} × {} {}, {how}, {length}: every host is set up first, then all start at once",
        count_of(plan.targets.len() as u64, "host"),
        spec.streams,
        if spec.streams == 1 { "flow" } else { "flows" },
    )
}

/// A sentence under a section: indented in text, a bullet in Markdown.
fn item(style: Style, text: &str, out: &mut dyn Write) -> std::io::Result<()> {
    match style {
        Style::Text => writeln!(out, "  {}", escape(text)),
        Style::Markdown => writeln!(out, "- {}", md_escape(text)),
    }
}

/// A section's heading: `Title:` in text, a level-2 heading in Markdown.
fn section(style: Style, title: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    match style {
        Style::Text => writeln!(out, "{}:", escape(title)),
        Style::Markdown => style.heading(2, title, out),
    }
}

/// A table, and in Markdown the blank line that ends it.
fn table(style: Style, t: &Table, out: &mut dyn Write) -> std::io::Result<()> {
    style.table(t, out)?;
    if style == Style::Markdown { writeln!(out) } else { Ok(()) }
}

/// A paragraph: a line in text, a paragraph in Markdown.
fn paragraph(style: Style, text: &str, out: &mut dyn Write) -> std::io::Result<()> {
    match style {
        Style::Text => writeln!(out, "{}", escape(text)),
        Style::Markdown => writeln!(out, "{}", md_escape(text)),
    }
}

/// How the hosts started and which window counts, in a sentence.
pub fn start_sentence(summary: &FleetSummary) -> String {
    match (summary.skew, summary.window) {
        (Some(skew), Some((from, to))) => format!(
            "Started together: start skew {} ms, stop skew {} ms; figures over the {} s every \
             host shared ({}–{} s after the go)",
            three_figures(skew.start_seconds * 1e3),
            three_figures(skew.stop_seconds * 1e3),
            three_figures(to - from),
            three_figures(from),
            three_figures(to),
        ),
        _ => "No shared window (not every host started): each host counted over its own test"
            .to_string(),
    }
}

/// What a host far from the median got, and what limited it.
pub fn outlier_sentence(o: &crate::stats::fleet::Outlier) -> String {
    let more = if o.against_median_percent < 0.0 { "less" } else { "more" };
    let why = &o.reason;
    format!(
        "outlier: {} got {}% {more} than the median host: {why}",
        o.label,
        three_figures(o.against_median_percent.abs()),
    )
}

/// The hosts that were not measured, as a heading.
pub fn not_measured_title(summary: &FleetSummary) -> String {
    format!("Not measured ({} of {} hosts)", summary.not_measured.len(), summary.hosts_planned)
}

/// Each host that was not measured: `label: why`.
pub fn not_measured_lines(summary: &FleetSummary) -> Vec<String> {
    summary.not_measured.iter().map(|(label, why)| format!("{label}: {why}")).collect()
}

/// What one direction's receivers counted outside the shared window, reported apart as `-O`
/// reports the omitted seconds; None when no host was windowed.
pub fn outside_sentence(summary: &FleetSummary, d: &FleetDirection) -> Option<String> {
    let (bytes, (before, after)) = d.outside_window_bytes.zip(summary.unshared_seconds)?;
    let share =
        d.outside_window_share.map_or(String::new(), |x| format!(", {} of all", percent(x)));
    // Only the spans there were: a window that opens at the first host's start has none
    // before it (no "0 s before it").
    let spans: Vec<String> = [(before, "before it"), (after, "after it")]
        .into_iter()
        .filter(|(secs, _)| *secs >= 0.0005)
        .map(|(secs, when)| format!("the {} s {when}", three_figures(secs)))
        .collect();
    let when = if spans.is_empty() { "at its edges".to_string() } else { spans.join(" and ") };
    let when = if spans.is_empty() { when } else { format!("in {when}") };
    Some(format!(
        "outside the shared window (apart, as -O is): {}{share}, {when}",
        ByteCount(bytes as u64).iec(),
    ))
}

/// ` = 98% of the link's TCP goodput (956 Mbit/s)`, or nothing without a named link.
fn of_link(bps: f64, goodput: Option<f64>) -> String {
    goodput.filter(|g| *g > 0.0).map_or(String::new(), |g| {
        format!(" = {} of the link's TCP goodput ({})", percent(bps / g), format_bits_per_second(g))
    })
}

/// The closing lines: the coordinator's CPU and memory, and the total per direction.
pub fn total_lines(summary: &FleetSummary) -> Vec<String> {
    let mut lines = Vec::new();
    if summary.coordinator_cpu_percent.is_some() || summary.coordinator_peak_rss_bytes.is_some() {
        lines.push(format!(
            "Coordinator (this host, every client end): {} of a core, peak memory {}",
            summary
                .coordinator_cpu_percent
                .map_or("n/a".into(), |c| format!("{}%", three_figures(c))),
            summary.coordinator_peak_rss_bytes.map_or("n/a".into(), |b| ByteCount(b).iec()),
        ));
    }
    if let Some(l) = &summary.latency {
        lines.push(format!(
            "Fleet total: {:.0} transactions per second over {} of {} hosts, p50 {}, p99 {}",
            l.transactions_per_second,
            l.hosts.len(),
            summary.hosts_planned,
            l.p50_ns.map_or("n/a".into(), crate::units::format_latency_ns),
            l.p99_ns.map_or("n/a".into(), crate::units::format_latency_ns),
        ));
        return lines;
    }
    for d in &summary.directions {
        lines.push(format!(
            "Fleet total {}: {} over {} of {} hosts{}",
            flow_words(d.flow),
            format_bits_per_second(d.total_bits_per_second),
            d.hosts.len(),
            summary.hosts_planned,
            of_link(d.total_bits_per_second, d.link_goodput_bits_per_second),
        ));
    }
    if summary.directions.is_empty() {
        lines.push("Fleet total: n/a (no host completed its test)".into());
    }
    lines
}

/// The note under a host table whose hosts were counted over their whole test.
pub const WHOLE_TEST_NOTE: &str = "* no interval samples: counted over its whole test";

/// A fleet's figures in text or Markdown: per direction the host table, spread and outliers,
/// then the hosts not measured, then the totals.
pub fn write_fleet_body(
    style: Style,
    summary: &FleetSummary,
    start_note: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(note) = start_note {
        paragraph(style, &format!("Start: {note}"), out)?;
        if style == Style::Markdown {
            writeln!(out)?;
        }
    }
    paragraph(style, &start_sentence(summary), out)?;
    // A fleet of request/response tests is read by its transactions and latency: no byte
    // table, no verdict, no bit/s total.
    for d in summary.throughput_directions() {
        section(style, &format!("Data {}", flow_words(d.flow)), out)?;
        table(style, &host_table(d), out)?;
        if d.hosts.iter().any(|h| h.whole_test) {
            item(style, WHOLE_TEST_NOTE, out)?;
        }
        if let Some(s) = &d.across_hosts {
            item(style, &spread_line("hosts", s), out)?;
        }
        if let Some(s) = &d.across_flows {
            item(style, &spread_line("flows", s), out)?;
        }
        if let Some(line) = outside_sentence(summary, d) {
            item(style, &line, out)?;
        }
        for o in &d.outliers {
            item(style, &outlier_sentence(o), out)?;
        }
    }
    if let Some(l) = &summary.latency {
        section(style, "Transactions (request/response)", out)?;
        table(style, &latency_table(l), out)?;
        item(style, &latency_total(l), out)?;
    }
    if !summary.not_measured.is_empty() {
        section(style, &not_measured_title(summary), out)?;
        // A failure's message may quote the peer (a refusal, an abort): escaped by `item`.
        for line in not_measured_lines(summary) {
            item(style, &line, out)?;
        }
    }
    match style {
        Style::Text => writeln!(out)?,
        Style::Markdown => section(style, "Totals", out)?,
    }
    for line in total_lines(summary) {
        match style {
            Style::Text => writeln!(out, "{line}")?,
            Style::Markdown => item(style, &line, out)?,
        }
    }
    Ok(())
}

/// The first lines of a scaling curve: what runs, in how many fleet runs, and the seed.
pub fn render_scale_start(
    plan: &FleetPlan,
    runs: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    render_start(plan, out)?;
    let counts: Vec<String> = plan.scale.iter().map(usize::to_string).collect();
    writeln!(
        out,
        "Scaling curve: the first {} host(s), {} each, {runs} fleet runs in a random order \
         (--seed {})",
        counts.join(", "),
        count_of(u64::from(plan.repeat), "run"),
        plan.seed
    )
}

/// After the first lines of a curve: its `--until-ci` rounds, and the group it continues.
pub fn render_scale_rounds(
    plan: &FleetPlan,
    resumed: Option<i64>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(target) = plan.until_ci {
        writeln!(
            out,
            "Then, until each total's 95% CI is within ±{:.1}% of its mean: more rounds, at \
             most {} whole runs per host count",
            target * 100.0,
            plan.max_repeat
        )?;
    }
    match resumed {
        Some(g) => writeln!(
            out,
            "Resuming {}: its whole fleet runs are kept, the rest run (seed {})",
            GroupKind::Fleet.reference(g),
            plan.seed
        ),
        None => Ok(()),
    }
}

/// Where a curve is, for the command's `Console` (a bar on a terminal; in a log, one line per
/// finished fleet run: `[3/8] 2 hosts (run 1): upload 1.88 Gbit/s`), its cell named by its
/// `hosts`: before a run `summary` is None, after it the run's figures.
pub fn curve_progress(
    p: &crate::session::grid::Progress<'_, crate::session::fleet::Ran>,
    hosts: usize,
    summary: Option<&FleetSummary>,
) -> super::progress::Progress {
    super::progress::Progress {
        cell: count_of(hosts as u64, "host"),
        eta: None,
        finished: summary.map(fleet_result),
        ..super::progress::Progress::of(p, |_| String::new())
    }
}

/// A live curve's warnings (hosts not measured, CPU-contended runs), as its report lists them.
pub fn render_warnings(warnings: &[String], out: &mut dyn Write) -> std::io::Result<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    Style::Text.list("Warnings", warnings, out)
}

/// One direction's curve in one unit: per host count the runs, the mean total with its 95 %
/// interval, min–max, the per-host mean and Jain's index.
pub fn scale_table(d: &ScaleDirection) -> Table {
    let top = d.points.iter().filter_map(|p| Some(p.total.as_ref()?.max)).fold(0.0, f64::max);
    let unit = rate_unit(top);
    let mut t = Table::new(&[
        ">hosts",
        ">runs",
        &format!(">total {} (mean ± 95% CI)", unit.0),
        &format!(">min–max ({})", unit.0),
        &format!(">per host ({})", unit.0),
        ">Jain",
    ]);
    for p in &d.points {
        let (mean, range) = match &p.total {
            Some(s) => (
                match s.ci95_half_width {
                    Some(h) => format!("{} ± {}", rate(s.mean, unit), rate(h, unit)),
                    None => rate(s.mean, unit),
                },
                format!("{}–{}", rate(s.min, unit), rate(s.max, unit)),
            ),
            None => ("n/a (no run measured every host)".into(), "n/a".into()),
        };
        let mut runs = p.totals.len().to_string();
        if p.partial_runs > 0 {
            runs.push_str(&format!(" (+{} partial)", p.partial_runs));
        }
        if p.contended_runs > 0 {
            runs.push_str(&format!(" ({} CPU-contended)", p.contended_runs));
        }
        t.rows.push(vec![
            p.hosts.to_string(),
            runs,
            mean,
            range,
            p.per_host_mean.map_or("n/a".into(), |m| rate(m, unit)),
            p.jain_mean.map_or("n/a (one host)".into(), |j| format!("{j:.3}")),
        ]);
    }
    t
}

/// The points whose runs include one a host's CPU set (`stats::scaling::cpu_contended`),
/// said under the table: their totals, spread and interval hold what a CPU allowed.
pub fn contended_sentence(d: &ScaleDirection) -> Option<String> {
    let points: Vec<String> = d
        .points
        .iter()
        .filter(|p| p.contended_runs > 0)
        .map(|p| {
            format!(
                "{} ({} of {} runs)",
                count_of(p.hosts as u64, "host"),
                p.contended_runs,
                p.totals.len()
            )
        })
        .collect();
    (!points.is_empty()).then(|| {
        format!(
            "CPU-contended: at {}, a host's own run says its CPU, not the path, set its rate \
             (starved for a CPU, or a busy host); those totals are in the point and may hold \
             it down: rerun on quiet hosts (each host's run is in the warnings)",
            points.join(", ")
        )
    })
}

/// Where one direction's total stops rising, in a sentence.
pub fn plateau_sentence(d: &ScaleDirection) -> String {
    let at = d.stops_rising_at.and_then(|k| d.points.iter().find(|p| p.hosts == k));
    match (at, d.still_rising) {
        (Some(p), false) => format!(
            "The total stops rising at {}: {} (mean){}, within {:.0}% of the highest mean.",
            count_of(p.hosts as u64, "host"),
            p.total.as_ref().map_or("n/a".into(), |s| format_bits_per_second(s.mean)),
            p.total
                .as_ref()
                .map_or(String::new(), |s| of_link(s.mean, d.link_goodput_bits_per_second)),
            PLATEAU * 100.0
        ),
        (Some(p), true) => format!(
            "The total is highest at the most hosts run ({}): it may still be rising; add more \
             targets to find where it stops.",
            p.hosts
        ),
        (None, _) => "Where the total stops rising: n/a (fewer than two points)".to_string(),
    }
}

/// The curve in text or Markdown: per direction its table and where the total stops rising.
pub fn write_scale_body(
    style: Style,
    curve: &ScaleSummary,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for d in &curve.directions {
        section(style, &format!("Scaling, data {}", flow_words(d.flow)), out)?;
        table(style, &scale_table(d), out)?;
        if let Some(note) = contended_sentence(d) {
            paragraph(style, &note, out)?;
        }
        paragraph(style, &plateau_sentence(d), out)?;
    }
    if curve.directions.is_empty() {
        paragraph(style, "Scaling: n/a (no fleet run completed)", out)?;
    }
    Ok(())
}

/// A fleet report's body in text or Markdown: a curve's tables, or a single fleet's sections.
pub fn write_report_body(
    style: Style,
    f: &FleetTierFigures,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if !f.scale.is_empty() {
        return write_scale_body(style, &f.curve, out);
    }
    if let Some(run) = f.runs.first() {
        writeln!(out)?;
        write_fleet_body(style, &run.summary, None, out)?;
    }
    Ok(())
}

/// Each host's label and run, of one fleet run of a fleet report.
pub fn run_hosts<'a>(r: &'a Report, run: &FleetRun) -> Vec<(&'a str, &'a RunRecord)> {
    let records = run.records.iter().filter_map(|&i| r.runs.get(i)).map(|x| &x.record);
    records.map(|record| (HostInput::placed(record).label, record)).collect()
}

/// A fleet report's JSON: a single fleet's `linerate.fleet` document (each host's label, run
/// and its summary; `start_note` says why a live fleet started without every host), a curve's
/// `linerate.fleet_scale` (each fleet run's figures and host runs).
pub fn render_report_json(
    r: &Report,
    f: &FleetTierFigures,
    start_note: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let hosts = |run: &FleetRun, summary: bool| -> Vec<Value> {
        let host = |(label, record): (&str, &RunRecord)| match summary {
            true => json!({ "label": label, "record": record, "summary": summarize(record) }),
            false => json!({ "label": label, "record": record }),
        };
        run_hosts(r, run).into_iter().map(host).collect()
    };
    let doc = match (f.scale.is_empty(), f.runs.first()) {
        (true, first) => json!({
            "schema_version": SCHEMA_VERSION,
            "kind": "linerate.fleet",
            "group": r.group,
            "start_note": start_note,
            "summary": first.map_or_else(|| summarize_fleet(&[]), |run| run.summary.clone()),
            "hosts": first.map_or_else(Vec::new, |run| hosts(run, true)),
        }),
        (false, _) => json!({
            "schema_version": SCHEMA_VERSION,
            "kind": "linerate.fleet_scale",
            "group": r.group,
            "seed": r.seed,
            "summary": f.curve,
            "runs": f.runs.iter().map(|run| json!({
                "hosts": run.hosts,
                "repetition": run.repetition,
                "summary": run.summary,
                "records": hosts(run, false),
            })).collect::<Vec<_>>(),
        }),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}

/// How a host's outcome is written: `completed`, `interrupted`, `failed`.
pub fn outcome_word(record: &RunRecord) -> &'static str {
    match record.outcome {
        Outcome::Completed => "completed",
        Outcome::Interrupted => "interrupted",
        Outcome::Failed { .. } => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_outside_the_window_name_only_the_spans_there_were() {
        let mut s = FleetSummary::even_for_tests(Flow::ClientToServer, 2, 1e9);
        s.directions[0].outside_window_bytes = Some(1_048_576.0);
        let line = |s: &FleetSummary| outside_sentence(s, &s.directions[0]).expect("a line");
        s.unshared_seconds = Some((0.0, 0.2));
        assert_eq!(
            line(&s),
            "outside the shared window (apart, as -O is): 1.00 MiB, in the 0.200 s after it"
        );
        s.unshared_seconds = Some((0.05, 0.2));
        assert!(
            line(&s).ends_with("in the 0.0500 s before it and the 0.200 s after it"),
            "{}",
            line(&s)
        );
        s.unshared_seconds = Some((0.0, 0.0));
        assert!(line(&s).ends_with(", at its edges"), "{}", line(&s));
    }
}

#[cfg(test)]
mod contended_tests {
    use super::*;
    use crate::stats::fleet::HostFigures;
    use crate::stats::scaling::summarize_scaling;

    #[test]
    fn a_point_holding_a_cpu_contended_run_says_so() {
        let fleet = |rate: f64, limit: &str| {
            let mut s = FleetSummary::even_for_tests(Flow::ClientToServer, 2, rate);
            s.directions[0].hosts[1] =
                HostFigures { limit: Some(limit.into()), ..s.directions[0].hosts[1].clone() };
            s
        };
        let runs = [
            (2, fleet(950e6, "path")),
            (2, fleet(569e6, "starved(server)")),
            (1, fleet(500e6, "path")),
        ];
        let curve = summarize_scaling(&runs);
        let d = &curve.directions[0];
        let counts: Vec<(usize, usize)> =
            d.points.iter().map(|p| (p.hosts, p.contended_runs)).collect();
        assert_eq!(counts, [(1, 0), (2, 1)]);
        let table = scale_table(d);
        assert_eq!(table.rows[1][1], "2 (1 CPU-contended)");
        let note = contended_sentence(d).expect("a note");
        assert!(note.contains("at 2 hosts (1 of 2 runs)"), "{note}");
        assert_eq!(contended_sentence(&summarize_scaling(&runs[..1]).directions[0]), None);
        assert!(
            fleet_result(&runs[1].1).ends_with("(CPU-contended: h1)"),
            "{}",
            fleet_result(&runs[1].1)
        );
    }
}
