//! linerate: a network throughput benchmark.
//!
//! Data flow: `argv -> cli -> Plan -> session (proto conn <-> bytes; traffic threads) ->
//! RunRecord -> stats::summarize -> report::render`. The protocol itself lives in the sans-IO
//! `linerate-proto` crate. This crate is the binary's internals, not a stable library API.

pub mod app;
pub mod campaign;
pub mod cli;
pub mod history;
pub mod matrix;
pub mod measure;
pub mod plan;
pub mod record;
pub mod report;
pub mod reporting;
pub mod resume;
pub mod session;
pub mod stats;
pub mod store;
pub mod traffic;
pub mod units;
