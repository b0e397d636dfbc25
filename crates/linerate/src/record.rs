//! The run record: everything one test produced, as raw figures, in a versioned form that is
//! written as JSON (and later stored in the history database).
//!
//! Summaries are derived from a record by `stats::summarize`; they are never stored in it, so
//! the record stays the single source of truth. Bump [`SCHEMA_VERSION`] on any incompatible
//! change and document it in docs/JSON.md.

mod end;
mod failure;
mod placement;

use serde::{Deserialize, Serialize};

use linerate_proto::{Flow, SideResults, StreamResult, StreamRole, TcpInternals, TestSpec};

pub use end::End;
pub use failure::{Failure, FailureKind};
pub use placement::{Decision, Placement};

/// Version of the record (and of the JSON document around it).
pub const SCHEMA_VERSION: u32 = 1;

/// A thread of one end's data plane, as [`RunRecord::data_threads`] gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataThread {
    /// The end it ran on.
    pub end: End,
    /// A stream's own thread, or a pool worker.
    pub what: ThreadKind,
    /// The stream's role; None for a worker, which may send and receive.
    pub role: Option<StreamRole>,
    /// Its CPU while it moved data.
    pub cpu: Option<linerate_proto::ProcessCpu>,
    /// Time it waited for a CPU, microseconds.
    pub wait_us: Option<u64>,
    /// Its wall time, microseconds.
    pub wall_us: u64,
}

/// Which thread a [`DataThread`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// The thread of the stream with this id.
    Stream(u32),
    /// Pool worker number n (from 1).
    Worker(u32),
}

impl std::fmt::Display for ThreadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stream(id) => write!(f, "stream {id}"),
            Self::Worker(n) => write!(f, "pool worker {n}"),
        }
    }
}

/// How a test ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Outcome {
    /// Ran to its end and both sides exchanged results.
    Completed,
    /// Stopped early by the user; results up to that point were exchanged.
    Interrupted,
    /// Failed; whatever results exist are partial.
    Failed {
        /// One line saying what happened and what to try.
        error: String,
        /// Whose fault it was; `None` in records stored before kinds were (the key is then
        /// absent, so such a record reads and renders as it always did).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<FailureKind>,
    },
}

impl Outcome {
    /// A failed outcome saying what failed and whose fault it was.
    pub fn failed(f: Failure) -> Self {
        Self::Failed { error: f.message, kind: Some(f.kind) }
    }

    /// The failure, if the test failed. A record stored before kinds has none: it reads as
    /// [`FailureKind::Environment`], the kind of a failure no one else is known to have caused
    /// (as [`FailureKind::of`] reads an untyped error).
    pub fn failure(&self) -> Option<Failure> {
        match self {
            Self::Failed { error, kind } => {
                Some(Failure::new(kind.unwrap_or(FailureKind::Environment), error.clone()))
            }
            Self::Completed | Self::Interrupted => None,
        }
    }
}

/// The link the user says the path has (`--link-speed`, `--mtu`), for the theoretical maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkAssumption {
    /// Link rate, bits per second.
    pub bits_per_second: u64,
    /// IP MTU, bytes.
    pub mtu_bytes: u32,
}

/// One test, as seen from the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Our software string.
    pub software: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// The server as the user named it, `host:port`.
    pub server: String,
    /// Local and remote control-connection addresses, once connected.
    pub local_address: Option<String>,
    /// The server's control address.
    pub remote_address: Option<String>,
    /// The server's software string, once known.
    pub server_software: Option<String>,
    /// The test that was requested.
    pub spec: TestSpec,
    /// The client's own stream figures (partial if the test failed).
    pub client: Option<SideResults>,
    /// The server's figures, as it reported them.
    pub server_results: Option<SideResults>,
    /// How it ended.
    pub outcome: Outcome,
    /// Things the user should know that did not stop the test.
    pub warnings: Vec<String>,
    /// The link the user said the path has, if any.
    #[serde(default)]
    pub link: Option<LinkAssumption>,
    /// What an iperf3 server printed for the test (`--get-server-output`), as text or as its
    /// `-J` document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output: Option<serde_json::Value>,
    /// For one host of a fleet (`linerate fleet`): its place in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetPlace>,
    /// A test under load (`--under-load`): the latency probes run on their own connection
    /// before the test (idle) and during it (loaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<Box<LatencyProbes>>,
    /// Where a loopback test's ends ran and why (`plan/placement.rs`); absent where the
    /// question did not arise: not loopback, CPUs listed with `-A`, UDP bulk, `--crr`, a
    /// pool, a fleet or a test under load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Decision>,
}

