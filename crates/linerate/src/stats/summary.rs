//! Per-direction and per-stream summaries of one run, from both ends' raw figures.

use serde::Serialize;

use linerate_proto::{Flow, SideResults, StreamResult, StreamRole};

use crate::record::{End, RunRecord};

/// Bytes over time, with the derived rate (None when the time is zero: nothing to divide by).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figures {
    /// Bytes counted (after the omitted warm-up).
    pub bytes: u64,
    /// Seconds counted (after the omitted warm-up).
    pub seconds: f64,
    /// bytes × 8 / seconds.
    pub bits_per_second: Option<f64>,
}

impl Figures {
    fn new(bytes: u64, micros: u64) -> Self {
        let seconds = micros as f64 / 1e6;
        let bits_per_second = (micros > 0).then(|| bytes as f64 * 8.0 / seconds);
        Self { bytes, seconds, bits_per_second }
    }

    /// Several streams together: bytes after the warm-up summed, over the longest stream's
    /// time after the warm-up.
    pub fn of_streams<'a>(streams: impl IntoIterator<Item = &'a StreamResult> + Clone) -> Self {
        let bytes = streams.clone().into_iter().map(|s| s.measured_bytes()).sum();
        let micros = streams.into_iter().map(|s| s.measured_us()).max().unwrap_or(0);
        Self::new(bytes, micros)
    }
}

/// One end's view of one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideFigures {
    /// Whose view it is.
    pub end: End,
    /// Sum over the direction's streams.
    #[serde(flatten)]
    pub figures: Figures,
    /// Streams counted.
    pub streams: usize,
    /// Retransmitted segments (senders; None where the OS does not say).
    pub retransmits: Option<u64>,
    /// Smallest and largest SO_SNDBUF the kernel granted, bytes.
    pub send_buffer_bytes: Option<(u64, u64)>,
    /// Smallest and largest SO_RCVBUF the kernel granted, bytes.
    pub recv_buffer_bytes: Option<(u64, u64)>,
    /// Smallest and largest MSS.
    pub mss_bytes: Option<(u32, u32)>,
    /// Congestion control in use (first stream).
    pub congestion: Option<String>,
    /// Smallest and largest type-of-service byte read back (`-S`/`--dscp` tests only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos: Option<(u8, u8)>,
    /// Smallest and largest pacing cap read back, bit/s (`--fq-rate` tests only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pacing_rate_bps: Option<(u64, u64)>,
    /// Stream errors, if any.
    pub errors: Vec<String>,
}

/// Both ends of one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionSummary {
    /// Which way.
    pub flow: Flow,
    /// The sending end (None if it reported nothing).
    pub sender: Option<SideFigures>,
    /// The receiving end.
    pub receiver: Option<SideFigures>,
    /// Jain's index of the direction's streams' received rates (None with fewer than two
    /// streams or no receiver figures): 1 when every stream got the same share.
    pub jain: Option<f64>,
}

/// One stream, both ends.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamSummary {
    /// Stream id.
    pub id: u32,
    /// Which way.
    pub flow: Flow,
    /// Sender's figures.
    pub sender: Option<Figures>,
    /// Receiver's figures.
    pub receiver: Option<Figures>,
    /// Sender's retransmits.
    pub retransmits: Option<u64>,
}

/// Everything derived from a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// One per direction in the test.
    pub directions: Vec<DirectionSummary>,
    /// One per stream.
    pub streams: Vec<StreamSummary>,
    /// What the test cost each end that reported it.
    pub cost: Vec<crate::stats::CostSummary>,
    /// What limited each direction.
    pub verdicts: Vec<crate::stats::Verdict>,
    /// Things in the figures the reader must know about, in plain words.
    pub warnings: Vec<String>,
    /// UDP accounting per direction (UDP tests only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub udp: Vec<crate::stats::udp::UdpSummary>,
    /// Transactions and latency (request/response tests only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<crate::stats::latency::LatencySummary>,
    /// Idle and loaded latency, added delay, responsiveness (`--under-load` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub under_load: Option<crate::stats::under_load::UnderLoadSummary>,
}

