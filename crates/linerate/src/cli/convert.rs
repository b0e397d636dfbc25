//! Arguments to plans: defaults, cross-flag rules and spec validation, with messages that
//! name the flag and the fix.

use std::time::Duration;

use linerate_proto::{Direction, EndCondition, Protocol, TestSpec};

use super::repeat::{CAMPAIGN, MATRIX, Rounds};
use crate::cli::args::{
    CampaignArgs, Cli, Command, CompatArgs, CsvKindArg, DbArgs, DoctorArgs, GateArgs, GenerateWhat,
    JsonFormat, MatrixArgs, NetArgs, ReportArgs, ReportFormatArg, ScheduleArgs, StoreArgs,
    TestArgs,
};
use crate::plan::campaign::{self, CampaignRun};
use crate::plan::host::ServerMatch;
use crate::plan::matrix::{AxisValue, MatrixPlan, MatrixRun};
use crate::plan::search::SearchPlan;
use crate::plan::size::Size;
use crate::plan::{
    ClientPlan, DoctorPlan, Family, Generated, Iperf3Schema, OutputFormat, Plan, Shell,
};
use crate::plan::{
    CsvKind, Gates, HistoryCommand, HistoryPlan, HistoryRef, ReportFormat, ReportPlan,
    ReportSource, Schedule, ScheduleEnd, StorePlan,
};
use crate::plan::{DEFAULT_TCP_BLOCK, DEFAULT_UDP_DATAGRAM, DEFAULT_UDP_RATE};
use crate::record::LinkAssumption;
use crate::store::Store;

/// Default test length for `client`.
pub const DEFAULT_TIME: Duration = Duration::from_secs(10);
/// Default test length for `selftest`: long enough for a stable figure, short enough to wait for.
pub const SELFTEST_TIME: Duration = Duration::from_secs(3);
/// `--find-max` trial length when `--trial` is not given.
pub const DEFAULT_TRIAL: Duration = Duration::from_secs(5);
/// `--find-max` loss threshold when `--loss` is not given, percent.
pub const DEFAULT_MAX_LOSS_PERCENT: f64 = 0.1;
/// Shortest interval between reports.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

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

fn matrix_plan(a: MatrixArgs) -> Result<(ClientPlan, MatrixPlan, MatrixRun), String> {
    if a.net.json_stream {
        return Err("--json-stream follows one test's intervals; a matrix writes one document \
                    at the end: use -J (or linerate report mN --format json afterwards)"
            .into());
    }
    let m = &a.test;
    if m.rr && a.rounds.until_ci.is_some() {
        return Err("--until-ci repeats cells until their bit rate's interval is narrow enough; \
                    with --rr, give --repeat instead"
            .into());
    }
    let test = TestArgs {
        time: Some(m.time),
        bytes: None,
        blocks: None,
        interval: m.interval,
        parallel: 1,
        window: None,
        length: None,
        read_size: None,
        notsent_lowat: None,
        no_gro: false,
        affinity: m.affinity.clone(),
        udp: false,
        reverse: false,
        bidir: false,
        bitrate: m.bitrate.map(|rate| super::args::RateArg { rate, burst: None }),
        mss: None,
        no_delay: m.no_delay,
        congestion: m.congestion.clone(),
        omit: m.omit,
        zerocopy: false,
        tos: None,
        dscp: None,
        fq_rate: None,
        dont_fragment: false,
        cport: None,
        threads: crate::plan::threads::Threads::Auto,
        title: m.title.clone(),
        text: super::args::TextArgs::default(),
        repeating_payload: false,
        udp_counters_64bit: false,
        link_speed: m.link_speed,
        mtu: m.mtu,
        find_max: false,
        loss: None,
        trial: None,
        get_server_output: false,
        iperf3: false,
        connect_timeout: m.connect_timeout,
        queue_timeout: None,
        rr: m.rr,
        crr: false,
        rr_shape: m.rr_shape,
        under_load: false,
        probe_rate: None,
        idle_time: None,
    };
    let base = with_store(client_plan(a.host, &a.net, &test, DEFAULT_TIME)?, &a.store);
    let base = with_gates(base, &a.gates)?;
    let u32_size = |l: Size| match u32::try_from(l.bytes()) {
        Ok(_) => Ok(l),
        Err(_) => Err(format!("--length {} is too large", l.label())),
    };
    let lengths: Result<Vec<AxisValue>, String> =
        a.length.iter().map(|l| Ok(AxisValue::Length(l.map(u32_size).transpose()?))).collect();
    let axes = vec![
        a.parallel.iter().map(|p| AxisValue::Parallel(*p)).collect(),
        a.window.iter().map(|w| AxisValue::Window(*w)).collect(),
        lengths?,
        a.protocol.iter().map(|p| AxisValue::Protocol((*p).into())).collect(),
        a.direction.iter().map(|d| AxisValue::Direction((*d).into())).collect(),
    ];
    let resume = a.rounds.resume.group(MATRIX, a.store.no_store, base.store.path.is_some())?;
    let Rounds { repeat, until_ci, max_repeat, seed } = a.rounds.rounds();
    let plan = MatrixPlan {
        axes,
        repeat,
        until_ci,
        max_repeat,
        seed,
        udp_rate: a.test.bitrate.map_or(DEFAULT_UDP_RATE, |b| b.bits_per_second()),
        length_given: false,
    };
    // Check every cell's test now, so a bad combination fails before the first run.
    for cell in plan.cells() {
        let spec = plan.cell_plan(&base, &cell).spec;
        spec.validate().map_err(|e| format!("cell {}: {e}", cell.label()))?;
    }
    Ok((base, plan, MatrixRun { resume, stop_after: a.rounds.resume.stop_after }))
}

