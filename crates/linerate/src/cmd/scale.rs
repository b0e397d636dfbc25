//! `linerate fleet --scale K,...`: the fleet run with the first k targets for each k, each
//! `--repeat` times in a random order the seed reproduces, then the scaling curve
//! (`stats::scaling`). Every host run is stored in one group, as cell `k=K` with its
//! repetition, so `report fN` rebuilds the curve from the history. `--until-ci` rounds and
//! `--resume`: `scale_resume`.
//!
//! Exit status as for a fleet: 3 when any run was partial (a host not measured; that run is
//! left out of its point), 130 when interrupted (the runs until then are reported).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::{group_failure_kind, interrupted};
use super::fleet::{host_records, render_stored};
use super::fleet_stored::{Attempt, Hosts, summarize_attempt};
use super::scale_resume::{self, Opened};
use crate::plan::fleet::FleetPlan;
use crate::plan::{OutputFormat, ReportFormat};
use crate::record::Failure;
use crate::record::RunRecord;
use crate::report::fleet as render;
use crate::report::fleet_report::{FleetReport, FleetRun, HostRun};
use crate::report::notice::{Notice, Stored};
use crate::session::Interrupt;
use crate::session::fleet_runs::{self, CurveProgress};
use crate::stats::scaling::{ScaleSummary, summarize_scaling};
use crate::store::{GroupRow, Store};

/// One fleet run of the curve, planned as its k hosts, its figures computed once.
fn fleet_run(hosts_in_run: usize, repetition: u32, records: Hosts, ids: &[i64]) -> FleetRun {
    let summary = summarize_attempt(hosts_in_run, &records);
    let hosts = records
        .into_iter()
        .enumerate()
        .map(|(i, (label, record))| HostRun { label, id: ids.get(i).copied(), record })
        .collect();
    FleetRun { hosts_in_run, repetition, hosts, summary }
}

/// A stored fleet run of the curve.
fn stored_run(a: Attempt) -> FleetRun {
    fleet_run(a.hosts, a.repetition, a.records, &a.ids)
}

/// Runs the scaling curve.
pub fn run(plan: &FleetPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let text = plan.base.output == OutputFormat::Text;
    let console = super::console(text);
    let Opened { mut runs, group, plan, earlier } = scale_resume::open(plan, interrupt, &console)?;
    let plan = &plan;
    if text {
        let out = &mut std::io::stdout();
        render::render_scale_start(plan, plan.first_round_runs(), out)?;
        render::render_scale_rounds(plan, group.filter(|_| plan.resume.is_some()), out)?;
    }
    // Whole earlier fleet runs are not run again; partial ones are (a fleet run is one
    // measurement of its k hosts at one instant) and stay listed as partial runs.
    let index = |k: usize| plan.scale.iter().position(|&s| s == k).unwrap_or(0);
    let prior: Vec<(usize, u32, RunRecord)> = earlier
        .iter()
        .filter(|a| scale_resume::whole(a.hosts, a.records.iter().map(|(_, r)| r)))
        .flat_map(|a| a.records.iter().map(move |(_, r)| (index(a.hosts), a.repetition, r.clone())))
        .collect();
    let done = std::cell::RefCell::new(earlier.into_iter().map(stored_run).collect::<Vec<_>>());
    let mut ran = 0;
    let outcome = fleet_runs::run_curve_from(
        plan,
        prior,
        interrupt,
        &mut |p: CurveProgress<'_>| {
            let done = done.borrow();
            if let (Some(_), Some(run)) = (p.finished, done.last()) {
                let line =
                    render::scale_progress_line(p.position, (p.hosts, p.repetition), &run.summary);
                let _ = writeln!(std::io::stderr(), "{line}");
            }
        },
        &mut |k, rep, records| {
            for (_, record) in records {
                runs.keep(format!("k={k}"), rep, record);
            }
            done.borrow_mut().push(fleet_run(k, rep, records.to_vec(), &[]));
            ran += 1;
            if plan.stop_after.is_some_and(|n| ran >= n) {
                interrupt.trigger();
            }
        },
    );
    let done = done.into_inner();
    let is_whole = |&(cell, rep): &(usize, u32)| {
        done.iter().any(|r| {
            (index(r.hosts_in_run), r.repetition) == (cell, rep)
                && scale_resume::whole(r.hosts_in_run, r.hosts.iter().map(|h| &h.record))
        })
    };
    let (planned, stopped) = (outcome.planned, outcome.stopped);
    let partial = planned.iter().filter(|p| !is_whole(p)).count();
    let complete = interrupt.count() == 0 && partial == 0 && stopped.is_none();
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
    if let (Some(group), false) = (group, complete) {
        console.show(&Notice::CurveIncomplete { group });
    }
    if interrupt.count() > 0 {
        return Err(interrupted(interrupt, "the runs until then are above"));
    }
    unstored?;
    if partial > 0 {
        let records = done.iter().flat_map(|r| r.hosts.iter().map(|h| &h.record));
        let kind = group_failure_kind(records);
        let why = format!(
            "{partial} of {} fleet runs were partial (a host not measured; left out of its point){}",
            planned.len(),
            stopped.map(|s| format!("; {s}")).unwrap_or_default()
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
    let done: Vec<FleetRun> =
        super::fleet_stored::curve_attempts(store, group.id)?.into_iter().map(stored_run).collect();
    let seed = group.params["seed"].as_u64();
    let report = FleetReport::curve(group.id, group.finished, seed, done);
    let mut buf = Vec::new();
    render_stored(&report, format, &mut buf)?;
    Ok(buf)
}
