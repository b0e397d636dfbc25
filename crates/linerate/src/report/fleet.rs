//! A fleet run as people read it (text) and as programs read it (JSON, docs/JSON.md
//! "linerate.fleet").
//!
//! Text ends with the answer, like a client run: first each host (its rate, share, flows,
//! retransmits and what limited it), then the hosts that were not measured and why, then the
//! spread across hosts and flows, the outliers, and last the total per direction.

use std::io::Write;

use linerate_proto::{Direction, EndCondition, Flow};
use serde::Serialize;

use crate::plan::fleet::FleetPlan;
use crate::record::{RunRecord, SCHEMA_VERSION};
use crate::report::table::{Table, verdict_words};
use crate::stats::fleet::{FleetDirection, FleetSummary, Spread};
use crate::units::peer_text::escape;
use crate::units::{ByteCount, count_of, format_bits_per_second, rate_unit, three_figures};

/// One host of the JSON document.
#[derive(Debug, Serialize)]
pub struct HostDocument<'a> {
    /// Its label.
    pub label: &'a str,
    /// Its run, as `linerate client -J` would have written it.
    pub record: &'a RunRecord,
    /// Its run's own summary.
    pub summary: crate::stats::Summary,
}

/// What a fleet document says besides its figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetMeta<'a> {
    /// The fleet's stored group, if it was stored.
    pub group: Option<i64>,
    /// Why the start went ahead without every host, if it did.
    pub start_note: Option<&'a str>,
}

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    kind: &'static str,
    group: Option<i64>,
    start_note: Option<&'a str>,
    summary: &'a FleetSummary,
    hosts: Vec<HostDocument<'a>>,
}

/// The `-J` document of a fleet.
pub fn render_json(
    summary: &FleetSummary,
    hosts: &[(&str, &RunRecord)],
    meta: FleetMeta<'_>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        kind: "linerate.fleet",
        group: meta.group,
        start_note: meta.start_note,
        summary,
        hosts: hosts
            .iter()
            .map(|(label, record)| HostDocument {
                label,
                record,
                summary: crate::stats::summarize(record),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}

fn flow_words(flow: Flow) -> &'static str {
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
fn host_table(d: &FleetDirection) -> Table {
    let unit = rate_unit(d.hosts.iter().map(|h| h.bits_per_second).fold(0.0, f64::max));
    let mut t = Table::new(&[
        "host",
        &format!(">{}", unit.0),
        ">share",
        &format!(">flows min–max ({})", unit.0),
        ">retr",
        ">server CPU",
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
            h.limit.as_deref().map_or("n/a".into(), |id| verdict_words(id).0),
        ]);
    }
    t
}

fn spread_line(what: &str, s: &Spread) -> String {
    let sd = match (s.stddev, s.cv) {
        (Some(sd), Some(cv)) => {
            format!("σ {} ({} of the mean)", format_bits_per_second(sd), percent(cv))
        }
        _ => "σ n/a (one value)".to_string(),
    };
    let jain = s.jain.map_or("n/a".into(), |j| format!("{j:.3}"));
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
    let how = match spec.direction {
        Direction::Upload => "upload (this host sends)",
        Direction::Download => "download (-R: the hosts send)",
        Direction::Bidirectional => "both ways (--bidir)",
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

/// The text of a fleet run; `start_note` says why the start went ahead without every host.
pub fn render_text(
    summary: &FleetSummary,
    start_note: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(note) = start_note {
        writeln!(out, "Start: {note}")?;
    }
    match (summary.skew, summary.window) {
        (Some(skew), Some((from, to))) => writeln!(
            out,
            "Started together: start skew {} ms, stop skew {} ms; figures over the {} s every \
             host shared ({}–{} s after the go)",
            three_figures(skew.start_seconds * 1e3),
            three_figures(skew.stop_seconds * 1e3),
            three_figures(to - from),
            three_figures(from),
            three_figures(to),
        )?,
        _ => writeln!(
            out,
            "No shared window (not every host started): each host counted over its own test"
        )?,
    }
    for d in &summary.directions {
        writeln!(out)?;
        writeln!(out, "Data {}:", flow_words(d.flow))?;
        let table = host_table(d);
        table.write_text(out)?;
        if d.hosts.iter().any(|h| h.whole_test) {
            writeln!(out, "  * no interval samples: counted over its whole test")?;
        }
        if let Some(s) = &d.across_hosts {
            writeln!(out, "  {}", spread_line("hosts", s))?;
        }
        if let Some(s) = &d.across_flows {
            writeln!(out, "  {}", spread_line("flows", s))?;
        }
        for o in &d.outliers {
            let more = if o.against_median_percent < 0.0 { "less" } else { "more" };
            let why = o.limit_summary.as_deref().map_or("its run has no verdict".into(), escape);
            writeln!(
                out,
                "  outlier: {} got {}% {more} than the median host: {why}",
                o.label,
                three_figures(o.against_median_percent.abs()),
            )?;
        }
    }
    if !summary.not_measured.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Not measured ({} of {} hosts):",
            summary.not_measured.len(),
            summary.hosts_planned
        )?;
        for (label, why) in &summary.not_measured {
            // A failure's message may quote the peer (a refusal, an abort): escaped.
            writeln!(out, "  {}: {}", escape(label), escape(why))?;
        }
    }
    writeln!(out)?;
    if let Some(c) = summary.coordinator_cpu_percent {
        writeln!(
            out,
            "Coordinator (this host, every client end): {}% of a core",
            three_figures(c)
        )?;
    }
    for d in &summary.directions {
        writeln!(
            out,
            "Fleet total {}: {} over {} of {} hosts",
            flow_words(d.flow),
            format_bits_per_second(d.total_bits_per_second),
            d.hosts.len(),
            summary.hosts_planned,
        )?;
    }
    if summary.directions.is_empty() {
        writeln!(out, "Fleet total: n/a (no host completed its test)")?;
    }
    Ok(())
}
