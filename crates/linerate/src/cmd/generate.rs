//! `linerate generate man|bash|zsh|fish`: the man page and shell completions, generated from
//! the same clap definitions as the parser.

use std::process::ExitCode;

use anyhow::Result;

use crate::plan::{Generated, Shell};

pub fn run(what: Generated) -> Result<ExitCode> {
    let mut cmd = crate::cli::command();
    let mut out = std::io::stdout().lock();
    match what {
        Generated::Man => clap_mangen::Man::new(cmd).render(&mut out)?,
        Generated::Completions(shell) => {
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(shell, &mut cmd, "linerate", &mut out);
        }
    }
    Ok(ExitCode::SUCCESS)
}
