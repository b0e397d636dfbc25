//! How a command that ran tests says it did not succeed, as typed errors `main` turns into
//! the exit status: interrupted (130), or runs that failed (3, or the kind of their failure);
//! a gate that failed is [`super::gate::GateFailed`] (1). Commands print and store everything
//! first; these errors are the last line.

use crate::record::{Failure, FailureKind, RunRecord};
use crate::session::Interrupt;

/// Stopped by SIGINT or SIGTERM (or `--stop-after`): `what` says what was kept.
pub fn interrupted(interrupt: &Interrupt, what: &str) -> anyhow::Error {
    let why = format!("interrupted by {}: {what}", interrupt.last_name());
    Failure::new(FailureKind::Interrupted, why).into()
}

/// The failure of the last failed run among `records`.
pub fn last_failure<'a>(
    records: impl DoubleEndedIterator<Item = &'a RunRecord>,
) -> Option<Failure> {
    records.rev().find_map(|r| r.outcome.failure())
}

/// Whether a grid (a matrix, a mesh: `what`) of `records` succeeded, once everything is
/// printed and stored: it stopped early (`stopped`), or some of its `runs` (`tests failed`,
/// say) failed, each an error of the kind of its last failure.
pub fn grid_failure<'a>(
    (what, runs): (&str, &str),
    stopped: Option<&str>,
    records: impl DoubleEndedIterator<Item = &'a RunRecord> + Clone,
) -> anyhow::Result<()> {
    let kind = group_failure_kind(records.clone());
    if let Some(why) = stopped {
        return Err(Failure::new(kind, format!("{what} stopped early: {why}")).into());
    }
    if let Some(last) = last_failure(records.clone()) {
        let all = records.clone().count();
        let failed = records.filter(|r| r.outcome.failure().is_some()).count();
        let why = format!("{failed} of {all} {runs} failed (last: {})", last.message);
        return Err(Failure::new(kind, why).into());
    }
    Ok(())
}

/// The kind of a group's failure: the kind of its last failed run (so a matrix whose every
/// run met a wrong flag is a usage error), else our environment's.
pub fn group_failure_kind<'a>(
    records: impl DoubleEndedIterator<Item = &'a RunRecord>,
) -> FailureKind {
    last_failure(records).map_or(FailureKind::Environment, |f| f.kind)
}
