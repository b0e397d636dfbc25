//! The **starved end** verdict: an end whose stream threads spent a large share of the test
//! runnable but waiting for a CPU, so what the test measured is that end's share of the CPU,
//! not the path, the window or the peer.
//!
//! How it is decided: each stream thread reads its scheduler run delay (Linux
//! `/proc/thread-self/schedstat`, second field: time runnable on a run queue, not running) when
//! it starts moving data and when it stops (`StreamResult::thread_wait_us`). Per end and
//! direction, the waits of its stream threads are summed and divided by their summed wall time
//! (each stream's `duration_us`). An end whose threads waited ≥ 25 % of that time is starved.
//!
//! Why 25 %: a thread that is ready a quarter of the test and cannot run cannot have kept its
//! socket full (sender) or drained (receiver) for that quarter, and every later rule reads
//! effects of exactly that — a receiver that could not drain shows as a full receive window, a
//! sender that could not run as an idle path. A saturating thread (rule 6, CPU-bound) ran
//! ≥ 90 % of the time and so cannot have waited 25 %: the two verdicts exclude each other per
//! thread. Measured on the project's shared 2-core build machine (load 7–13): unlimited
//! loopback runs waited 37–61 %; a quiet host was not available to measure its baseline.
//!
//! The rule sits after "pacing target reached" and "UDP sender fell behind" (both already
//! explain the rate) and before the receive-window rule, except when the user set the window
//! (`-w`): a limit the user imposed is named first, and the starved end is in its evidence. Whose fault the wait was is said from
//! the end's cost figures: other processes (foreign load ≥ 10 % of a core and at least the
//! end's own process) or the test's own threads outnumbering the free cores.
//!
//! An end that pooled its streams (`data_plane.mode` `pool`) has no per-stream threads: its
//! workers' run delays and wall times are used instead, every worker for either direction,
//! since a worker that waited held back all of its streams.
//!
//! Where the OS gives no run delay (not Linux, schedstats off, an iperf3 peer) the rule does
//! not apply: no figure, no verdict. Pure: no I/O.

use linerate_proto::Flow;

use crate::record::{End, RunRecord};
use crate::stats::CostSummary;
use crate::stats::cost::FOREIGN_WARN_PERCENT;

/// An end whose threads waited at least this share of their wall time for a CPU is starved.
pub const STARVED_WAIT_SHARE: f64 = 0.25;

/// An end's stream threads of one direction waited for a CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Starved {
    /// The end whose threads waited.
    pub end: End,
    /// Waiting time over wall time, 0..1 (summed over the end's threads of the direction).
    pub share: f64,
    /// Summed wall time of those threads, microseconds.
    pub wall_us: u64,
}

/// Each end's wait share for `flow`, where its threads reported a run delay.
pub fn waits(record: &RunRecord, flow: Flow) -> Vec<Starved> {
    let threads = record.data_threads(flow);
    End::BOTH
        .into_iter()
        .filter_map(|end| {
            let (wall_us, wait_us) = threads
                .iter()
                .filter(|t| t.end == end)
                .filter_map(|t| Some((t.wall_us, t.wait_us?)))
                .fold((0u64, 0u64), |(w, t), (d, x)| (w + d, t + x));
            (wall_us > 0).then(|| Starved { end, share: wait_us as f64 / wall_us as f64, wall_us })
        })
        .collect()
}

/// The most starved end of `flow`, if its threads waited at least [`STARVED_WAIT_SHARE`].
pub fn starved_end(record: &RunRecord, flow: Flow) -> Option<Starved> {
    waits(record, flow)
        .into_iter()
        .filter(|s| s.share >= STARVED_WAIT_SHARE)
        .max_by(|a, b| a.share.total_cmp(&b.share))
}

/// The verdict's sentence and its evidence line, with whose fault the wait was.
pub fn explain(s: &Starved, cost: &[CostSummary]) -> (String, String) {
    let c = cost.iter().find(|c| c.end == s.end);
    let foreign = c.and_then(|c| c.foreign_percent_of_core);
    let own = c.and_then(|c| c.process_percent_of_core);
    let crowded = foreign.is_some_and(|f| f >= FOREIGN_WARN_PERCENT && f >= own.unwrap_or(0.0));
    let why = if crowded {
        format!(
            "other processes used {:.0}% of a core on the {} host; rerun on a quiet machine",
            foreign.unwrap_or(0.0),
            s.end
        )
    } else {
        "the test's own threads and the host's other work left too few free cores; use fewer \
         streams (-P), pin the ends to separate cores (taskset) or a host with more cores"
            .to_string()
    };
    let pct = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}%"));
    let summary = format!(
        "starved: the {}'s threads waited {:.0}% of the time for a CPU (runnable, not running), \
         so the rate measures its share of the CPU, not the path or the window; {why}",
        s.end,
        s.share * 100.0
    );
    let evidence = format!(
        "{}: stream threads waited {:.0}% of {:.2} s for a CPU (scheduler run delay); other \
         processes {} of a core, its own process {}",
        s.end,
        s.share * 100.0,
        s.wall_us as f64 / 1e6,
        pct(foreign),
        pct(own)
    );
    (summary, evidence)
}
