//! linerate: a network throughput benchmark.
//!
//! Data flow: `argv -> cli -> Plan -> session (proto conn <-> bytes; traffic threads) ->
//! RunRecord -> stats::summarize -> report::render`. The protocol itself lives in the sans-IO
//! `linerate-proto` crate. This crate is the binary's internals, not a stable library API.
//!
//! **Dead code.** The modules are public so that the integration tests can reach into them,
//! which hides dead code from the compiler: a public item is never "unused". Built with
//! `--cfg linerate_private` (`.ci/dead-code`), every module is private to the crate and only
//! what the binary calls is exported, so the compiler names every item nothing uses; CI
//! refuses any. Items only the integration tests call say so with
//! `#[cfg_attr(linerate_private, allow(dead_code))]`.

/// Declares the crate's modules: public, or crate-private under `--cfg linerate_private`.
macro_rules! modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(not(linerate_private))]
        pub mod $name;
        #[cfg(linerate_private)]
        pub(crate) mod $name;
    )*};
}

modules!(cli, cmd, measure, plan, record, report, session, stats, store, sys, traffic, units);

/// What the binary (`main.rs`) calls, when the modules are private.
#[cfg(linerate_private)]
pub mod entry {
    pub use crate::cli::parse;
    pub use crate::cmd::{GateFailed, execute};
    pub use crate::record::{Failure, FailureKind};
    pub use crate::units::peer_text::escape;
}
