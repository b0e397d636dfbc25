//! A probe (`/probe?target=IP:PORT` of the metrics endpoint, `exporter.rs`): the server runs
//! one short bidirectional TCP test, as a client, to a target the operator allowed, and
//! answers with its figures as OpenMetrics text — what Prometheus's blackbox exporter does
//! for ping or HTTP, for throughput.
//!
//! The test is an ordinary client test (`client.rs`), so the target's limits, key and
//! allow-list apply to it as to any client, and it cannot last longer than
//! `--probe-duration` (at most 5 s) plus the protocol's deadlines. A figure the test did not
//! produce is shown missing with its reason (`stats/probe.rs`), never as a value. The
//! prober's CPU is this server process's: it includes whatever tests it serves meanwhile.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use linerate_proto::{Direction, EndCondition, TestSpec};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::plan::ClientPlan;
use crate::record::Outcome;
use crate::session::{Interrupt, Quiet, client};
use crate::stats::probe::{ProbeFigure, probe_figures};

/// How long a probe may wait for the target to accept its connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What a probe found: its metrics text and, if it failed, why.
#[derive(Debug)]
pub(crate) struct Probed {
    /// OpenMetrics text of its figures.
    pub(crate) text: String,
    /// Why the test failed (the target's refusal, no connection, ...).
    pub(crate) error: Option<String>,
}

/// The test a probe runs to `target`: one TCP stream each way for `duration`, not pinned to
/// CPUs (the server's threads are not the probe's to move).
fn plan(target: SocketAddr, duration: Duration) -> ClientPlan {
    let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let spec = TestSpec {
        direction: Direction::Bidirectional,
        end: EndCondition::Duration { duration_ms: ms },
        interval_ms: 0,
        ..TestSpec::default_tcp()
    };
    ClientPlan {
        placement: crate::plan::placement::Choice::Fixed(crate::record::Placement::System),
        connect_timeout: CONNECT_TIMEOUT,
        ..ClientPlan::to(&target.ip().to_string(), target.port(), spec)
    }
}

/// A failed probe's error as the server's operator reads it: the client's hints name client
/// flags (`-p`, `--connect-timeout`) this server does not have.
fn in_server_words(error: &str) -> String {
    let silent = format!(
        "; check that the target is up and that this server reaches it (a probe waits {} s to \
         connect)",
        CONNECT_TIMEOUT.as_secs_f64()
    );
    error
        .replace(client::RAISE_CONNECT_TIMEOUT, &silent)
        .replace(client::CHECK_PORT, " or check the port in --probe-allow")
}

/// Runs a probe to `target` (stopped early by `interrupt`).
pub(crate) fn run(target: SocketAddr, duration: Duration, interrupt: &Interrupt) -> Probed {
    let started = Instant::now();
    let record = client::run(&plan(target, duration), &mut Quiet, interrupt);
    let took = started.elapsed().as_secs_f64();
    let error = match &record.outcome {
        Outcome::Completed => None,
        Outcome::Interrupted => Some("stopped: the server is shutting down".to_string()),
        Outcome::Failed { error, .. } => Some(in_server_words(error)),
    };
    let text = exposition(&probe_figures(&record), error.is_none(), took);
    Probed { text, error }
}

type FigureGauge = Gauge<f64, AtomicU64>;
/// One figure's gauges, by what they are of.
type Figures = Family<[(&'static str, &'static str); 1], FigureGauge>;

/// The help text of each probe figure's metric.
fn help(name: &str) -> &'static str {
    match name {
        "bits_per_second" => "Throughput the receiver measured, each way",
        "retransmits" => "Segments the sender retransmitted, each way",
        "rtt_seconds" => "The sender's smoothed round-trip time at the end (TCP_INFO), each way",
        "cpu_percent_of_core" => {
            "Process CPU during the test, % of one core (prober: this whole server process)"
        }
        _ => "A probe figure",
    }
}

/// The figures as OpenMetrics text: each present figure a gauge, each missing one a
/// `linerate_probe_figure_missing` series naming it and why.
fn exposition(figures: &[ProbeFigure], success: bool, took: f64) -> String {
    let mut registry = Registry::default();
    let ok = FigureGauge::default();
    ok.set(if success { 1.0 } else { 0.0 });
    registry.register("linerate_probe_success", "1 if the probe's test completed", ok);
    let seconds = FigureGauge::default();
    seconds.set(took);
    registry.register(
        "linerate_probe_duration_seconds",
        "How long the probe took, connection and results included",
        seconds,
    );
    let missing = Family::<Vec<(&'static str, &'static str)>, FigureGauge>::default();
    let mut families: Vec<(&'static str, Figures)> = Vec::new();
    for f in figures {
        match f.value {
            Ok(v) => {
                let family = match families.iter().find(|(n, _)| *n == f.name) {
                    Some((_, family)) => family.clone(),
                    None => {
                        let family = Family::default();
                        families.push((f.name, family.clone()));
                        family
                    }
                };
                family.get_or_create(&[f.of]).set(v);
            }
            Err(why) => {
                let labels = vec![("figure", f.name), f.of, ("reason", why.word())];
                missing.get_or_create(&labels).set(1.0);
            }
        }
    }
    for (name, family) in families {
        registry.register(format!("linerate_probe_{name}"), help(name), family);
    }
    registry.register(
        "linerate_probe_figure_missing",
        "A figure the probe's test did not produce, and why (test_failed, not_reported, \
         not_measured); never shown as a value",
        missing,
    );
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut text, &registry);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_probe_names_no_flag_the_server_lacks() {
        // A closed loopback port: the client's refusal, in the server's words.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = closed.local_addr().expect("addr");
        drop(closed);
        let probed = run(target, Duration::from_millis(500), &Interrupt::default());
        let error = probed.error.expect("the probe failed");
        assert!(error.contains("--probe-allow") && !error.contains("check -p"), "{error}");
        // A silent host (the client's own hint, as a SYN-dropping target gives it).
        let silent =
            format!("cannot connect to 127.0.0.9:5201: no answer{}", client::RAISE_CONNECT_TIMEOUT);
        let said = in_server_words(&silent);
        assert!(!said.contains("--connect-timeout") && said.contains("waits 2 s"), "{said}");
    }
}
