//! The figures of a fleet run: totals per direction, each host's share, and how evenly the
//! hosts and the flows shared the capacity (the VMware paper's Figures 4–6 question).
//!
//! **The shared window.** Hosts start within a control round trip of each other, not at
//! once, and stop likewise. Only the time every host was sending counts: from the latest
//! start (plus `-O`) to the earliest end, on the coordinator's clock. Each host's bytes in
//! that window come from its receiver's interval samples, placed on the coordinator's clock
//! at the host's measured start and interpolated linearly inside the samples at the two
//! edges (the error is the rate change within one sample across the skew, i.e. milliseconds
//! of a multi-second window). A host without interval samples is counted over its own whole
//! test, and the summary says so.
//!
//! **Spread.** Across hosts: each host's rate (the sum of its flows). Across flows: every
//! flow of every host. For both: mean, standard deviation, min–max, coefficient of variation
//! and Jain's index ((Σx)²/(n·Σx²): 1 when all are equal, 1/n when one took everything).
//!
//! **Outliers.** A host more than [`OUTLIER_SHARE`] away from the median of the hosts is
//! named. The median, not the mean: one slow host drags the mean down, and with few hosts
//! every other host would then look "high" and be named too. Its reason must be what sets it
//! apart from the other hosts ([`outlier_reason`]): its own run's verdict when most other
//! hosts' runs gave another; else a figure far from every other host's (retransmits, its
//! server's CPU); else "no cause found", saying which verdict it shares. A verdict every host
//! gave ("starved" on a busy coordinator) explains none of them.
//!
//! Pure; no I/O.

use std::time::Duration;

use linerate_proto::{Flow, StreamRole};
use serde::Serialize;

use crate::record::{End, Outcome, RunRecord};
use crate::stats::fairness::jain_index;
use crate::stats::sample::describe;
use crate::stats::{Summary, summarize};

/// How far from the hosts' median (as a fraction of it) a host must be to be named.
pub const OUTLIER_SHARE: f64 = 0.10;

/// One host's run as the fleet saw it.
#[derive(Debug, Clone, Copy)]
pub struct HostInput<'a> {
    /// What reports call it.
    pub label: &'a str,
    /// Its run.
    pub record: &'a RunRecord,
    /// When its streams started, after the fleet's go (None: it never started).
    pub started: Option<Duration>,
    /// When its first data byte moved on the coordinator, after the go (None: not known).
    pub first_byte: Option<Duration>,
}

impl<'a> HostInput<'a> {
    /// A host run as stored: placed by its record's fleet place (label, measured start); one
    /// without a place is called by its server.
    pub fn placed(record: &'a RunRecord) -> Self {
        let place = record.fleet.as_ref();
        HostInput {
            label: place.map_or(record.server.as_str(), |f| f.label.as_str()),
            record,
            started: place.and_then(|f| f.started_us).map(Duration::from_micros),
            first_byte: place.and_then(|f| f.first_byte_us).map(Duration::from_micros),
        }
    }
}

/// Mean, spread and fairness of some rates (bit/s).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// How many rates.
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// Sample standard deviation; None for n < 2.
    pub stddev: Option<f64>,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// stddev / mean; None for n < 2 or a zero mean.
    pub cv: Option<f64>,
    /// Jain's fairness index; None for n < 2 or nothing moved.
    pub jain: Option<f64>,
}

impl Spread {
    /// The spread of `rates`; None when there are none (or any is not finite).
    pub fn of(rates: &[f64]) -> Option<Self> {
        let d = describe(rates)?;
        Some(Self {
            n: d.n,
            mean: d.mean,
            stddev: d.stddev,
            min: d.min,
            max: d.max,
            cv: d.cv,
            jain: jain_index(rates),
        })
    }
}

