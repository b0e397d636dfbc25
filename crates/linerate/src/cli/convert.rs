//! Arguments to plans: defaults, cross-flag rules and spec validation, with messages that
//! name the flag and the fix.

use std::time::Duration;

use linerate_proto::{EndCondition, TestSpec};

use super::args::{
    Cli, Command, CompatArgs, CsvKindArg, DbArgs, DoctorArgs, GenerateWhat, ReportArgs,
    ReportFormatArg,
};
use super::matrix_plan::{campaign_run, matrix_plan};
use super::test_args::{JsonFormat, NetArgs, ScheduleArgs};
use super::test_plan::{
    client_plan, family, output, random_seed, schedule_of, with_gates, with_store,
};
use super::values::history_ref;
use crate::plan::host::ServerMatch;
use crate::plan::matrix::{AxisValue, MatrixPlan};
use crate::plan::{ClientPlan, DoctorPlan, Family, Generated, OutputFormat, Plan, Shell};
use crate::plan::{
    CsvKind, HistoryCommand, HistoryPlan, HistoryRef, ReportFormat, ReportPlan, ReportSource,
    Schedule, StorePlan,
};
use crate::plan::{DEFAULT_TIME, DEFAULT_UDP_RATE, SELFTEST_TIME};
use crate::store::Store;

pub(super) fn to_plan(cli: Cli) -> Result<Plan, String> {
    match cli.command {
        Some(Command::Client(a)) => {
            let mut p = with_store(client_plan(a.host, &a.net, &a.test, DEFAULT_TIME)?, &a.store);
            p.every = schedule(&a.schedule, &p)?;
            Ok(Plan::Client(with_gates(p, &a.gates)?))
        }
        Some(Command::History { label, server, since, group, failed, completed, limit, db }) => {
            let outcome = match (failed, completed) {
                (true, _) => Some("failed"),
                (_, true) => Some("completed"),
                _ => None,
            };
            let server = server.as_deref().map(ServerMatch::parse).transpose()?;
            history(&db, HistoryCommand::List { label, server, since, group, outcome, limit })
        }
        Some(Command::Show { run, db }) => {
            let run = match history_ref(&run)? {
                HistoryRef::Group(g) => {
                    return Err(format!(
                        "`show` shows one run; for matrix or campaign {g} use `linerate report {run}`"
                    ));
                }
                r => r,
            };
            history(&db, HistoryCommand::Show(run))
        }
        Some(Command::Compare { a, b, html, db }) => {
            history(&db, HistoryCommand::Compare(history_ref(&a)?, history_ref(&b)?, html))
        }
        Some(Command::Report(a)) => report_plan(a).map(Plan::Report),
        Some(Command::Server(a)) => super::server_args::server_plan(&a).map(Plan::Server),
        Some(Command::Selftest(a)) => {
            let net = NetArgs {
                port: Some(0),
                bind: None,
                ipv4: true,
                ipv6: false,
                json: a.json,
                json_format: JsonFormat::Linerate,
                psk_file: None,
                json_stream: false,
            };
            client_plan("127.0.0.1".into(), &net, &a.test, SELFTEST_TIME).map(Plan::Selftest)
        }
        Some(Command::Fleet(a)) => super::fleet_args::fleet_plan(a).map(Plan::Fleet),
        Some(Command::Mesh(a)) => super::mesh_args::mesh_plan(a).map(Plan::Mesh),
        Some(Command::Matrix(a)) => matrix_plan(a).map(|(c, m, r)| Plan::Matrix(c, m, r)),
        Some(Command::Campaign(a)) => campaign_run(a).map(Plan::Campaign),
        Some(Command::Doctor(a)) => doctor_plan(a).map(Plan::Doctor),
        Some(Command::Generate { what: GenerateWhat::Kubernetes, dir, kubernetes: k }) => {
            let defaults = crate::plan::kubernetes::KubernetesOptions::default();
            let options = crate::plan::kubernetes::KubernetesOptions {
                namespace: k.namespace.unwrap_or(defaults.namespace),
                image: k.image.unwrap_or(defaults.image),
                host_network: k.host_network,
                psk_secret: k.psk_secret,
                mesh: k.mesh,
                schedule: k.schedule,
                both_networks: k.both_networks,
            }
            .checked()?;
            Ok(Plan::Kubernetes(crate::plan::kubernetes::KubernetesPlan { options, dir }))
        }
        Some(Command::Generate { what, dir, kubernetes: k }) => {
            if k.namespace.is_some()
                || k.image.is_some()
                || k.host_network
                || k.psk_secret.is_some()
                || k.mesh
                || k.schedule.is_some()
                || k.both_networks
            {
                return Err("--namespace, --image, --host-network, --psk-secret, --mesh, \
                            --schedule and --both-networks shape the Kubernetes manifests: \
                            linerate generate kubernetes ..."
                    .into());
            }
            generated(what, dir)
        }
        None => compat_plan(cli.compat),
    }
}