/// The latency probes of a test under load: request/response transactions on a connection
/// of their own, first with the path idle, then while this record's test loads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyProbes {
    /// What each probe exchanges, and its rate (an open loop).
    pub probe: linerate_proto::latency::RrSpec,
    /// The idle phase, before the test: how long, and what it measured or why it failed.
    pub idle: ProbePhase,
    /// The loaded phase: it starts `from_ms` after the test's start.
    pub loaded: ProbePhase,
}

/// One phase of [`LatencyProbes`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbePhase {
    /// Milliseconds after the test's start at which the phase began (0 for idle, which ran
    /// before the test).
    pub from_ms: u64,
    /// How long the probes ran, milliseconds.
    pub duration_ms: u64,
    /// What the probe stream measured; None when the probe run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Box<linerate_proto::latency::LatencyResult>>,
    /// The probe stream's interval samples (transactions, p50, p99, max per interval).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<linerate_proto::latency::RrIntervalSample>,
    /// Why the probe run failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The handshake probes' connect times (a new connection each, a tenth as often as the
    /// request probes), nanoseconds; None when they failed or in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<Box<linerate_proto::histogram::DurationHistogram>>,
}

/// One host's place in a fleet run: what the fleet's figures need beyond the host's own run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetPlace {
    /// The host's label in the fleet.
    pub label: String,
    /// When its streams started, microseconds after the fleet's go (None: never started).
    pub started_us: Option<u64>,
    /// When its first data byte moved on the coordinator (written or read), microseconds
    /// after the go (None: none did, or a record from before this was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_us: Option<u64>,
}

impl RunRecord {
    /// A completed record of `spec` with these two ends' results, for tests.
    #[cfg(test)]
    pub fn for_tests(spec: TestSpec, client: SideResults, server: SideResults) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            software: "t".into(),
            started_unix_ms: 0,
            server: "h:1".into(),
            local_address: None,
            remote_address: None,
            server_software: None,
            spec,
            client: Some(client),
            server_results: Some(server),
            outcome: Outcome::Completed,
            warnings: vec![],
            link: None,
            server_output: None,
            fleet: None,
            probes: None,
            placement: None,
        }
    }

    /// Stream 1 of an upload moving `bytes` in one second, seen from `role`'s end, for tests.
    #[cfg(test)]
    pub fn test_stream(role: StreamRole, bytes: u64) -> StreamResult {
        StreamResult {
            id: 1,
            flow: Flow::ClientToServer,
            role,
            bytes,
            omitted_bytes: 0,
            duration_us: 1_000_000,
            omitted_us: 0,
            intervals: vec![],
            socket: linerate_proto::SocketReport::default(),
            retransmits: None,
            tcp: None,
            thread_cpu: None,
            thread_wait_us: None,
            udp_sender: None,
            udp_receiver: None,
            error: None,
            latency: None,
        }
    }

    /// Each end's results, client first; None for an end that sent none.
    pub fn sides(&self) -> [(End, Option<&SideResults>); 2] {
        [(End::Client, self.client.as_ref()), (End::Server, self.server_results.as_ref())]
    }

    /// Every stream result of both ends, with its end.
    pub fn all_streams(&self) -> impl Iterator<Item = (End, &StreamResult)> {
        self.sides()
            .into_iter()
            .filter_map(|(end, r)| Some((end, r?)))
            .flat_map(|(end, r)| r.streams.iter().map(move |s| (end, s)))
    }

    /// The results of the end that receives `flow`: the server's for uploads, the client's
    /// for downloads.
    pub fn receiving_side(&self, flow: Flow) -> Option<&SideResults> {
        match flow {
            Flow::ClientToServer => self.server_results.as_ref(),
            Flow::ServerToClient => self.client.as_ref(),
        }
    }

    /// The threads that moved `flow`'s data on each end, with what they measured of
    /// themselves: one per stream where the end ran a thread per stream, or the end's pool
    /// workers (which may serve both directions) where it pooled.
    pub fn data_threads(&self, flow: Flow) -> Vec<DataThread> {
        let mut out = Vec::new();
        for (end, side) in self.sides() {
            let Some(side) = side else { continue };
            let workers =
                side.cost.as_ref().and_then(|c| c.data_plane.as_ref()).map(|d| &d.workers);
            match workers {
                Some(w) if !w.is_empty() => {
                    out.extend(w.iter().enumerate().map(|(i, w)| DataThread {
                        end,
                        what: ThreadKind::Worker(i as u32 + 1),
                        role: None,
                        cpu: w.cpu,
                        wait_us: w.wait_us,
                        wall_us: w.wall_us,
                    }))
                }
                _ => {
                    out.extend(side.streams.iter().filter(|s| s.flow == flow).map(|s| DataThread {
                        end,
                        what: ThreadKind::Stream(s.id),
                        role: Some(s.role),
                        cpu: s.thread_cpu,
                        wait_us: s.thread_wait_us,
                        wall_us: s.duration_us,
                    }))
                }
            }
        }
        out
    }

    /// Whether the test ran over loopback: both control addresses are loopback ones. Then
    /// there is no link, shaper or remote peer to blame for a rate, only this host.
    pub fn on_loopback(&self) -> bool {
        let loopback = |a: &Option<String>| {
            a.as_deref()
                .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
                .is_some_and(|a| is_loopback(a.ip()))
        };
        loopback(&self.local_address) && loopback(&self.remote_address)
    }

    /// The final TCP internals of one direction's sending streams, from whichever end sent.
    pub fn sender_tcp(&self, flow: Flow) -> Vec<TcpInternals> {
        self.all_streams()
            .filter(|(_, s)| s.flow == flow && s.role == StreamRole::Sender)
            .filter_map(|(_, s)| s.tcp)
            .collect()
    }
}

