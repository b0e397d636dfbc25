//! Executes a plan: wires sessions to renderers and decides the exit status.
//!
//! This is the glue between `session/` (which produces records) and `report/` (which renders
//! them). Failures of a test become `Err` after the partial results have been rendered, so
//! `main` prints exactly one error line and exits 1.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};

use crate::plan::matrix::MatrixRun;
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
        Plan::Matrix(base, m, how) => crate::matrix::run(&base, &m, &how, &Interrupt::install()?),
        Plan::History(h) => crate::history::run(&h),
        Plan::SelftestMatrix(base, m) => with_embedded_server(base, |plan| {
            println!(
                "linerate: the default methodology on loopback against an embedded server on \
                     127.0.0.1:{} (run `linerate --help` for everything else)",
                plan.port
            );
            crate::matrix::run(plan, &m, &MatrixRun::default(), &Interrupt::install()?)
        }),
        Plan::Campaign(c) => crate::campaign::run(&c, &Interrupt::install()?),
        Plan::Doctor(d) => run_doctor(&d),
        Plan::Report(r) => crate::reporting::run(&r),
        Plan::Generate(g) => generate(g),
    }
}

/// `linerate doctor`: gathers the facts (session), judges them (stats), prints (report).
/// Exits 1 when a HOST was given but could not be examined, after printing what is known.
fn run_doctor(plan: &crate::plan::DoctorPlan) -> Result<ExitCode> {
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

/// Exits 1 (through an error) when a `--fail-below` or `--fail-regression` gate failed.
pub(crate) fn gate(plan: &ClientPlan, cells: &[(String, Vec<f64>)]) -> Result<()> {
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
        // The user's own loopback server: only the protocol's limits apply.
        limits: linerate_proto::Limits::unlimited(),
        access: crate::plan::server::Access::default(),
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
