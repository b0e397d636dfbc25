//! The data plane: one OS thread per stream moving bytes as fast as allowed.
//!
//! Each stream thread owns its socket and a reusable buffer, and publishes its progress in a
//! [`StreamCounters`] (plain atomic stores by the one writer, loads by the one sampler). There
//! are no locks and no shared counters on the hot path. Threads wait at a [`StartGate`] so
//! that every stream starts when the test starts, not when its thread happened to spawn.
//!
//! This module must not print, talk the control protocol or decide policy; it moves bytes and
//! counts them. Socket options and zero-copy syscalls come from `measure::sys`.

mod control;
mod tcp;

pub use control::{ByteBudget, StartGate, StreamCounters, TrafficControl};
pub use tcp::{SendOptions, receive_loop, send_loop};
