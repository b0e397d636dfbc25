//! `linerate compare fA fB` as people read it (text) and as programs read it (JSON,
//! docs/JSON.md "linerate.fleet_compare"). The figures and the tests are `stats::fleet_compare`;
//! this module only lays them out.
//!
//! Text: per direction, a table of the hosts both fleets measured and the total (or, for two
//! scaling curves, of every host count), then what was not compared and why, how evenly the
//! rates were shared, the test settings that differ and the coordinator's environment changes.

use std::io::Write;

use serde::Serialize;

use crate::record::SCHEMA_VERSION;
use crate::report::fleet::flow_words;
use crate::report::history::environment_line;
use crate::report::table::Table;
use crate::stats::compare::Comparison;
use crate::stats::environment::{EndChanges, EnvChange};
use crate::stats::fleet_compare::{CurveChange, DirectionChange, FleetChange, Pair, ScaleChange};
use crate::units::peer_text::escape;
use crate::units::{count_of, format_bits_per_second};

/// What was compared: two single fleets or two scaling curves.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FleetCompared {
    /// Two single fleets.
    Fleet(FleetChange),
    /// Two scaling curves.
    Scale(ScaleChange),
}

/// A fleet comparison with what surrounds its figures.
#[derive(Debug, Clone, Serialize)]
pub struct FleetCompareDocument {
    /// Always the record schema version.
    pub schema_version: u32,
    /// `linerate.fleet_compare`.
    pub kind: &'static str,
    /// A as the user names it (`f3`).
    pub a: String,
    /// B.
    pub b: String,
    /// The test settings that differ between the first measured host runs of A and B.
    pub settings: Vec<EnvChange>,
    /// What changed in the coordinator's environment (the `client` end of the host runs).
    pub environment: Vec<EndChanges>,
    /// The figures: `{"fleet": …}` or `{"scale": …}`.
    pub compared: FleetCompared,
}

impl FleetCompareDocument {
    /// The document of A against B.
    pub fn new(
        (a, b): (String, String),
        settings: Vec<EnvChange>,
        environment: Vec<EndChanges>,
        compared: FleetCompared,
    ) -> Self {
        let kind = "linerate.fleet_compare";
        Self { schema_version: SCHEMA_VERSION, kind, a, b, settings, environment, compared }
    }
}

/// The comparison as text or as its JSON document.
pub fn render(doc: &FleetCompareDocument, json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, doc).map_err(std::io::Error::other)?;
        return writeln!(out);
    }
    let mut lines = Vec::new();
    match &doc.compared {
        FleetCompared::Fleet(c) => fleet_text(doc, c, &mut lines, out)?,
        FleetCompared::Scale(c) => curve_text(doc, c, &mut lines, out)?,
    }
    if !doc.settings.is_empty() {
        lines.push(
            "Settings differ, A → B (these are different tests, not one test before and after):"
                .into(),
        );
        lines.extend(
            doc.settings.iter().map(|c| format!("  - {} {} → {}", c.key, c.before, c.after)),
        );
    }
    if !doc.environment.is_empty() {
        lines.push("Environment, A → B:".into());
        lines.extend(doc.environment.iter().map(|e| format!("  {}", environment_line(e))));
    }
    lines.iter().try_for_each(|l| writeln!(out, "{}", escape(l)))
}

fn fleet_text(
    doc: &FleetCompareDocument,
    c: &FleetChange,
    lines: &mut Vec<String>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "Fleet {} (A) against fleet {} (B): A measured {} of {} hosts, B {} of {}.",
        doc.a, doc.b, c.hosts_a.0, c.hosts_a.1, c.hosts_b.0, c.hosts_b.1
    )?;
    for note in &c.notes {
        writeln!(out, "{note}.")?;
    }
    for d in &c.directions {
        direction_text(d, out)?;
    }
    only_in_lines(&c.only_in, lines);
    lines.push(
        "Significance: one fleet run a side, so no test is possible (compare tests repeated \
         runs; a scaling curve with --repeat is tested at each host count)."
            .into(),
    );
    Ok(())
}

