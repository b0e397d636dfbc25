//! Executes a plan: wires sessions to renderers and decides the exit status.
//!
//! This is the glue between `session/` (which produces records) and `report/` (which renders
//! them). Failures of a test become `Err` after the partial results have been rendered, so
//! `main` prints exactly one error line and exits 1.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};

use crate::plan::matrix::{Cell, MatrixPlan};
use crate::plan::search::{RateSearch, SearchPlan};
use crate::plan::{ClientPlan, Family, Generated, OutputFormat, Plan, ServerPlan, Shell};
use crate::record::{Outcome, RunRecord};
use crate::report::{self, iperf3_json, json, text};
use crate::session::server::{NoteSink, Server, ServerNote};
use crate::session::{Interrupt, Quiet, client, iperf3};
use crate::store::{RunKind, RunMeta};
use crate::{session, stats};

/// Runs the plan to completion.
pub fn execute(plan: Plan) -> Result<ExitCode> {
    match plan {
        Plan::Client(p) => run_client(&p, &Interrupt::install()?),
        Plan::Server(p) => run_server(&p),
        Plan::Selftest(p) => run_selftest(p),
        Plan::Matrix(base, m) => run_matrix(&base, &m, &Interrupt::install()?),
        Plan::History(h) => crate::history::run(&h),
        Plan::SelftestMatrix(base, m) => with_embedded_server(base, |plan| {
            println!(
                "linerate: the default methodology on loopback against an embedded server on \
                     127.0.0.1:{} (run `linerate --help` for everything else)",
                plan.port
            );
            run_matrix(plan, &m, &Interrupt::install()?)
        }),
        Plan::Campaign(c) => crate::campaign::run(&c, &Interrupt::install()?),
        Plan::Report(r) => crate::reporting::run(&r),
        Plan::Generate(g) => generate(g),
    }
}

fn run_client(plan: &ClientPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    if let Some(search) = plan.find_max {
        return find_max(plan, search, interrupt);
    }
    let stdout = std::io::stdout();
    let run = if plan.iperf3 { iperf3::client::run } else { client::run };
    let record = match plan.output {
        OutputFormat::Text => {
            let mut live = text::LivePrinter::new(stdout.lock(), plan.spec.title.clone());
            run(plan, &mut live, interrupt)
        }
        OutputFormat::JsonStream => run(plan, &mut json::JsonStream::new(stdout.lock()), interrupt),
        OutputFormat::Json | OutputFormat::Iperf3Json => run(plan, &mut Quiet, interrupt),
    };
    finish_client(plan, &record)
}

fn finish_client(plan: &ClientPlan, record: &RunRecord) -> Result<ExitCode> {
    let stored = crate::history::keep(
        &mut crate::history::open(&plan.store),
        record,
        &RunMeta::test(plan.store.labels.clone()),
    );
    let mut out = std::io::stdout().lock();
    let has_figures = record.client.is_some() || record.server_results.is_some();
    match plan.output {
        OutputFormat::Json => json::render_run(record, &mut out)?,
        OutputFormat::JsonStream => json::render_run_line(record, &mut out)?,
        OutputFormat::Iperf3Json => iperf3_json::render_run(record, &mut out)?,
        OutputFormat::Text if has_figures => text::render_run(record, &mut out)?,
        OutputFormat::Text => {}
    }
    if let (Some(id), OutputFormat::Text) = (stored, plan.output) {
        writeln!(out, "Stored as run {id} (linerate show {id}).")?;
    }
    out.flush()?;
    if !matches!(record.outcome, Outcome::Failed { .. }) {
        let cells = vec![(
            "run".to_string(),
            vec![stats::matrix::received_rate(&stats::summarize(record))],
        )];
        gate(plan, &cells)?;
    }
    out.flush()?;
    match &record.outcome {
        Outcome::Completed | Outcome::Interrupted => Ok(ExitCode::SUCCESS),
        Outcome::Failed { error } => Err(anyhow!("{error}")),
    }
}

/// `--find-max`: runs trials until the search is done, printing each, then the answer.
fn find_max(plan: &ClientPlan, search_plan: SearchPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    let mut search = RateSearch::new(search_plan);
    let mut records = Vec::new();
    let mut store = crate::history::open(&plan.store);
    let params = serde_json::json!({ "max_loss": search_plan.max_loss, "start_bits_per_second": search_plan.start_bits_per_second, "spec": plan.spec });
    let group = store.as_mut().and_then(|s| s.begin_group("find_max", None, &params).ok());
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
        if let Outcome::Failed { error } = &record.outcome {
            return Err(anyhow!("trial {} at {} failed: {error}", records.len() + 1, rate));
        }
        let trial = search.record(crate::stats::udp::trial_of(&record, rate));
        let meta = RunMeta {
            kind: RunKind::FindMaxTrial,
            group,
            cell: Some(format!("b={rate}")),
            repetition: None,
            labels: plan.store.labels.clone(),
        };
        crate::history::keep(&mut store, &record, &meta);
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
    Ok(ExitCode::SUCCESS)
}

