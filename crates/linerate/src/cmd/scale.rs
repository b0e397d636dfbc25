//! `linerate fleet --scale K,...`: the fleet run with the first k targets for each k, each
//! `--repeat` times in a random order the seed reproduces, then the scaling curve
//! (`stats::scaling`). Every host run is stored in one group, as cell `k=K` with its
//! repetition, so `report fN` rebuilds the curve from the history.
//!
//! Exit status as for a fleet: 3 when any run was partial (a host not measured; that run is
//! left out of its point), 130 when interrupted (the runs until then are reported).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::{group_failure_kind, interrupted};
use super::fleet::{
    all_completed, host_records, inputs, open_group, placed, render_stored, stored_label,
};
use crate::plan::fleet::FleetPlan;
use crate::plan::{OutputFormat, ReportFormat};
use crate::record::Failure;
use crate::report::fleet as render;
use crate::report::fleet_report::{FleetReport, FleetRun, HostRun};
use crate::report::notice::{Notice, Stored};
use crate::session::{Interrupt, fleet};
use crate::stats::fleet::summarize_fleet;
use crate::stats::scaling::{ScaleSummary, summarize_scaling};
use crate::store::{GroupRow, Store};

/// One fleet run of the curve, its figures computed once.
fn fleet_run(hosts_in_run: usize, repetition: u32, hosts: Vec<HostRun>) -> FleetRun {
    let summary = summarize_fleet(&inputs(hosts.iter().map(|h| (h.label.as_str(), &h.record))));
    FleetRun { hosts_in_run, repetition, hosts, summary }
}

/// Runs the scaling curve.
pub fn run(plan: &FleetPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let text = plan.base.output == OutputFormat::Text;
    let console = super::console(text);
    let order = plan.order();
    if text {
        render::render_scale_start(plan, order.len(), &mut std::io::stdout())?;
    }
    let (mut runs, group) = open_group(plan, interrupt, &console)?;
    let mut done: Vec<FleetRun> = Vec::new();
    for (i, &(k, rep)) in order.iter().enumerate() {
        if interrupt.count() > 0 {
            break;
        }
        let records = placed(fleet::run_fleet(&plan.first(k), interrupt).hosts);
        for (_, record) in &records {
            runs.keep(format!("k={k}"), rep, record);
        }
        let hosts = records
            .into_iter()
            .map(|(label, record)| HostRun { label, id: None, record })
            .collect();
        let run = fleet_run(k, rep, hosts);
        let line = render::scale_progress_line((i + 1, order.len()), (k, rep), &run.summary);
        let _ = writeln!(std::io::stderr(), "{line}");
        done.push(run);
    }
    let partial = done.iter().filter(|r| !all_completed(r.hosts.iter().map(|h| &h.record))).count();
    let complete = done.len() == order.len() && partial == 0;
    if let (Some(s), Some(g), true) = (runs.store.as_mut(), group, complete) {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    let mut out = std::io::stdout().lock();
    let curve = curve_of(&done);
    if text {
        render::render_scale_text(&curve, &mut out)?;
    } else {
        write_curve_json(&curve, &done, (group, Some(plan.seed)), &mut out)?;
    }
    out.flush()?;
    if let Some(g) = group {
        console.show(&Notice::Stored(Stored::Fleet(g)));
    }
    if interrupt.count() > 0 {
        return Err(interrupted(interrupt, "the runs until then are above"));
    }
    unstored?;
    if partial > 0 {
        let records = done.iter().flat_map(|r| r.hosts.iter().map(|h| &h.record));
        let kind = group_failure_kind(records);
        let why = format!(
            "{partial} of {} fleet runs were partial (a host not measured; left out of its point)",
            done.len()
        );
        return Err(Failure::new(kind, why).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The curve of some fleet runs.
fn curve_of(runs: &[FleetRun]) -> ScaleSummary {
    let fleets: Vec<(usize, crate::stats::fleet::FleetSummary)> =
        runs.iter().map(|r| (r.hosts_in_run, r.summary.clone())).collect();
    summarize_scaling(&fleets)
}

/// The curve as a `linerate.fleet_scale` JSON document.
pub(super) fn write_curve_json(
    curve: &ScaleSummary,
    runs: &[FleetRun],
    (group, seed): (Option<i64>, Option<u64>),
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let docs: Vec<render::ScaleRunDocument<'_>> = runs
        .iter()
        .map(|r| render::ScaleRunDocument {
            hosts: r.hosts_in_run,
            repetition: r.repetition,
            summary: r.summary.clone(),
            records: host_records(r),
        })
        .collect();
    render::render_scale_json(curve, &docs, (group, seed), out)
}

/// `report fN` of a stored scaling curve.
pub(super) fn stored_report(
    store: &Store,
    group: &GroupRow,
    format: ReportFormat,
) -> Result<Vec<u8>> {
    let mut grouped: Vec<(usize, u32, Vec<HostRun>)> = Vec::new();
    for (id, meta, record) in store.group_runs(group.id)? {
        let k = meta.cell.as_deref().and_then(|c| c.strip_prefix("k=")?.parse().ok());
        let (Some(k), Some(rep)) = (k, meta.repetition) else { continue };
        let host = HostRun { label: stored_label(&record), id: Some(id), record };
        match grouped.iter_mut().find(|(n, r, _)| *n == k && *r == rep) {
            Some((_, _, hosts)) => hosts.push(host),
            None => grouped.push((k, rep, vec![host])),
        }
    }
    let done: Vec<FleetRun> =
        grouped.into_iter().map(|(k, rep, hosts)| fleet_run(k, rep, hosts)).collect();
    let seed = group.params["seed"].as_u64();
    let report = FleetReport::curve(group.id, group.finished, seed, done);
    let mut buf = Vec::new();
    render_stored(&report, format, &mut buf)?;
    Ok(buf)
}
