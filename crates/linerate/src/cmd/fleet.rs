//! `linerate fleet TARGET...`: one test against many servers at once, started together; the
//! figures of the fleet (`stats::fleet`), each host's run stored in one group. With
//! `--scale K,...`: the fleet run with the first k targets for each k, each `--repeat` times in
//! a random order the seed reproduces, then the scaling curve; every host run is stored as cell
//! `k=K` with its repetition, so `report fN` rebuilds the curve from the history. A single
//! fleet is the grid of one cell (every target, once). Both write their figures and JSON from
//! the report model (`source::fleet_source`, `report::model`), as `report fN` does, so the live
//! and the stored output cannot differ.
//!
//! **Rounds.** The curve is a grid (`session::grid`, through `session::fleet`) whose
//! cells are the host counts: every count `--repeat` times in the seeded order, then with
//! `--until-ci` a round for every count whose total's 95 % interval is still wider than asked
//! (`stats::scaling::pending_counts`), as a matrix does; repetitions go on counting from
//! `--repeat`, and three fleet runs in a row that measured no host stop the curve.
//!
//! **Resuming.** The group's params hold the curve's settings (targets, test, counts,
//! repetitions, `--until-ci`) under `"plan"` and the order seed beside them. The same command
//! line with `--resume` continues the newest unfinished curve with exactly those settings
//! (or the one named; another plan is refused, as for a matrix: `store::resume`), walks the
//! same grid with the stored seed and skips every (k, repetition) that has a whole fleet run
//! (every host stored and measured; the one attempt rule, `stats::campaign_fleet`). A partial
//! one — a host not measured, or the run cut short — is run again whole: a fleet run is one
//! measurement of its k hosts at one instant, so the hosts that did finish cannot be kept
//! alone. Earlier attempts stay stored and are listed as partial runs, never counted in a
//! point.
//!
//! **A single fleet** (no `--scale`) is not resumable: it is one such measurement, so nothing
//! of an interrupted one can be kept, and rerunning it into the old group would only mix an
//! abandoned attempt into the new fleet's figures. `--resume` without `--scale` is refused
//! (`cli::fleet_args`), and the fleet is simply run again as a new group.
//!
//! Exit status: 0 when every host of every fleet run was measured; 3 when any run was partial
//! (a host not measured: the others' figures are still printed and stored, and a curve leaves
//! that run out of its point); 130 when interrupted (the runs until then are reported).

use std::cell::RefCell;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::{group_failure_kind, interrupted};
use super::keep::{self, GroupRuns};
use super::source::{fleet_source, load_from};
use crate::plan::OutputFormat;
use crate::plan::fleet::{FleetIdentity, FleetPlan};
use crate::record::{Failure, FailureKind, RunRecord};
use crate::report::fleet as render;
use crate::report::model::{InputRun, build};
use crate::report::notice::{Console, Notice, Stored};
use crate::report::style::Style;
use crate::session::Interrupt;
use crate::session::fleet;
use crate::session::grid::Progress;
use crate::stats::campaign_fleet::{FleetShape, completed_fleet_runs};
use crate::stats::fleet::{FleetSummary, HostInput, summarize_fleet, summarize_planned};
use crate::store::resume::Resumable;
use crate::store::{GroupKind, RunKind, Store};

/// File descriptors a fleet host costs the coordinator: its control connection and each data
/// connection, plus a few for the probes each run opens.
const FDS_PER_HOST_EXTRA: u64 = 4;

/// With a key (`--psk-file`), every host is greeted with it before any test, so that a wrong
/// key stops the fleet once, naming the key file, instead of failing every host's test and
/// storing a fleet with nothing measured.
fn check_key(plan: &FleetPlan) -> Result<()> {
    if plan.base.psk.is_none() {
        return Ok(());
    }
    let greet = |t: &crate::plan::fleet::Target| crate::session::agents::greet(t, &plan.base);
    let heard = crate::session::agents::greet_all(&plan.targets, &greet);
    match crate::session::agents::key_refusal(&plan.targets, &heard, plan.key_file.as_deref()) {
        Some(msg) => Err(Failure::new(FailureKind::Refused, msg).into()),
        None => Ok(()),
    }
}

