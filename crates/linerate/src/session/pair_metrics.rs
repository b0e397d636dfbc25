//! What an agent measured as the sender of pair tests (`linerate mesh`), for Prometheus: per
//! peer, the last test's figures each way, tests by outcome, and the two watching signals of
//! `stats::drift` over the agent's own recent tests of that peer — a fresh drop and a drift —
//! as gauges an alerting rule can fire on (`packaging/prometheus/linerate-rules.yml`).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `linerate_pair_tests_total` | node, peer, peer_zone, outcome | pair tests this agent ran to the peer, `completed` or `failed` |
//! | `linerate_pair_bits_per_second` | node, peer, peer_zone, direction | the last completed test's receiver rate, `to_peer` / `from_peer` |
//! | `linerate_pair_retransmits` | … direction | the last completed test's sender retransmits |
//! | `linerate_pair_rtt_seconds` | … direction | the last completed test's senders' smoothed RTT |
//! | `linerate_pair_loss_ratio` | … direction | the last completed UDP test's lost datagrams over those sent |
//! | `linerate_pair_last_test_timestamp_seconds` | node, peer, peer_zone | when the last test to the peer ended |
//! | `linerate_pair_drop_ratio` | node, peer, peer_zone | the fresh drop of the last 1–2 rates to the peer against the runs before (−0.4: 40 % down), 0 without one |
//! | `linerate_pair_drift_ratio_per_run` | node, peer, peer_zone | the drift of the rates to the peer, a fraction of their median a run, 0 without one |
//!
//! `node` is this agent's node, so a dashboard draws node × peer without relabelling; `peer` and
//! `peer_zone` are what the peer reported of itself (an agent holding the same key). A figure
//! the test did not produce is absent, never zero: an iperf3-like peer without TCP internals has
//! no RTT series.
//!
//! **Bounded.** At most [`MAX_PEERS`] peers get series of their own; tests to any further peer
//! are counted under `peer="other"`, `peer_zone="other"` (and give no figures). Label values are
//! cut to [`MAX_LABEL`] bytes of printable text. So the series are at most
//! (`MAX_PEERS` + 1) × 13, whatever a fabric or a requester does; the rates kept for the signals
//! are [`KEPT_RATES`] per peer.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::record::{Outcome, RunRecord};

/// Peers with series of their own; tests to more are counted as `other`.
pub const MAX_PEERS: usize = 1024;
/// Longest label value, bytes.
pub const MAX_LABEL: usize = 63;
/// Rates kept per peer for the drop and drift signals.
pub const KEPT_RATES: usize = 32;

