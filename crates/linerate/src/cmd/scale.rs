//! `linerate fleet --scale K,...`: the fleet run with the first k targets for each k, each
//! `--repeat` times in a random order the seed reproduces, then the scaling curve. Every host
//! run is stored in one group, as cell `k=K` with its repetition, so `report fN` rebuilds the
//! curve from the history; the live command's figures and JSON come from the same report
//! model (`source::fleet_source`, `report::model`), so the two cannot differ.
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
//! Exit status as for a fleet: 3 when any run was partial (a host not measured; that run is
//! left out of its point), 130 when interrupted (the runs until then are reported).

use std::cell::RefCell;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::failed::{group_failure_kind, interrupted};
use super::fleet::{group_runs, open_group, placed};
use super::keep::{self, GroupRuns};
use super::source::{fleet_source, load_from};
use crate::plan::fleet::{FleetIdentity, FleetPlan};
use crate::plan::{OutputFormat, ReportFormat};
use crate::record::{Failure, RunRecord};
use crate::report::fleet as render;
use crate::report::model::{InputRun, build};
use crate::report::notice::{Console, Notice, Stored};
use crate::session::Interrupt;
use crate::session::fleet::{self, CurveProgress};
use crate::stats::campaign_fleet::{FleetShape, completed_fleet_runs};
use crate::stats::fleet::{FleetSummary, summarize_planned};
use crate::store::GroupKind;
use crate::store::resume::{self, Resumable};

/// Runs the scaling curve.
pub fn run(plan: &FleetPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let text = plan.base.output == OutputFormat::Text;
    let console = super::console(text);
    let Opened { mut runs, group, plan, earlier } = open(plan, interrupt, &console)?;
    let plan = &plan;
    if text {
        let out = &mut std::io::stdout();
        render::render_scale_start(plan, plan.first_round_runs(), out)?;
        render::render_scale_rounds(plan, group.filter(|_| plan.resume.is_some()), out)?;
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
    let mut ran = 0;
    let outcome = fleet::run_curve_from(
        plan,
        prior,
        interrupt,
        &mut |p: CurveProgress<'_>| {
            let summary = last.borrow();
            console.progress(&render::curve_progress(&p, p.finished.and(summary.as_ref())));
        },
        &mut |k, rep, fleet_run| {
            let records = &fleet_run.hosts;
            for record in records {
                runs.keep(format!("k={k}"), rep, record);
                let run =
                    InputRun { cell: index(k), repetition: rep, id: None, record: record.clone() };
                all.borrow_mut().push(run);
            }
            *last.borrow_mut() = Some(summarize_planned(k, &placed(records)));
            ran += 1;
            if plan.stop_after.is_some_and(|n| ran >= n) {
                interrupt.trigger();
            }
        },
    );
    console.end_progress();
    let mut report = build(fleet_source((group, Some(plan.seed)), false, shape, all.into_inner()));
    let Some(f) = report.fleet() else { unreachable!("a fleet source makes a fleet report") };
    let whole = |&(cell, rep): &(usize, u32)| {
        f.counted().any(|r| (index(r.hosts), r.repetition) == (cell, rep) && r.whole())
    };
    let (planned, stopped) = (outcome.planned, outcome.stopped);
    let partial = planned.iter().filter(|p| !whole(p)).count();
    let complete = interrupt.count() == 0 && partial == 0 && stopped.is_none();
    report.finished = complete;
    if let (Some(s), Some(g), true) = (runs.store.as_mut(), group, complete) {
        s.finish_group(g)?;
    }
    let unstored = runs.unstored();
    let mut out = std::io::stdout().lock();
    match (text, report.fleet()) {
        (true, Some(f)) => {
            render::render_scale_text(&f.curve, &mut out)?;
            render::render_warnings(&report.warnings, &mut out)?;
        }
        _ => crate::report::render(&report, ReportFormat::Json, &mut out)?,
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
        let kind = group_failure_kind(report.runs.iter().map(|r| &r.record));
        let why = format!(
            "{partial} of {} fleet runs were partial (a host not measured; left out of its point){}",
            planned.len(),
            stopped.map(|s| format!("; {s}")).unwrap_or_default()
        );
        return Err(Failure::new(kind, why).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// A curve's group, opened anew or continued.
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

/// A new group for `plan`, or (with `--resume`) the unfinished one it continues.
fn open<'a>(
    plan: &FleetPlan,
    interrupt: &'a Interrupt,
    console: &'a Console,
) -> Result<Opened<'a>> {
    let Some(which) = plan.resume else {
        let (runs, group) = open_group(plan, interrupt, console)?;
        return Ok(Opened { runs, group, plan: plan.clone(), earlier: Vec::new() });
    };
    let store = keep::open(&plan.base.store, console)
        .context("--resume needs the history, which cannot be opened")?;
    let wanted = serde_json::to_value(FleetIdentity::of(plan))?;
    let resumable = Resumable {
        kind: GroupKind::Fleet,
        plan: &wanted,
        name: None,
        fix: "repeat the original command line (targets, --scale, --repeat, --until-ci, test \
              flags)",
        canonical: Clone::clone,
    };
    let g = resume::find_open_group(&store, which, &resumable)?;
    let plan = FleetPlan { seed: resume::stored_seed(&g)?, ..plan.clone() };
    let source = load_from(&store, crate::store::Stored::Group(g.id))?;
    let earlier = source.tiers.into_iter().flat_map(|t| t.runs).collect();
    let runs = group_runs(Some(store), Some(g.id), &plan, (interrupt, console));
    Ok(Opened { runs, group: Some(g.id), plan, earlier })
}
