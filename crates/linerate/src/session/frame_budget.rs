//! The server's memory for large control frames, shared by every session.
//!
//! A results frame may be 16 MiB, and receiving and decoding it may take five times that
//! ([`linerate_proto::wire::frame_memory`]). Each test alone is bounded, but sixteen tests
//! sending hostile 16 MiB frames at once used to make the server hold 847 MB at the peak
//! (issue 35). So a frame larger than what every connection may buffer unasked
//! ([`linerate_proto::wire::GRANT_ABOVE`], the handshake cap) is only buffered and decoded
//! while its session holds a [`Reservation`] of its whole cost from one [`FrameBudget`]:
//!
//! - *all or nothing*: a frame reserves its whole cost at once, from its header, or waits;
//!   no frame holds part of the budget while waiting for the rest, so none can deadlock;
//! - *in order*: waiting frames are served first come, first served (a [`Ticket`]), so a
//!   stream of small frames cannot starve a large one;
//! - *bounded waiting*: a session whose frame waits stops reading its control connection (TCP
//!   flow control holds the peer), and gives up after [`MAX_WAIT`] with a sentence saying
//!   why; a frame that got its memory must arrive at a floor rate ([`fill_limit`]), so a
//!   peer trickling a declared 16 MiB cannot hold the budget for long.
//!
//! The sans-IO machines say which frame needs memory (`Machine::large_frame`); [`FrameGate`]
//! is the driver's side, used once per turn by every server session.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use linerate_proto::Machine;
use linerate_proto::wire::{GRANT_ABOVE, MAX_FRAME_RESULTS, frame_memory};

use crate::session::ControlChannel;

/// The whole server's memory for large frames: one largest results frame (80 MiB) with room
/// for a few smaller ones beside it.
pub(crate) const SERVER_FRAME_MEMORY: u64 = 96 << 20;

/// A server session's control connection: of what the peer sends while the server's own send
/// waits, only what every connection may buffer unasked is kept (the rest waits in the
/// peer's TCP window), so a frame cannot reach memory past the budget that way either.
pub(crate) fn server_side(ctrl: ControlChannel) -> ControlChannel {
    ctrl.keep_early_at_most(GRANT_ABOVE as usize)
}

/// How long a frame may wait for memory before its test is refused.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(10);

/// How long a granted frame of `len` bytes may take to arrive: 10 s, plus 1 s per MiB
/// (8 Mbit/s; a 16 MiB frame 26 s).
pub(crate) fn fill_limit(len: u32) -> Duration {
    Duration::from_secs(10) + Duration::from_secs_f64(f64::from(len) / f64::from(1u32 << 20))
}

/// A budget of bytes that sessions reserve from, first come, first served.
#[derive(Debug)]
pub(crate) struct FrameBudget {
    total: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    used: u64,
    next_ticket: u64,
    /// Tickets of the frames waiting, oldest first.
    waiting: BTreeSet<u64>,
}

/// A waiting frame's place in line; leaves the line when dropped.
#[derive(Debug)]
pub(crate) struct Ticket {
    budget: Arc<FrameBudget>,
    number: u64,
}

/// Bytes held from the budget; given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<FrameBudget>,
    bytes: u64,
}

impl FrameBudget {
    pub(crate) fn new(total: u64) -> Self {
        Self { total, state: Mutex::new(State::default()) }
    }

    /// The budget, in bytes.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place at the end of the line.
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        let mut s = self.state();
        let number = s.next_ticket;
        s.next_ticket += 1;
        s.waiting.insert(number);
        Ticket { budget: self.clone(), number }
    }

    /// Reserves `bytes` (at most the whole budget) for `ticket`'s frame if it is first in
    /// line and they are free; the ticket then leaves the line.
    pub(crate) fn try_reserve(
        self: &Arc<Self>,
        ticket: Ticket,
        bytes: u64,
    ) -> std::result::Result<Reservation, Ticket> {
        let bytes = bytes.min(self.total);
        let mut s = self.state();
        let first = s.waiting.first() == Some(&ticket.number);
        if !first || s.used + bytes > self.total {
            return Err(ticket);
        }
        s.used += bytes;
        drop(s);
        drop(ticket);
        Ok(Reservation { budget: self.clone(), bytes })
    }

    /// Bytes reserved now.
    #[cfg(test)]
    fn used(&self) -> u64 {
        self.state().used
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.budget.state().waiting.remove(&self.number);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut s = self.budget.state();
        s.used = s.used.saturating_sub(self.bytes);
    }
}