type PeerLabels = [(&'static str, String); 3];
type DirLabels = [(&'static str, String); 4];
type OutcomeLabels = [(&'static str, String); 4];

/// A float gauge (prometheus-client's gauge over an f64 atomic).
type FGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The per-pair metrics of one agent.
#[derive(Debug)]
pub(crate) struct PairMetrics {
    tests: Family<OutcomeLabels, Counter>,
    rate: Family<DirLabels, FGauge>,
    retransmits: Family<DirLabels, FGauge>,
    rtt: Family<DirLabels, FGauge>,
    loss: Family<DirLabels, FGauge>,
    last: Family<PeerLabels, FGauge>,
    drop: Family<PeerLabels, FGauge>,
    drift: Family<PeerLabels, FGauge>,
    /// The peers with series, and their recent rates to them (oldest first).
    peers: Mutex<HashMap<(String, String), VecDeque<f64>>>,
}

impl PairMetrics {
    /// Registers the pair metrics in `registry`.
    pub(crate) fn new(registry: &mut Registry) -> Self {
        let m = PairMetrics {
            tests: Family::default(),
            rate: Family::default(),
            retransmits: Family::default(),
            rtt: Family::default(),
            loss: Family::default(),
            last: Family::default(),
            drop: Family::default(),
            drift: Family::default(),
            peers: Mutex::new(HashMap::new()),
        };
        registry.register(
            "linerate_pair_tests",
            "Pair tests (linerate mesh) this agent ran as the sender, by peer and outcome",
            m.tests.clone(),
        );
        let by_direction = [
            ("bits_per_second", "The last completed pair test's receiver rate", &m.rate),
            ("retransmits", "The last completed pair test's sender retransmits", &m.retransmits),
            ("rtt_seconds", "The last completed pair test's senders' smoothed RTT", &m.rtt),
            ("loss_ratio", "The last completed UDP pair test's lost over sent datagrams", &m.loss),
        ];
        for (name, help, family) in by_direction {
            let help = format!("{help}, by peer and direction");
            registry.register(format!("linerate_pair_{name}"), help, family.clone());
        }
        let by_peer = [
            (
                "last_test_timestamp_seconds",
                "When the last pair test to the peer ended, seconds since the Unix epoch",
                &m.last,
            ),
            (
                "drop_ratio",
                "Fresh drop of the last 1-2 rates to the peer against the runs before (-0.4: \
                 40 % down; 0: none), as report --trend finds it",
                &m.drop,
            ),
            (
                "drift_ratio_per_run",
                "Drift of the rates to the peer, a fraction of their median a run (Mann-Kendall \
                 with a Theil-Sen slope; 0: none)",
                &m.drift,
            ),
        ];
        for (name, help, family) in by_peer {
            registry.register(format!("linerate_pair_{name}"), help, family.clone());
        }
        m
    }

    /// A pair test this agent ran has ended with `record` (its client's environment names this
    /// agent's node, its server's the peer's).
    pub(crate) fn ended(&self, record: &RunRecord, ended_unix_s: f64) {
        let own = record.client.as_ref().and_then(|c| c.environment.as_ref());
        let node = own.and_then(|e| e.node.as_deref()).unwrap_or("unnamed");
        let place = record.server_results.as_ref().and_then(|s| s.environment.as_ref());
        let peer = label(place.and_then(|e| e.node.as_deref()).unwrap_or(record.server.as_str()));
        let zone = label(place.and_then(|e| e.zone.as_deref()).unwrap_or("unknown"));
        let node = label(node);
        let completed = record.outcome == Outcome::Completed;
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let known = peers.contains_key(&(peer.clone(), zone.clone()));
        let (peer, zone) = if known || peers.len() < MAX_PEERS {
            (peer, zone)
        } else {
            ("other".to_string(), "other".to_string())
        };
        let outcome = if completed { "completed" } else { "failed" };
        let o = [
            ("node", node.clone()),
            ("peer", peer.clone()),
            ("peer_zone", zone.clone()),
            ("outcome", outcome.into()),
        ];
        self.tests.get_or_create(&o).inc();
        if peer == "other" && !known {
            return;
        }
        let p: PeerLabels =
            [("node", node.clone()), ("peer", peer.clone()), ("peer_zone", zone.clone())];
        self.last.get_or_create(&p).set(ended_unix_s);
        let rates = peers.entry((peer.clone(), zone.clone())).or_default();
        if !completed {
            return;
        }
        for f in crate::stats::probe::probe_figures(record) {
            let Ok(value) = f.value else { continue };
            let direction = match f.of.1 {
                "to_target" => "to_peer",
                "from_target" => "from_peer",
                _ => continue,
            };
            let d: DirLabels = [
                ("node", node.clone()),
                ("peer", peer.clone()),
                ("peer_zone", zone.clone()),
                ("direction", direction.into()),
            ];
            let family = match f.name {
                "bits_per_second" => &self.rate,
                "retransmits" => &self.retransmits,
                "rtt_seconds" => &self.rtt,
                _ => continue,
            };
            family.get_or_create(&d).set(value);
            if f.name == "bits_per_second" && direction == "to_peer" {
                if rates.len() == KEPT_RATES {
                    rates.pop_front();
                }
                rates.push_back(value);
            }
        }
        let summary = crate::stats::summarize(record);
        for u in &summary.udp {
            let Some(sent) = u.sent.filter(|s| *s > 0) else { continue };
            let direction = match u.flow {
                linerate_proto::Flow::ClientToServer => "to_peer",
                linerate_proto::Flow::ServerToClient => "from_peer",
            };
            let d: DirLabels = [
                ("node", node.clone()),
                ("peer", peer.clone()),
                ("peer_zone", zone.clone()),
                ("direction", direction.into()),
            ];
            self.loss.get_or_create(&d).set(u.lost as f64 / sent as f64);
        }
        let values: Vec<f64> = rates.iter().copied().collect();
        let (drop, drift) = signals(&values);
        self.drop.get_or_create(&p).set(drop);
        self.drift.get_or_create(&p).set(drift);
    }
}

/// The fresh drop (relative, ≤ 0) and drift (relative a run) of `rates`, 0 for none: the same
/// tests `report --trend` makes (`stats::drift::watch`).
fn signals(rates: &[f64]) -> (f64, f64) {
    let (drop, drift) =
        crate::stats::drift::watch(rates, &crate::stats::change_point::Method::default());
    (drop.map_or(0.0, |f| f.relative), drift.map_or(0.0, |d| d.relative_per_run))
}

/// A peer's word as a label value: printable, at most [`MAX_LABEL`] bytes.
fn label(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_LABEL {
            break;
        }
        out.push(c);
    }
    if out.is_empty() { "unnamed".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(peer: &str) -> RunRecord {
        let json = include_str!("../../tests/fixtures/records/tcp_upload.json");
        let mut r: RunRecord = serde_json::from_str(json).expect("fixture");
        if let Some(env) = r.server_results.as_mut().and_then(|s| s.environment.as_mut()) {
            env.node = Some(peer.into());
            env.zone = Some("zone-b".into());
        }
        if let Some(env) = r.client.as_mut().and_then(|c| c.environment.as_mut()) {
            env.node = Some("node-a".into());
        }
        r
    }

    fn text(m: &PairMetrics, registry: &Registry) -> String {
        let _ = m;
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, registry).expect("encode");
        s
    }

    #[test]
    fn series_name_the_peer_and_stay_bounded() {
        let mut registry = Registry::default();
        let m = PairMetrics::new(&mut registry);
        m.ended(&record("node-b"), 1.0);
        let t = text(&m, &registry);
        assert!(t.contains("linerate_pair_tests_total{node=\"node-a\",peer=\"node-b\",peer_zone=\"zone-b\",outcome=\"completed\"} 1"), "{t}");
        assert!(t.contains("linerate_pair_bits_per_second{node=\"node-a\",peer=\"node-b\",peer_zone=\"zone-b\",direction=\"to_peer\"}"), "{t}");
        for i in 0..MAX_PEERS + 5 {
            m.ended(&record(&format!("p{i}\u{1b}[2J{}", "x".repeat(100))), 2.0);
        }
        let peers = m.peers.lock().unwrap().len();
        assert_eq!(peers, MAX_PEERS, "a flood of peers cannot grow it");
        let t = text(&m, &registry);
        assert!(
            t.contains("peer=\"other\",peer_zone=\"other\",outcome=\"completed\"} 6"),
            "node-b and 1023 more, then 6 others"
        );
        assert!(
            !t.contains('\u{1b}') && t.lines().all(|l| l.len() < 400),
            "labels cut and printable"
        );
    }

    #[test]
    fn the_signals_are_the_trends() {
        let mut rates: Vec<f64> =
            (0..12).map(|i| 200e6 * (1.0 + 0.01 * f64::from(i % 3))).collect();
        assert_eq!(signals(&rates), (0.0, 0.0), "flat");
        rates.extend([120e6, 121e6]);
        let (drop, drift) = signals(&rates);
        assert!((drop + 0.4).abs() < 0.03 && drift == 0.0, "{drop} {drift}");
        let decline: Vec<f64> = (0..14).map(|i| 200e6 * 0.96f64.powi(i)).collect();
        let (drop, drift) = signals(&decline);
        assert!(drop == 0.0 && (drift + 0.04).abs() < 0.01, "{drop} {drift}");
    }
}
