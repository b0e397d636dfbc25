//! What a running server counts for Prometheus (`--metrics`): tests served by outcome, tests
//! refused by reason, connections dropped before they were part of a test by reason, bytes
//! each way, active tests and streams, the exclusive queue, connections waiting at the door,
//! a test-duration histogram and the build. The exposition format is `prometheus-client`'s
//! OpenMetrics text, not text written here: its escaping, `_total` suffixes, histogram
//! buckets and `# EOF` are the crate's, checked by every Prometheus that scrapes it.
//!
//! Label values are a fixed set of words chosen here (reasons, outcomes, directions), never a
//! peer's text or address: a label set per client would let a crowd grow the server's memory
//! and every time series database that scrapes it.
//!
//! Counts are taken where the decision is made (`served.rs` for admissions and ends,
//! `front.rs` for the door); gauges that mirror state the server already keeps (running
//! tests, the queue) are read when scraped, so they cannot drift from it.

use linerate_proto::limits::LimitKind;
use linerate_proto::{SideResults, StreamRole};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// One label: its name and one of a fixed set of values.
pub(crate) type Label = [(&'static str, &'static str); 1];

/// The content type of [`ServerMetrics::encode`]'s text.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why a test (or doctor) request was refused: the limit that said no, or the key.
pub(crate) fn refusal_reason(kind: LimitKind) -> &'static str {
    match kind {
        LimitKind::Busy => "busy",
        LimitKind::Streams => "streams",
        LimitKind::Duration => "duration",
        LimitKind::Bitrate => "bitrate",
        LimitKind::Bytes => "bytes",
        LimitKind::NotAllowed => "not_allowed",
        LimitKind::ClientRate => "client_rate",
        LimitKind::Interval => "interval",
        LimitKind::Block => "block",
        LimitKind::Memory => "memory",
        LimitKind::MinRate => "min_rate",
    }
}

/// A refusal by the pre-shared key (`--psk-file`): a wrong key, none, or an iperf3 client.
pub(crate) const REFUSED_AUTH: &str = "auth";

/// Why a connection was closed before it was part of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// Not in `--allow`.
    AllowList,
    /// Its client held `--max-client-connections` already.
    ClientConnections,
    /// The door held `--max-connections` and this client its share (or it was evicted).
    MaxConnections,
    /// Its first bytes were late, absent or neither protocol.
    FirstBytes,
    /// Its greeting failed or timed out (not a refusal).
    Handshake,
    /// A data connection with a cookie no test owns.
    UnknownCookie,
}

impl Dropped {
    fn label(self) -> &'static str {
        match self {
            Self::AllowList => "allow_list",
            Self::ClientConnections => "client_connections",
            Self::MaxConnections => "max_connections",
            Self::FirstBytes => "first_bytes",
            Self::Handshake => "handshake",
            Self::UnknownCookie => "unknown_cookie",
        }
    }
}

/// The server's metrics. Every handle is an atomic behind an `Arc` inside the crate's types:
/// counting is a few atomic adds, from any thread.
#[derive(Debug)]
pub(crate) struct ServerMetrics {
    registry: Registry,
    tests: Family<Label, Counter>,
    refused: Family<Label, Counter>,
    dropped: Family<Label, Counter>,
    bytes: Family<Label, Counter>,
    duration: Histogram,
    active_tests: Gauge,
    active_streams: Gauge,
    queued: Gauge,
    /// Connections waiting at the door, set by the door every turn.
    pub(crate) waiting: Gauge,
    probes: Family<Label, Counter>,
    http_dropped: Family<Label, Counter>,
    /// What this server measured as an agent's pair tests, by peer.
    pub(crate) pairs: crate::session::pair_metrics::PairMetrics,
}

