//! Command-line parsing: the only module that knows clap. Arguments become a typed
//! [`Plan`] here, once; nothing downstream sees a flag.
//!
//! iperf muscle memory works: `linerate -s ARGS` is read as `linerate server ARGS` (one set
//! of server flags, `argv.rs`), `linerate -c HOST` is `linerate client HOST`, and the short
//! flags are iperf3's. `linerate` with no arguments
//! runs the default methodology on loopback (a small matrix against an embedded server: the
//! "localhost" tier of a layered method); `linerate selftest` runs one test against it.

mod args;
mod argv;
mod convert;
mod fleet_args;
mod generate;
mod matrix_plan;
mod mesh_args;
mod repeat;
mod server_args;
mod test_args;
mod test_plan;
mod tos;
mod values;

use std::ffi::OsString;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};

pub use args::Cli;
pub use generate::{Rendered, generated};

use crate::plan::Plan;

/// Parses argv into a plan. Errors are clap errors (usage, help, version): call `.exit()`.
pub fn parse<I, T>(argv: I) -> Result<Plan, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let bare = argv.len() <= 1;
    let cmd = command();
    let shorthand = argv::server_shorthand(&cmd, &argv);
    let after_s = shorthand.is_some();
    let argv = shorthand.unwrap_or(argv);
    let matches =
        cmd.clone().try_get_matches_from(&argv).map_err(|e| argv::explain(&cmd, e, after_s))?;
    if let Some(msg) = argv::unmet_requirement(&cmd, &argv, &matches) {
        return Err(command().error(ErrorKind::ArgumentConflict, msg));
    }
    let cli = Cli::from_arg_matches(&matches)?;
    if bare {
        return Ok(convert::default_methodology());
    }
    convert::to_plan(cli).map_err(|msg| command().error(ErrorKind::ValueValidation, msg))
}

/// The clap command, for the parser and for generated docs (man page, completions).
pub fn command() -> clap::Command {
    repeat::for_curves(argv::negative_values(Cli::command()))
}