/// Computes the summary of a run from both ends' raw results.
pub fn summarize(record: &RunRecord) -> Summary {
    let sides = record.sides();
    let mut flows: Vec<Flow> = record.spec.stream_plan().iter().map(|(_, f)| *f).collect();
    flows.dedup();
    let mut directions: Vec<DirectionSummary> = flows
        .iter()
        .map(|&flow| DirectionSummary {
            flow,
            sender: side_figures(&sides, flow, StreamRole::Sender),
            receiver: side_figures(&sides, flow, StreamRole::Receiver),
            jain: None,
        })
        .collect();
    // By id and role, first seen first (as a search in order would find): 10,000 streams
    // must not cost 10,000 searches of 20,000 results.
    let mut by_id: std::collections::HashMap<(u32, StreamRole), &StreamResult> =
        std::collections::HashMap::new();
    for r in sides.iter().filter_map(|(_, s)| *s).flat_map(|s| &s.streams) {
        by_id.entry((r.id, r.role)).or_insert(r);
    }
    let streams: Vec<StreamSummary> = record
        .spec
        .stream_plan()
        .iter()
        .map(|&(id, flow)| {
            let find = |role| by_id.get(&(id, role)).copied();
            let snd = find(StreamRole::Sender);
            StreamSummary {
                id,
                flow,
                sender: snd.map(|r| Figures::new(r.measured_bytes(), r.measured_us())),
                receiver: find(StreamRole::Receiver)
                    .map(|r| Figures::new(r.measured_bytes(), r.measured_us())),
                retransmits: snd.and_then(|r| r.retransmits),
            }
        })
        .collect();
    for d in &mut directions {
        let rates: Vec<f64> = streams
            .iter()
            .filter(|s| s.flow == d.flow)
            .filter_map(|s| s.receiver.as_ref()?.bits_per_second)
            .collect();
        d.jain = crate::stats::fairness::jain_index(&rates);
    }
    let cost: Vec<crate::stats::CostSummary> =
        sides.iter().filter_map(|(end, r)| crate::stats::cost_summary(*end, (*r)?)).collect();
    let mut warnings: Vec<String> = idle_stream_warning(&streams).into_iter().collect();
    let one_machine = same_host(record);
    warnings.extend(cost.iter().flat_map(|c| crate::stats::cost_warnings(c, one_machine)));
    warnings.extend(crate::stats::verdict::link_warning(record, &directions));
    let udp = crate::stats::udp::summarize_udp(record);
    warnings.extend(crate::stats::udp::udp_warnings(&udp));
    let latency = crate::stats::latency::summarize_latency(record);
    let under_load = crate::stats::under_load::summarize_under_load(record, &directions);
    // A bulk verdict (window, CPU, path) judges a flow that saturates something; requests
    // and responses wait on each other by design, so it would only mislead.
    let verdicts = if record.spec.rr.is_some() {
        Vec::new()
    } else {
        crate::stats::verdict::verdicts(record, &directions, &cost, &udp)
    };
    warnings.extend(crate::stats::verdict::pacing_warnings(record, &directions, &verdicts));
    if cost.len() == 2 && one_machine {
        warnings.push(if same_process(record) {
            "client and server ran in one process (selftest): both ends' process and machine \
             CPU figures cover both"
                .to_string()
        } else {
            "client and server ran on the same machine: the machine-wide CPU figures of both \
             ends cover both"
                .to_string()
        });
    }
    Summary { directions, streams, cost, verdicts, warnings, udp, latency, under_load }
}

