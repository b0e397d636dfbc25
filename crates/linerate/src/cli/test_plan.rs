//! The shared argument groups to a client plan (`client_plan`: the test, where to connect,
//! its text), where results go (`with_store`), when tests repeat (`schedule_of`) and a fresh
//! seed (`random_seed`): what `client`, `matrix`, `fleet` and `mesh` convert alike. Defaults
//! and cross-flag rules stand here once, with messages that name the flag and the fix.

use std::time::Duration;

use linerate_proto::{Direction, EndCondition, Protocol, TestSpec};

use super::test_args::{
    GateArgs, JsonFormat, LogArgs, NetArgs, ScheduleArgs, StoreArgs, TestArgs, TextArgs,
};
use super::values::history_ref;
use crate::plan::search::SearchPlan;
use crate::plan::{
    ClientPlan, Family, Gates, Iperf3Schema, OutputFormat, Schedule, ScheduleEnd, StorePlan,
};
use crate::plan::{DEFAULT_TCP_BLOCK, DEFAULT_UDP_DATAGRAM, DEFAULT_UDP_RATE};
use crate::record::LinkAssumption;
use crate::store::Store;

/// Shortest interval between reports.
pub(super) const MIN_INTERVAL: Duration = Duration::from_millis(10);

pub(super) fn with_store(mut plan: ClientPlan, s: &StoreArgs) -> ClientPlan {
    plan.store = store_plan(s);
    plan
}

pub(super) fn store_plan(s: &StoreArgs) -> StorePlan {
    StorePlan {
        path: if s.no_store { None } else { s.db.clone().or_else(Store::default_path) },
        labels: s.label.clone(),
    }
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

pub(super) fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // Without randomness the order is still a valid shuffle, just the same every time.
    let _ = getrandom::getrandom(&mut b);
    u64::from_le_bytes(b)
}

pub(super) fn family(net: &NetArgs) -> Family {
    match (net.ipv4, net.ipv6) {
        (true, _) => Family::V4,
        (_, true) => Family::V6,
        _ => Family::Any,
    }
}

pub(super) fn output(net: &NetArgs) -> OutputFormat {
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
        spec.end = EndCondition::Duration { duration_ms: millis(t.trial).max(1) };
        SearchPlan {
            max_loss: t.loss / 100.0,
            // Unset -b means "start unpaced", not the 1 Mbit/s UDP default.
            start_bits_per_second: t.run.bitrate.map_or(0, |b| b.bits_per_second()),
        }
    });
    if find_max.is_some() && net.json_stream {
        return Err("--json-stream follows one test's intervals; --find-max runs many trials \
                    and writes one document at the end: use -J"
            .into());
    }
    if t.run.connect_timeout.is_zero() {
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
        cpus: t.run.affinity.as_ref().map_or_else(Vec::new, |a| a.client.clone()),
        placement: t.run.affinity.as_ref().map_or_else(Default::default, |a| a.placement),
        calibrated: Vec::new(),
        agents_only: false,
        connect_timeout: t.run.connect_timeout,
        queue_timeout: t.queue_timeout.unwrap_or(linerate_proto::QUEUE_LIMIT),
        output: output(net),
        link: t
            .run
            .link_speed
            .filter(|l| l.bits_per_second() > 0)
            .map(|l| LinkAssumption { bits_per_second: l.bits_per_second(), mtu_bytes: t.run.mtu }),
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

pub(super) fn text_options(t: &TextArgs) -> crate::plan::text::TextOptions {
    crate::plan::text::TextOptions {
        scale: t.format.unwrap_or_default(),
        verbose: t.verbose,
        ..log_options(&t.log)
    }
}

pub(super) fn log_options(l: &LogArgs) -> crate::plan::text::TextOptions {
    crate::plan::text::TextOptions {
        timestamps: l.timestamps.clone(),
        logfile: l.logfile.clone(),
        forceflush: l.forceflush,
        ..Default::default()
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The probes of `--under-load`, checked against the test they run beside.
pub(super) fn under_load_plan(
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
pub(super) fn rr_spec(t: &TestArgs) -> Result<Option<linerate_proto::latency::RrSpec>, String> {
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

pub(super) fn test_spec(t: &TestArgs, default_time: Duration) -> Result<TestSpec, String> {
    let end = match (t.run.time, t.bytes) {
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
    if !t.run.interval.is_zero() && t.run.interval < MIN_INTERVAL {
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
        bits_per_second: match (t.run.bitrate, t.udp) {
            (Some(b), _) => b.bits_per_second(),
            (None, true) if !t.rr && !t.crr => DEFAULT_UDP_RATE,
            (None, _) => 0,
        },
        mss_bytes: t.mss,
        // Request/response needs each small write on the wire at once, as netperf's TCP_RR.
        no_delay: t.run.no_delay || ((t.rr || t.crr) && !t.udp),
        congestion: t.run.congestion.clone(),
        omit_ms: t.run.omit.map_or(0, millis),
        interval_ms: millis(t.run.interval),
        zerocopy: t.zerocopy,
        title: t.run.title.clone(),
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
        server_cpus: t.run.affinity.as_ref().map_or_else(Vec::new, |a| a.server.clone()),
        rr: rr_spec(t)?,
        // iperf3 reads a zero type of service or pacing cap as "leave the kernel's default".
        tos: t.tos.or(t.dscp).and_then(std::num::NonZeroU8::new),
        fq_rate_bps: t.fq_rate.and_then(|r| std::num::NonZeroU64::new(r.bits_per_second())),
        dont_fragment: t.dont_fragment,
        burst: t.run.bitrate.and_then(|b| b.burst),
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

pub(super) fn with_gates(mut plan: ClientPlan, g: &GateArgs) -> Result<ClientPlan, String> {
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
