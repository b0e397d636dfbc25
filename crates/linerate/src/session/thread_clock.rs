//! [`ThreadClock`]: the CPU and scheduler wait a data thread measures of itself, from its
//! start to its end (TCP, UDP and request/response streams alike).

use std::time::Duration;

use linerate_proto::ProcessCpu;

use crate::measure::counters;
use crate::traffic::{LoopError, StreamCounters};

/// What a data thread measures of itself: its CPU time and scheduler wait since it was made.
pub(in crate::session) struct ThreadClock {
    cpu: Option<ProcessCpu>,
    wait_us: Option<u64>,
}

impl ThreadClock {
    /// The calling thread's readings now (before it waits for the start).
    pub(in crate::session) fn now() -> Self {
        Self { cpu: counters::thread_cpu(), wait_us: counters::thread_wait_us() }
    }

    /// The CPU the calling thread used since [`ThreadClock::now`].
    pub(in crate::session) fn cpu(&self) -> Option<ProcessCpu> {
        cpu_since(self.cpu, counters::thread_cpu())
    }

    /// How long the calling thread waited for a CPU since [`ThreadClock::now`].
    pub(in crate::session) fn wait_us(&self) -> Option<u64> {
        self.wait_us.zip(counters::thread_wait_us()).map(|(a, b)| b - a.min(b))
    }

    /// Ends a stream: its thread's CPU and wait, then its end `elapsed` after the start.
    pub(in crate::session) fn finish(
        &self,
        c: &StreamCounters,
        elapsed: Duration,
        error: Option<LoopError>,
    ) {
        c.set_thread_cpu(self.cpu());
        c.set_thread_wait(self.wait_us());
        c.finish(elapsed, error);
    }
}

fn cpu_since(a: Option<ProcessCpu>, b: Option<ProcessCpu>) -> Option<ProcessCpu> {
    let (a, b) = (a?, b?);
    Some(ProcessCpu {
        user_us: b.user_us.saturating_sub(a.user_us),
        system_us: b.system_us.saturating_sub(a.system_us),
    })
}