impl ServerMetrics {
    /// Registers every metric, the build's version and commit among them.
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let tests = Family::<Label, Counter>::default();
        registry.register(
            "linerate_tests",
            "Tests that ended, by outcome (completed, failed: cut by a limit, the peer or an error)",
            tests.clone(),
        );
        let refused = Family::<Label, Counter>::default();
        registry.register(
            "linerate_tests_refused",
            "Test and doctor requests refused, by the limit or check that refused them",
            refused.clone(),
        );
        let dropped = Family::<Label, Counter>::default();
        registry.register(
            "linerate_connections_dropped",
            "Connections closed before they were part of a test, by reason",
            dropped.clone(),
        );
        let bytes = Family::<Label, Counter>::default();
        registry.register(
            "linerate_test_bytes",
            "Bytes the server's streams moved, warm-up included, counted when a test ends \
             (sent: the server sent them; received: it received them)",
            bytes.clone(),
        );
        let duration = Histogram::new(exponential_buckets(0.25, 2.0, 16));
        registry.register(
            "linerate_test_duration_seconds",
            "How long each ended test held its slot, from admission to its end",
            duration.clone(),
        );
        let active_tests = Gauge::default();
        registry.register(
            "linerate_active_tests",
            "Tests admitted and not yet ended",
            active_tests.clone(),
        );
        let active_streams = Gauge::default();
        registry.register(
            "linerate_active_streams",
            "Data connections (streams) of the tests admitted and not yet ended",
            active_streams.clone(),
        );
        let queued = Gauge::default();
        registry.register(
            "linerate_queued_tests",
            "Tests waiting in the exclusive queue (--exclusive)",
            queued.clone(),
        );
        let waiting = Gauge::default();
        registry.register(
            "linerate_waiting_connections",
            "Connections at the door not yet part of a test (capped by --max-connections)",
            waiting.clone(),
        );
        let probes = Family::<Label, Counter>::default();
        registry.register(
            "linerate_probes",
            "Probe requests (/probe), by outcome (completed, failed, refused, busy, too_soon, \
             unauthorized)",
            probes.clone(),
        );
        let http_dropped = Family::<Label, Counter>::default();
        registry.register(
            "linerate_metrics_connections_dropped",
            "Connections to the metrics endpoint closed without an answer, by reason",
            http_dropped.clone(),
        );
        let build = Info::new([
            ("version", env!("CARGO_PKG_VERSION")),
            ("commit", env!("LINERATE_COMMIT")),
        ]);
        registry.register("linerate_build", "The linerate build serving these metrics", build);
        let pairs = crate::session::pair_metrics::PairMetrics::new(&mut registry);
        Self {
            registry,
            tests,
            refused,
            dropped,
            bytes,
            duration,
            active_tests,
            active_streams,
            queued,
            waiting,
            probes,
            http_dropped,
            pairs,
        }
    }

    /// A test or doctor request was refused for `reason` ([`refusal_reason`], [`REFUSED_AUTH`]).
    pub(crate) fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&[("reason", reason)]).inc();
    }

    /// A connection was closed before it was part of a test.
    pub(crate) fn dropped(&self, why: Dropped) {
        self.dropped.get_or_create(&[("reason", why.label())]).inc();
    }

    /// A test with `streams` data connections was admitted.
    pub(crate) fn admitted(&self, streams: u32) {
        self.active_streams.inc_by(i64::from(streams));
    }

    /// An admitted test with `streams` data connections ended after `held_s` seconds, with
    /// the server's own `results` if its streams ran.
    pub(crate) fn ended(
        &self,
        streams: u32,
        held_s: f64,
        failed: bool,
        results: Option<&SideResults>,
    ) {
        self.active_streams.dec_by(i64::from(streams));
        let outcome = if failed { "failed" } else { "completed" };
        self.tests.get_or_create(&[("outcome", outcome)]).inc();
        self.duration.observe(held_s);
        for s in results.map_or(&[][..], |r| &r.streams) {
            let direction = match s.role {
                StreamRole::Sender => "sent",
                StreamRole::Receiver => "received",
            };
            self.bytes.get_or_create(&[("direction", direction)]).inc_by(s.bytes);
        }
    }

    /// A probe request ended so (`completed`, `failed`, `refused`, `busy`, `too_soon`,
    /// `unauthorized`).
    pub(crate) fn probe(&self, outcome: &'static str) {
        self.probes.get_or_create(&[("outcome", outcome)]).inc();
    }

    /// A metrics connection was closed without an answer for `reason`.
    pub(crate) fn http_dropped(&self, reason: &'static str) {
        self.http_dropped.get_or_create(&[("reason", reason)]).inc();
    }

    /// The metrics as OpenMetrics text, with the gauges that mirror the server's state set
    /// from it first.
    pub(crate) fn encode(&self, active_tests: u32, queued: usize) -> String {
        self.active_tests.set(i64::from(active_tests));
        self.queued.set(i64::try_from(queued).unwrap_or(i64::MAX));
        let mut text = String::new();
        // Writing into a String cannot fail; an error would be the crate's own bug.
        if encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}
