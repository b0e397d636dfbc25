//! `linerate client HOST` (and `-c HOST`): one test, or a `--find-max` rate search; the run
//! is stored, rendered in the chosen format, and gated (`--fail-below`, `--fail-regression`).
//! Then a failed test is its [`Failure`], an interrupted one an interruption, a short one a
//! failed gate: errors `main` turns into the exit status.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::failed::interrupted;
use super::gate::gate;
use super::keep;
use crate::plan::search::{RateSearch, SearchPlan};
use crate::plan::{ClientPlan, OutputFormat, Schedule};
use crate::record::{Failure, Outcome, RunRecord};
use crate::report::notice::{Notice, Stored};
use crate::report::{iperf3_json, json, text};
use crate::session::{Interrupt, Quiet, client, iperf3, under_load};
use crate::stats;
use crate::store::{RunKind, RunMeta};

pub fn run(plan: &ClientPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    if let Some(search) = plan.find_max {
        return find_max(plan, search, interrupt);
    }
    super::output::open_logfile(&plan.text)?;
    // `-A auto`: the placement of this test's shape, once for a whole schedule.
    let mut plan = plan.clone();
    let console = super::console(plan.output == OutputFormat::Text);
    let streams = [plan.spec.streams];
    super::placement::resolve(&mut plan, &streams, &console, interrupt)?;
    let plan = &plan;
    match plan.every {
        Some(schedule) => every(plan, schedule, interrupt),
        None => once(plan, interrupt),
    }
}

/// `--every`: the test on its schedule (`super::every`).
fn every(plan: &ClientPlan, schedule: Schedule, interrupt: &Interrupt) -> Result<ExitCode> {
    let console = super::console(plan.output == OutputFormat::Text);
    let target = crate::plan::host::format_host_port(&plan.host, plan.port);
    let then = format!("their trend: linerate report --trend {target}");
    super::every::on_schedule(schedule, (&console, interrupt), &then, &mut || once(plan, interrupt))
}

/// One test: run, stored, rendered and gated.
fn once(plan: &ClientPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let run = match (plan.iperf3, plan.under_load) {
        (true, _) => iperf3::client::run,
        (false, Some(_)) => under_load::run,
        (false, None) => client::run,
    };
    let record = match plan.output {
        OutputFormat::Text => {
            let live = text::LivePrinter::new(
                super::output::text_out(&plan.text),
                plan.spec.title.clone(),
            );
            run(plan, &mut live.with_scale(plan.text.scale), interrupt)
        }
        OutputFormat::JsonStream => {
            run(plan, &mut json::JsonStream::new(std::io::stdout().lock()), interrupt)
        }
        OutputFormat::Json | OutputFormat::Iperf3Json(_) => run(plan, &mut Quiet, interrupt),
    };
    finish_client(plan, &record, interrupt)
}

fn finish_client(plan: &ClientPlan, record: &RunRecord, interrupt: &Interrupt) -> Result<ExitCode> {
    let console = super::console(plan.output == OutputFormat::Text);
    let meta = RunMeta::test(plan.store.labels.clone());
    let kept = keep::keep(&mut keep::open(&plan.store, &console), &plan.store, record, &meta);
    let (stored, unstored) = match kept {
        Ok(id) => (id, None),
        Err(lost) => (None, Some(lost)),
    };
    let mut out = std::io::stdout().lock();
    let has_figures = record.client.is_some() || record.server_results.is_some();
    match plan.output {
        OutputFormat::Json => json::render_run(record, &mut out)?,
        OutputFormat::JsonStream => json::render_run_line(record, &mut out)?,
        OutputFormat::Iperf3Json(schema) => iperf3_json::render_run(record, schema, &mut out)?,
        OutputFormat::Text if has_figures => {
            let mut out = super::output::text_out(&plan.text);
            text::render_run_in(record, plan.text.scale, &mut out)?;
            if plan.text.verbose {
                crate::report::verbose::render(record, plan.text.scale, &mut out)?;
            }
            out.flush()?;
        }
        OutputFormat::Text => {}
    }
    out.flush()?;
    let failed = matches!(record.outcome, Outcome::Failed { .. });
    if let Some(id) = stored {
        // A failure is recorded, not presented as a result.
        let kept = if failed { Stored::FailedRun(id) } else { Stored::Run(id) };
        console.show(&Notice::Stored(kept));
    }
    if let Some(failure) = record.outcome.failure() {
        return Err(failure.into());
    }
    if record.outcome == Outcome::Interrupted {
        return Err(interrupted(interrupt, "the results until then are above"));
    }
    if let Some(lost) = unstored {
        return Err(lost.into());
    }
    let cells =
        vec![("run".to_string(), vec![stats::matrix::received_rate(&stats::summarize(record))])];
    gate(plan, &cells)?;
    Ok(ExitCode::SUCCESS)
}

/// `--find-max`: runs trials until the search is done, printing each, then the answer.
fn find_max(plan: &ClientPlan, search_plan: SearchPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let mut search = RateSearch::new(search_plan);
    let mut records = Vec::new();
    let console = super::console(plan.output == OutputFormat::Text);
    let mut store = keep::open(&plan.store, &console);
    let mut unstored = Vec::new();
    let params = serde_json::json!({ "max_loss": search_plan.max_loss, "start_bits_per_second": search_plan.start_bits_per_second, "spec": plan.spec });
    let params = crate::store::GroupParams::new(&params, None)?;
    let kind = crate::store::GroupKind::FindMax;
    let group = store.as_mut().and_then(|s| s.begin_group(kind, None, &params).ok());
    let mut out = std::io::stdout().lock();
    let text = plan.output == OutputFormat::Text;
    if text {
        text::render_search_start(&plan.spec, &search_plan, &mut out)?;
    }
    while let Some(rate) = search.next_rate() {
        if interrupt.count() > 0 {
            break;
        }
        let mut trial_plan = plan.clone();
        trial_plan.spec.bits_per_second = rate;
        let record = client::run(&trial_plan, &mut Quiet, interrupt);
        if let Some(f) = record.outcome.failure() {
            let why = format!("trial {} at {} failed: {}", records.len() + 1, rate, f.message);
            return Err(Failure::new(f.kind, why).into());
        }
        let trial = search.record(crate::stats::udp::trial_of(&record, rate));
        let meta = RunMeta {
            kind: RunKind::FindMaxTrial,
            group,
            cell: Some(format!("b={rate}")),
            repetition: None,
            labels: plan.store.labels.clone(),
        };
        if let Err(lost) = keep::keep(&mut store, &plan.store, &record, &meta) {
            console.show(&Notice::RunNotStored(lost.detail()));
            unstored.push(lost);
        }
        if text {
            text::render_trial(records.len() + 1, &trial, &mut out)?;
        }
        records.push(record);
    }
    let answer = search.answer();
    if let (Some(s), Some(g)) = (store.as_mut(), group) {
        let _ = s.finish_group(g);
    }
    match plan.output {
        OutputFormat::Text => text::render_search_answer(&answer, &search_plan, &mut out)?,
        _ => json::render_search(&answer, &search_plan, &records, &mut out)?,
    }
    out.flush()?;
    if interrupt.count() > 0 {
        return Err(interrupted(interrupt, "the answer above is from the trials until then"));
    }
    if !unstored.is_empty() {
        return Err(crate::store::spill::UnstoredRuns(unstored).into());
    }
    Ok(ExitCode::SUCCESS)
}
