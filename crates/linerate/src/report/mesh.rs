//! A mesh's output (`linerate mesh`): the agents and where they are, each pair's statistics
//! (the matrix's cell table, one pair per row), the pairs by zone direction, the findings; or
//! one JSON document (`linerate.mesh`). Figures come from `stats::mesh`; this lays them out.

use std::io::Write;

use crate::report::words::duration_words;
use crate::units::peer_text::escape;

use crate::record::RunRecord;
use crate::report::style::Style;
use crate::report::table::{Table, cell_table};
use crate::stats::matrix::MatrixSummary;
use crate::stats::mesh::{MeshSummary, PairGroup};
use crate::store::GroupKind;
use crate::units::format_bits_per_second;

/// The mesh as text or Markdown: agents, pairs, zones, findings, and why it stopped early.
pub fn write_mesh(
    style: Style,
    m: &MeshSummary,
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    style.table(&agents_table(m), out)?;
    writeln!(out)?;
    let pairs = MatrixSummary { cells: m.cells.clone(), findings: Vec::new() };
    style.table(&cell_table(&pairs, None), out)?;
    write_groups(style, m, "Findings", out)?;
    if let Some(why) = stopped {
        let why = crate::units::peer_text::escape(why);
        writeln!(out, "Stopped early: {why}; the tables cover the runs that finished.")?;
    }
    Ok(())
}

/// The agents: label, node, zone (and network, when one names it) as their records said (`unknown` for nothing said: a
/// zone is missing on Kubernetes 1.33-1.34 without the PodTopologyLabelsAdmission gate).
pub fn agents_table(m: &MeshSummary) -> Table {
    let none = || crate::report::words::ZONE_UNKNOWN.to_string();
    let networks = m.agents.iter().any(|a| a.network.is_some());
    let mut agents = match networks {
        true => Table::new(&["agent", "node", "zone", "network"]),
        false => Table::new(&["agent", "node", "zone"]),
    };
    for a in &m.agents {
        let mut row = vec![
            a.label.clone(),
            a.node.clone().unwrap_or_else(none),
            a.zone.clone().unwrap_or_else(none),
        ];
        if networks {
            row.push(a.network.clone().unwrap_or_else(none));
        }
        agents.rows.push(row);
    }
    agents
}

/// Groups of pairs (`what`: `zones`, `pairs`): each with its count, the mean of its pair
/// means, its slowest and fastest pair; None for no group.
fn groups_table(what: &str, groups: &[PairGroup]) -> Option<Table> {
    if groups.is_empty() {
        return None;
    }
    let mut t =
        Table::new(&[what, ">pairs", ">mean of pair means", ">slowest pair", ">fastest pair"]);
    for g in groups {
        t.rows.push(vec![
            g.name.clone(),
            g.pairs.to_string(),
            format_bits_per_second(g.mean_bits_per_second),
            format_bits_per_second(g.min_bits_per_second),
            format_bits_per_second(g.max_bits_per_second),
        ]);
    }
    Some(t)
}

/// Each network against the reference on the same node pairs; None unless two are named.
fn networks_table(m: &MeshSummary) -> Option<Table> {
    let reference = &m.networks.first()?.reference;
    let mean = format!(">{reference} mean");
    let mut t = Table::new(&["node pair", "network", ">mean", &mean, ">change", "95 % intervals"]);
    for c in &m.networks {
        t.rows.push(vec![
            c.nodes.clone(),
            c.network.clone(),
            format_bits_per_second(c.bits_per_second),
            format_bits_per_second(c.reference_bits_per_second),
            format!("{:+.1} %", c.change_percent),
            match c.beyond_noise {
                Some(true) => "apart".into(),
                Some(false) => "overlap".into(),
                None => "n/a (one run)".into(),
            },
        ]);
    }
    Some(t)
}

