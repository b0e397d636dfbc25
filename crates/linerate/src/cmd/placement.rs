//! `-A auto` before a loopback test: the placement of each shape of test the command will run,
//! from the history's calibration for this host, or measured now and kept there
//! (`plan/placement.rs` says why and how it chooses).
//!
//! The calibration runs against a server embedded in this process on 127.0.0.1, not the
//! test's server: it measures the host, and the test's server stays untouched. Two commands
//! that start at once on one history do not both measure (each would load the CPUs the other
//! measures): the first takes a lock beside the history, the second waits for it, then reads
//! what the first kept. Without a history to keep it in (`--no-store`, no home directory, a
//! history that cannot be opened) nothing is measured, and the test is paired by rule and says
//! why: a calibration thrown away after each test would cost every test its trials.

use std::net::ToSocketAddrs;
use std::time::{Duration, Instant};

use crate::plan::ClientPlan;
use crate::plan::placement::{self, Calibration, Choice, HostKey, Shape, Trials, by_rule};
use crate::record::{Decision, Placement};
use crate::report::notice::{Console, Notice};
use crate::session::{Interrupt, Quiet, client};
use crate::store::Store;

/// The longest a command waits for another's calibration on the same history.
const LOCK_WAIT: Duration = Duration::from_secs(60);
/// How often it looks.
const LOCK_POLL: Duration = Duration::from_millis(100);

/// Fills `plan.calibrated` for the shapes of the tests of `streams` streams that `plan` will
/// run (a test, or a matrix's cells), when `-A auto` applies to them: a TCP bulk test to a
/// loopback address of a linerate server, no CPUs listed, not under load. Fails only when
/// interrupted (Ctrl-C during a calibration: nothing ran).
pub fn resolve(
    plan: &mut ClientPlan,
    streams: &[u32],
    console: &Console,
    interrupt: &Interrupt,
) -> anyhow::Result<()> {
    if !applies(plan) {
        return Ok(());
    }
    let Some(cpus) = crate::sys::allowed_cpus().filter(|c| c.len() >= 2) else { return Ok(()) };
    let (model, kernel) = crate::measure::host::cpu_model_and_kernel();
    let host = HostKey {
        cpu_model: model.unwrap_or_else(|| "n/a".into()),
        kernel: kernel.unwrap_or_else(|| "n/a".into()),
        cpus,
    };
    let mut shapes: Vec<Shape> = Vec::new();
    for shape in streams.iter().map(|s| Shape::of(*s)) {
        if !shapes.contains(&shape) {
            shapes.push(shape);
        }
    }
    let store = match &plan.store.path {
        None => Err("--no-store (or no home directory) keeps no history to hold it".to_string()),
        Some(path) => Store::open(path).map_err(|e| format!("the history cannot be opened: {e:#}")),
    };
    plan.calibrated = match store {
        Err(why) => {
            shapes.iter().map(|s| (*s, by_rule(&format!("not calibrated: {why}")))).collect()
        }
        Ok(mut store) => {
            let trial = Trial { host: &host, plan, interrupt };
            shapes.iter().map(|s| (*s, calibrated(&mut store, &trial, *s, console))).collect()
        }
    };
    if interrupt.count() > 0 {
        return Err(super::failed::interrupted(
            interrupt,
            "during the calibration of the loopback placement; no test ran",
        ));
    }
    Ok(())
}

/// Whether `-A auto` decides anything for `plan` (the rest of the conditions are the
/// session's, `session/client.rs`): a TCP bulk test to a loopback address.
fn applies(plan: &ClientPlan) -> bool {
    let loopback = (plan.host.as_str(), plan.port)
        .to_socket_addrs()
        .is_ok_and(|mut a| a.all(|a| crate::record::is_loopback(a.ip())));
    plan.placement == Choice::Auto
        && plan.cpus.is_empty()
        && plan.spec.server_cpus.is_empty()
        && plan.spec.protocol == linerate_proto::Protocol::Tcp
        && plan.spec.rr.is_none()
        && plan.under_load.is_none()
        && !plan.iperf3
        && loopback
}

