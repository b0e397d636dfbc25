//! `linerate generate man|bash|zsh|fish`: writes the man page or a completion script that
//! `cli/` renders from its clap definitions, or (`generate man --dir DIR`) a man page per
//! command into DIR.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::Rendered;
use crate::plan::Generated;

pub fn run(what: Generated) -> Result<ExitCode> {
    match crate::cli::generated(&what)? {
        Rendered::Pages(dir, pages) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for (name, page) in pages {
                let path = dir.join(name);
                std::fs::write(&path, page)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
        Rendered::One(page) => {
            let mut out = std::io::stdout().lock();
            out.write_all(&page)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
