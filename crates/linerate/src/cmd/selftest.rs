//! `linerate selftest` and the default job (`linerate` with no arguments): a test, or the
//! default methodology, against a server embedded in this process on loopback.

use std::process::ExitCode;

use anyhow::Result;

use super::embedded::with_embedded_server;
use crate::plan::matrix::{MatrixPlan, MatrixRun};
use crate::plan::{ClientPlan, OutputFormat};
use crate::report::notice::Notice;
use crate::session::Interrupt;

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
