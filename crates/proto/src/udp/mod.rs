//! The UDP test core: datagram header, receiver accounting, jitter, pacing. Sans-IO.
//!
//! The data path (in the application's `traffic::udp`) owns the sockets and the clock; for
//! every datagram it calls into this module with bytes and a `Duration` since an arbitrary
//! epoch of its monotonic clock:
//!
//! * sender: [`Pacer`] says when and how many datagrams may go; [`DatagramHeader::encode`]
//!   stamps each one; [`BurstStats`] measures how smooth the sending really was.
//! * receiver: [`DatagramHeader::decode`] (plus an [`Unwrapper`] for iperf3's 32-bit
//!   sequence numbers) then [`SequenceTracker::on_seq`]; datagrams it calls
//!   [`Arrival::InOrder`] also go to [`JitterMeter::on_in_order`]. At the end,
//!   [`SequenceTracker::settle`] reconciles with the sender's count.
//!
//! Everything here is what iperf3 gets wrong in UDP (see docs/METHODOLOGY.md, UDP): reordering
//! counted as loss, duplicates hiding loss, loss above 100 %, a jitter figure that hides
//! spikes, and catch-up bursts after late wake-ups. The module docs of each part say how.
//!
//! Nothing here may open sockets, read clocks, sleep, spawn threads or allocate per
//! datagram (every structure has fixed memory, except the burst window's queue, bounded by
//! the calls made within one window).

mod burst;
mod header;
mod jitter;
mod pacer;
mod results;
mod tracker;
mod window;

#[cfg(test)]
mod tests;

pub use crate::histogram::DurationHistogram;
pub use burst::{BurstReport, BurstStats};
pub use header::{
    BufferTooShort, DatagramFormat, DatagramHeader, Decoded, SECRET_LEN, SeqWidth, Unwrapper,
    header_len, secret_of,
};
pub use jitter::{JitterMeter, JitterSummary};
pub use pacer::{BURST_WINDOW, Pacer};
pub use results::{UdpCounts, UdpIntervalSample, UdpReceiverResult, UdpSenderResult};
pub use tracker::{
    Arrival, DEFAULT_WINDOW_BITS, Inconsistency, MAX_JUMP, MAX_WINDOW_BITS, REORDER_BUCKETS,
    SequenceTracker, Settled, TrackerCounts, TrackerDelta,
};
