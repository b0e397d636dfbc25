//! A server embedded in this process on loopback, for the commands that test against one:
//! `selftest` and the default job, and the loopback placement's calibration
//! (`cmd/placement.rs`). It imports nothing else of `cmd/`.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::plan::{ClientPlan, Family, OutputFormat, ServerPlan};
use crate::report::text;
use crate::session::Interrupt;
use crate::session::server::Server;
use crate::session::server_note::{Notes, ServerNote};

/// Runs `f` with `plan` pointed at a server started on loopback for the purpose.
pub fn with_embedded_server(
    mut plan: ClientPlan,
    f: impl FnOnce(&ClientPlan) -> Result<ExitCode>,
) -> Result<ExitCode> {
    let server_plan = ServerPlan {
        agent: false,
        pair_allow: Vec::new(),
        text: crate::plan::text::TextOptions::default(),
        port: 0,
        bind: Some(std::net::IpAddr::from([127, 0, 0, 1])),
        family: Family::V4,
        one_off: false,
        output: OutputFormat::Text,
        log_results: crate::plan::server::LogResults::Brief,
        // The user's own loopback server: only the protocol's limits apply.
        limits: linerate_proto::Limits::unlimited(),
        access: crate::plan::server::Access::default(),
        metrics: None,
        probe: crate::plan::server::ProbePlan::default(),
        place: crate::plan::server::Place::default(),
    };
    let server = Server::bind(&server_plan).context("cannot start the embedded server")?;
    plan.port = server.local_addr()?.port();
    let stop_server = Interrupt::manual();
    let server_thread = {
        let stop = stop_server.clone();
        std::thread::spawn(move || {
            server.run(
                &stop,
                Notes { sink: Arc::new(|_: &ServerNote| {}), text: text::server_notes_text },
            )
        })
    };
    let result = f(&plan);
    stop_server.trigger();
    let _ = server_thread.join();
    result
}
