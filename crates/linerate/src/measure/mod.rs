//! Measurement of the host and its sockets.
//!
//! Probes built on the system-call wrappers of `crate::sys` (`counters`: getrusage and cycle
//! counters; `procfs`: the kernel's text interfaces; `host`: the
//! environment snapshot of kernel, CPU, sysctls and interfaces). Each
//! answers capability queries and returns "unsupported" rather than inventing a figure.
//! `cost` turns their snapshots into what a test cost one end.

pub mod cost;
pub mod counters;
pub mod host;
pub mod liveness;
pub mod procfs;
