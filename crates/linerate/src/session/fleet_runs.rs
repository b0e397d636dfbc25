//! Fleet runs one after another: each host run as a record that carries its place in the
//! fleet (label, measured start), and a campaign's fleet tier — the scaling curve (or one host
//! count) `repeat` times in the plan's seeded order, skipping the fleet runs an earlier,
//! interrupted attempt completed.
//!
//! A fleet run in which no host was measured says nothing of the fleet; after
//! [`MAX_FAILURES_IN_A_ROW`] of them the tier stops (its servers are gone), as a matrix does.
//! Prints nothing: progress goes to a callback.

use crate::plan::fleet::FleetPlan;
use crate::record::{FleetPlace, Outcome, RunRecord};
use crate::session::Interrupt;
use crate::session::fleet::{HostRun, run_fleet};
use crate::session::matrix::{MAX_FAILURES_IN_A_ROW, MatrixOutcome};

/// Each host's record with its place in the fleet (label, measured start), labelled.
pub fn placed(hosts: Vec<HostRun>) -> Vec<(String, RunRecord)> {
    hosts
        .into_iter()
        .map(|h| {
            let mut record = h.record;
            let us = |d: Option<std::time::Duration>| {
                d.map(|d| d.as_micros().try_into().unwrap_or(u64::MAX))
            };
            record.fleet = Some(FleetPlace {
                label: h.target.label.clone(),
                started_us: us(h.started),
                first_byte_us: us(h.first_byte),
            });
            (h.target.label, record)
        })
        .collect()
}

/// Each host's label and record, in one fleet run.
pub type Hosts = [(String, RunRecord)];

/// Before and after each fleet run of a curve.
#[derive(Debug, Clone, Copy)]
pub struct CurveProgress<'a> {
    /// Hosts in the run.
    pub hosts: usize,
    /// Its repetition (1-based).
    pub repetition: u32,
    /// After the run: each host's label and record (before it: None).
    pub finished: Option<&'a Hosts>,
}

/// Runs `plan`'s curve (every host count of `plan.scale`, `plan.repeat` times) after
/// `prior`: the host runs (index of the host count in `plan.scale`, repetition, record) of the
/// fleet runs an earlier attempt completed, which are not run again. The outcome's runs start
/// with `prior`, then every host run of each new fleet run; `each` sees each new fleet run.
pub fn run_curve_from(
    plan: &FleetPlan,
    prior: Vec<(usize, u32, RunRecord)>,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(CurveProgress<'_>),
    each: &mut dyn FnMut(usize, u32, &Hosts),
) -> MatrixOutcome {
    let done: std::collections::HashSet<(usize, u32)> =
        prior.iter().map(|(c, r, _)| (*c, *r)).collect();
    let mut out = MatrixOutcome { runs: prior, stopped: None };
    let mut failures = 0u32;
    for (k, rep) in plan.order() {
        let index = plan.scale.iter().position(|&s| s == k).unwrap_or(0);
        if done.contains(&(index, rep)) {
            continue;
        }
        if interrupt.count() > 0 {
            out.stopped = Some(format!("interrupted by {}", interrupt.last_name()));
            break;
        }
        progress(CurveProgress { hosts: k, repetition: rep, finished: None });
        let records = placed(run_fleet(&plan.first(k), interrupt).hosts);
        each(k, rep, &records);
        progress(CurveProgress { hosts: k, repetition: rep, finished: Some(&records) });
        let measured = records.iter().any(|(_, r)| r.outcome == Outcome::Completed);
        let first_error = records.iter().find_map(|(label, r)| match &r.outcome {
            Outcome::Failed { error, .. } => Some(format!("{label}: {error}")),
            _ => None,
        });
        failures = if measured { 0 } else { failures + 1 };
        out.runs.extend(records.into_iter().map(|(_, r)| (index, rep, r)));
        if failures >= MAX_FAILURES_IN_A_ROW {
            out.stopped = Some(format!(
                "{failures} fleet runs in a row measured no host (last: {}); stopping the tier",
                first_error.unwrap_or_else(|| "no host completed".into())
            ));
            break;
        }
    }
    out
}
