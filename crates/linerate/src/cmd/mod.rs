//! The command layer: one file per subcommand. Each takes its typed plan (from `cli/`) and
//! wires the runners of `session/` and `plan/` to the record, the history (`store/`) and the
//! renderers (`report/`), and decides the exit status: a command that did not succeed returns
//! a typed error (a [`crate::record::Failure`] with its kind, or a [`GateFailed`]) after
//! printing and storing what it has, and `main` maps that error to the code.
//!
//! This is the only layer that may import every other one; nothing imports it but `main.rs`.
//! Commands compute nothing themselves (`stats/` does) and format nothing themselves
//! (`report/` does); they decide what runs, what is stored and what is shown, in which order.

mod campaign;
mod client;
mod compare;
mod doctor;
mod embedded;
mod every;
mod failed;
mod fleet;
mod gate;
mod generate;
mod history;
mod keep;
mod matrix;
mod mesh;
mod output;
mod placement;
mod report;
mod selftest;
mod server;
mod show;
mod source;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;

use crate::plan::{HistoryCommand, Plan};
use crate::report::notice::Console;
use crate::session::Interrupt;

/// Where a command's notices go: notes with text results (`text`), progress when standard
/// error is a terminal (read for its width as each line is drawn).
fn console(text: bool) -> Console {
    let terminal = std::io::stderr().is_terminal().then_some(crate::sys::stderr_columns as _);
    Console::new(text, terminal)
}
pub use gate::GateFailed;

/// Runs the plan to completion.
pub fn execute(plan: Plan) -> Result<ExitCode> {
    match plan {
        Plan::Client(p) => client::run(&p, &Interrupt::install()?),
        Plan::Server(p) => server::run(&p),
        Plan::Selftest(p) => selftest::run(p),
        Plan::Matrix(base, m, how) => matrix::run(&base, &m, &how, &Interrupt::install()?),
        Plan::History(h) => match &h.command {
            HistoryCommand::List { .. } => history::run(&h),
            HistoryCommand::Show(id) => show::run(&h, *id),
            HistoryCommand::Compare(a, b, html) => compare::run(&h, (*a, *b), html.as_deref()),
        },
        Plan::SelftestMatrix(base, m) => selftest::run_default(base, &m),
        Plan::Campaign(c) => campaign::run(&c, &Interrupt::install()?),
        Plan::Fleet(f) => fleet::run(&f, &Interrupt::install()?),
        Plan::Mesh(m) => mesh::run(&m, &Interrupt::install()?),
        Plan::Doctor(d) => doctor::run(&d),
        Plan::Report(r) => report::run(&r),
        Plan::Generate(g) => generate::run(g),
        Plan::Kubernetes(k) => generate::kubernetes(&k),
    }
}
