//! `linerate generate man|bash|zsh|fish`: writes the man page or a completion script that
//! `cli/` renders from its clap definitions.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use crate::plan::Generated;

pub fn run(what: Generated) -> Result<ExitCode> {
    let page = crate::cli::generated(what)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&page)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
