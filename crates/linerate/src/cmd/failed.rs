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

/// The kind of a group's failure: the kind of its last failed run (so a matrix whose every
/// run met a wrong flag is a usage error), else our environment's.
pub fn group_failure_kind<'a>(
    records: impl DoubleEndedIterator<Item = &'a RunRecord>,
) -> FailureKind {
    last_failure(records).map_or(FailureKind::Environment, |f| f.kind)
}