/// `generate man|bash|zsh|fish [--dir DIR]`.
fn generated(what: GenerateWhat, dir: Option<std::path::PathBuf>) -> Result<Plan, String> {
    Ok(Plan::Generate(match (what, dir) {
        (GenerateWhat::Man, None) => Generated::Man,
        (GenerateWhat::Man, Some(dir)) => Generated::ManPages(dir),
        (GenerateWhat::Bash, None) => Generated::Completions(Shell::Bash),
        (GenerateWhat::Zsh, None) => Generated::Completions(Shell::Zsh),
        (GenerateWhat::Fish, None) => Generated::Completions(Shell::Fish),
        // Parsed before this function.
        (GenerateWhat::Kubernetes, _) | (_, Some(_)) => {
            return Err("--dir writes the man pages or the Kubernetes manifests; completions go \
                        to standard output: linerate generate bash > FILE"
                .into());
        }
    }))
}

fn history(db: &DbArgs, command: HistoryCommand) -> Result<Plan, String> {
    let path =
        db.db.clone().or_else(Store::default_path).ok_or(
            "no history database: set XDG_DATA_HOME or HOME, or give --db PATH".to_string(),
        )?;
    Ok(Plan::History(HistoryPlan { db: path, json: db.json, command }))
}

/// `--every` with `--for` or `--count`: a schedule, refused where a schedule cannot go.
fn schedule(a: &ScheduleArgs, p: &ClientPlan) -> Result<Option<Schedule>, String> {
    let Some(s) = schedule_of(a)? else { return Ok(None) };
    if p.find_max.is_some() {
        return Err("--every repeats one test; --find-max is a search: run the search alone, \
                    or schedule a test at the rate it found"
            .into());
    }
    if p.store.path.is_none() && a.every.is_some() {
        return Err("--every fills the history for `linerate report --trend`; it cannot \
                    run with --no-store"
            .into());
    }
    Ok(Some(s))
}

/// `linerate report`: a history reference if `what` reads as one, else a file.
fn report_plan(a: ReportArgs) -> Result<ReportPlan, String> {
    let db = || {
        a.db.clone()
            .or_else(Store::default_path)
            .ok_or("no history database: set XDG_DATA_HOME or HOME, or give --db PATH".to_string())
    };
    let source = match history_ref(&a.what) {
        _ if a.trend.is_some() => {
            if a.what != "last" {
                return Err(format!(
                    "--trend reports a target's runs over time, not {:?}: give one or the other",
                    a.what
                ));
            }
            let target = a.trend.clone().unwrap_or_default();
            let server = ServerMatch::parse(&target)?;
            ReportSource::Trend { db: db()?, target, server, since: a.since }
        }
        Ok(which) => ReportSource::History { db: db()?, which },
        Err(_) if std::path::Path::new(&a.what).exists() => {
            ReportSource::File(a.what.clone().into())
        }
        Err(e) => return Err(format!("{e}, and no file of that name exists")),
    };
    let format = match a.format {
        ReportFormatArg::Text => ReportFormat::Text,
        ReportFormatArg::Md => ReportFormat::Markdown,
        ReportFormatArg::Csv => ReportFormat::Csv(match a.csv_kind {
            CsvKindArg::Cells => CsvKind::Cells,
            CsvKindArg::Intervals => CsvKind::Intervals,
        }),
        ReportFormatArg::Json => ReportFormat::Json,
        ReportFormatArg::Html => ReportFormat::Html,
    };
    Ok(ReportPlan { source, format, output: a.output })
}

/// `linerate` with no arguments: streams 1 and 2, three times each, 1 s per run, against an
/// embedded loopback server — a layered method's first tier in a few seconds.
pub(super) fn default_methodology() -> Plan {
    let spec =
        TestSpec { end: EndCondition::Duration { duration_ms: 1000 }, ..TestSpec::default_tcp() };
    let mut base = ClientPlan {
        family: Family::V4,
        store: StorePlan { path: Store::default_path(), labels: vec!["selftest".into()] },
        ..ClientPlan::to("127.0.0.1", 0, spec)
    };
    base.spec.interval_ms = 0;
    let matrix = MatrixPlan {
        axes: vec![vec![AxisValue::Parallel(1), AxisValue::Parallel(2)]],
        repeat: 3,
        until_ci: None,
        max_repeat: 3,
        seed: random_seed(),
        udp_rate: DEFAULT_UDP_RATE,
        length_given: false,
    };
    Plan::SelftestMatrix(base, matrix)
}