fn direction_text(d: &DirectionChange, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "Data {}:", flow_words(d.flow))?;
    let mut t = Table::new(&["host", ">A", ">B", ">change", "verdict"]);
    for h in &d.hosts {
        t.rows.push(row(&h.label, &h.result));
    }
    t.rows.push(row("total", &d.total));
    t.write_text(out)?;
    for u in &d.unmatched {
        let rate = format_bits_per_second(u.bits_per_second);
        let line = format!(
            "Not compared: {} (only {} measured it: {rate}; {})",
            u.label, u.measured_in, u.other_side
        );
        writeln!(out, "{}", escape(&line))?;
    }
    for (what, e) in [("hosts", &d.across_hosts), ("flows", &d.across_flows)] {
        let pct = |v: f64| format!("{:.1} %", v * 100.0);
        let jain = pair(&e.jain, |v| format!("{v:.3}"), |v| format!("{v:+.3}"));
        let cv = pair(&e.cv, pct, |v| format!("{:+.1} points", v * 100.0));
        writeln!(out, "Across {what}: Jain's index {jain}; CV {cv}")?;
    }
    Ok(())
}

/// `0.998 → 0.951 (-0.047)`, with `n/a` for a side without the figure.
fn pair(p: &Pair, value: impl Fn(f64) -> String, change: impl Fn(f64) -> String) -> String {
    let side = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), &value);
    let delta = p.change.map_or_else(String::new, |d| format!(" ({})", change(d)));
    format!("{} → {}{delta}", side(p.a), side(p.b))
}

/// A row of figures: name, A's mean, B's mean, the change and the verdict.
fn row(name: &str, c: &Comparison) -> Vec<String> {
    let side = |mean: f64, n: usize| match n {
        0 => "n/a".to_string(),
        1 => format_bits_per_second(mean),
        n => format!("{} (n={n})", format_bits_per_second(mean)),
    };
    vec![
        name.to_string(),
        side(c.mean_a, c.n_a),
        side(c.mean_b, c.n_b),
        c.change_percent.map_or("n/a".into(), |p| format!("{p:+.1}%")),
        c.verdict.clone(),
    ]
}

fn only_in_lines(only: &[(linerate_proto::Flow, &str)], lines: &mut Vec<String>) {
    for (flow, side) in only {
        lines.push(format!("Not compared: data {}: only {side} ran it", flow_words(*flow)));
    }
}

fn curve_text(
    doc: &FleetCompareDocument,
    c: &ScaleChange,
    lines: &mut Vec<String>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "Scaling curve {} (A) against scaling curve {} (B).", doc.a, doc.b)?;
    for d in &c.directions {
        curve_direction_text(d, out)?;
    }
    only_in_lines(&c.only_in, lines);
    Ok(())
}

fn curve_direction_text(d: &CurveChange, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "Scaling, data {}:", flow_words(d.flow))?;
    let mut t = Table::new(&[
        ">hosts",
        ">A mean total (95% CI)",
        ">B mean total (95% CI)",
        ">change",
        "verdict",
    ]);
    for p in &d.points {
        let r = &p.result;
        let side = |mean: f64, n: usize, ci: Option<(f64, f64)>| match (n, ci) {
            (0, _) => "n/a".to_string(),
            (n, Some((lo, hi))) => format!(
                "{} ± {} (n={n})",
                format_bits_per_second(mean),
                format_bits_per_second((hi - lo) / 2.0)
            ),
            (n, None) => format!("{} (n={n}, no interval)", format_bits_per_second(mean)),
        };
        t.rows.push(vec![
            p.hosts.to_string(),
            side(r.mean_a, r.n_a, p.ci95_a),
            side(r.mean_b, r.n_b, p.ci95_b),
            r.change_percent.map_or("n/a".into(), |x| format!("{x:+.1}%")),
            r.verdict.clone(),
        ]);
    }
    t.write_text(out)?;
    let stops = |(at, rising): (Option<usize>, bool)| match (at, rising) {
        (Some(k), false) => format!("at {}", count_of(k as u64, "host")),
        (Some(k), true) => format!("may still be rising (highest at {k}, the most hosts run)"),
        (None, _) => "n/a (fewer than two host counts measured)".into(),
    };
    writeln!(
        out,
        "The total stops rising: A {}; B {}.",
        stops(d.stops_rising_a),
        stops(d.stops_rising_b)
    )
}