/// `linerate matrix`: runs every cell, shows progress on a terminal, then the table and
/// findings (or one JSON document).
fn run_matrix(base: &ClientPlan, plan: &MatrixPlan, interrupt: &Interrupt) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let cells = plan.cells();
    let text_out = base.output == OutputFormat::Text;
    if text_out {
        report::matrix::render_start(plan, cells.len(), &mut std::io::stdout().lock())?;
    }
    let tty = std::io::stderr().is_terminal();
    let mut progress = |p: session::matrix::Progress<'_>| {
        if tty {
            let line = report::matrix::progress_line(
                p.done,
                p.planned,
                &p.cell.label(),
                p.repetition,
                p.eta,
            );
            eprint!("\r\x1b[2K{line}");
        }
    };
    let mut store = crate::history::open(&base.store);
    let axes: Vec<Vec<String>> =
        plan.axes.iter().map(|a| a.iter().map(|v| v.label()).collect()).collect();
    let params = serde_json::json!({ "axes": axes, "repeat": plan.repeat, "seed": plan.seed, "until_ci": plan.until_ci, "spec": base.spec });
    let group = store.as_mut().and_then(|s| s.begin_group("matrix", None, &params).ok());
    let labels = base.store.labels.clone();
    let mut keep = |cell: &Cell, rep: u32, record: &RunRecord| {
        let meta = RunMeta {
            kind: RunKind::MatrixCell,
            group,
            cell: Some(cell.label()),
            repetition: Some(rep),
            labels: labels.clone(),
        };
        crate::history::keep(&mut store, record, &meta);
    };
    let outcome = session::matrix::run_matrix(base, plan, interrupt, &mut progress, &mut keep);
    if let (Some(s), Some(g), None) = (store.as_mut(), group, outcome.stopped.as_ref()) {
        let _ = s.finish_group(g);
    }
    if tty {
        eprint!("\r\x1b[2K");
    }
    let runs: Vec<(usize, RunRecord)> =
        outcome.runs.iter().map(|(c, _, r)| (*c, r.clone())).collect();
    let summary = stats::matrix::summarize_matrix(&cells, &runs, plan.until_ci);
    let mut out = std::io::stdout().lock();
    let stopped = outcome.stopped.as_deref();
    match base.output {
        OutputFormat::Text => report::matrix::render_text(&summary, stopped, &mut out)?,
        _ => report::matrix::render_json(
            report::matrix::MatrixMeta { seed: Some(plan.seed), until_ci: plan.until_ci },
            &summary,
            &outcome.runs,
            stopped,
            &mut out,
        )?,
    }
    if let (Some(g), OutputFormat::Text) = (group, base.output) {
        writeln!(
            out,
            "Stored as matrix m{g} (linerate report m{g} --format html -o m{g}.html; \
             linerate compare m{g} mN)."
        )?;
    }
    out.flush()?;
    if let Some(why) = stopped.filter(|_| interrupt.count() == 0) {
        return Err(anyhow!("matrix stopped early: {why}"));
    }
    let cells: Vec<(String, Vec<f64>)> =
        summary.cells.iter().map(|c| (c.label.clone(), c.samples.clone())).collect();
    gate(base, &cells)?;
    Ok(ExitCode::SUCCESS)
}

/// Exits 1 (through an error) when a `--fail-below` or `--fail-regression` gate failed.
fn gate(plan: &ClientPlan, cells: &[(String, Vec<f64>)]) -> Result<()> {
    let failed = crate::history::failed_gates(&plan.gates, plan.store.path.as_deref(), cells)?;
    if failed.is_empty() {
        return Ok(());
    }
    Err(anyhow!("gate failed: {}", failed.join("; ")))
}

fn note_sink(format: OutputFormat) -> NoteSink {
    Arc::new(move |note: &ServerNote| {
        let mut out = std::io::stdout().lock();
        let _ = match format {
            OutputFormat::Text => text::render_server_note(note, &mut out),
            OutputFormat::Json | OutputFormat::Iperf3Json | OutputFormat::JsonStream => {
                json::render_line(note, &mut out)
            }
        };
        let _ = out.flush();
    })
}

fn run_server(plan: &ServerPlan) -> Result<ExitCode> {
    let interrupt = Interrupt::install()?;
    let server = Server::bind(plan)?;
    server.run(&interrupt, note_sink(plan.output))?;
    Ok(ExitCode::SUCCESS)
}

fn run_selftest(plan: ClientPlan) -> Result<ExitCode> {
    with_embedded_server(plan, |plan| {
        if plan.output == OutputFormat::Text {
            println!(
                "linerate selftest: embedded server on 127.0.0.1:{}, {}",
                plan.port,
                text::describe_spec(&plan.spec)
            );
        }
        run_client(plan, &Interrupt::install()?)
    })
}

/// Runs `f` with `plan` pointed at a server started on loopback for the purpose.
fn with_embedded_server(
    mut plan: ClientPlan,
    f: impl FnOnce(&ClientPlan) -> Result<ExitCode>,
) -> Result<ExitCode> {
    let server_plan = ServerPlan {
        port: 0,
        bind: Some(std::net::IpAddr::from([127, 0, 0, 1])),
        family: Family::V4,
        one_off: false,
        output: OutputFormat::Text,
    };
    let server = Server::bind(&server_plan).context("cannot start the embedded server")?;
    plan.port = server.local_addr()?.port();
    let stop_server = Interrupt::manual();
    let server_thread = {
        let stop = stop_server.clone();
        std::thread::spawn(move || server.run(&stop, Arc::new(|_: &ServerNote| {})))
    };
    let result = f(&plan);
    stop_server.trigger();
    let _ = server_thread.join();
    result
}

fn generate(what: Generated) -> Result<ExitCode> {
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