/// Runs `linerate fleet`: a single fleet, or with `--scale` its curve.
pub fn run(plan: &FleetPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let text = plan.base.output == OutputFormat::Text;
    let console = super::console(text);
    let _lock = keep::requester_lock(&plan.base.store, "fleet", &console, interrupt)?;
    let mut status = |s: &str| console.show(&Notice::AwaitingAgents(s));
    let (each, wait) = (plan.each_address, plan.agent_wait);
    let targets = fleet::discover(&plan.targets, each, wait, 1, &plan.base, interrupt, &mut status)
        .map_err(|e| Failure::new(FailureKind::Network, e.why))?;
    let plan = &FleetPlan { targets, ..plan.clone() };
    check_descriptors(plan)?;
    check_key(plan)?;
    let curve = !plan.scale.is_empty();
    let Opened { mut runs, group, plan, earlier } = open(plan, interrupt, &console)?;
    let plan = &plan;
    if text {
        let out = &mut std::io::stdout();
        match curve {
            true => {
                render::render_scale_start(plan, plan.first_round_runs(), out)?;
                render::render_scale_rounds(plan, group.filter(|_| plan.resume.is_some()), out)?;
            }
            false => render::render_start(plan, out)?,
        }
    }
    // Whole earlier fleet runs are not run again; partial ones are (a fleet run is one
    // measurement of its k hosts at one instant) and stay listed as partial runs.
    let shape = FleetShape { targets: plan.targets.len(), scale: plan.scale.clone() };
    let stored: Vec<(usize, u32, RunRecord)> =
        earlier.iter().map(|r| (r.cell, r.repetition, r.record.clone())).collect();
    let prior = completed_fleet_runs(&shape, &stored);
    let index = |k: usize| plan.scale.iter().position(|&s| s == k).unwrap_or(0);
    let all = RefCell::new(earlier);
    let last: RefCell<Option<FleetSummary>> = RefCell::new(None);
    let counts = plan.counts();
    let mut start_note = None;
    let mut ran = 0;
    let outcome = fleet::run_curve_from(
        plan,
        prior,
        interrupt,
        &mut |p: Progress<'_, fleet::Ran>| {
            let summary = last.borrow();
            if curve {
                let (hosts, summary) = (counts[p.slot.cell], p.finished.and(summary.as_ref()));
                console.progress(&render::curve_progress(&p, hosts, summary));
            }
        },
        &mut |k, rep, fleet_run| {
            let records = &fleet_run.hosts;
            for record in records {
                // A single fleet's host runs are stored by their labels.
                let cell = if curve { format!("k={k}") } else { placed_label(record) };
                runs.keep(cell, rep, record);
                let run =
                    InputRun { cell: index(k), repetition: rep, id: None, record: record.clone() };
                all.borrow_mut().push(run);
            }
            if curve {
                let placed: Vec<HostInput<'_>> = records.iter().map(HostInput::placed).collect();
                *last.borrow_mut() = Some(summarize_planned(k, &placed));
            }
            start_note.clone_from(&fleet_run.gate_note);
            ran += 1;
            if plan.stop_after.is_some_and(|n| ran >= n) {
                interrupt.trigger();
            }
        },
    );
    console.end_progress();
    let report = build(fleet_source((group, Some(plan.seed)), false, shape, all.into_inner()));
    let Some(f) = report.fleet() else { unreachable!("a fleet source makes a fleet report") };
    let whole = |&(cell, rep): &(usize, u32)| {
        f.counted().any(|r| (index(r.hosts), r.repetition) == (cell, rep) && r.whole())
    };
    let (planned, stopped) = (outcome.planned, outcome.stopped);
    let partial = planned.iter().filter(|p| !whole(p)).count();
    let complete = interrupt.count() == 0 && partial == 0 && stopped.is_none();
    if let (Some(s), Some(g), true) = (runs.store.as_mut(), group, complete) {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    let mut out = std::io::stdout().lock();
    // A single fleet's one run (none when interrupted before it started).
    let single = f.runs.first().map_or_else(|| summarize_fleet(&[]), |r| r.summary.clone());
    match (text, curve) {
        (true, true) => {
            render::write_scale_body(Style::Text, &f.curve, &mut out)?;
            render::render_warnings(&report.warnings, &mut out)?;
        }
        (true, false) => {
            render::write_fleet_body(Style::Text, &single, start_note.as_deref(), &mut out)?
        }
        (false, _) => render::render_report_json(&report, f, start_note.as_deref(), &mut out)?,
    }
    out.flush()?;
    if let Some(g) = group {
        console.show(&Notice::Stored(Stored::Fleet(g)));
    }
    if let (Some(group), false, true) = (group, complete, curve) {
        console.show(&Notice::CurveIncomplete { group });
    }
    if interrupt.count() > 0 {
        let what = if curve { "the runs" } else { "the hosts' figures" };
        return Err(interrupted(interrupt, &format!("{what} until then are above")));
    }
    unstored?;
    if partial > 0 {
        let kind = group_failure_kind(report.runs.iter().map(|r| &r.record));
        let why = match curve {
            true => format!(
                "{partial} of {} fleet runs were partial (a host not measured; left out of its \
                 point){}",
                planned.len(),
                stopped.map(|s| format!("; {s}")).unwrap_or_default()
            ),
            false => format!(
                "the fleet is partial: {} of {} hosts were not measured (named above)",
                single.not_measured.len(),
                single.hosts_planned
            ),
        };
        return Err(Failure::new(kind, why).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// A host run's label: its target's.
fn placed_label(record: &RunRecord) -> String {
    HostInput::placed(record).label.to_string()
}

/// A fleet's or curve's group, opened anew or continued.
struct Opened<'a> {
    /// Where its host runs go.
    runs: GroupRuns<'a>,
    /// Its group, if there is a history.
    group: Option<i64>,
    /// The plan, with the stored seed when resumed.
    plan: FleetPlan,
    /// The host runs stored before (resumed), in stored order.
    earlier: Vec<InputRun>,
}

/// A new group for `plan`, or (a curve's `--resume`) the unfinished one it continues.
fn open<'a>(
    plan: &FleetPlan,
    interrupt: &'a Interrupt,
    console: &'a Console,
) -> Result<Opened<'a>> {
    let mut store = keep::open(&plan.base.store, console);
    let wanted = serde_json::to_value(FleetIdentity::of(plan))?;
    let fix = "repeat the original command line (targets, --scale, --repeat, --until-ci, test \
               flags)";
    let resumable = Resumable::new(GroupKind::Fleet, &wanted, fix);
    let opened = keep::open_group(&mut store, plan.resume, &resumable, plan.seed, console)?;
    let plan = FleetPlan { seed: opened.seed, ..plan.clone() };
    // A fleet's host runs are read as `report` reads them: with their places in the fleet.
    let earlier = match (&opened.continued, store.as_ref()) {
        (Some(g), Some(s)) => {
            let source = load_from(s, crate::store::Stored::Group(g.id))?;
            source.tiers.into_iter().flat_map(|t| t.runs).collect()
        }
        _ => Vec::new(),
    };
    let runs = group_runs(store, opened.id, &plan, (interrupt, console));
    Ok(Opened { runs, group: opened.id, plan, earlier })
}

/// Where the host runs of `group` are kept.
fn group_runs<'a>(
    store: Option<Store>,
    group: Option<i64>,
    plan: &FleetPlan,
    (interrupt, console): (&'a Interrupt, &'a Console),
) -> GroupRuns<'a> {
    let labels = plan.base.store.labels.clone();
    let kind = (RunKind::FleetHost, group);
    let mut runs = GroupRuns::new(store, kind, labels, (None, interrupt), console);
    runs.wanted = plan.base.store.path.clone();
    runs
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
