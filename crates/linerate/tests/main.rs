//! One integration-test binary (faster to link than one per file).
//!
//! Everything here runs the real `linerate` binary against real kernel TCP on loopback
//! (127.0.0.1 / ::1) only, except the renderers' snapshots (`render.rs`), which read frozen
//! records. Every server is started on an ephemeral port and killed on drop; every client run
//! is bounded by a timeout.

mod abuse;
mod access;
mod attacks;
mod campaign;
mod chart_layout;
mod circles;
mod cli;
mod cli_parse;
mod client_text;
mod crowd;
mod docs;
mod doctor;
mod environment;
mod exit;
mod faults;
mod fidelity;
mod fidelity_client;
mod fleet;
mod fleet_history;
mod hostile_agent;
mod hostile_server;
mod interop;
mod interop_options;
mod interop_output;
mod interop_server;
mod kubernetes;
mod latency;
mod layers;
mod limits;
mod loopback;
mod matrix;
mod memory;
mod mesh;
mod metrics;
mod netns;
mod peer_strings;
mod place;
mod prometheus;
mod render;
mod report;
mod report_html;
mod report_latency;
mod report_matrix_latency;
mod rr_server;
mod server_log;
mod store;
mod trend;
mod udp;
mod udp_spoof;
mod util;
mod window;