/// Milliseconds since the Unix epoch now (0 if the clock is before 1970).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whether `ip` is a loopback address, IPv4-mapped ones (`::ffff:127.0.0.1`, seen on a
/// dual-stack socket) included: the one test every end uses to decide its loopback rule
/// (pairing) and the summary its "same host" reading.
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// An address as people write it (and as records store it): IPv4-mapped IPv6 (`[::ffff:10.0.0.1]:5201`, seen on a
/// dual-stack listener) becomes plain IPv4 (`10.0.0.1:5201`).
pub fn canonical(addr: std::net::SocketAddr) -> std::net::SocketAddr {
    match addr {
        std::net::SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => std::net::SocketAddr::new(v4.into(), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_mapped_loopback_is_loopback() {
        for (ip, want) in [
            ("127.0.0.1", true),
            ("127.9.9.9", true),
            ("::1", true),
            ("::ffff:127.0.0.1", true),
            ("::ffff:10.0.0.1", false),
            ("10.0.0.1", false),
        ] {
            assert_eq!(is_loopback(ip.parse().expect("ip")), want, "{ip}");
        }
    }

    #[test]
    fn a_failed_outcome_stores_its_kind_beside_the_error() {
        let o = Outcome::failed(Failure::new(FailureKind::Refused, "the server refused the test"));
        let json = serde_json::to_value(&o).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"status": "failed", "error": "the server refused the test", "kind": "refused"})
        );
        assert_eq!(serde_json::from_value::<Outcome>(json).expect("back"), o);
    }

    /// Records in users' histories were stored before `kind` existed: they still load, and
    /// write back exactly as they were stored.
    #[test]
    fn an_outcome_stored_before_kinds_still_loads() {
        let old = serde_json::json!({"status": "failed", "error": "cannot connect to h:1: connection refused"});
        let o: Outcome = serde_json::from_value(old.clone()).expect("old outcome");
        assert_eq!(
            o,
            Outcome::Failed {
                error: "cannot connect to h:1: connection refused".into(),
                kind: None
            }
        );
        assert_eq!(serde_json::to_value(&o).expect("json"), old);
        assert_eq!(o.failure().map(|f| f.kind), Some(FailureKind::Environment));
        let record = include_str!("../tests/fixtures/reports/failed.json");
        let doc: serde_json::Value = serde_json::from_str(record).expect("fixture");
        let r: RunRecord = serde_json::from_value(doc["record"].clone()).expect("old record");
        assert!(matches!(r.outcome, Outcome::Failed { kind: None, .. }), "{:?}", r.outcome);
    }
}
