//! The one surface every control machine offers its driver: [`Machine`].
//!
//! Five machines speak on a control connection — the native client ([`crate::client`]),
//! server ([`crate::server`]) and doctor ([`crate::doctor`]), and iperf3's client and server
//! ([`crate::iperf3`]). They differ in how they parse bytes and what a close means; everything
//! else — the outbox, the one deadline, failure, the event queue — is the same, and lives once
//! here in [`Io`] behind the trait's provided methods. A driver needs only this trait: the
//! linerate binary has one pump (`session::pump`) that drives all five.
//!
//! Rules every machine keeps, enforced here: a failed machine stays failed (further input is a
//! violation, a close is not an error any more) and has no deadline (a timeout check passes); any error from
//! [`Machine::handle_input`], [`Machine::handle_eof`] or [`Machine::handle_timeout`] leaves it
//! failed; output queued before a failure (a farewell) is still handed out.

use std::collections::VecDeque;
use std::time::Duration;

use crate::conn::Deadline;
use crate::error::ProtoError;

/// A machine's plumbing: bytes to send, the current deadline, whether it failed, and the
/// events its driver has not taken yet. Opaque to drivers.
#[derive(Debug)]
pub struct Io<E> {
    pub(crate) out: Vec<u8>,
    pub(crate) deadline: Option<Deadline>,
    pub(crate) failed: bool,
    pub(crate) events: VecDeque<E>,
}

impl<E> Io<E> {
    /// Plumbing with `out` already queued and the first deadline set.
    pub(crate) fn new(out: Vec<u8>, deadline: Option<Deadline>) -> Self {
        Self { out, deadline, failed: false, events: VecDeque::new() }
    }

    /// Marks the connection failed: no deadline, no more input.
    pub(crate) fn fail(&mut self) {
        self.failed = true;
        self.deadline = None;
    }

    /// An error for input to a machine that already failed.
    pub(crate) fn ensure_alive(&self) -> Result<(), ProtoError> {
        if self.failed {
            return Err(ProtoError::Violation("connection already failed".into()));
        }
        Ok(())
    }

    /// Queues an event for the driver.
    pub(crate) fn emit(&mut self, event: E) {
        self.events.push_back(event);
    }
}

/// A frame over the size a machine buffers unasked, whose length header has arrived
/// ([`Machine::large_frame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LargeFrame {
    /// The frame's declared length in bytes (within the cap in force).
    pub len: u32,
    /// [`Machine::grant_frame`] was called for it: its body is being buffered.
    pub granted: bool,
}

/// A sans-IO control machine: bytes and time in, bytes, events and deadlines out.
///
/// A driver loops: write [`Machine::poll_transmit`]; stop once [`Machine::is_finished`];
/// wait for input until [`Machine::poll_timeout`]; feed it to [`Machine::handle_input`] (or
/// [`Machine::handle_eof`]); call [`Machine::handle_timeout`]; act on every
/// [`Machine::poll_event`].
pub trait Machine {
    /// What the driver must act on.
    type Event;

    /// The machine's plumbing.
    fn io(&self) -> &Io<Self::Event>;
    /// The machine's plumbing, to change.
    fn io_mut(&mut self) -> &mut Io<Self::Event>;
    /// Takes in bytes from the control connection and runs every message they complete.
    fn absorb(&mut self, bytes: &[u8], now: Duration) -> Result<(), ProtoError>;
    /// What the peer's close means in the current state: `Ok` where a close is the normal
    /// end, an error (usually [`ProtoError::Closed`]) otherwise. Only called while alive.
    fn on_close(&mut self) -> Result<(), ProtoError>;
    /// True once the session ended cleanly.
    fn is_finished(&self) -> bool;

    /// Leaves the machine failed. Machines with their own failed state extend it.
    fn fail(&mut self) {
        self.io_mut().fail();
    }

    /// Feeds bytes read from the control connection.
    fn handle_input(&mut self, bytes: &[u8], now: Duration) -> Result<(), ProtoError> {
        self.io().ensure_alive()?;
        let r = self.absorb(bytes, now);
        if r.is_err() {
            self.fail();
        }
        r
    }

    /// The peer closed the control connection.
    fn handle_eof(&mut self) -> Result<(), ProtoError> {
        if self.io().failed {
            return Ok(());
        }
        let r = self.on_close();
        if r.is_err() {
            self.fail();
        }
        r
    }

    /// Checks the deadline; call at or after [`Machine::poll_timeout`]. A failed machine has
    /// no deadline, so this is `Ok` then: a machine that refused a request (and queued its
    /// refusal) must not turn the refusal into a second error on the driver's next turn.
    fn handle_timeout(&mut self, now: Duration) -> Result<(), ProtoError> {
        let r = self.io().deadline.as_ref().map_or(Ok(()), |d| d.check(now));
        if r.is_err() {
            self.fail();
        }
        r
    }

    /// The next deadline, if any.
    fn poll_timeout(&self) -> Option<Duration> {
        self.io().deadline.as_ref().map(|d| d.at)
    }

    /// Bytes to write to the control connection.
    fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        let out = &mut self.io_mut().out;
        (!out.is_empty()).then(|| std::mem::take(out))
    }

    /// The next event for the driver.
    fn poll_event(&mut self) -> Option<Self::Event> {
        self.io_mut().events.pop_front()
    }

    /// The frame at the front of the input when it is larger than this machine buffers
    /// unasked (the server machines: [`crate::wire::GRANT_ABOVE`]). Until the driver calls
    /// [`Machine::grant_frame`], the machine neither reserves room for its body nor decodes
    /// it, and the driver should stop reading: a server gives large frames memory from one
    /// shared budget ([`crate::wire::frame_memory`]), so that many peers sending large
    /// frames at once cannot take more than it. Machines that buffer every frame return
    /// None.
    fn large_frame(&self) -> Option<LargeFrame> {
        None
    }

    /// Lets the frame [`Machine::large_frame`] names be buffered and decoded (the driver
    /// reserved its memory), and runs it at once if all of it is already buffered (its events
    /// are then queued; an error leaves the machine failed, as from
    /// [`Machine::handle_input`]). Its grant ends when it is decoded.
    fn grant_frame(&mut self, _now: Duration) -> Result<(), ProtoError> {
        Ok(())
    }
}
