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
use crate::stats::scaling::{PLATEAU, ScaleSummary};
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
            "Resuming f{g}: its whole fleet runs are kept, the rest run (seed {})",
            plan.seed
        ),
        None => Ok(()),
    }
}

/// One line per finished fleet run of a curve (stderr), so long curves show progress.
pub fn scale_progress_line(
    (done, of): (usize, usize),
    (hosts, rep): (usize, u32),
    summary: &FleetSummary,
) -> String {
    let totals: Vec<String> = summary
        .directions
        .iter()
        .map(|d| format!("{} {}", d.flow.label(), format_bits_per_second(d.total_bits_per_second)))
        .collect();
    let result = if summary.hosts_measured < summary.hosts_planned {
        format!("partial: {} of {} hosts measured", summary.hosts_measured, summary.hosts_planned)
    } else if totals.is_empty() {
        "no figures".to_string()
    } else {
        totals.join(", ")
    };
    format!("[{done}/{of}] {} (run {rep}): {result}", count_of(hosts as u64, "host"))
}

/// The scaling curve as a table per direction, ending with where the total stops rising.
pub fn render_scale_text(curve: &ScaleSummary, out: &mut dyn Write) -> std::io::Result<()> {
    for d in &curve.directions {
        let top = d.points.iter().filter_map(|p| Some(p.total.as_ref()?.max)).fold(0.0, f64::max);
        let unit = rate_unit(top);
        writeln!(out)?;
        writeln!(out, "Scaling, data {}:", flow_words(d.flow))?;
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
                None => ("n/a".into(), "n/a".into()),
            };
            let mut runs = p.totals.len().to_string();
            if p.partial_runs > 0 {
                runs.push_str(&format!(" (+{} partial)", p.partial_runs));
            }
            t.rows.push(vec![
                p.hosts.to_string(),
                runs,
                mean,
                range,
                p.per_host_mean.map_or("n/a".into(), |m| rate(m, unit)),
                p.jain_mean.map_or("n/a".into(), |j| format!("{j:.3}")),
            ]);
        }
        t.write_text(out)?;
        let at = d.stops_rising_at.and_then(|k| d.points.iter().find(|p| p.hosts == k));
        match (at, d.still_rising) {
            (Some(p), false) => writeln!(
                out,
                "The total stops rising at {}: {} (mean), within {}% of the highest mean.",
                count_of(p.hosts as u64, "host"),
                p.total.as_ref().map_or("n/a".into(), |s| format_bits_per_second(s.mean)),
                three_figures(PLATEAU * 100.0)
            )?,
            (Some(p), true) => writeln!(
                out,
                "The total is highest at the most hosts run ({}): it may still be rising; add \
                 more targets to find where it stops.",
                p.hosts
            )?,
            (None, _) => {
                writeln!(out, "Where the total stops rising: n/a (fewer than two points)")?
            }
        }
    }
    if curve.directions.is_empty() {
        writeln!(out, "Scaling: n/a (no fleet run completed)")?;
    }
    Ok(())
}

/// One fleet run of a curve in the JSON document.
#[derive(Debug, Serialize)]
pub struct ScaleRunDocument<'a> {
    /// Hosts in this run.
    pub hosts: usize,
    /// Its repetition.
    pub repetition: u32,
    /// Its fleet figures.
    pub summary: FleetSummary,
    /// Each host's label and run.
    #[serde(serialize_with = "host_records")]
    pub records: Vec<(&'a str, &'a RunRecord)>,
}

fn host_records<S: serde::Serializer>(v: &[(&str, &RunRecord)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for (label, record) in v {
        seq.serialize_element(&serde_json::json!({ "label": label, "record": record }))?;
    }
    seq.end()
}

/// The `-J` document of a scaling curve (`linerate.fleet_scale`).
pub fn render_scale_json(
    curve: &ScaleSummary,
    runs: &[ScaleRunDocument<'_>],
    (group, seed): (Option<i64>, Option<u64>),
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let doc = serde_json::json!({
        "schema_version": SCHEMA_VERSION,
        "kind": "linerate.fleet_scale",
        "group": group,
        "seed": seed,
        "summary": curve,
        "runs": runs,
    });
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}
