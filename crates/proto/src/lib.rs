//! The sans-IO core of linerate's native control protocol.
//!
//! This crate turns bytes into protocol events and protocol decisions into bytes. It owns the
//! test specification ([`spec::TestSpec`]), the wire format ([`wire`]), the results both ends
//! exchange ([`results`]), the error taxonomy ([`error`]), the client and server state
//! machines ([`client::ClientConn`], [`server::ServerConn`]) and the UDP test core ([`udp`]:
//! datagram header, loss/reorder/duplicate accounting, jitter, pacing).
//!
//! It must not open sockets, read clocks, spawn threads, draw random numbers or log: time and
//! randomness are passed in by the caller (the driver in `linerate::session`). That keeps every
//! protocol decision testable in memory with simulated time (see the `tests` module) and
//! fuzzable without a network (see [`fuzzing`]).
//!
//! Method naming follows quinn: `handle_*` feeds an input in, `poll_*` takes an output out.
//! A driver loops: read bytes -> `handle_input`; `poll_transmit` -> write bytes; `poll_event`
//! -> act; at `poll_timeout` -> `handle_timeout`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod auth;
pub mod bounded;
pub mod client;
mod conn;
pub mod doctor;
pub mod environment;
pub mod error;
pub mod fuzz_seeds;
pub mod fuzzing;
pub mod histogram;
pub mod iperf3;
pub mod latency;
pub mod limits;
pub mod machine;
pub mod pair;
pub mod results;
pub mod samples;
pub mod server;
pub mod spec;
pub mod udp;
pub mod wire;

#[cfg(test)]
mod doctor_tests;
#[cfg(test)]
mod tests;

pub use conn::{
    HANDSHAKE_TIMEOUT, HELD_TIMEOUT, QUEUE_LIMIT, RESULTS_TIMEOUT, RUN_GRACE, STREAMS_TIMEOUT,
};
pub use environment::{CpuEnvironment, Environment, Fact, InterfaceEnvironment};
pub use error::{Blame, ProtoError};
pub use limits::{LimitKind, Limits, Refusal, StreamLayout};
pub use machine::{LargeFrame, Machine};
pub use results::{
    BufferCap, CostSample, CpuTimes, CycleSource, DataPlane, HostCost, IntervalSample, MemoryUse,
    NotsentLowat, ProcessCpu, SideResults, SocketReport, StreamResult, StreamRole, SystemCpu,
    TcpInternals, WorkerReport,
};
pub use spec::{Direction, EndCondition, Flow, Protocol, SpecError, TestSpec};
