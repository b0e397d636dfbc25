//! `linerate fleet TARGET...`: one test against many servers at once, started together; the
//! figures of the fleet (`stats::fleet`), each host's run stored in one group.
//!
//! Exit status: 0 when every host was measured; 3 when any was not (the fleet is partial:
//! the others' figures are still printed and stored); 130 when interrupted.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::{group_failure_kind, interrupted};
use super::keep::{self, GroupRuns};
use crate::plan::OutputFormat;
use crate::plan::fleet::{FleetIdentity, FleetPlan};
use crate::record::{Failure, FailureKind, RunRecord};
use crate::report::fleet::FleetMeta;
use crate::report::notice::{self, Notice};
use crate::session::fleet::Ran;
use crate::session::{Interrupt, fleet};
use crate::stats::fleet::{FleetSummary, HostInput, summarize_fleet};
use crate::store::{GroupKind, GroupParams, RunKind, Store};

/// File descriptors a fleet host costs the coordinator: its control connection and each data
/// connection, plus a few for the probes each run opens.
const FDS_PER_HOST_EXTRA: u64 = 4;

/// Runs `linerate fleet`.
pub fn run(plan: &FleetPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let targets = fleet::expanded(plan).map_err(|e| Failure::new(FailureKind::Network, e))?;
    let plan = &FleetPlan { targets, ..plan.clone() };
    check_descriptors(plan)?;
    if !plan.scale.is_empty() {
        return super::scale::run(plan, interrupt);
    }
    let text = plan.base.output == OutputFormat::Text;
    let console = super::console(text);
    if text {
        crate::report::fleet::render_start(plan, &mut std::io::stdout())?;
    }
    let (mut runs, group) = open_group(plan, interrupt, &console)?;
    // A single fleet is the grid of one cell: every target, once.
    let mut ran = None;
    fleet::run_curve_from(plan, Vec::new(), interrupt, &mut |_| {}, &mut |_, _, r| {
        for record in &r.hosts {
            runs.keep(HostInput::placed(record).label.to_string(), 1, record);
        }
        ran = Some(r.clone());
    });
    let Ran { hosts: records, gate_note } = ran.unwrap_or(Ran { hosts: Vec::new(), gate_note: None });
    if let (Some(s), Some(g), true) =
        (runs.store.as_mut(), group, all_completed(&records))
    {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    let summary = summarize_fleet(&placed(&records));
    let mut out = std::io::stdout().lock();
    let meta = FleetMeta { group, start_note: gate_note.as_deref() };
    write_fleet(&summary, &records, meta, text, &mut out)?;
    out.flush()?;
    if let Some(g) = group {
        console.show(&Notice::Stored(notice::Stored::Fleet(g)));
    }
    if interrupt.count() > 0 {
        return Err(interrupted(interrupt, "the hosts' figures until then are above"));
    }
    unstored?;
    if !summary.not_measured.is_empty() {
        let kind = group_failure_kind(records.iter());
        let why = format!(
            "the fleet is partial: {} of {} hosts were not measured (named above)",
            summary.not_measured.len(),
            summary.hosts_planned
        );
        return Err(Failure::new(kind, why).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The history group of a fleet (or a scaling curve), and where its host runs are kept.
pub(super) fn open_group<'a>(
    plan: &FleetPlan,
    interrupt: &'a Interrupt,
    console: &'a crate::report::notice::Console,
) -> Result<(GroupRuns<'a>, Option<i64>)> {
    let mut store = keep::open(&plan.base.store, console);
    let params = GroupParams::new(&FleetIdentity::of(plan), Some(plan.seed))?;
    let group = match store.as_mut() {
        Some(s) => Some(s.begin_group(GroupKind::Fleet, None, &params)?),
        None => None,
    };
    Ok((group_runs(store, group, plan, (interrupt, console)), group))
}

/// Where the host runs of `group` are kept.
pub(super) fn group_runs<'a>(
    store: Option<Store>,
    group: Option<i64>,
    plan: &FleetPlan,
    (interrupt, console): (&'a Interrupt, &'a crate::report::notice::Console),
) -> GroupRuns<'a> {
    let labels = plan.base.store.labels.clone();
    let kind = (RunKind::FleetHost, group);
    let mut runs = GroupRuns::new(store, kind, labels, (None, interrupt), console);
    runs.wanted = plan.base.store.path.clone();
    runs
}

/// True when every host's test completed.
pub(super) fn all_completed<'a>(records: impl IntoIterator<Item = &'a RunRecord>) -> bool {
    records.into_iter().all(|r| r.outcome == crate::record::Outcome::Completed)
}

/// A fleet's figures in text or as its `linerate.fleet` JSON document.
fn write_fleet(
    summary: &FleetSummary,
    records: &[RunRecord],
    meta: FleetMeta<'_>,
    text: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if text {
        return crate::report::fleet::render_text(summary, meta.start_note, out);
    }
    let hosts: Vec<(&str, &RunRecord)> =
        records.iter().map(|r| (HostInput::placed(r).label, r)).collect();
    crate::report::fleet::render_json(summary, &hosts, meta, out)
}

/// The fleet's inputs to `stats::fleet`: records that carry their place.
pub(super) fn placed(records: &[RunRecord]) -> Vec<HostInput<'_>> {
    records.iter().map(HostInput::placed).collect()
}

/// Refuses a fleet the open-files limit cannot hold, before any connection is made.
pub(super) fn check_descriptors(plan: &FleetPlan) -> Result<()> {
    let per_host = u64::from(plan.base.spec.connection_count()) + 1 + FDS_PER_HOST_EXTRA;
    let need = per_host * plan.targets.len() as u64 + 64;
    if let Some(limit) = crate::sys::raise_fd_limit()
        && need > limit
    {
        let why = format!(
            "{} hosts × {} connections need about {need} open files, but this process may open \
             {limit}: raise it (ulimit -n {need}) or run fewer hosts or streams",
            plan.targets.len(),
            plan.base.spec.connection_count() + 1
        );
        return Err(Failure::new(FailureKind::Environment, why).into());
    }
    Ok(())
}
