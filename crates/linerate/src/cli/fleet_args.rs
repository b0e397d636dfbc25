//! The flags of `linerate fleet`.

use clap::Args;

use super::args::{NetArgs, StoreArgs, TestArgs};
use crate::plan::OutputFormat;
use crate::plan::fleet::{FleetPlan, Target, check_targets, parse_target, parse_targets_file};

/// `linerate fleet TARGET... [test flags]`.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// The servers: HOST[:PORT][=LABEL] each (IPv6 in brackets: [fd00::2]:5201=vm2). A target
    /// without a port uses -p.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// Read more targets from FILE, one per line (`#` starts a comment).
    #[arg(long = "targets", value_name = "FILE")]
    pub targets_file: Option<std::path::PathBuf>,
    /// A scaling curve: run the fleet with the first k targets for each k, e.g. 1,2,4,8,16 or
    /// 1..16, in a random order, with statistics per k and where the total stops rising.
    #[arg(long = "scale", value_name = "K,...|A..B")]
    pub scale: Option<String>,
    /// With --scale: runs per host count.
    #[arg(long = "repeat", value_name = "N", default_value_t = 1, requires = "scale",
          value_parser = |s: &str| super::args::whole::<u32>(s, 1..=100))]
    pub repeat: u32,
    /// Every target name that resolves to several addresses (a Kubernetes headless service,
    /// round-robin DNS) becomes one target per address, labelled NAME/ADDRESS.
    #[arg(long = "each-address")]
    pub each_address: bool,
    /// With --scale: the seed of the run order [default: random, printed].
    #[arg(long = "seed", value_name = "N", requires = "scale", value_parser = super::args::count::<u64>)]
    pub seed: Option<u64>,
    /// With --scale: repeat each host count until the 95 % confidence interval of its total
    /// is within this share of the mean (e.g. 5%), up to --max-repeat runs; only fleet runs
    /// in which every host was measured count.
    #[arg(long = "until-ci", value_name = "PERCENT", value_parser = super::args::percent,
          requires = "scale")]
    pub until_ci: Option<f64>,
    /// With --until-ci: the most whole fleet runs per host count.
    #[arg(long = "max-repeat", value_name = "N", default_value_t = 10, requires = "until_ci",
          value_parser = |s: &str| super::args::whole::<u32>(s, 2..=1000))]
    pub max_repeat: u32,
    /// With --scale: continue the newest unfinished scaling curve with these settings (or
    /// fleet fN): fleet runs in which every host was measured are kept, the rest run in the
    /// stored order.
    #[arg(long = "resume", value_name = "fN", num_args = 0..=1, value_parser = fleet_ref)]
    pub resume: Option<Option<i64>>,
    /// Stop after N fleet runs as if interrupted (for testing --resume).
    #[arg(long = "stop-after", value_name = "N", hide = true, value_parser = super::args::count::<usize>)]
    pub stop_after: Option<usize>,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub test: TestArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// The longest interval sample a fleet's hosts take (`-i` may ask for shorter), ms.
pub const FLEET_SAMPLE_MS: u64 = 100;

/// The fleet plan: the targets, checked, and the test every one gets.
pub(super) fn fleet_plan(a: FleetArgs) -> Result<FleetPlan, String> {
    let port = a.net.port.unwrap_or(crate::plan::DEFAULT_PORT);
    let mut targets: Vec<Target> =
        a.targets.iter().map(|t| parse_target(t, port)).collect::<Result<_, _>>()?;
    if let Some(path) = &a.targets_file {
        let text = std::fs::read(path)
            .map_err(|e| format!("cannot read the targets file {}: {e}", path.display()))?;
        let more =
            parse_targets_file(&text, port).map_err(|e| format!("{}: {e}", path.display()))?;
        targets.extend(more);
    }
    check_targets(&targets)?;
    let refused = [
        (a.test.find_max, "--find-max searches one server's rate; run it per host"),
        (a.test.iperf3, "--iperf3: iperf3 servers cannot hold a start; run linerate server"),
        (a.test.get_server_output, "--get-server-output is for iperf3 servers"),
        (a.test.under_load, "--under-load yet: its probes measure one path; run it per host"),
        (a.test.repeating_payload, "--repeating-payload is for iperf3 servers"),
        (
            a.test.text.format.is_some() || a.test.text.verbose,
            "-f or -V: they shape one client's text; a fleet prints its own tables (-J for all)",
        ),
        (
            a.test.text.log.logfile.is_some()
                || a.test.text.log.timestamps.is_some()
                || a.test.text.log.forceflush,
            "--logfile, --timestamps or --forceflush yet; redirect its output instead",
        ),
        (
            a.test.cport.is_some(),
            "--cport fixes local ports per stream; a fleet's hosts would share them",
        ),
        (a.net.json_stream, "--json-stream follows one test; a fleet writes one document: use -J"),
        (
            a.test.interval.is_zero(),
            "-i 0: a fleet needs interval samples to find the window every host shared",
        ),
    ];
    if let Some((_, why)) = refused.iter().find(|(bad, _)| *bad) {
        return Err(format!("a fleet cannot take {why}"));
    }
    let mut base =
        super::convert::client_plan("fleet".into(), &a.net, &a.test, super::convert::DEFAULT_TIME)?;
    // The shared window is cut inside each host's interval samples, pro rata: a sample as long
    // as a second put the tail a starved flow drained after its senders stopped at the wrong
    // instants, and a 1 s fleet through a 956 Mbit/s link read 975. Fleets sample finely.
    base.spec.interval_ms = base.spec.interval_ms.min(FLEET_SAMPLE_MS);
    if matches!(base.output, OutputFormat::Iperf3Json(_)) {
        return Err("a fleet writes linerate's JSON only: drop --json-format iperf3".into());
    }
    let scale = match &a.scale {
        Some(s) => crate::plan::fleet::parse_scale(s, targets.len())?,
        None => Vec::new(),
    };
    let base = super::convert::with_store(base, &a.store);
    check_resume(&a, &base)?;
    Ok(FleetPlan {
        targets,
        base,
        scale,
        repeat: a.repeat,
        seed: a.seed.unwrap_or_else(super::convert::random_seed),
        each_address: a.each_address,
        until_ci: a.until_ci.map(|p| p / 100.0),
        max_repeat: a.max_repeat.max(a.repeat),
        resume: a.resume,
        stop_after: a.stop_after,
    })
}

/// Refuses `--resume` where there is nothing to continue. A single fleet (no `--scale`) is
/// one measurement of every host at one instant: no part of an interrupted one can be kept,
/// so it is run again, as a new fleet, without `--resume`.
fn check_resume(a: &FleetArgs, base: &crate::plan::ClientPlan) -> Result<(), String> {
    if a.resume.is_none() {
        return Ok(());
    }
    if a.scale.is_none() {
        return Err("--resume continues a scaling curve (--scale): a single fleet run measures                     every host at one instant, so nothing of an interrupted one can be kept;                     run it again without --resume"
            .into());
    }
    if a.store.no_store {
        return Err("--resume reads the curve's runs from the history: drop --no-store".into());
    }
    if base.store.path.is_none() {
        return Err("--resume needs the history: set XDG_DATA_HOME or HOME, or give --db".into());
    }
    Ok(())
}

/// `fN` or `N`: a stored fleet's group.
fn fleet_ref(s: &str) -> Result<i64, String> {
    match s.strip_prefix('f').unwrap_or(s).parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a fleet; write it as `linerate history` shows it, e.g. f3")),
    }
}