/// One session's side of the budget: its frame's place in line or its memory.
#[derive(Debug)]
pub(crate) struct FrameGate {
    budget: Arc<FrameBudget>,
    /// The frame waiting for memory, and since when.
    waiting: Option<(Ticket, Instant)>,
    /// The memory of the frame being received, and when it was granted.
    held: Option<(Reservation, Instant)>,
}

/// What the session may do with its control connection this turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Read it.
    Open,
    /// Read it: the machine's large frame was just given its memory (and may already be
    /// decoded, its events waiting).
    Granted,
    /// Leave it unread: a large frame waits for memory.
    Wait,
}

impl FrameGate {
    pub(crate) fn new(budget: Arc<FrameBudget>) -> Self {
        Self { budget, waiting: None, held: None }
    }

    /// Before a turn reads input: gives the machine's large frame its memory when it can, and
    /// gives memory back once the frame is decoded. Fails when the frame waited too long for
    /// memory or, granted, arrives too slowly.
    pub(crate) fn check(&mut self, m: &mut impl Machine, now: Duration) -> Result<Gate> {
        let Some(frame) = m.large_frame() else {
            (self.waiting, self.held) = (None, None);
            return Ok(Gate::Open);
        };
        if frame.granted {
            if let Some((_, since)) = &self.held
                && since.elapsed() > fill_limit(frame.len)
            {
                bail!(
                    "the client's {} frame did not arrive within {:.0} s of its header; a frame \
                     that large holds memory other clients' results need",
                    size(frame.len),
                    fill_limit(frame.len).as_secs_f64()
                );
            }
            return Ok(Gate::Open);
        }
        // A new frame: whatever an earlier one held is free again (it was decoded).
        self.held = None;
        let (ticket, since) = match self.waiting.take() {
            Some(w) => w,
            None => (self.budget.ticket(), Instant::now()),
        };
        match self.budget.try_reserve(ticket, frame_memory(frame.len)) {
            Ok(r) => {
                self.held = Some((r, Instant::now()));
                m.grant_frame(now)?;
                Ok(Gate::Granted)
            }
            Err(_) if since.elapsed() >= MAX_WAIT => bail!(
                "the server's frame memory ({}, for clients' large results frames) stayed busy \
                 with other clients' results for {} s, so this test's {} results frame was \
                 refused; run the test again, or with fewer streams or a longer -i for smaller \
                 results (largest frame: {})",
                size_u64(self.budget.total()),
                MAX_WAIT.as_secs(),
                size(frame.len),
                size(MAX_FRAME_RESULTS)
            ),
            Err(ticket) => {
                self.waiting = Some((ticket, since));
                Ok(Gate::Wait)
            }
        }
    }
}

fn size(bytes: u32) -> String {
    size_u64(u64::from(bytes))
}

fn size_u64(bytes: u64) -> String {
    crate::units::ByteCount(bytes).iec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_all_or_nothing_within_the_total_and_given_back() {
        let b = Arc::new(FrameBudget::new(100));
        let r1 = b.try_reserve(b.ticket(), 60).expect("fits");
        let t = b.ticket();
        let t = b.try_reserve(t, 50).expect_err("60 + 50 is over 100: nothing taken");
        assert_eq!(b.used(), 60);
        drop(r1);
        let r2 = b.try_reserve(t, 50).expect("free again");
        assert_eq!(b.used(), 50);
        drop(r2);
        assert_eq!(b.used(), 0);
        let huge =
            b.try_reserve(b.ticket(), 1000).expect("capped at the total: never waits forever");
        assert_eq!(b.used(), 100);
        drop(huge);
    }

    #[test]
    fn waiting_frames_are_served_in_order_and_a_dropped_ticket_leaves_the_line() {
        let b = Arc::new(FrameBudget::new(100));
        let held = b.try_reserve(b.ticket(), 90).expect("fits");
        let big = b.ticket();
        let big = b.try_reserve(big, 80).expect_err("busy");
        let small = b.ticket();
        let small = b.try_reserve(small, 5).expect_err("fits, but the large frame is first");
        drop(held);
        let r = b.try_reserve(big, 80).expect("first in line");
        let small = b.try_reserve(small, 5).expect("now first, and fits");
        drop((r, small));
        let gone = b.ticket();
        let next = b.ticket();
        drop(gone);
        assert!(b.try_reserve(next, 1).is_ok(), "a dropped ticket does not block the line");
    }

    #[test]
    fn a_granted_frame_has_a_floor_rate() {
        assert_eq!(fill_limit(0), Duration::from_secs(10));
        assert_eq!(fill_limit(MAX_FRAME_RESULTS), Duration::from_secs(26));
    }
}
