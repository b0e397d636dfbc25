//! A test under load (`--under-load`): latency probes first on the idle path, then during
//! the test, on a connection of their own.
//!
//! The probes are an ordinary request/response test (`--rr`, 1-byte requests and responses,
//! an open loop at `--probe-rate`) run as its own session against the same server, so they
//! travel the path's queues like any other flow and their latency is measured from each
//! probe's intended send time (a stalled probe counts its whole wait). The order:
//!
//! 1. **idle**: the probes alone for `--idle-time`;
//! 2. **loaded**: the test itself, with the probes running beside it from the moment the load
//!    has settled (the end of `-O`, or 1 s after the start) until just before it stops, so
//!    every loaded probe sees a full queue and none sees the ramp or the drain.
//!
//! Beside the request probes run handshake probes, a tenth as often: each a connection of its
//! own (`--crr`), whose connect time is the draft's `tcp_f`.
//!
//! Up to five seconds of probes may be outstanding at once (at most 1024): a probe waits in
//! the same queue as the load, and a loop that allowed only one outstanding would fall behind
//! its schedule as soon as the queue delay exceeded the probe interval.
//!
//! The test's record carries both phases (`RunRecord::probes`); `stats::under_load` turns them
//! into idle and loaded percentiles, the added delay and the responsiveness figure.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use linerate_proto::latency::{MAX_IN_FLIGHT, RrSpec};
use linerate_proto::{EndCondition, TestSpec};

use crate::plan::{ClientPlan, UnderLoadPlan};
use crate::record::{Failure, FailureKind, LatencyProbes, Outcome, ProbePhase, RunRecord};
use crate::session::{Interrupt, LiveEvent, Observer, Quiet, client};

/// How long the probes stop before the test does, so none of them sees the senders' stop.
const END_MARGIN: Duration = Duration::from_millis(250);
/// When no `-O` is given, how long the load runs before the probes start.
const SETTLE: Duration = Duration::from_secs(1);

/// Runs `plan` under load when it asks for it (else as [`client::run`] does): idle probes,
/// then the test with probes beside it; the test's record carries both phases.
pub fn run(plan: &ClientPlan, observer: &mut dyn Observer, interrupt: &Interrupt) -> RunRecord {
    let Some(ul) = plan.under_load else { return client::run(plan, observer, interrupt) };
    let probe = probe_spec(ul);
    observer.on_event(LiveEvent::Notice(&format!(
        "latency probes on the idle path for {} s ({} per second)",
        ul.idle.as_secs_f64(),
        ul.probes_per_second
    )));
    let (idle, failed) = phase(&probe_plan(plan, probe, ul.idle), interrupt, Duration::ZERO);
    if let Some(f) = failed {
        // No idle figure, no added delay: the test would load the path for nothing (and an
        // iperf3 server, which cannot answer probes, may not even be there any more).
        let mut record = client::new_record(plan);
        let why = format!("the latency probes on the idle path failed: {}", f.message);
        record.outcome = Outcome::failed(Failure::new(f.kind, why));
        record.probes =
            Some(Box::new(LatencyProbes { probe, idle, loaded: ProbePhase::default() }));
        return record;
    }
    let omit = Duration::from_millis(plan.spec.omit_ms);
    let settle = if omit.is_zero() { SETTLE } else { omit };
    let total = omit + Duration::from_millis(plan.spec.duration_ms().unwrap_or(0));
    let loaded_for = total.saturating_sub(settle + END_MARGIN).max(Duration::from_millis(500));
    let loaded_plan = probe_plan(plan, probe, loaded_for);
    let (tx, rx) = mpsc::channel::<Instant>();
    let mut watch = StartWatch { inner: observer, started: Some(tx) };
    let (mut record, loaded) = std::thread::scope(|s| {
        let loaded_plan = &loaded_plan;
        let probes = s.spawn(move || {
            // The sender is dropped when the test ends: a test that never started has no
            // loaded phase.
            let started = rx.recv().ok()?;
            let at = started + settle;
            while Instant::now() < at {
                if interrupt.count() > 0 {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(20).min(at - Instant::now().min(at)));
            }
            Some(phase(loaded_plan, interrupt, settle))
        });
        let record = client::run(plan, &mut watch, interrupt);
        watch.started = None;
        (record, probes.join().ok().flatten())
    });
    let (loaded, failed) = loaded.unwrap_or_else(|| {
        let why = "the test did not run long enough to probe it";
        let phase = ProbePhase {
            from_ms: millis(settle),
            duration_ms: 0,
            latency: None,
            intervals: Vec::new(),
            error: Some(why.into()),
            connect: None,
        };
        (phase, Some(Failure::new(FailureKind::Environment, why)))
    });
    // The test's own figures stand, but the run's answer is its latency under load: a probe
    // session that failed (cut by the server, refused) leaves that answer partial, and so
    // the run failed, said in its last line and its exit status, with every figure kept.
    if let (Some(f), Outcome::Completed) = (failed, &record.outcome) {
        let why = format!(
            "the latency probes under load failed: {}; the throughput figures are whole, the \
             latency under load is partial",
            f.message
        );
        record.outcome = Outcome::failed(Failure::new(f.kind, why));
    }
    record.probes = Some(Box::new(LatencyProbes { probe, idle, loaded }));
    record
}

