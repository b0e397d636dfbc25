//! `linerate generate man|bash|zsh|fish`: writes the man page or a completion script that
//! `cli/` renders from its clap definitions, or (`generate man --dir DIR`) a man page per
//! command into DIR. `generate kubernetes` writes the manifests `report/kubernetes.rs`
//! renders: one stream, or (`--dir DIR`) a file per object and a kustomization.yaml.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::Rendered;
use crate::plan::Generated;
use crate::plan::kubernetes::KubernetesPlan;

pub fn run(what: Generated) -> Result<ExitCode> {
    match crate::cli::generated(&what)? {
        Rendered::Pages(dir, pages) => write_files(&dir, pages)?,
        Rendered::One(page) => print(&page)?,
    }
    Ok(ExitCode::SUCCESS)
}

pub fn kubernetes(plan: &KubernetesPlan) -> Result<ExitCode> {
    match &plan.dir {
        Some(dir) => write_files(dir, crate::report::kubernetes::files(&plan.options))?,
        None => print(crate::report::kubernetes::stream(&plan.options).as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

fn print(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()?;
    Ok(())
}

/// Each file into `dir`, made if missing.
fn write_files(dir: &Path, files: Vec<(String, impl AsRef<[u8]>)>) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