/// True when both ends reported the same kernel and the same process id.
fn same_process(record: &RunRecord) -> bool {
    let id = |r: Option<&SideResults>| {
        r.and_then(|r| r.cost.as_ref()).and_then(|c| Some((c.host_id.clone()?, c.process_id?)))
    };
    match (id(record.client.as_ref()), id(record.server_results.as_ref())) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// True when both ends ran on one machine: the same kernel boot id (network namespaces
/// included), or, when an end does not report one, a control connection on loopback.
fn same_host(record: &RunRecord) -> bool {
    let id =
        |r: Option<&SideResults>| r.and_then(|r| r.cost.as_ref()).and_then(|c| c.host_id.clone());
    if let (Some(a), Some(b)) = (id(record.client.as_ref()), id(record.server_results.as_ref())) {
        return a == b;
    }
    record.on_loopback()
}

/// Streams whose sender moved nothing while others did: the aggregate hides starvation.
fn idle_stream_warning(streams: &[StreamSummary]) -> Option<String> {
    let sent = |s: &&StreamSummary| s.sender.is_some_and(|f| f.bytes > 0);
    let busy = streams.iter().filter(sent).count();
    let idle = streams.iter().filter(|s| s.sender.is_some()).count() - busy;
    (busy > 0 && idle > 0).then(|| {
        format!(
            "{idle} of {} streams moved no data after the warm-up while the others did: the \
             host ran short of CPU for so many stream threads or of kernel TCP memory \
             (net.ipv4.tcp_mem); use fewer streams, a smaller -w, or a longer -t",
            idle + busy
        )
    })
}

fn side_figures(
    sides: &[(End, Option<&SideResults>)],
    flow: Flow,
    role: StreamRole,
) -> Option<SideFigures> {
    sides.iter().find_map(|(end, results)| {
        let streams: Vec<&StreamResult> =
            (*results)?.streams.iter().filter(|s| s.flow == flow && s.role == role).collect();
        if streams.is_empty() {
            return None;
        }
        let retransmits = streams.iter().map(|s| s.retransmits).sum::<Option<u64>>();
        Some(SideFigures {
            end: *end,
            figures: Figures::of_streams(streams.iter().copied()),
            streams: streams.len(),
            retransmits: if role == StreamRole::Sender { retransmits } else { None },
            send_buffer_bytes: range(streams.iter().filter_map(|s| s.socket.send_buffer_bytes)),
            recv_buffer_bytes: range(streams.iter().filter_map(|s| s.socket.recv_buffer_bytes)),
            mss_bytes: range(streams.iter().filter_map(|s| s.socket.mss_bytes)),
            congestion: streams.iter().find_map(|s| s.socket.congestion.clone()),
            tos: range(streams.iter().filter_map(|s| s.socket.tos)),
            max_pacing_rate_bps: range(streams.iter().filter_map(|s| s.socket.max_pacing_rate_bps)),
            errors: streams
                .iter()
                .filter_map(|s| s.error.as_ref().map(|e| format!("stream {}: {e}", s.id)))
                .collect(),
        })
    })
}

fn range<T: Ord + Copy>(values: impl Iterator<Item = T>) -> Option<(T, T)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::{Direction, SocketReport, TestSpec};

    fn stream(id: u32, flow: Flow, role: StreamRole, bytes: u64, us: u64) -> StreamResult {
        StreamResult {
            id,
            flow,
            role,
            bytes,
            omitted_bytes: bytes / 10,
            duration_us: us,
            omitted_us: us / 10,
            intervals: vec![],
            socket: SocketReport {
                send_buffer_bytes: Some(1000 * u64::from(id)),
                ..Default::default()
            },
            retransmits: (role == StreamRole::Sender).then_some(u64::from(id)),
            tcp: None,
            thread_cpu: None,
            thread_wait_us: None,
            udp_sender: None,
            udp_receiver: None,
            error: None,
            latency: None,
        }
    }

    fn record(client: Vec<StreamResult>, server: Vec<StreamResult>) -> RunRecord {
        let side = |software: &str, streams| SideResults {
            software: software.into(),
            streams,
            intervals_dropped: false,
            intervals_per_sample: 1,
            cost: None,
            environment: None,
        };
        let spec =
            TestSpec { direction: Direction::Bidirectional, streams: 2, ..TestSpec::default_tcp() };
        RunRecord::for_tests(spec, side("c", client), side("s", server))
    }

    #[test]
    fn sums_streams_per_direction_and_excludes_warmup() {
        let up = Flow::ClientToServer;
        let down = Flow::ServerToClient;
        let r = record(
            vec![
                stream(1, up, StreamRole::Sender, 1_000_000, 1_000_000),
                stream(2, up, StreamRole::Sender, 1_000_000, 2_000_000),
                stream(3, down, StreamRole::Receiver, 500_000, 1_000_000),
            ],
            vec![
                stream(1, up, StreamRole::Receiver, 1_000_000, 1_000_000),
                stream(2, up, StreamRole::Receiver, 1_000_000, 1_000_000),
                stream(3, down, StreamRole::Sender, 500_000, 1_000_000),
            ],
        );
        let s = summarize(&r);
        assert_eq!(s.directions.len(), 2);
        let upd = &s.directions[0];
        let snd = upd.sender.as_ref().expect("sender");
        assert_eq!(snd.end, End::Client);
        assert_eq!(snd.figures.bytes, 1_800_000);
        assert!((snd.figures.seconds - 1.8).abs() < 1e-9);
        assert_eq!(snd.figures.bits_per_second, Some(1_800_000.0 * 8.0 / 1.8));
        assert_eq!(snd.retransmits, Some(3));
        assert_eq!(snd.send_buffer_bytes, Some((1000, 2000)));
        let rcv = upd.receiver.as_ref().expect("receiver");
        assert_eq!(rcv.end, End::Server);
        assert_eq!(rcv.retransmits, None);
        let downd = &s.directions[1];
        assert_eq!(downd.sender.as_ref().map(|x| x.end), Some(End::Server));
        assert_eq!(s.streams.len(), 4, "stream 4 appears with no figures");
        assert_eq!(s.streams[3].sender, None);
        assert!(s.warnings.is_empty(), "stream 4 has no sender figures at all: not idle");
    }

    #[test]
    fn idle_streams_are_warned_about() {
        let up = Flow::ClientToServer;
        let mut r = record(
            vec![
                stream(1, up, StreamRole::Sender, 1000, 1_000_000),
                stream(2, up, StreamRole::Sender, 0, 1_000_000),
            ],
            vec![],
        );
        r.spec.direction = linerate_proto::Direction::Upload;
        let s = summarize(&r);
        assert_eq!(s.warnings.len(), 1);
        assert!(s.warnings[0].starts_with("1 of 2 streams moved no data"), "{}", s.warnings[0]);
    }

    #[test]
    fn zero_duration_gives_no_rate_not_infinity() {
        let r = record(vec![stream(1, Flow::ClientToServer, StreamRole::Sender, 0, 0)], vec![]);
        let s = summarize(&r);
        let snd = s.directions[0].sender.as_ref().expect("sender");
        assert_eq!(snd.figures.bits_per_second, None);
        assert!(s.directions[0].receiver.is_none());
    }
}