/// The tables of a mesh's groups: the networks side by side, same against cross node and
/// zone, then the zone directions.
pub fn group_tables(m: &MeshSummary) -> Vec<Table> {
    [networks_table(m), groups_table("relation", &m.relations), groups_table("zones", &m.zones)]
        .into_iter()
        .flatten()
        .collect()
}

/// A stored mesh's report, after its pairs' table: the agents, the zones and the mesh's
/// findings.
pub fn write_places(style: Style, m: &MeshSummary, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    style.heading(2, "Agents and zones", out)?;
    style.table(&agents_table(m), out)?;
    write_groups(style, m, "Mesh findings", out)
}

/// The group tables, then the mesh's findings under `title`.
fn write_groups(
    style: Style,
    m: &MeshSummary,
    title: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for t in group_tables(m) {
        writeln!(out)?;
        style.table(&t, out)?;
    }
    style.list(title, &m.findings, out)
}

/// The mesh as one JSON document (`linerate.mesh`): its summary and every run with its pair
/// (cell) and repetition.
pub fn render_json<R: std::borrow::Borrow<RunRecord>>(
    meta: crate::report::matrix::MatrixMeta,
    m: &MeshSummary,
    runs: &[(usize, u32, R)],
    stopped: Option<&str>,
    live: Live<'_>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    /// The summary, the agents not tested (or no longer) with why, the interference check and
    /// the watch against earlier meshes.
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        #[serde(flatten)]
        summary: &'a MeshSummary,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        agents_gone: Vec<Gone<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        interference: Option<&'a crate::stats::mesh::Interference>,
        #[serde(skip_serializing_if = "Option::is_none")]
        watch: Option<&'a crate::stats::mesh_watch::MeshWatch>,
    }
    #[derive(serde::Serialize)]
    struct Gone<'a> {
        agent: &'a str,
        why: &'a str,
    }
    let agents_gone = live.gone.iter().map(|(a, w)| Gone { agent: a, why: w }).collect();
    let doc = Doc { summary: m, agents_gone, interference: live.interference, watch: live.watch };
    crate::report::matrix::grid_document("linerate.mesh", meta, &doc, runs, stopped, out)
}

/// What a mesh that just ran adds to its summary: the agents gone, the interference check and
/// the watch against earlier meshes (each None or empty when it did not apply).
#[derive(Debug, Clone, Copy)]
pub struct Live<'a> {
    /// Agents not tested, or no longer, with why.
    pub gone: &'a [(String, String)],
    /// The interference check.
    pub interference: Option<&'a crate::stats::mesh::Interference>,
    /// The pairs against earlier meshes.
    pub watch: Option<&'a crate::stats::mesh_watch::MeshWatch>,
}

/// The words for a pair's points: one mesh, meshes.
const MESHES: (&str, &str) = ("mesh", "meshes");

/// After a live mesh's tables: its pairs against the meshes before it, when there were enough
/// to say anything (5 or more).
pub fn write_watch(
    w: Option<&crate::stats::mesh_watch::MeshWatch>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(w) = w.filter(|w| w.meshes_before >= 5) else { return Ok(()) };
    let (before, found) = (w.meshes_before, w.pairs.len());
    if found == 0 {
        return writeln!(out, "Against the {before} meshes before: no pair dropped or drifted");
    }
    writeln!(out, "Against the {before} meshes before: {found} pair(s) dropped or drifted")?;
    for p in &w.pairs {
        let said: Vec<String> = p
            .fresh_drop
            .iter()
            .map(|f| {
                crate::report::words::fresh_sentence(f, MESHES, crate::report::words::rate_words)
            })
            .chain(p.drift.iter().map(|d| {
                crate::report::words::drift_sentence(d, MESHES, crate::report::words::rate_words)
            }))
            .collect();
        writeln!(out, "  {}: {}", escape(&p.pair), said.join("; "))?;
    }
    Ok(())
}

