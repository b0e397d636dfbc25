//! `linerate selftest` and the default job (`linerate` with no arguments): a test, or the
//! default methodology, against a server embedded in this process on loopback.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::plan::matrix::{MatrixPlan, MatrixRun};
use crate::plan::{ClientPlan, Family, OutputFormat, ServerPlan};
use crate::report::notice::Notice;
use crate::report::text;
use crate::session::Interrupt;
use crate::session::server::{Notes, Server, ServerNote};

/// The default job: a layered method's first tier (localhost) against an embedded server.
pub fn run_default(base: ClientPlan, m: &MatrixPlan) -> Result<ExitCode> {
    with_embedded_server(base, |plan| {
        super::console(true).show(&Notice::DefaultJob { port: plan.port });
        super::matrix::run(plan, m, &MatrixRun::default(), &Interrupt::install()?)
    })
}

pub fn run(plan: ClientPlan) -> Result<ExitCode> {
    with_embedded_server(plan, |plan| {
        let console = super::console(plan.output == OutputFormat::Text);
        console.show(&Notice::Selftest { port: plan.port, spec: &plan.spec });
        super::client::run(plan, &Interrupt::install()?)
    })
}

/// Runs `f` with `plan` pointed at a server started on loopback for the purpose.
pub(super) fn with_embedded_server(
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
