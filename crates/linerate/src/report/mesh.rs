//! A mesh's output (`linerate mesh`): the agents and where they are, each pair's statistics
//! (the matrix's cell table, one pair per row), the pairs by zone direction, the findings; or
//! one JSON document (`linerate.mesh`). Figures come from `stats::mesh`; this lays them out.

use std::io::Write;

use crate::record::RunRecord;
use crate::report::document::Style;
use crate::report::table::{Table, cell_table};
use crate::stats::matrix::MatrixSummary;
use crate::stats::mesh::{MeshSummary, PairGroup};
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

/// The agents: label, node and zone as their records said (`-` for nothing said).
pub fn agents_table(m: &MeshSummary) -> Table {
    let none = || "-".to_string();
    let mut agents = Table::new(&["agent", "node", "zone"]);
    for a in &m.agents {
        agents.rows.push(vec![
            a.label.clone(),
            a.node.clone().unwrap_or_else(none),
            a.zone.clone().unwrap_or_else(none),
        ]);
    }
    agents
}

/// Groups of pairs (`what`: `zones`, `pairs`): each with its count, the mean of its pair
/// means, its slowest and fastest pair; None for no group.
fn groups_table(what: &str, groups: &[PairGroup]) -> Option<Table> {
    if groups.is_empty() {
        return None;
    }
    let mut t = Table::new(&[what, ">pairs", ">mean of pair means", ">slowest pair", ">fastest pair"]);
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

/// The tables of a mesh's groups: same against cross node and zone, then the zone directions.
pub fn group_tables(m: &MeshSummary) -> Vec<Table> {
    [groups_table("relation", &m.relations), groups_table("zones", &m.zones)]
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
pub fn render_json(
    meta: crate::report::matrix::MatrixMeta,
    m: &MeshSummary,
    runs: &[(usize, u32, RunRecord)],
    stopped: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    crate::report::matrix::grid_document("linerate.mesh", meta, m, runs, stopped, out)
}