/// One host in one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostFigures {
    /// The host's label.
    pub label: String,
    /// Its flows' sum in the shared window (or its whole test, see `whole_test`), bit/s.
    pub bits_per_second: f64,
    /// Its share of the direction's total, 0..=1.
    pub share: f64,
    /// Each of its flows, bit/s, by stream id.
    pub flows: Vec<f64>,
    /// Its own run's receiver figure over its whole test, bit/s.
    pub whole_test_bits_per_second: Option<f64>,
    /// True when the host had no interval samples, so its whole test was counted.
    pub whole_test: bool,
    /// Retransmitted segments of its senders.
    pub retransmits: Option<u64>,
    /// Its senders' smoothed round-trip time at the end, mean over its streams, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<u64>,
    /// Its senders' congestion window at the end, mean over its streams, segments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwnd_segments: Option<u64>,
    /// What its own run's verdict says limited this direction (a verdict id).
    pub limit: Option<String>,
    /// The verdict's sentence.
    pub limit_summary: Option<String>,
    /// The host's server process, % of one core.
    pub server_cpu_percent: Option<f64>,
    /// The host's server process's peak resident memory, bytes.
    pub server_peak_rss_bytes: Option<u64>,
    /// Bytes its receivers counted outside the shared window (before it, including `-O`,
    /// and after it): reported apart, as `-O` reports the omitted seconds. None when the
    /// host was counted over its whole test.
    pub outside_window_bytes: Option<f64>,
    /// The node its server named (`linerate server --node-name`), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The zone its server named (`--zone`), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// A host named for being far from the mean.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outlier {
    /// Its label.
    pub label: String,
    /// Its rate against the hosts' median, in percent (−41 = 41 % less than the median).
    pub against_median_percent: f64,
    /// What its own verdict says limited it.
    pub limit_summary: Option<String>,
    /// Why it stands apart, from evidence that tells it from the other hosts
    /// ([`outlier_reason`]).
    pub reason: String,
}

/// One direction of a fleet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetDirection {
    /// Which way.
    pub flow: Flow,
    /// Sum over the hosts, bit/s.
    pub total_bits_per_second: f64,
    /// Every measured host.
    pub hosts: Vec<HostFigures>,
    /// Across hosts (each host's sum).
    pub across_hosts: Option<Spread>,
    /// Across every flow of every host.
    pub across_flows: Option<Spread>,
    /// Hosts far from the mean.
    pub outliers: Vec<Outlier>,
    /// Bytes the hosts' receivers counted outside the shared window, summed (None when no
    /// host was windowed).
    pub outside_window_bytes: Option<f64>,
    /// Their share of every byte the receivers counted, 0..=1.
    pub outside_window_share: Option<f64>,
    /// The theoretical TCP goodput of the link the user named (`--link-speed`, `--mtu`):
    /// the coordinator's link, which carries the total. None without one.
    pub link_goodput_bits_per_second: Option<f64>,
}

/// How far apart the hosts started and stopped, on the coordinator's clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Skew {
    /// Latest start minus earliest start, seconds.
    pub start_seconds: f64,
    /// What "start" means in `start_seconds`.
    pub start_of: StartOf,
    /// Latest end minus earliest end, seconds.
    pub stop_seconds: f64,
}

/// The instant a host's start is taken at, for the start skew.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StartOf {
    /// Its first data byte written or read on the coordinator: what the skew is about.
    FirstByte,
    /// Its streams' start on the coordinator (runs stored before first bytes were kept).
    StreamStart,
}

/// Everything derived from a fleet run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetSummary {
    /// Hosts planned.
    pub hosts_planned: usize,
    /// Hosts whose test completed and count in the figures.
    pub hosts_measured: usize,
    /// Hosts that failed or were interrupted: label and why.
    pub not_measured: Vec<(String, String)>,
    /// Start and stop spread.
    pub skew: Option<Skew>,
    /// The shared window, seconds after the go: (from, to).
    pub window: Option<(f64, f64)>,
    /// The time outside the shared window: from the earliest host's start to the window's
    /// start (the skew plus `-O`), and from the window's end to the latest host's end.
    pub unshared_seconds: Option<(f64, f64)>,
    /// One per direction of the test.
    pub directions: Vec<FleetDirection>,
    /// The coordinator (this host: every host's client end) in % of one core: the whole
    /// process, as each host's run measured it (the largest of them).
    pub coordinator_cpu_percent: Option<f64>,
    /// The coordinator's peak resident memory, bytes (the largest its hosts' runs saw).
    pub coordinator_peak_rss_bytes: Option<u64>,
    /// A fleet of request/response tests (`--rr`, `--crr`): transactions and latency per
    /// host and across the fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<FleetLatency>,
}