fn campaign_run(a: CampaignArgs) -> Result<CampaignRun, String> {
    let text = std::fs::read_to_string(&a.file)
        .map_err(|e| format!("cannot read the campaign file {}: {e}", a.file.display()))?;
    let stem = a.file.file_stem().map_or("campaign".into(), |s| s.to_string_lossy());
    // A fleet tier's `targets` file is found beside the campaign file unless absolute.
    let dir = a.file.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let plan = campaign::parse_with(&text, &a.file.display().to_string(), &stem, &read)
        .map_err(|e| e.to_string())?;
    let store = store_plan(&a.store);
    let resume = a.resume.group(CAMPAIGN, a.store.no_store, store.path.is_some())?;
    Ok(CampaignRun {
        seed: plan.seed.unwrap_or_else(random_seed),
        plan,
        file: a.file,
        resume,
        store,
        db_given: a.store.db,
        output: if a.json { OutputFormat::Json } else { OutputFormat::Text },
        stop_after: a.resume.stop_after,
    })
}

pub(super) fn with_store(mut plan: ClientPlan, s: &StoreArgs) -> ClientPlan {
    plan.store = store_plan(s);
    plan
}

fn store_plan(s: &StoreArgs) -> StorePlan {
    StorePlan {
        path: if s.no_store { None } else { s.db.clone().or_else(Store::default_path) },
        labels: s.label.clone(),
    }
}

