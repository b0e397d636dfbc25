//! Measurement of the host and its sockets.
//!
//! This is the only part of the program with operating-system-specific code (`sys`: socket
//! options and zero-copy; `udp_sys`: batched UDP calls, offloads and drop counters;
//! `counters`: getrusage and cycle counters; `procfs`: the kernel's text interfaces; `host`: the
//! environment snapshot of kernel, CPU, sysctls and interfaces). Each
//! answers capability queries and returns "unsupported" rather than inventing a figure.
//! `cost` turns their snapshots into what a test cost one end.

pub mod cost;
pub mod counters;
pub mod host;
pub mod liveness;
pub mod procfs;
pub mod sys;
pub mod udp_sys;
