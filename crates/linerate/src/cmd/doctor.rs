//! `linerate doctor [HOST]`: gathers the facts (`session::doctor`), judges them
//! (`stats::doctor`), prints them (`report::doctor`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};

use crate::report;
use crate::session;

/// `linerate doctor`: gathers the facts (session), judges them (stats), prints (report).
/// Exits 3 when a HOST was given but could not be examined, after printing what is known.
pub fn run(plan: &crate::plan::DoctorPlan) -> Result<ExitCode> {
    use crate::stats::doctor::{DoctorReport, diagnose, link_rate};
    let (local, remote) = match &plan.host {
        Some(host) => {
            let (local, facts) = session::doctor::examine(plan, host);
            (local, Some(facts))
        }
        None => (session::doctor::local_environment(plan.bind), None),
    };
    let link = link_rate(plan.link_bits_per_second, &local);
    let failed = remote.as_ref().and_then(|r| match &r.environment {
        linerate_proto::Fact::NA(why) => Some(format!("{}: {why}", r.server)),
        linerate_proto::Fact::Value(_) => None,
    });
    let report = diagnose(DoctorReport {
        local,
        remote,
        link_bits_per_second: link.as_ref().map(|l| l.0),
        link_source: link.map(|l| l.1),
        recommendations: Vec::new(),
        notes: Vec::new(),
    });
    let mut out = std::io::stdout().lock();
    report::doctor::render(&report, plan.json, &mut out)?;
    out.flush()?;
    match failed {
        Some(why) => Err(anyhow!("cannot examine the server {why}")),
        None => Ok(ExitCode::SUCCESS),
    }
}
