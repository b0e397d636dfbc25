//! Continuing an interrupted repeated experiment (a matrix, a fleet's curve, a mesh, a
//! campaign) from the history: finding the group to continue and the runs it already
//! completed, placed in the cells of its plan (`cmd::keep::open_group` opens it).
//!
//! A group is identified by the plan it ran (stored in its params under `"plan"`), not by
//! when it ran: mixing runs of two different plans into one table would be silently wrong, so
//! a group whose stored plan differs from the one given is refused, naming the group. The
//! order seed is stored beside the plan (`"seed"`), so the continued runs walk the same
//! random order and the runs left are exactly the ones the first attempt had not reached.
//! Only completed runs count as done; failed and interrupted ones are run again.

use anyhow::{Context, Result};
use serde_json::Value;

use super::{GroupKind, GroupRow, Store};
use crate::record::{Failure, Outcome, RunRecord};

/// What is being resumed, for finding its group and for the errors.
#[derive(Debug)]
pub struct Resumable<'a> {
    /// The group kind.
    pub kind: GroupKind,
    /// The plan as a group's params store it (`GroupParams::plan_json`).
    pub plan: &'a Value,
    /// The group's name, when plans have names (campaigns): an open group of that name with
    /// another plan means the plan was edited since.
    pub name: Option<&'a str>,
    /// How to get a matching plan back, ending the "cannot be continued" error.
    pub fix: &'a str,
    /// The plan as compared: what may be written differently and mean the same (a matrix's
    /// sizes in other words) written one way.
    pub canonical: fn(&Value) -> Value,
}

impl<'a> Resumable<'a> {
    /// A plan of `kind`, compared as it is stored, without a name; `fix` ends the error that
    /// refuses a group of another plan.
    pub fn new(kind: GroupKind, plan: &'a Value, fix: &'a str) -> Self {
        Resumable { kind, plan, name: None, fix, canonical: Value::clone }
    }

    /// Whether `g` ran this plan.
    fn ran(&self, g: &GroupRow) -> bool {
        (self.canonical)(g.params.plan_json()) == (self.canonical)(self.plan)
    }
}

/// The group to continue: `which`, or the newest unfinished group of the kind with this plan.
/// A group that is not there or cannot be continued with this plan is a usage error: the
/// command line (or the file) names the wrong one.
pub fn find_open_group(store: &Store, which: Option<i64>, r: &Resumable<'_>) -> Result<GroupRow> {
    let refuse = |why: String| Err(Failure::usage(why).into());
    if let Some(id) = which {
        let Some(g) = store.group(id)? else {
            return refuse(format!("no group {id} in the history"));
        };
        if g.kind != r.kind {
            return refuse(format!("group {id} is a {}, not a {}", g.kind, r.kind));
        }
        if g.finished {
            return refuse(format!(
                "{} group {id} is already finished; run without --resume to start anew",
                r.kind
            ));
        }
        if !r.ran(&g) {
            return refuse(changed(&g, r));
        }
        return Ok(g);
    }
    let open: Vec<GroupRow> =
        store.groups(10_000)?.into_iter().filter(|g| g.kind == r.kind && !g.finished).collect();
    if let Some(g) = open.iter().find(|g| r.ran(g)) {
        return Ok(g.clone());
    }
    if let Some(g) = r.name.and_then(|n| open.iter().find(|g| g.name.as_deref() == Some(n))) {
        return refuse(changed(g, r));
    }
    let named = r.name.map_or(String::new(), |n| format!(" {n:?}"));
    refuse(format!(
        "no unfinished {}{named} with these settings to resume in {}; run without --resume to \
         start one (`linerate history` lists the stored groups)",
        r.kind,
        store.path().display()
    ))
}

fn changed(g: &GroupRow, r: &Resumable<'_>) -> String {
    format!(
        "the {kind} changed since {kind} group {id} was started (its stored plan differs from \
         this one), so its runs cannot be continued with it: {fix}, or run without --resume to \
         start a new {kind}",
        kind = r.kind,
        id = g.id,
        fix = r.fix
    )
}

/// The order seed stored with group `g`.
pub fn stored_seed(g: &GroupRow) -> Result<u64> {
    g.params.seed.with_context(|| format!("group {} has no stored seed", g.id))
}

/// A stored run of a group's plan.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// Its cell's name as stored.
    pub cell: String,
    /// Its repetition.
    pub repetition: u32,
    /// The record.
    pub record: RunRecord,
    /// The first completed run of its (cell, repetition): done, not run again on resume. The
    /// others (failed, interrupted) are attempts the figures do not count but the reports list.
    pub kept: bool,
}

/// Every run of group `id` that belongs to its plan (has a cell and a repetition), in the
/// order stored.
pub fn planned_runs(store: &Store, id: i64) -> Result<Vec<PlannedRun>> {
    let mut runs: Vec<PlannedRun> = Vec::new();
    for (_, meta, record) in store.group_runs(id)? {
        let (Some(cell), Some(repetition)) = (meta.cell, meta.repetition) else { continue };
        let done = |r: &PlannedRun| r.kept && (&r.cell, r.repetition) == (&cell, repetition);
        let kept = record.outcome == Outcome::Completed && !runs.iter().any(done);
        runs.push(PlannedRun { cell, repetition, record, kept });
    }
    Ok(runs)
}

/// The runs of continued group `g`'s plan, each placed by `place` from the cell name it was
/// stored under (a matrix's `P=4`, a mesh's `a -> b`, a campaign's `TIER/CELL`). A run that
/// `place` cannot place is an error naming the group: the plan it ran is not this one.
pub fn placed_runs<T>(
    store: &Store,
    g: &GroupRow,
    place: impl Fn(&str) -> Option<T>,
) -> Result<Vec<(T, PlannedRun)>> {
    let at = |run: PlannedRun| -> Result<(T, PlannedRun)> {
        let cell = place(&run.cell).with_context(|| {
            format!(
                "run {:?} of {} {} is of no cell of its plan here",
                run.cell,
                g.kind,
                g.kind.reference(g.id)
            )
        })?;
        Ok((cell, run))
    };
    planned_runs(store, g.id)?.into_iter().map(at).collect()
}

/// A continued group's runs as a runner takes them, by (place, repetition): the completed
/// ones it skips (`kept`), and every run of the plan in stored order (`all`: failed and
/// interrupted attempts too, which the figures do not count but tables and documents list,
/// as `report` does).
#[derive(Debug)]
pub struct Earlier<T> {
    /// The completed runs.
    pub kept: Vec<(T, u32, RunRecord)>,
    /// Every run.
    pub all: Vec<(T, u32, RunRecord)>,
}

impl<T> Default for Earlier<T> {
    fn default() -> Self {
        Self { kept: Vec::new(), all: Vec::new() }
    }
}

impl<T: Clone> Earlier<T> {
    /// The placed runs, kept and all.
    pub fn of(placed: Vec<(T, PlannedRun)>) -> Self {
        let mut earlier = Earlier::default();
        for (at, run) in placed {
            if run.kept {
                earlier.kept.push((at.clone(), run.repetition, run.record.clone()));
            }
            earlier.all.push((at, run.repetition, run.record));
        }
        earlier
    }
}