/// After a live mesh's tables: the interference check's conclusion and its pairs, if it ran.
pub fn write_interference(
    i: Option<&crate::stats::mesh::Interference>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(i) = i else { return Ok(()) };
    writeln!(out, "Interference (sample seed {}): {}", i.seed, i.finding)?;
    for p in &i.pairs {
        let mark = if p.disturbed { " (disturbed)" } else { "" };
        writeln!(
            out,
            "  {}: {} in its rounds, {} alone, {:.0} % lost{mark}",
            escape(&p.pair),
            format_bits_per_second(p.in_round_bits_per_second),
            format_bits_per_second(p.alone_bits_per_second),
            p.lost_percent
        )?;
    }
    Ok(())
}

/// After a live mesh's tables: the agents not tested, or no longer (pre-flight, or failing in
/// a row), each with why; nothing when every agent took part.
pub fn write_gone(gone: &[(String, String)], out: &mut dyn Write) -> std::io::Result<()> {
    if gone.is_empty() {
        return Ok(());
    }
    writeln!(out, "Agents not tested, or no longer ({}):", gone.len())?;
    for (agent, why) in gone {
        let (agent, why) = (escape(agent), escape(why));
        writeln!(out, "  - {agent}: {why}")?;
    }
    Ok(())
}

/// The mesh's plan, before its first test: `Plan: 20 agents, 380 ordered pairs × 1 run in 38
/// rounds of disjoint pairs (…); about 1 min 16 s (one pair at a time: 12 min 40 s)`, and
/// whether it resumes a stored mesh (its group, the runs kept).
pub fn plan_line(s: &crate::plan::rounds::Shape, resumed: Option<(i64, usize)>) -> String {
    let runs = if s.repeat == 1 { "1 run".to_string() } else { format!("{} runs", s.repeat) };
    let mut line = format!("Plan: {} agents", s.agents);
    if s.unreachable > 0 {
        line += &format!(" ({} not reachable)", s.unreachable);
    }
    line += &format!(", {} ordered pairs × {runs}", s.pairs);
    if s.serial() {
        line += ", one pair at a time (--serial: each figure is its path's alone)";
    } else {
        let at_once = if s.concurrency >= crate::plan::mesh::MAX_CONCURRENCY {
            String::new()
        } else {
            format!(", at most {} at once", s.concurrency)
        };
        line += &format!(
            " in {} rounds of disjoint pairs{at_once} (no agent in two tests at once; \
             --serial tests one pair at a time, where disjoint pairs share a bottleneck)",
            s.rounds * s.repeat as usize
        );
    }
    match (s.estimate(), s.serial_estimate()) {
        (Some(t), Some(one)) if !s.serial() => {
            line += &format!(
                "; about {} (one pair at a time: {})",
                duration_words(t),
                duration_words(one)
            )
        }
        (Some(t), _) => line += &format!("; about {}", duration_words(t)),
        (None, _) => line += "; the total is not known ahead (a byte count ends each test)",
    }
    if let Some((g, kept)) = resumed {
        line += &format!("; resuming mesh {} ({kept} runs kept)", GroupKind::Mesh.reference(g));
    }
    line
}

/// A mesh's first lines: its plan ([`plan_line`]), then each agent pre-flight did not reach
/// (its label, why), whose pairs are stored as failed rather than run. Labels and reasons can
/// be an agent's words (a node name, an error), so they are escaped.
pub fn render_start(
    shape: &crate::plan::rounds::Shape,
    resumed: Option<(i64, usize)>,
    unreached: &[(&str, &str)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "{}", plan_line(shape, resumed))?;
    for (agent, why) in unreached {
        let (agent, why) = (escape(agent), escape(why));
        writeln!(out, "Agent {agent} {why}: its pairs are stored as failed, not run")?;
    }
    Ok(())
}

/// The line before the interference check's runs: how many sampled pairs run again alone.
pub fn render_interference_start(
    pairs: usize,
    seed: u64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "Interference check: {pairs} sampled pairs run again alone, one at a time (sample seed \
         {seed})"
    )
}
