//! Renderers: the only code that writes results for people or programs to read.
//!
//! Every figure comes from `stats` (compute first, render separately). Renderers take a
//! `Write` so they can be snapshot-tested.

pub mod campaign;
pub mod doctor;
pub mod environment;
pub mod history;
pub mod iperf3_json;
pub mod json;
pub mod matrix;
pub mod progress;
pub mod text;