impl FleetSummary {
    /// The directions read as throughput: none for a fleet of request/response tests, whose
    /// bytes are requests (its figures are its transactions and latency).
    pub fn throughput_directions(&self) -> &[FleetDirection] {
        if self.latency.is_some() { &[] } else { &self.directions }
    }
}

/// The transactions of a fleet of request/response tests, over each host's whole test (a
/// transaction's latency belongs to it wherever it falls, so no shared window applies).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetLatency {
    /// Per host, in the fleet's order.
    pub hosts: Vec<HostLatency>,
    /// Every host's transactions per second, summed.
    pub transactions_per_second: f64,
    /// Jain's index of the hosts' transaction rates (1 = equal shares).
    pub jain: Option<f64>,
    /// Every transaction of every host: median, 99th and 99.9th percentiles, maximum, ns.
    pub p50_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// 99.9th percentile.
    pub p99_9_ns: Option<u64>,
    /// Largest.
    pub max_ns: Option<u64>,
}

/// One host of a [`FleetLatency`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostLatency {
    /// The host's label.
    pub label: String,
    /// Its transactions per second.
    pub transactions_per_second: Option<f64>,
    /// Its median latency, ns.
    pub p50_ns: Option<u64>,
    /// Its 99th percentile, ns.
    pub p99_ns: Option<u64>,
    /// Its largest, ns.
    pub max_ns: Option<u64>,
}

/// The latency figures of a fleet's request/response hosts; None for bulk fleets.
fn fleet_latency(measured: &[HostInput<'_>], summaries: &[Summary]) -> Option<FleetLatency> {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let mut merged = linerate_proto::histogram::DurationHistogram::new();
    let mut hosts = Vec::new();
    for (h, s) in measured.iter().zip(summaries) {
        let Some(l) = &s.latency else { continue };
        merged.merge(&l.histogram);
        hosts.push(HostLatency {
            label: h.label.to_string(),
            transactions_per_second: l.transactions_per_second,
            p50_ns: l.p50_ns,
            p99_ns: l.p99_ns,
            max_ns: l.max_ns,
        });
    }
    if hosts.is_empty() {
        return None;
    }
    let rates: Vec<f64> = hosts.iter().filter_map(|h| h.transactions_per_second).collect();
    Some(FleetLatency {
        transactions_per_second: rates.iter().sum(),
        jain: crate::stats::fairness::jain_index(&rates),
        p50_ns: merged.quantile(0.5).map(ns),
        p99_ns: merged.quantile(0.99).map(ns),
        p99_9_ns: merged.quantile(0.999).map(ns),
        max_ns: merged.max().map(ns),
        hosts,
    })
}

/// A host's receiving streams of `flow`, with its placement on the fleet's clock.
struct Placed<'a> {
    input: HostInput<'a>,
    /// The host's own run summary (computed once per host).
    summary: &'a Summary,
    receivers: Vec<&'a linerate_proto::StreamResult>,
}

/// Seconds after the go at which the host's receivers saw their last byte counted.
fn end_of(p: &Placed<'_>) -> Option<f64> {
    let start = p.input.started?.as_secs_f64();
    // `duration_us` runs from the test's start, `-O` included.
    let last = p.receivers.iter().map(|s| s.duration_us).max()?;
    Some(start + last as f64 / 1e6)
}

/// When a host's receivers' first interval samples end (the latest), seconds after the go.
fn first_sample_end(p: &Placed<'_>) -> Option<f64> {
    let start = p.input.started?.as_secs_f64();
    let ends = p.receivers.iter().map(|s| s.intervals.first().map(|i| i.end_us));
    Some(start + ends.collect::<Option<Vec<u64>>>()?.into_iter().max()? as f64 / 1e6)
}

