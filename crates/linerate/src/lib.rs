//! linerate: a network throughput benchmark.
//!
//! Data flow: `argv -> cli -> Plan -> session (proto conn <-> bytes; traffic threads) ->
//! RunRecord -> stats::summarize -> report::render`. The protocol itself lives in the sans-IO
//! `linerate-proto` crate. This crate is the binary's internals, not a stable library API.

pub mod cli;
pub mod cmd;
pub mod measure;
pub mod plan;
pub mod record;
pub mod report;
pub mod session;
pub mod stats;
pub mod store;
pub mod sys;
pub mod traffic;
pub mod units;