/// The probes' request/response: 1 byte each way, as the responsiveness draft's 1-byte
/// object, in an open loop with up to five seconds of probes outstanding.
fn probe_spec(ul: UnderLoadPlan) -> RrSpec {
    let in_flight = ul.probes_per_second.saturating_mul(5).clamp(1, u64::from(MAX_IN_FLIGHT));
    RrSpec {
        request_bytes: 1,
        response_bytes: 1,
        in_flight: in_flight as u32,
        rate_per_second: ul.probes_per_second,
        connect_each: false,
    }
}

/// The probe session: one request/response stream to the test's server for `duration`, with
/// one-second interval samples, stored nowhere (its figures go into the test's record).
fn probe_plan(plan: &ClientPlan, probe: RrSpec, duration: Duration) -> ClientPlan {
    let spec = TestSpec {
        end: EndCondition::Duration { duration_ms: millis(duration).max(1) },
        interval_ms: crate::stats::under_load::PROBE_INTERVAL_MS,
        no_delay: true,
        rr: Some(probe),
        ..TestSpec::default_tcp()
    };
    ClientPlan {
        spec,
        under_load: None,
        every: None,
        find_max: None,
        cport: None,
        cpus: Vec::new(),
        store: crate::plan::StorePlan::default(),
        gates: crate::plan::Gates::default(),
        ..plan.clone()
    }
}

/// Runs one probe phase starting `from` after the test's start and keeps what it measured,
/// with the probe run's failure if it failed.
fn phase(
    plan: &ClientPlan,
    interrupt: &Interrupt,
    from: Duration,
) -> (ProbePhase, Option<Failure>) {
    // The handshake probes (the draft's tcp_f) run beside the request probes: a connection
    // of their own each, a tenth as often.
    let mut connects = plan.clone();
    if let Some(rr) = connects.spec.rr.as_mut() {
        rr.connect_each = true;
        rr.in_flight = 1;
        rr.rate_per_second = (rr.rate_per_second / 10).max(1);
    }
    let (record, handshakes) = std::thread::scope(|s| {
        let handshakes = s.spawn(|| client::run(&connects, &mut Quiet, interrupt));
        let record = client::run(plan, &mut Quiet, interrupt);
        (record, handshakes.join().ok())
    });
    let connect = handshakes
        .as_ref()
        .and_then(|r| r.client.as_ref()?.streams.first()?.latency.as_ref()?.phases.clone())
        .map(|p| Box::new(p.connect));
    let stream = record.client.as_ref().and_then(|c| c.streams.first());
    let latency = stream.and_then(|s| s.latency.clone());
    let intervals =
        stream.map_or_else(Vec::new, |s| s.intervals.iter().filter_map(|i| i.rr).collect());
    let failure = match (&latency, record.outcome.failure()) {
        (_, Some(f)) => Some(f),
        (None, None) => {
            Some(Failure::new(FailureKind::Environment, "the probe stream reported no latency"))
        }
        (Some(_), None) => None,
    };
    // Both probe runs failing says more together (an iperf3 server refuses the one it
    // recognises and closes on the other); the handshake probes failing alone fail the
    // phase too: its connect figures are missing or partial.
    let failure = match (failure, handshakes.as_ref().and_then(|r| r.outcome.failure())) {
        (Some(f), Some(h)) if h.message != f.message => Some(Failure::new(
            f.kind,
            format!("{}; the handshake probes: {}", f.message, h.message),
        )),
        (None, Some(h)) => {
            Some(Failure::new(h.kind, format!("the handshake probes: {}", h.message)))
        }
        (f, _) => f,
    };
    let error = failure.as_ref().map(|f| f.message.clone());
    let phase = ProbePhase {
        from_ms: millis(from),
        duration_ms: plan.spec.duration_ms().unwrap_or(0),
        latency,
        intervals,
        error,
        connect,
    };
    (phase, failure)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Passes every event on and tells the probe thread when the test started.
struct StartWatch<'a> {
    inner: &'a mut dyn Observer,
    started: Option<mpsc::Sender<Instant>>,
}

impl Observer for StartWatch<'_> {
    fn on_event(&mut self, event: LiveEvent<'_>) {
        if let (LiveEvent::Started { .. }, Some(tx)) = (&event, &self.started) {
            let _ = tx.send(Instant::now());
        }
        self.inner.on_event(event);
    }
}