/// When a host's receivers' last interval samples start (the earliest), seconds after the go.
fn last_sample_start(p: &Placed<'_>) -> Option<f64> {
    let start = p.input.started?.as_secs_f64();
    let starts = p.receivers.iter().map(|s| s.intervals.last().map(|i| i.start_us));
    Some(start + starts.collect::<Option<Vec<u64>>>()?.into_iter().min()? as f64 / 1e6)
}

/// Bytes a stream received between `from` and `to` seconds after its host's start, from its
/// interval samples (linear inside a sample). None without samples.
fn bytes_between(s: &linerate_proto::StreamResult, from: f64, to: f64) -> Option<f64> {
    if s.intervals.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for i in &s.intervals {
        let (a, b) = (i.start_us as f64 / 1e6, i.end_us as f64 / 1e6);
        if b <= a {
            continue;
        }
        let overlap = (b.min(to) - a.max(from)).max(0.0);
        total += i.bytes as f64 * overlap / (b - a);
    }
    Some(total)
}

/// Bytes a stream's interval samples hold, over its whole test.
fn sample_bytes(s: &linerate_proto::StreamResult) -> f64 {
    s.intervals.iter().map(|i| i.bytes as f64).sum()
}

/// Where a host run belongs, for [`split_attempts`]: its fleet run's key (host count or its
/// index, repetition), the hosts that fleet run planned, and the host's label.
pub type AttemptOf<'a> = ((usize, u32), usize, &'a str);

