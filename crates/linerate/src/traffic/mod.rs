//! The data plane: one OS thread per stream moving bytes as fast as allowed, or for many
//! streams a few workers each serving many sockets through epoll ([`pool`]).
//!
//! Each stream thread owns its socket and a reusable buffer, and publishes its progress in a
//! [`StreamCounters`] (plain atomic stores by the one writer, loads by the one sampler). There
//! are no locks and no shared counters on the hot path. Threads wait at a [`StartGate`] so
//! that every stream starts when the test starts, not when its thread happened to spawn.
//! UDP streams also publish loss and jitter figures in a [`UdpShared`], once per batch.
//!
//! Data sockets are made in [`socket`], the one place that sets a test's socket options (on
//! both ends) and reads back what the kernel granted.
//!
//! This module must not print, talk the control protocol or decide policy; it moves bytes and
//! counts them. Socket options and zero-copy syscalls come from `sys`, UDP batching and
//! offloads from `sys::udp`.

mod control;
mod error;
mod follow;
pub mod pool;
pub mod rr;
pub mod rr_crr;
pub mod rr_udp;
pub mod socket;
mod tcp;
mod udp;
pub mod unsent;

pub use control::{ByteBudget, StartGate, StreamCounters, TrafficControl};
pub use error::LoopError;
pub use tcp::{SendOptions, receive_loop, send_loop};
pub use udp::{
    UdpReceiveFinal, UdpReceiveOptions, UdpSendFinal, UdpSendOptions, UdpShared, UdpSnapshot,
    udp_receive_loop, udp_send_loop,
};

/// The byte pattern senders write: not all zeros, so compression or dedup on the path cannot
/// flatter the result.
pub const PATTERN: &[u8] = b"linerate-payload-0123456789abcdef";

/// `len` bytes of [`PATTERN`], repeated.
pub fn pattern(len: usize) -> Vec<u8> {
    PATTERN.iter().copied().cycle().take(len).collect()
}
