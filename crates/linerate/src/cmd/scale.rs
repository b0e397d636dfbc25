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
use super::fleet::{placed, unbuilt_format};
use super::fleet_stored::Hosts;
use super::scale_resume::{self, Opened, Walk};
use crate::plan::fleet::FleetPlan;
use crate::plan::{OutputFormat, ReportFormat};
use crate::record::Failure;
use crate::report::fleet as render;
use crate::report::notice::{Notice, Stored};
use crate::session::{Interrupt, fleet};
use crate::stats::fleet::FleetSummary;
use crate::stats::scaling::summarize_scaling;
use crate::store::Store;

/// One fleet run of the curve.
struct ScaleRun {
    /// Hosts in it.
    hosts: usize,
    /// Its repetition.
    repetition: u32,
    /// Each host's label and run.
    records: Hosts,
    /// Its figures, computed once.
    summary: FleetSummary,
}

impl ScaleRun {
    fn new(hosts: usize, repetition: u32, records: Hosts) -> Self {
        let summary = super::fleet_stored::summarize_attempt(hosts, &records);
        Self { hosts, repetition, records, summary }
    }
}

/// Runs the scaling curve.
pub fn run(plan: &FleetPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let text = plan.base.output == OutputFormat::Text;
    let console = super::console(text);
    let Opened { mut runs, group, plan, earlier } = scale_resume::open(plan, interrupt, &console)?;
    let plan = &plan;
    let mut walk = Walk::new(plan, &earlier);
    if text {
        let out = &mut std::io::stdout();
        render::render_scale_start(plan, plan.order().len(), out)?;
        render::render_scale_rounds(plan, group.filter(|_| plan.resume.is_some()), out)?;
    }
    let mut done: Vec<ScaleRun> =
        earlier.into_iter().map(|a| ScaleRun::new(a.hosts, a.repetition, a.records)).collect();
    let mut ran = 0;
    while interrupt.count() == 0 {
        let so_far: Vec<(usize, &FleetSummary)> =
            done.iter().map(|r| (r.hosts, &r.summary)).collect();
        let Some((k, rep)) = walk.next(plan, &so_far) else { break };
        let records = placed(fleet::run_fleet(&plan.first(k), interrupt).hosts);
        for (_, record) in &records {
            runs.keep(format!("k={k}"), rep, record);
        }
        let run = ScaleRun::new(k, rep, records);
        let line = render::scale_progress_line(walk.position(), (k, rep), &run.summary);
        let _ = writeln!(std::io::stderr(), "{line}");
        done.push(run);
        ran += 1;
        if plan.stop_after.is_some_and(|n| ran >= n) {
            interrupt.trigger();
        }
    }
    let whole = |&(k, rep): &(usize, u32)| {
        done.iter()
            .any(|r| (r.hosts, r.repetition) == (k, rep) && scale_resume::whole(k, &r.records))
    };
    let partial = walk.planned().iter().filter(|p| !whole(p)).count();
    let complete = interrupt.count() == 0 && partial == 0;
    if let (Some(s), Some(g), true) = (runs.store.as_mut(), group, complete) {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    let mut out = std::io::stdout().lock();
    write_curve(&done, text, group, Some(plan.seed), &mut out)?;
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
        let kind = group_failure_kind(done.iter().flat_map(|r| r.records.iter().map(|(_, x)| x)));
        let why = format!(
            "{partial} of {} fleet runs were partial (a host not measured; left out of its point)",
            walk.planned().len()
        );
        return Err(Failure::new(kind, why).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The curve in text or as a `linerate.fleet_scale` JSON document.
fn write_curve(
    done: &[ScaleRun],
    text: bool,
    group: Option<i64>,
    seed: Option<u64>,
    out: &mut dyn Write,
) -> Result<()> {
    let fleets: Vec<(usize, FleetSummary)> =
        done.iter().map(|r| (r.hosts, r.summary.clone())).collect();
    let curve = summarize_scaling(&fleets);
    if text {
        render::render_scale_text(&curve, out)?;
    } else {
        let runs: Vec<render::ScaleRunDocument<'_>> = done
            .iter()
            .map(|r| render::ScaleRunDocument {
                hosts: r.hosts,
                repetition: r.repetition,
                summary: r.summary.clone(),
                records: r.records.iter().map(|(l, x)| (l.as_str(), x)).collect(),
            })
            .collect();
        render::render_scale_json(&curve, &runs, (group, seed), out)?;
    }
    Ok(())
}

/// `report fN` of a stored scaling curve.
pub(super) fn stored_report(store: &Store, id: i64, format: ReportFormat) -> Result<Vec<u8>> {
    let done: Vec<ScaleRun> = super::fleet_stored::curve_attempts(store, id)?
        .into_iter()
        .map(|a| ScaleRun::new(a.hosts, a.repetition, a.records))
        .collect();
    let seed = store.group(id)?.and_then(|g| g.params["seed"].as_u64());
    let mut buf = Vec::new();
    match format {
        ReportFormat::Text => write_curve(&done, true, Some(id), seed, &mut buf)?,
        ReportFormat::Json => write_curve(&done, false, Some(id), seed, &mut buf)?,
        _ => return Err(unbuilt_format(id)),
    }
    Ok(buf)
}