/// The one rule that tells a curve's fleet runs apart in the history (`fleet --scale` and a
/// campaign's fleet tier; resume and reports alike). A fleet run is stored as one run per
/// host, all under one (host count, repetition); a resume runs a (host count, repetition)
/// again when an earlier attempt did not measure every host, so one key may hold several
/// attempts, each stored host after host. In stored order, a host run joins the newest
/// attempt of its key unless that attempt already holds as many runs as hosts were planned,
/// or a run with the same label; then it opens a new attempt. Returns each run's attempt
/// number (0, 1, … in the order attempts open). An attempt with fewer runs than planned (the
/// process was killed while storing it) stays one partial attempt.
pub fn split_attempts<'a>(runs: impl IntoIterator<Item = AttemptOf<'a>>) -> Vec<usize> {
    let mut open: Vec<((usize, u32), usize, Vec<&'a str>)> = Vec::new();
    let mut out = Vec::new();
    for (key, hosts, label) in runs {
        let newest = open.iter().rposition(|(k, _, _)| *k == key);
        let joins = newest.filter(|&a| {
            let (_, planned, labels) = &open[a];
            labels.len() < (*planned).max(1) && !labels.contains(&label)
        });
        let at = match joins {
            Some(a) => a,
            None => {
                open.push((key, hosts, Vec::new()));
                open.len() - 1
            }
        };
        open[at].2.push(label);
        out.push(at);
    }
    out
}

/// The figures of one fleet run planned as `planned` hosts, however many records it has: a
/// host whose record was never stored (an interrupted store) still counts as planned, so the
/// run reads as partial, not as a smaller fleet.
pub fn summarize_planned(planned: usize, hosts: &[HostInput<'_>]) -> FleetSummary {
    let mut summary = summarize_fleet(hosts);
    summary.hosts_planned = summary.hosts_planned.max(planned);
    summary
}

/// The fleet's figures.
pub fn summarize_fleet(hosts: &[HostInput<'_>]) -> FleetSummary {
    let measured: Vec<HostInput<'_>> =
        hosts.iter().copied().filter(|h| h.record.outcome == Outcome::Completed).collect();
    let not_measured = hosts
        .iter()
        .filter(|h| h.record.outcome != Outcome::Completed)
        .map(|h| {
            let why = match &h.record.outcome {
                Outcome::Failed { error, .. } => error.clone(),
                Outcome::Interrupted => "interrupted".to_string(),
                Outcome::Completed => unreachable!("filtered"),
            };
            (h.label.to_string(), why)
        })
        .collect();
    let omit = measured.first().map_or(0.0, |h| h.record.spec.omit_ms as f64 / 1e3);
    let mut flows: Vec<Flow> = measured
        .first()
        .map(|h| h.record.spec.stream_plan().iter().map(|(_, f)| *f).collect())
        .unwrap_or_default();
    flows.dedup();
    let summaries: Vec<Summary> = measured.iter().map(|h| summarize(h.record)).collect();
    let placed_for = |flow: Flow| -> Vec<Placed<'_>> {
        measured
            .iter()
            .zip(&summaries)
            .map(|(&input, summary)| Placed {
                input,
                summary,
                receivers: input
                    .record
                    .receiving_side(flow)
                    .map(|side| {
                        side.streams
                            .iter()
                            .filter(|s| s.flow == flow && s.role == StreamRole::Receiver)
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    };
    let placed: Vec<(Flow, Vec<Placed<'_>>)> = flows.iter().map(|&f| (f, placed_for(f))).collect();
    let starts: Vec<f64> =
        measured.iter().filter_map(|h| h.started.map(|d| d.as_secs_f64())).collect();
    let ends: Vec<f64> = placed.iter().flat_map(|(_, p)| p).filter_map(end_of).collect();
    let spread = |v: &[f64]| {
        let max = v.iter().copied().fold(f64::MIN, f64::max);
        let min = v.iter().copied().fold(f64::MAX, f64::min);
        max - min
    };
    let firsts: Vec<f64> =
        measured.iter().filter_map(|h| h.first_byte.map(|d| d.as_secs_f64())).collect();
    let (start_of, skew_starts) = if firsts.len() == measured.len() {
        (StartOf::FirstByte, &firsts)
    } else {
        (StartOf::StreamStart, &starts)
    };
    let complete = !measured.is_empty() && starts.len() == measured.len();
    let skew = (complete && !ends.is_empty()).then(|| Skew {
        start_seconds: spread(skew_starts),
        start_of,
        stop_seconds: spread(&ends),
    });
    let window = skew.and_then(|_| {
        let from = starts.iter().copied().fold(f64::MIN, f64::max) + omit;
        let to = ends.iter().copied().fold(f64::MAX, f64::min);
        // Inside every host's first and last interval sample: a receiver's first sample holds
        // what crossed the link before its clock started, its last the tail its flows drained
        // after the senders stopped; spread evenly over the sample (as `bytes_between` must),
        // either put bytes at instants the link was carrying other hosts' (a 1 s fleet through a
        // 956 Mbit/s link read 969). Where that leaves no window (too few samples), the edges
        // stay.
        let all = placed.iter().flat_map(|(_, p)| p);
        let inner_from = all.clone().filter_map(first_sample_end).fold(from, f64::max);
        let inner_to = all.filter_map(last_sample_start).fold(to, f64::min);
        if inner_to > inner_from {
            Some((inner_from, inner_to))
        } else {
            (to > from).then_some((from, to))
        }
    });
    let link = link_goodput(&measured);
    let directions = placed
        .iter()
        .map(|(f, p)| FleetDirection {
            link_goodput_bits_per_second: link,
            ..direction(*f, p, window)
        })
        .collect();
    let unshared_seconds = window.map(|(from, to)| {
        let first = starts.iter().copied().fold(f64::MAX, f64::min);
        let last = ends.iter().copied().fold(f64::MIN, f64::max);
        ((from - first).max(0.0), (last - to).max(0.0))
    });
    let largest = |v: Option<f64>, x: f64| Some(v.map_or(x, |m: f64| m.max(x)));
    let coordinator_cpu_percent = summaries
        .iter()
        .filter_map(|s| end_cost(s, End::Client)?.process_percent_of_core)
        .fold(None, largest);
    let coordinator_peak_rss_bytes =
        summaries.iter().filter_map(|s| end_cost(s, End::Client)?.peak_rss_bytes).max();
    let latency = fleet_latency(&measured, &summaries);
    FleetSummary {
        latency,
        hosts_planned: hosts.len(),
        hosts_measured: measured.len(),
        not_measured,
        skew,
        window,
        unshared_seconds,
        directions,
        coordinator_cpu_percent,
        coordinator_peak_rss_bytes,
    }
}

/// One end's cost figures in a run's summary.
fn end_cost(summary: &Summary, end: End) -> Option<&crate::stats::cost::CostSummary> {
    summary.cost.iter().find(|c| c.end == end)
}

fn direction(flow: Flow, placed: &[Placed<'_>], window: Option<(f64, f64)>) -> FleetDirection {
    let mut hosts: Vec<HostFigures> =
        placed.iter().map(|p| host_figures(flow, p, window)).collect();
    let total: f64 = hosts.iter().map(|h| h.bits_per_second).sum();
    for h in &mut hosts {
        h.share = if total > 0.0 { h.bits_per_second / total } else { 0.0 };
    }
    let host_rates: Vec<f64> = hosts.iter().map(|h| h.bits_per_second).collect();
    let flow_rates: Vec<f64> = hosts.iter().flat_map(|h| h.flows.iter().copied()).collect();
    let across_hosts = Spread::of(&host_rates);
    let median = describe(&host_rates).map(|d| d.median);
    let outliers = match median {
        Some(m) if host_rates.len() >= 2 && m > 0.0 => hosts
            .iter()
            .filter(|h| ((h.bits_per_second - m) / m).abs() > OUTLIER_SHARE)
            .map(|h| Outlier {
                label: h.label.clone(),
                against_median_percent: (h.bits_per_second - m) / m * 100.0,
                limit_summary: h.limit_summary.clone(),
                reason: outlier_reason(h, &hosts),
            })
            .collect(),
        _ => Vec::new(),
    };
    let outside: Vec<f64> = hosts.iter().filter_map(|h| h.outside_window_bytes).collect();
    let outside_window_bytes = (!outside.is_empty()).then(|| outside.iter().sum::<f64>());
    let counted: f64 = placed.iter().flat_map(|p| &p.receivers).map(|r| sample_bytes(r)).sum();
    let outside_window_share = outside_window_bytes.filter(|_| counted > 0.0).map(|b| b / counted);
    FleetDirection {
        flow,
        total_bits_per_second: total,
        hosts,
        across_hosts,
        across_flows: Spread::of(&flow_rates),
        outliers,
        outside_window_bytes,
        outside_window_share,
        link_goodput_bits_per_second: None,
    }
}

/// The TCP goodput of the link the hosts' runs name (they all carry the fleet's one
/// `--link-speed`), over IPv6 when the first host was reached over it.
fn link_goodput(measured: &[HostInput<'_>]) -> Option<f64> {
    let record = measured.first()?.record;
    let ipv6 = record
        .remote_address
        .as_deref()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .is_some_and(|a| a.is_ipv6());
    crate::stats::verdict::tcp_goodput_bits_per_second(record.link.as_ref()?, ipv6)
}

fn host_figures(flow: Flow, p: &Placed<'_>, window: Option<(f64, f64)>) -> HostFigures {
    let summary = p.summary;
    let dir = summary.directions.iter().find(|d| d.flow == flow);
    let whole = dir.and_then(|d| d.receiver.as_ref()?.figures.bits_per_second);
    let verdict = summary.verdicts.iter().find(|v| v.flow == flow);
    let server = end_cost(summary, End::Server);
    let server_environment =
        p.input.record.server_results.as_ref().and_then(|r| r.environment.as_deref());
    // Each receiver's bytes in the shared window, and the window's length.
    let windowed: Option<(Vec<f64>, f64)> =
        window.zip(p.input.started).and_then(|((from, to), s)| {
            let s = s.as_secs_f64();
            let bytes: Option<Vec<f64>> =
                p.receivers.iter().map(|r| bytes_between(r, from - s, to - s)).collect();
            Some((bytes?, to - from))
        });
    let whole_test = windowed.is_none();
    let outside_window_bytes = windowed.as_ref().map(|(inside, _)| {
        let all: f64 = p.receivers.iter().map(|r| sample_bytes(r)).sum();
        (all - inside.iter().sum::<f64>()).max(0.0)
    });
    let flows = windowed.map(|(bytes, len)| bytes.iter().map(|b| b * 8.0 / len).collect());
    let flows: Vec<f64> = flows.unwrap_or_else(|| {
        summary
            .streams
            .iter()
            .filter(|s| s.flow == flow)
            .filter_map(|s| s.receiver.as_ref()?.bits_per_second)
            .collect()
    });
    let tcp = p.input.record.sender_tcp(flow);
    let mean = |f: fn(&linerate_proto::TcpInternals) -> u32| {
        (!tcp.is_empty())
            .then(|| tcp.iter().map(|t| u64::from(f(t))).sum::<u64>() / tcp.len() as u64)
    };
    HostFigures {
        label: p.input.label.to_string(),
        bits_per_second: flows.iter().sum(),
        share: 0.0,
        flows,
        whole_test_bits_per_second: whole,
        whole_test,
        retransmits: dir.and_then(|d| d.sender.as_ref()?.retransmits),
        rtt_us: mean(|t| t.rtt_us),
        cwnd_segments: mean(|t| t.cwnd_segments),
        limit: verdict.map(|v| v.id()),
        limit_summary: verdict.map(|v| v.summary.clone()),
        server_cpu_percent: server.and_then(|c| c.process_percent_of_core),
        server_peak_rss_bytes: server.and_then(|c| c.peak_rss_bytes),
        outside_window_bytes,
        node: server_environment.and_then(|e| e.node.clone()),
        zone: server_environment.and_then(|e| e.zone.clone()),
    }
}

/// Retransmits this many times every other host's most (and at least [`RETRANSMITS_APART`])
/// set a host apart: its path dropped packets theirs did not.
const RETRANSMITS_FACTOR: u64 = 10;
/// The fewest retransmits that can set a host apart.
const RETRANSMITS_APART: u64 = 100;
/// A round-trip time this many times every other host's longest (and at least
/// [`RTT_APART_US`] longer) sets a host apart: a queue on its own path; a congestion window
/// this many times smaller than every other's smallest, a path that keeps it small.
const TCP_FACTOR: u64 = 4;
/// The least difference in round-trip time that can set a host apart, µs.
const RTT_APART_US: u64 = 1000;

/// Why outlier `h` stands apart from the other `hosts`. Its own evidence first, each that
/// holds: retransmits [`RETRANSMITS_FACTOR`] times every other host's; a round-trip time
/// [`TCP_FACTOR`] times every other's, or a congestion window that many times smaller; its
/// server at a full core when every other server used under half of one. Then its own
/// verdict when most others gave another — said beside the evidence when both hold, and named
/// as the coordinator's condition when it is about the client end, which every host's run
/// shares (all client ends run in the coordinator; issue 46: a busy coordinator made a host
/// whose own path dropped thousands of packets "limited by client CPU"). Else "no cause
/// found", naming the verdict it shares.
pub fn outlier_reason(h: &HostFigures, hosts: &[HostFigures]) -> String {
    let others: Vec<&HostFigures> = hosts.iter().filter(|o| o.label != h.label).collect();
    let evidence = own_evidence(h, &others);
    let sharing = others.iter().filter(|o| o.limit.is_some() && o.limit == h.limit).count();
    let verdict = h.limit_summary.as_ref().filter(|_| sharing * 2 <= others.len());
    let coordinator = h.limit.as_deref().is_some_and(|l| l.ends_with("(client)"));
    match (evidence.is_empty(), verdict) {
        (false, Some(v)) if coordinator => format!(
            "{}; its run's verdict also says {v}, a condition of the coordinator, where the \
             client end of every host runs",
            evidence.join("; ")
        ),
        (false, Some(v)) => format!("{}; its run's verdict also says {v}", evidence.join("; ")),
        (false, None) => evidence.join("; "),
        (true, Some(v)) => v.clone(),
        (true, None) => match &h.limit_summary {
            Some(summary) => format!(
                "no cause found: its run's verdict ({summary}) is that of {sharing} of the other \
                 {} hosts too, and no figure sets it apart",
                others.len()
            ),
            None => "no cause found: its run gave no verdict, and no figure sets it apart".into(),
        },
    }
}

/// What sets `h` apart from every one of `others` by its own figures (see [`outlier_reason`]).
fn own_evidence(h: &HostFigures, others: &[&HostFigures]) -> Vec<String> {
    // Every other host's figure, or None if one of them lacks it.
    let all = |f: fn(&HostFigures) -> Option<u64>| -> Option<(u64, u64)> {
        let v: Option<Vec<u64>> = others.iter().map(|o| f(o)).collect();
        let v = v.filter(|v| !v.is_empty())?;
        Some((*v.iter().min()?, *v.iter().max()?))
    };
    let mut out = Vec::new();
    if let (Some(r), Some((least, most))) = (h.retransmits, all(|o| o.retransmits))
        && r >= RETRANSMITS_APART
        && r >= RETRANSMITS_FACTOR * most.max(1)
    {
        out.push(format!(
            "{r} retransmits against {least}–{most} on the other hosts: its path dropped \
             packets theirs did not"
        ));
    }
    if let (Some(rtt), Some((least, most))) = (h.rtt_us, all(|o| o.rtt_us))
        && rtt >= TCP_FACTOR * most.max(1)
        && rtt >= most + RTT_APART_US
    {
        let ms = |us: u64| us as f64 / 1000.0;
        out.push(format!(
            "its flows' round-trip time was {:.1} ms against {:.1}–{:.1} ms on the other hosts: \
             a queue on its own path",
            ms(rtt),
            ms(least),
            ms(most)
        ));
    }
    if let (Some(cwnd), Some((least, most))) = (h.cwnd_segments, all(|o| o.cwnd_segments))
        && cwnd.saturating_mul(TCP_FACTOR) <= least
    {
        out.push(format!(
            "its congestion window ended at {cwnd} segments against {least}–{most} on the \
             other hosts"
        ));
    }
    let cpu: Vec<f64> = others.iter().filter_map(|o| o.server_cpu_percent).collect();
    if let (Some(c), Some(most)) = (h.server_cpu_percent, cpu.iter().copied().reduce(f64::max))
        && cpu.len() == others.len()
        && c >= 90.0
        && most < 50.0
    {
        out.push(format!(
            "its server used {c:.0}% of a core, every other host's at most {most:.0}%: its \
             server was the limit"
        ));
    }
    out
}

#[cfg(test)]
impl HostFigures {
    /// A host with this rate and these flows, for tests.
    pub fn for_tests(label: &str, bits_per_second: f64, flows: Vec<f64>) -> Self {
        HostFigures {
            label: label.into(),
            bits_per_second,
            share: 0.0,
            flows,
            whole_test_bits_per_second: Some(bits_per_second),
            whole_test: false,
            retransmits: None,
            rtt_us: None,
            cwnd_segments: None,
            limit: None,
            limit_summary: None,
            server_cpu_percent: None,
            server_peak_rss_bytes: None,
            outside_window_bytes: None,
            node: None,
            zone: None,
        }
    }
}

#[cfg(test)]
impl FleetSummary {
    /// A fleet of these hosts in one direction (and these not measured), for tests.
    pub fn for_tests(flow: Flow, hosts: Vec<HostFigures>, not_measured: &[&str]) -> Self {
        let rates: Vec<f64> = hosts.iter().map(|h| h.bits_per_second).collect();
        let flows: Vec<f64> = hosts.iter().flat_map(|h| h.flows.clone()).collect();
        FleetSummary {
            hosts_planned: hosts.len() + not_measured.len(),
            hosts_measured: hosts.len(),
            not_measured: not_measured.iter().map(|l| (l.to_string(), "refused".into())).collect(),
            skew: None,
            window: None,
            unshared_seconds: None,
            directions: vec![FleetDirection {
                flow,
                total_bits_per_second: rates.iter().sum(),
                hosts,
                across_hosts: Spread::of(&rates),
                across_flows: Spread::of(&flows),
                outliers: vec![],
                outside_window_bytes: None,
                outside_window_share: None,
                link_goodput_bits_per_second: None,
            }],
            coordinator_cpu_percent: None,
            coordinator_peak_rss_bytes: None,
            latency: None,
        }
    }

    /// A fleet of `hosts` equal hosts with this total, for tests.
    pub fn even_for_tests(flow: Flow, hosts: usize, total: f64) -> Self {
        let per = total / hosts as f64;
        let figures =
            (0..hosts).map(|i| HostFigures::for_tests(&format!("h{i}"), per, vec![per])).collect();
        Self::for_tests(flow, figures, &[])
    }
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
