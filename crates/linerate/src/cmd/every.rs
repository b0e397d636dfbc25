//! `--every`: one command again and again on a schedule (`client --every`, `mesh --every`),
//! every run stored, until the schedule ends or a signal stops it.
//!
//! A failed run is reported and the schedule goes on: a monitor that stops at the first
//! outage records nothing of the outage. The last failure is the command's error. Runs start
//! on their slots (`plan::Schedule`): an overrun skips slots, never runs back to back, so a
//! slow link is not loaded harder. `--slip D` starts each run a random 0 to D after its slot
//! (the first run too), so requesters on one schedule — meshes of several clusters, probes of
//! several hosts — do not all load a shared fabric at the same second.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::failed::interrupted;
use crate::plan::Schedule;
use crate::record::unix_ms_now;
use crate::report::notice::{Console, Notice};
use crate::session::Interrupt;

/// Runs `once` on `schedule`; `then` is what the final note suggests (how to read the runs).
pub(super) fn on_schedule(
    schedule: Schedule,
    (console, interrupt): (&Console, &Interrupt),
    then: &str,
    once: &mut dyn FnMut() -> Result<ExitCode>,
) -> Result<ExitCode> {
    let (start, start_ms) = (Instant::now(), unix_ms_now());
    let (mut runs, mut failed, mut last_error) = (0u32, 0u32, None);
    let mut slot = Duration::ZERO;
    loop {
        let at = slot + slip(schedule.slip);
        if at > Duration::ZERO {
            let unix_ms =
                start_ms.saturating_add(u64::try_from(at.as_millis()).unwrap_or(u64::MAX));
            console.show(&Notice::NextRun { unix_ms, done: runs });
        }
        // Wakes often enough that a signal stops the wait at once.
        while start.elapsed() < at {
            if interrupt.count() > 0 {
                return Err(interrupted(interrupt, "every run until then is stored"));
            }
            std::thread::sleep((at - start.elapsed()).min(Duration::from_millis(100)));
        }
        runs += 1;
        if let Err(e) = once() {
            if interrupt.count() > 0 {
                return Err(e);
            }
            failed += 1;
            console.show(&Notice::ScheduledRunFailed(format!("{e:#}")));
            last_error = Some(e);
        }
        let Some(next) = schedule.next_start(start.elapsed(), runs) else { break };
        slot = next;
    }
    console.show(&Notice::ScheduleDone { runs, failed, then });
    match last_error {
        Some(e) => Err(e.context(format!("{failed} of {runs} scheduled runs failed; the last"))),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// A random delay below `slip` (zero without one).
fn slip(slip: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    if slip.is_zero() || getrandom::getrandom(&mut bytes).is_err() {
        return Duration::ZERO;
    }
    let nanos = u64::try_from(slip.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(u64::from_le_bytes(bytes) % nanos)
}
