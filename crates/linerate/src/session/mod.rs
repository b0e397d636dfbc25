//! Session drivers: they pump bytes between sockets and the sans-IO protocol machines, run the
//! local streams, and produce a [`crate::record::RunRecord`].
//!
//! Drivers own time (a monotonic [`Clock`]), sockets and threads; the protocol machines own
//! every protocol decision. Drivers do not print: live progress goes to an [`Observer`], which
//! the caller connects to a renderer in `report/`.

mod admission;
pub mod agents;
pub mod campaign;
pub mod client;
mod control;
mod crowd;
pub mod doctor;
mod doctor_echo;
mod exporter;
pub mod fleet;
mod frame_budget;
mod front;
pub mod grid;
pub(crate) mod heap;
pub mod iperf3;
mod iperf3_peer;
pub mod log_limit;
pub mod matrix;
pub mod mesh;
mod metrics;
mod native;
mod pair_metrics;
pub mod preflight;
mod probe;
pub(crate) mod pump;
mod rr_stream;
mod served;
pub mod server;
pub mod server_note;
mod shared;
mod signals;
mod slots;
pub mod streams;
pub mod test_log;
mod thread_clock;
pub mod udp;
mod udp_stream;
pub mod under_load;

use std::time::{Duration, Instant};

pub use control::{ControlChannel, Recv};
pub use signals::Interrupt;
pub use streams::{IntervalRow, StreamSet};

/// The software string both ends send in their hello.
pub const SOFTWARE: &str = concat!("linerate ", env!("CARGO_PKG_VERSION"));

/// How long a running test may move no bytes at all before it is declared stalled.
pub const NO_PROGRESS_TIMEOUT: Duration = Duration::from_secs(10);

/// The driver's monotonic clock, as the `Duration` since its creation that proto expects.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Self(Instant::now())
    }

    /// Time since the clock started.
    pub fn now(&self) -> Duration {
        self.0.elapsed()
    }

    /// Converts a protocol time back to an instant.
    pub fn instant(&self, at: Duration) -> Instant {
        self.0 + at
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Something that happened during a test that a user may want to see live.
#[derive(Debug, Clone)]
pub enum LiveEvent<'a> {
    /// The control connection is up and the server accepted the test.
    Accepted {
        /// Local control address.
        local: String,
        /// Server address.
        remote: String,
        /// The server's software string.
        server_software: &'a str,
    },
    /// All streams connected; the test is starting.
    Started {
        /// Number of local streams.
        streams: usize,
    },
    /// One interval's rows (one per local stream).
    Interval(&'a [IntervalRow]),
    /// A notice worth a line (e.g. "interrupted: stopping early").
    Notice(&'a str),
    /// The server queued the test (`--exclusive`): where it waits and for about how long.
    Queued {
        /// 1 = next to run.
        position: u32,
        /// The server's estimate, if it has one.
        wait: Option<Duration>,
    },
}

/// Receives live events (the text renderer prints them; JSON mode ignores them).
pub trait Observer {
    /// Called for every live event.
    fn on_event(&mut self, event: LiveEvent<'_>);
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;

impl Observer for Quiet {
    fn on_event(&mut self, _: LiveEvent<'_>) {}
}

/// The earliest of some optional instants, bounded to at most `cap` from now, never zero.
pub(crate) fn wait_until(deadlines: &[Option<Instant>], cap: Duration) -> Duration {
    let now = Instant::now();
    let soonest = deadlines.iter().flatten().map(|d| d.saturating_duration_since(now)).min();
    soonest.unwrap_or(cap).min(cap).max(Duration::from_millis(1))
}

/// Socket timeouts have scheduler-tick granularity (4 ms at HZ=250, rounded up), so waits
/// for a sample tick stop this much early and the rest is slept with a precise timer.
const TICK_MARGIN: Duration = Duration::from_millis(10);

/// Waits for control input until the earliest deadline, without overshooting `tick` (the
/// next interval sample) by more than the precise timer's resolution.
pub(crate) fn wait_for_input<'c>(
    ctrl: &'c mut ControlChannel,
    tick: Option<Instant>,
    deadlines: &[Option<Instant>],
    cap: Duration,
) -> anyhow::Result<Recv<'c>> {
    let now = Instant::now();
    if let Some(t) = tick {
        let left = t.saturating_duration_since(now);
        if left <= TICK_MARGIN {
            // Input already there is taken without waiting: with ticks closer together than
            // the margin (-i 0.01) the control connection would otherwise never be read.
            match ctrl.recv_ready()? {
                Recv::Idle => {
                    std::thread::sleep(left);
                    return Ok(Recv::Idle);
                }
                got => return Ok(got),
            }
        }
        let wait = wait_until(deadlines, cap).min(left - TICK_MARGIN);
        return ctrl.recv(wait);
    }
    ctrl.recv(wait_until(deadlines, cap))
}

/// A fresh random nonce for the pre-shared-key challenge (`linerate_proto::auth`).
pub(crate) fn random_nonce() -> anyhow::Result<[u8; linerate_proto::auth::NONCE_LEN]> {
    let mut n = [0u8; linerate_proto::auth::NONCE_LEN];
    getrandom::getrandom(&mut n).map_err(|e| anyhow::anyhow!("no randomness for a nonce: {e}"))?;
    Ok(n)
}
