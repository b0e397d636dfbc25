//! The one control pump: moves bytes between a control connection and any sans-IO machine
//! (`linerate_proto::Machine`: the native client, server and doctor, iperf3's client and
//! server), with time from the driver's [`Clock`].
//!
//! One [`turn`] flushes the machine's output, stops if it finished, waits for input no longer
//! than the earliest of the machine's deadline, the caller's own instants and the next sample
//! tick (without overshooting the tick), feeds what arrived, and checks the deadline. What the
//! machine then asks for ([`Machine::poll_event`]) is the caller's business: the drivers differ
//! in what they do with events, not in how they pump.
//!
//! Must not: interpret events, print, or own sockets other than the control connection.

use std::time::{Duration, Instant};

use anyhow::Result;
use linerate_proto::Machine;

use crate::session::{Clock, ControlChannel, Recv, wait_for_input};

/// How long one turn may wait for input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wait<'a> {
    /// The next interval sample of running streams: reached, never overshot.
    pub(crate) tick: Option<Instant>,
    /// Other instants the caller must act at (end of the test, a delayed message).
    pub(crate) deadlines: &'a [Option<Instant>],
    /// The longest wait, so the caller polls its own state (signals, streams) this often.
    pub(crate) cap: Duration,
}

impl Wait<'_> {
    /// Waits of at most `cap`, with no tick and no instants of the caller's.
    pub(crate) fn at_most(cap: Duration) -> Wait<'static> {
        Wait { tick: None, deadlines: &[], cap }
    }
}

/// What a turn ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The machine goes on: act on its events, then turn again.
    Going,
    /// The machine finished (its output was flushed).
    Finished,
    /// The peer closed the connection and the machine took it as a normal end.
    Closed,
}

/// A check of the first bytes the peer sends (e.g. "this is an iperf3 server"), made once.
#[derive(Debug)]
pub(crate) struct FirstBytes {
    checked: bool,
    check: fn(&[u8]) -> Result<()>,
}

impl FirstBytes {
    /// Checks the peer's first bytes with `check`.
    pub(crate) fn new(check: fn(&[u8]) -> Result<()>) -> Self {
        Self { checked: false, check }
    }

    fn inspect(&mut self, bytes: &[u8]) -> Result<()> {
        if std::mem::replace(&mut self.checked, true) { Ok(()) } else { (self.check)(bytes) }
    }
}

/// One turn of the pump (see the module docs).
pub(crate) fn turn<M: Machine>(
    ctrl: &mut ControlChannel,
    clock: &Clock,
    m: &mut M,
    wait: Wait<'_>,
    first: Option<&mut FirstBytes>,
) -> Result<Turn> {
    let Some(deadlines) = flush_and_deadlines(ctrl, clock, m, wait)? else {
        return Ok(Turn::Finished);
    };
    let closed = match wait_for_input(ctrl, wait.tick, &deadlines, wait.cap)? {
        Recv::Data(bytes) => {
            if let Some(f) = first {
                f.inspect(bytes)?;
            }
            m.handle_input(bytes, clock.now())?;
            false
        }
        Recv::Eof => {
            m.handle_eof()?;
            true
        }
        Recv::Idle => false,
    };
    m.handle_timeout(clock.now())?;
    Ok(if closed { Turn::Closed } else { Turn::Going })
}

/// A turn that leaves the control connection unread, because the machine's large frame waits
/// for memory (`session/frame_budget.rs`; TCP's flow control holds the peer meanwhile):
/// flushes the machine's output, sleeps until the earliest of its deadline, the caller's
/// instants, the tick and the cap, and checks the deadline.
pub(crate) fn pause<M: Machine>(
    ctrl: &mut ControlChannel,
    clock: &Clock,
    m: &mut M,
    wait: Wait<'_>,
) -> Result<Turn> {
    let Some(deadlines) = flush_and_deadlines(ctrl, clock, m, wait)? else {
        return Ok(Turn::Finished);
    };
    let mut nap = crate::session::wait_until(&deadlines, wait.cap);
    if let Some(tick) = wait.tick {
        nap = nap.min(tick.saturating_duration_since(Instant::now()));
    }
    std::thread::sleep(nap);
    m.handle_timeout(clock.now())?;
    Ok(Turn::Going)
}

/// A turn's start: flushes the machine's output; None once it finished, else the instants
/// the turn may wait until (the caller's and the machine's deadline).
fn flush_and_deadlines<M: Machine>(
    ctrl: &mut ControlChannel,
    clock: &Clock,
    m: &mut M,
    wait: Wait<'_>,
) -> Result<Option<Vec<Option<Instant>>>> {
    if let Some(bytes) = m.poll_transmit() {
        ctrl.send(&bytes)?;
    }
    if m.is_finished() {
        return Ok(None);
    }
    let mut deadlines = Vec::with_capacity(wait.deadlines.len() + 1);
    deadlines.extend_from_slice(wait.deadlines);
    deadlines.push(m.poll_timeout().map(|t| clock.instant(t)));
    Ok(Some(deadlines))
}

/// Turns until the machine has an event; None if it finished or the peer closed first.
pub(crate) fn next_event<M: Machine>(
    ctrl: &mut ControlChannel,
    clock: &Clock,
    m: &mut M,
    cap: Duration,
    mut first: Option<&mut FirstBytes>,
) -> Result<Option<M::Event>> {
    loop {
        if let Some(ev) = m.poll_event() {
            return Ok(Some(ev));
        }
        match turn(ctrl, clock, m, Wait::at_most(cap), first.as_deref_mut())? {
            Turn::Going => {}
            Turn::Finished | Turn::Closed => return Ok(m.poll_event()),
        }
    }
}

/// Sends whatever the machine still has to say (a farewell after an error), best effort: the
/// connection may already be gone.
pub(crate) fn flush<M: Machine>(ctrl: &mut ControlChannel, m: &mut M) {
    if let Some(bytes) = m.poll_transmit() {
        let _ = ctrl.send(&bytes);
    }
}