fn with_gates(mut plan: ClientPlan, g: &GateArgs) -> Result<ClientPlan, String> {
    if plan.spec.rr.is_some() && (g.fail_below.is_some() || g.fail_regression.is_some()) {
        return Err("--fail-below and --fail-regression judge a received bit rate; a \
                    request/response test (--rr, --crr) is judged by its transactions and \
                    latency, which gates do not take yet: drop the gate"
            .into());
    }
    let regression = match (g.fail_regression, &g.baseline) {
        (Some(_), Some(b)) if b == "last" => {
            return Err("--baseline last would name this very run once it is stored: give the \
                        baseline's id (`linerate history` lists them)"
                .into());
        }
        (Some(pct), Some(b)) => Some((pct / 100.0, history_ref(b)?)),
        _ => None,
    };
    if regression.is_some() && plan.store.path.is_none() {
        return Err("--fail-regression reads the baseline from the history: drop --no-store".into());
    }
    plan.gates = Gates { below: g.fail_below.map(|b| b.bits_per_second()), regression };
    Ok(plan)
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

/// The schedule `--every`, `--for`, `--count` and `--slip` ask for: None without `--every` or
/// `--slip`; `--slip` alone is one run started a random while later.
pub(super) fn schedule_of(a: &ScheduleArgs) -> Result<Option<Schedule>, String> {
    let slip = a.slip.unwrap_or_default();
    let Some(every) = a.every else {
        return Ok(a.slip.map(|_| Schedule {
            every: Duration::ZERO,
            until: ScheduleEnd::Count(1),
            slip,
        }));
    };
    let until = match (a.for_, a.count) {
        (Some(d), None) => ScheduleEnd::For(d),
        (None, Some(n)) => ScheduleEnd::Count(n),
        _ => {
            return Err("--every needs how long to keep testing: --for DURATION (e.g. --for \
                        30d) or --count N"
                .into());
        }
    };
    if !slip.is_zero() && slip >= every {
        return Err(format!(
            "--slip must be shorter than --every ({} s): each run starts within its own period",
            every.as_secs_f64()
        ));
    }
    Ok(Some(Schedule { every, until, slip }))
}

/// `12` is a run, `m3` a matrix (or search) group, `c4` a campaign group, `last` the newest.
fn history_ref(s: &str) -> Result<HistoryRef, String> {
    if s == "last" {
        return Ok(HistoryRef::Last);
    }
    let bad = || {
        format!(
            "{s:?} is neither a run id (e.g. 12), a matrix, campaign, fleet or mesh id (e.g. m3, \
             c4, f5, n6) nor `last`"
        )
    };
    let group = ['m', 'c', 'f', 'n'].into_iter().find_map(|l| s.strip_prefix(l));
    match group {
        Some(g) => g.parse().map(HistoryRef::Group).map_err(|_| bad()),
        None => s.parse().map(HistoryRef::Run).map_err(|_| bad()),
    }
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

pub(super) fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // Without randomness the order is still a valid shuffle, just the same every time.
    let _ = getrandom::getrandom(&mut b);
    u64::from_le_bytes(b)
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

fn family(net: &NetArgs) -> Family {
    match (net.ipv4, net.ipv6) {
        (true, _) => Family::V4,
        (_, true) => Family::V6,
        _ => Family::Any,
    }
}

fn output(net: &NetArgs) -> OutputFormat {
    match (net.json, net.json_format) {
        _ if net.json_stream => OutputFormat::JsonStream,
        (false, _) => OutputFormat::Text,
        (true, JsonFormat::Linerate) => OutputFormat::Json,
        (true, JsonFormat::Iperf3 | JsonFormat::Iperf3_3_21) => {
            OutputFormat::Iperf3Json(Iperf3Schema::V3_21)
        }
        (true, JsonFormat::Iperf3_3_12) => OutputFormat::Iperf3Json(Iperf3Schema::V3_12),
    }
}

pub(super) fn client_plan(
    host: String,
    net: &NetArgs,
    t: &TestArgs,
    default_time: Duration,
) -> Result<ClientPlan, String> {
    let mut spec = test_spec(t, default_time)?;
    let find_max = t.find_max.then(|| {
        let trial = t.trial.unwrap_or(DEFAULT_TRIAL);
        spec.end = EndCondition::Duration { duration_ms: millis(trial).max(1) };
        SearchPlan {
            max_loss: t.loss.unwrap_or(DEFAULT_MAX_LOSS_PERCENT) / 100.0,
            // Unset -b means "start unpaced", not the 1 Mbit/s UDP default.
            start_bits_per_second: t.bitrate.map_or(0, |b| b.bits_per_second()),
        }
    });
    if find_max.is_some() && net.json_stream {
        return Err("--json-stream follows one test's intervals; --find-max runs many trials \
                    and writes one document at the end: use -J"
            .into());
    }
    if t.connect_timeout.is_zero() {
        return Err("--connect-timeout must be more than 0 s".into());
    }
    if t.queue_timeout.is_some_and(|q| q.is_zero()) {
        return Err("--queue-timeout must be more than 0 s".into());
    }
    // Refused here, before the host is resolved, as every other flag error; the check in
    // the client repeats it for plans that do not come from flags.
    let layout = t.threads.layout(crate::plan::threads::cores());
    if let Some(r) = linerate_proto::limits::buffer_refusal(&spec, layout) {
        return Err(r.message);
    }
    let under_load = under_load_plan(t, &spec)?;
    let psk = net.psk_file.as_deref().map(crate::plan::server::read_psk).transpose()?;
    let (host, port) = crate::plan::host::host_port(&host, net.port, "-p")?;
    Ok(ClientPlan {
        text: text_options(&t.text),
        repeating_payload: t.repeating_payload,
        psk,
        host,
        port,
        spec,
        family: family(net),
        bind: net.bind,
        cport: t.cport,
        threads: t.threads,
        cpus: t.affinity.as_ref().map_or_else(Vec::new, |a| a.client.clone()),
        placement: t.affinity.as_ref().map_or_else(Default::default, |a| a.placement),
        calibrated: Vec::new(),
        agents_only: false,
        connect_timeout: t.connect_timeout,
        queue_timeout: t.queue_timeout.unwrap_or(linerate_proto::QUEUE_LIMIT),
        output: output(net),
        link: t
            .link_speed
            .filter(|l| l.bits_per_second() > 0)
            .map(|l| LinkAssumption { bits_per_second: l.bits_per_second(), mtu_bytes: t.mtu }),
        iperf3: t.iperf3,
        get_server_output: t.get_server_output,
        udp_length_auto: t.udp && t.length.is_none(),
        block_count: t.blocks,
        find_max,
        store: StorePlan { path: Store::default_path(), labels: Vec::new() },
        gates: Gates::default(),
        under_load,
        every: None,
    })
}

fn text_options(t: &super::args::TextArgs) -> crate::plan::text::TextOptions {
    crate::plan::text::TextOptions {
        scale: t.format.unwrap_or_default(),
        verbose: t.verbose,
        ..log_options(&t.log)
    }
}

fn log_options(l: &super::args::LogArgs) -> crate::plan::text::TextOptions {
    crate::plan::text::TextOptions {
        timestamps: l.timestamps.clone(),
        logfile: l.logfile.clone(),
        forceflush: l.forceflush,
        ..Default::default()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The probes of `--under-load`, checked against the test they run beside.
fn under_load_plan(
    t: &TestArgs,
    spec: &TestSpec,
) -> Result<Option<crate::plan::UnderLoadPlan>, String> {
    if !t.under_load {
        return Ok(None);
    }
    let default = crate::plan::UnderLoadPlan::DEFAULT;
    // 1..=10000, checked by the flag's parser.
    let probes_per_second = t.probe_rate.unwrap_or(default.probes_per_second);
    let idle = t.idle_time.unwrap_or(default.idle);
    if idle < Duration::from_millis(500) || idle > Duration::from_secs(600) {
        return Err("--idle-time must be from 0.5 s to 600 s".into());
    }
    if spec.duration_ms().is_some_and(|ms| ms < 2000) {
        return Err("--under-load needs -t of at least 2 s: the probes start once the load has settled (1 s, or -O)".into());
    }
    Ok(Some(crate::plan::UnderLoadPlan { probes_per_second, idle }))
}

/// The request/response part of a test (`--rr`), sizes checked to fit the wire's fields.
fn rr_spec(t: &TestArgs) -> Result<Option<linerate_proto::latency::RrSpec>, String> {
    if !t.rr && !t.crr {
        return Ok(None);
    }
    // The smallest message: 1 byte over TCP (netperf's default), the 24-byte header over UDP.
    let least = if t.udp { linerate_proto::spec::MIN_UDP_DATAGRAM } else { 1 };
    let size = |v: Option<crate::units::ByteCount>, flag: &str| {
        v.map_or(Ok(least), |b| {
            u32::try_from(b.bytes())
                .map_err(|_| format!("{flag} {} is too large; at most 1M", b.bytes()))
        })
    };
    Ok(Some(linerate_proto::latency::RrSpec {
        request_bytes: size(t.rr_shape.request_size, "--request-size")?,
        response_bytes: size(t.rr_shape.response_size, "--response-size")?,
        in_flight: t.rr_shape.in_flight.unwrap_or(1),
        rate_per_second: t.rr_shape.rr_rate.unwrap_or(0),
        connect_each: t.crr,
    }))
}

fn test_spec(t: &TestArgs, default_time: Duration) -> Result<TestSpec, String> {
    let end = match (t.time, t.bytes) {
        (_, Some(b)) => EndCondition::Bytes { bytes: b.bytes() },
        (Some(d), None) => {
            if d.is_zero() {
                return Err("-t 0 (iperf3's test without an end) is not supported: give a \
                            duration (e.g. -t 3600) or a byte count (-n)"
                    .into());
            }
            if d < Duration::from_millis(1) {
                return Err("-t must be at least 1 ms (0.001)".into());
            }
            EndCondition::Duration { duration_ms: millis(d) }
        }
        (None, None) => EndCondition::Duration { duration_ms: millis(default_time) },
    };
    if !t.interval.is_zero() && t.interval < MIN_INTERVAL {
        return Err("-i must be 0 (no interval reports) or at least 0.01 s".into());
    }
    let block = match (t.length, t.udp) {
        (Some(l), _) => l.bytes(),
        // Replaced by the path's size once the control connection is up (see
        // `ClientPlan::udp_length_auto`); 1472 fits a 1500-byte IPv4 MTU.
        (None, true) => u64::from(DEFAULT_UDP_DATAGRAM),
        (None, false) => DEFAULT_TCP_BLOCK,
    };
    let block_bytes =
        u32::try_from(block).map_err(|_| format!("-l {block} is too large; at most 64M"))?;
    // -k: blocks of the size the test runs with (re-sized with it, `ClientPlan::sized`).
    let end = match t.blocks {
        Some(0) => return Err("-k must be at least 1 block".into()),
        Some(n) => EndCondition::Bytes { bytes: n.saturating_mul(block) },
        None => end,
    };
    let mut spec = TestSpec {
        protocol: if t.udp { Protocol::Udp } else { Protocol::Tcp },
        direction: match (t.reverse, t.bidir) {
            (true, _) => Direction::Download,
            (_, true) => Direction::Bidirectional,
            _ => Direction::Upload,
        },
        streams: t.parallel,
        end,
        block_bytes,
        window_bytes: t.window.map(|w| w.bytes()),
        bits_per_second: match (t.bitrate, t.udp) {
            (Some(b), _) => b.bits_per_second(),
            (None, true) if !t.rr && !t.crr => DEFAULT_UDP_RATE,
            (None, _) => 0,
        },
        mss_bytes: t.mss,
        // Request/response needs each small write on the wire at once, as netperf's TCP_RR.
        no_delay: t.no_delay || ((t.rr || t.crr) && !t.udp),
        congestion: t.congestion.clone(),
        omit_ms: t.omit.map_or(0, millis),
        interval_ms: millis(t.interval),
        zerocopy: t.zerocopy,
        title: t.title.clone(),
        held_start: false,
        read_bytes: t.read_size.map(|r| u32::try_from(r.bytes()).unwrap_or(u32::MAX)),
        write_bytes: None,
        // A test under load fills the path's queues as an ordinary bulk application does:
        // with the system's unsent queue (traffic/unsent.rs says why).
        notsent_lowat: t
            .notsent_lowat
            .map(|r| u32::try_from(r.bytes()).unwrap_or(u32::MAX))
            .or((t.under_load && !t.udp).then_some(0)),
        no_gro: t.no_gro,
        server_cpus: t.affinity.as_ref().map_or_else(Vec::new, |a| a.server.clone()),
        rr: rr_spec(t)?,
        // iperf3 reads a zero type of service or pacing cap as "leave the kernel's default".
        tos: t.tos.or(t.dscp).and_then(std::num::NonZeroU8::new),
        fq_rate_bps: t.fq_rate.and_then(|r| std::num::NonZeroU64::new(r.bits_per_second())),
        dont_fragment: t.dont_fragment,
        burst: t.bitrate.and_then(|b| b.burst),
        // Proposed by the client once it knows the server's address (`plan/affinity.rs`).
        pair_cpus: Vec::new(),
        pair_split: false,
    };
    // TCP bulk without -l writes in up to 1 MiB (spec.rs says why); -l is the user's, and a
    // test under load keeps an ordinary application's writes, as it keeps its unsent queue.
    spec.write_bytes = (t.length.is_none() && !t.under_load && spec.writes_bulk())
        .then_some(linerate_proto::spec::DEFAULT_WRITE_BYTES);
    // With --iperf3 the datagrams carry iperf3's header only (no secret): its minimum.
    let min_udp = if t.iperf3 {
        linerate_proto::spec::MIN_IPERF3_UDP_DATAGRAM
    } else {
        linerate_proto::spec::MIN_UDP_DATAGRAM
    };
    spec.validate_with_udp_min(min_udp).map_err(|e| e.to_string())?;
    Ok(spec)
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
