//! A campaign's report: per tier a heading, the matrix table and findings
//! (`report::matrix`), then the cross-tier summary; or one JSON document with every tier.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::plan::campaign::{CampaignPlan, Tier};
use crate::plan::schedule::Schedule;
use crate::record::{RunRecord, SCHEMA_VERSION};
use crate::report::matrix::{RunEntry, run_entries};
use crate::report::schedule::plan_line;
use crate::session::preflight::{Check, Reached, Unreached};
use crate::stats::campaign::TierSummary;

/// The lines before the first run: the campaign, for a resumed one (`--resume`) its group and
/// the completed runs each tier keeps, and the plan's runs and duration.
pub fn render_start(
    plan: &CampaignPlan,
    seed: u64,
    already_done: Option<(i64, &[usize])>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "Campaign {}: {} tier(s), {} run(s), tiers in file order, each in its own random order \
         (seed {seed})",
        plan.name,
        plan.tiers.len(),
        plan.planned_runs()
    )?;
    let done = already_done.map_or(&[][..], |(_, done)| done);
    if let Some(group) = already_done.map(|(g, _)| g) {
        let kept: usize = done.iter().sum();
        writeln!(out, "Resuming campaign group {group}: {kept} completed run(s) kept")?;
    }
    writeln!(out, "{}", plan_line(&Schedule::of_campaign(plan, done)))
}

/// A tier with the server check made before the first run (`session::preflight`).
pub type Checked<'a> = (usize, &'a Tier, &'a Check);

/// After the pre-flight, the line that says who answered for each tier (a fleet tier's
/// servers in one entry: how many, the first and last, and what they run).
pub fn render_preflight(checked: &[Checked<'_>], out: &mut dyn Write) -> std::io::Result<()> {
    let mut who: Vec<String> = Vec::new();
    let mut at = 0;
    while at < checked.len() {
        let (i, tier, _) = checked[at];
        let of_tier: Vec<&Check> =
            checked[at..].iter().take_while(|(j, _, _)| *j == i).map(|(_, _, c)| *c).collect();
        at += of_tier.len();
        let mut programs: Vec<String> = Vec::new();
        for c in &of_tier {
            let program = match c.result.as_ref() {
                Ok(Reached::Linerate(software)) => software.clone(),
                Ok(Reached::Iperf3) => "an iperf3 server".into(),
                Err(_) => continue,
            };
            if !programs.contains(&program) {
                programs.push(program);
            }
        }
        let servers = match of_tier.as_slice() {
            [] => continue,
            [one] => format!("at {}", one.server),
            [first, .., last] => {
                format!("{} servers at {} … {}", of_tier.len(), first.server, last.server)
            }
        };
        if !programs.is_empty() {
            who.push(format!("tier {} {} {servers} ({})", i + 1, tier.name, programs.join(", ")));
        }
    }
    if who.is_empty() {
        return Ok(());
    }
    writeln!(out, "Pre-flight: every server answered: {}", who.join(", "))
}

/// Each server the pre-flight did not reach (of a tier of `tiers`), with why:
/// `pre-flight: tier 2/4 "b" at host:5201 refused the connection (…)`.
pub fn preflight_unreached(checked: &[Checked<'_>], tiers: usize) -> Vec<String> {
    checked
        .iter()
        .filter_map(|(i, tier, check)| {
            let (why, detail) = check.result.as_ref().err()?;
            let what = match why {
                Unreached::Unresolved => "does not resolve",
                Unreached::Refused => "refused the connection",
                Unreached::TimedOut => "timed out",
                Unreached::Unreachable => "cannot be reached",
                Unreached::WrongProgram => {
                    "runs the wrong program: it speaks neither linerate nor iperf3"
                }
                Unreached::Rejected => "turned the hello down",
            };
            Some(format!(
                "pre-flight: tier {}/{tiers} \"{}\" at {} {what} ({detail})",
                i + 1,
                tier.name,
                check.server
            ))
        })
        .collect()
}

/// Why the campaign stops before its first run, in one line: the one server not reached, or
/// how many (each on a line of its own above, [`super::notice::Notice::Unreached`]: a list,
/// not one line of thousands of characters), then what to do (`file`: the campaign file).
pub fn preflight_failure(unreached: &[String], file: &Path) -> String {
    let what = match unreached {
        [one] => one.clone(),
        many => format!("pre-flight: {} servers were not reached (listed above)", many.len()),
    };
    format!(
        "{what}; no run was made: fix the tier's host or port in {} or start its server, then \
         run the campaign again",
        file.display()
    )
}

/// Every tier's table and findings, then the summary across tiers.
pub fn render_text(
    tiers: &[TierSummary],
    findings: &[String],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    crate::report::sections::write_campaign(crate::report::style::Style::Text, tiers, findings, out)
}

/// One tier's runs for the JSON document: (cell index, repetition, record).
pub type TierRuns<'a> = &'a [(usize, u32, RunRecord)];

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    kind: &'static str,
    name: &'a str,
    seed: Option<u64>,
    group: Option<i64>,
    finished: bool,
    tiers: Vec<TierEntry<'a>>,
    findings: &'a [String],
}

#[derive(Serialize)]
struct TierEntry<'a> {
    #[serde(flatten)]
    summary: &'a TierSummary,
    runs: Vec<RunEntry<'a>>,
}

/// What the JSON document says about the campaign as a whole.
#[derive(Debug, Clone, Copy)]
pub struct CampaignMeta<'a> {
    /// Its name.
    pub name: &'a str,
    /// The order seed (None when unknown).
    pub seed: Option<u64>,
    /// Its history group, if stored.
    pub group: Option<i64>,
    /// Whether every run completed.
    pub finished: bool,
}

/// One JSON document: every tier's summary and runs, then the cross-tier findings.
pub fn render_json(
    meta: CampaignMeta<'_>,
    tiers: &[(TierSummary, TierRuns<'_>)],
    findings: &[String],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        kind: "linerate.campaign",
        name: meta.name,
        seed: meta.seed,
        group: meta.group,
        finished: meta.finished,
        tiers: tiers
            .iter()
            .map(|(summary, runs)| TierEntry { summary, runs: run_entries(runs) })
            .collect(),
        findings,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}