fn compat_plan(c: CompatArgs) -> Result<Plan, String> {
    let stored = c.store.no_store || c.store.db.is_some() || !c.store.label.is_empty();
    let gated = c.gates.fail_below.is_some() || c.gates.fail_regression.is_some();
    if c.client.is_none() && (stored || gated) {
        return Err("--no-store, --db, --label and the --fail-* gates apply to a client: \
                    add -c HOST (or use `linerate client HOST`)"
            .into());
    }
    if c.server {
        // `parse` reads `linerate -s ARGS` as `linerate server ARGS`; `-s` after `--` is no
        // switch.
        return Err("-s runs a server: write it before `--`, or use `linerate server`".into());
    }
    match c.client {
        Some(host) => {
            let p = with_store(client_plan(host, &c.net, &c.test, DEFAULT_TIME)?, &c.store);
            Ok(Plan::Client(with_gates(p, &c.gates)?))
        }
        None => {
            let net = NetArgs {
                port: Some(0),
                bind: None,
                ipv4: true,
                ipv6: false,
                json: c.net.json,
                json_format: c.net.json_format,
                psk_file: None,
                json_stream: c.net.json_stream,
            };
            client_plan("127.0.0.1".into(), &net, &c.test, SELFTEST_TIME).map(Plan::Selftest)
        }
    }
}

fn doctor_plan(a: DoctorArgs) -> Result<DoctorPlan, String> {
    if matches!(output(&a.net), OutputFormat::Iperf3Json(_)) {
        return Err("doctor has no iperf3-shaped output; drop --json-format".into());
    }
    if let Some(ip) = a.net.bind
        && !family(&a.net).allows(&ip)
    {
        return Err(format!("-B {ip} does not match -4/-6; drop one of them"));
    }
    let (host, port) = match &a.host {
        Some(h) => {
            let (name, port) = crate::plan::host::host_port(h, a.net.port, "-p")?;
            (Some(name), port)
        }
        None => (None, a.net.port.unwrap_or(crate::plan::DEFAULT_PORT)),
    };
    Ok(DoctorPlan {
        host,
        port,
        bind: a.net.bind,
        family: family(&a.net),
        json: a.net.json,
        link_bits_per_second: a.link_speed.map(|r| r.bits_per_second()),
        connect_timeout: Duration::from_secs(5),
        psk: a.net.psk_file.as_deref().map(crate::plan::server::read_psk).transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use crate::cli::parse;
    use crate::plan::{Family, OutputFormat, Plan};
    use linerate_proto::{Direction, EndCondition};

    fn client(args: &[&str]) -> crate::plan::ClientPlan {
        match parse(args.iter().copied()) {
            Ok(Plan::Client(p)) => p,
            other => panic!("expected a client plan from {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn iperf_style_and_subcommand_forms_agree() {
        let a = client(&["linerate", "-c", "h", "-P", "4", "-t", "2.5", "-R", "-w", "256K"]);
        let b = client(&["linerate", "client", "h", "-P", "4", "-t", "2.5", "-R", "-w", "256K"]);
        assert_eq!(a, b);
        assert_eq!(a.spec.streams, 4);
        assert_eq!(a.spec.end, EndCondition::Duration { duration_ms: 2500 });
        assert_eq!(a.spec.direction, Direction::Download);
        assert_eq!(a.spec.window_bytes, Some(262_144));
    }

    #[test]
    fn units_follow_iperf_conventions() {
        let p = client(&["linerate", "client", "h", "-n", "100M", "-b", "10G", "-l", "64k"]);
        assert_eq!(p.spec.end, EndCondition::Bytes { bytes: 100 * 1024 * 1024 });
        assert_eq!(p.spec.bits_per_second, 10_000_000_000);
        assert_eq!(p.spec.block_bytes, 64_000);
    }

    #[test]
    fn defaults() {
        let p = client(&["linerate", "client", "h"]);
        assert_eq!(p.port, 5201);
        assert_eq!(p.spec.end, EndCondition::Duration { duration_ms: 10_000 });
        assert_eq!(p.spec.block_bytes, 128 * 1024);
        assert_eq!(p.spec.interval_ms, 1000);
        assert_eq!(p.family, Family::Any);
        assert_eq!(p.output, OutputFormat::Text);
        assert!(matches!(parse(["linerate"]), Ok(Plan::SelftestMatrix(..))));
        assert!(matches!(parse(["linerate", "-s", "-1"]), Ok(Plan::Server(s)) if s.one_off));
    }

    #[test]
    fn bad_input_names_the_flag() {
        for (args, needle) in [
            (vec!["linerate", "client", "h", "-t", "abc"], "abc"),
            (vec!["linerate", "client", "h", "-P", "0"], "0"),
            (vec!["linerate", "client", "h", "-P", "20000"], "20000"),
            (vec!["linerate", "client", "h", "-l", "1G"], "-l"),
            (vec!["linerate", "client", "h", "-R", "--bidir"], "--bidir"),
            (vec!["linerate", "client", "h", "-t", "1", "-n", "1M"], "--bytes"),
            (vec!["linerate", "client", "h", "-i", "0.001"], "-i"),
            (vec!["linerate", "client", "h", "-C", "bad name"], "-C"),
            (vec!["linerate", "client", "h", "-M", "5"], "-M"),
            (vec!["linerate", "-s", "-c", "h"], "--client"),
        ] {
            let err = parse(args.iter().copied()).expect_err("must fail").to_string();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn subcommand_and_compat_flags_do_not_mix() {
        assert!(parse(["linerate", "-P", "2", "server"]).is_err());
    }
}
