//! Command-line parsing: the only module that knows clap. Arguments become a typed
//! [`Plan`] here, once; nothing downstream sees a flag.
//!
//! iperf muscle memory works: `linerate -s` is `linerate server`, `linerate -c HOST` is
//! `linerate client HOST`, and the short flags are iperf3's. `linerate` with no arguments
//! runs the default methodology on loopback (a small matrix against an embedded server: the
//! "localhost" tier of a layered method); `linerate selftest` runs one test against it.

mod args;
mod convert;
mod fleet_args;
mod host;
mod server_args;
mod tos;

use std::ffi::OsString;

use clap::{CommandFactory, Parser};

pub use args::Cli;

use crate::plan::Plan;

/// Parses argv into a plan. Errors are clap errors (usage, help, version): call `.exit()`.
pub fn parse<I, T>(argv: I) -> Result<Plan, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<T> = argv.into_iter().collect();
    let bare = argv.len() <= 1;
    let cli = Cli::try_parse_from(argv)?;
    if bare {
        return Ok(convert::default_methodology());
    }
    convert::to_plan(cli)
        .map_err(|msg| Cli::command().error(clap::error::ErrorKind::ValueValidation, msg))
}

/// The clap command, for generated docs (man page, completions).
pub fn command() -> clap::Command {
    Cli::command()
}