/// What a calibration measures: this host, with the user's test (its block and write sizes,
/// its buffers) in the calibration's length and streams.
struct Trial<'a> {
    host: &'a HostKey,
    plan: &'a ClientPlan,
    interrupt: &'a Interrupt,
}

/// The decision for `shape` on the trial's host: the history's calibration, or a new one.
fn calibrated(store: &mut Store, trial: &Trial<'_>, shape: Shape, console: &Console) -> Decision {
    let (host, interrupt) = (trial.host, trial.interrupt);
    let kept = |store: &Store| store.calibration(host, shape).ok().flatten();
    if let Some(d) = kept(store).as_ref().and_then(placement::choose) {
        return d;
    }
    let lock_path = {
        let mut p = store.path().as_os_str().to_owned();
        p.push(".placement.lock");
        std::path::PathBuf::from(p)
    };
    let until = Instant::now() + LOCK_WAIT;
    let _lock = loop {
        match crate::sys::lock::try_lock(&lock_path) {
            Ok(Some(lock)) => break lock,
            Ok(None) if Instant::now() < until && interrupt.count() == 0 => {
                std::thread::sleep(LOCK_POLL)
            }
            Ok(None) => return by_rule("not calibrated: another linerate was calibrating"),
            Err(e) => return by_rule(&format!("not calibrated: cannot lock {lock_path:?}: {e}")),
        }
    };
    // Another command may have kept one while this one waited.
    if let Some(d) = kept(store).as_ref().and_then(placement::choose) {
        return d;
    }
    console.show(&Notice::Calibrating(shape));
    let c = match measure(trial, shape) {
        Ok(c) => c,
        Err(e) => return by_rule(&format!("not calibrated: {e:#}")),
    };
    let Some(d) = placement::choose(&c) else {
        return by_rule("not calibrated: no trial of the calibration completed");
    };
    if let Err(e) = store.save_calibration(&c) {
        return Decision { why: format!("{} (not kept: {e:#})", d.why), ..d };
    }
    console.show(&Notice::Calibrated(&d));
    d
}

/// Runs the calibration of `shape`: [`placement::ROUNDS`] rounds, each a trial of every
/// placement in turn, against a server embedded in this process.
fn measure(trial: &Trial<'_>, shape: Shape) -> anyhow::Result<Calibration> {
    let (host, interrupt) = (trial.host, trial.interrupt);
    let streams = shape.trial_streams(host.cpus.len());
    let spec = linerate_proto::TestSpec {
        streams,
        direction: linerate_proto::Direction::Upload,
        end: linerate_proto::EndCondition::Duration {
            duration_ms: placement::TRIAL.as_millis() as u64,
        },
        omit_ms: 0,
        title: None,
        ..trial.plan.spec.clone()
    };
    // The user's test, to the embedded server: no key, no addresses or ports of theirs.
    let base = ClientPlan {
        psk: None,
        agents_only: false,
        bind: None,
        cport: None,
        family: crate::plan::Family::Any,
        calibrated: Vec::new(),
        ..ClientPlan { spec, ..trial.plan.clone() }
    };
    let base = ClientPlan { host: "127.0.0.1".into(), ..base };
    let mut trials: Vec<Trials> = Placement::ALL
        .iter()
        .map(|p| Trials { placement: *p, bits_per_second: Vec::new() })
        .collect();
    super::embedded::with_embedded_server(base, |base| {
        for _ in 0..placement::ROUNDS {
            for t in &mut trials {
                if interrupt.count() > 0 {
                    anyhow::bail!("interrupted");
                }
                let plan = ClientPlan { placement: Choice::Fixed(t.placement), ..base.clone() };
                let record = client::run(&plan, &mut Quiet, interrupt);
                if record.outcome.failure().is_none() {
                    let s = crate::stats::summarize(&record);
                    t.bits_per_second.push(crate::stats::matrix::received_rate(&s));
                }
            }
        }
        Ok(std::process::ExitCode::SUCCESS)
    })?;
    Ok(Calibration {
        host: host.clone(),
        shape,
        streams,
        trial_ms: placement::TRIAL.as_millis() as u64,
        at_unix_ms: crate::record::unix_ms_now(),
        trials,
    })
}
