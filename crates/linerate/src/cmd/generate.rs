//! `linerate generate man|bash|zsh|fish`: the man page and shell completions, generated from
//! the same clap definitions as the parser.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use crate::plan::{Generated, Shell};

pub fn run(what: Generated) -> Result<ExitCode> {
    let mut cmd = crate::cli::command();
    // Rendered whole, then written: clap_complete panics when its writer fails, and a closed
    // pipe (`generate bash | head -1`) is the reader's choice, which `main` ends quietly.
    let mut page = Vec::new();
    match what {
        Generated::Man => clap_mangen::Man::new(cmd).render(&mut page)?,
        Generated::Completions(shell) => {
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(shell, &mut cmd, "linerate", &mut page);
        }
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&page)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
