//! The flags of `linerate fleet`.

use clap::Args;

use super::repeat::{CURVE, Rounds};
use super::test_args::{NetArgs, StoreArgs, TestArgs};
use super::values::{seconds, whole};
use crate::plan::OutputFormat;
use crate::plan::fleet::{FleetPlan, Target, check_targets, parse_target, parse_targets_file};

/// `linerate fleet TARGET... [test flags]`.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// The servers: HOST[:PORT][=LABEL] each (IPv6 in brackets: [fd00::2]:5201=vm2). A target
    /// without a port uses -p.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// A scaling curve: run the fleet with the first k targets for each k, e.g. 1,2,4,8,16 or
    /// 1..16, in a random order, with statistics per k and where the total stops rising;
    /// --repeat, --until-ci, --seed and --resume shape its rounds.
    #[arg(long = "scale", value_name = "K,...|A..B")]
    pub scale: Option<String>,
    #[command(flatten)]
    pub reach: ReachArgs,
    // A scaling curve's rounds and resume: the flags every repeated experiment shares, made
    // to need --scale, with one run per host count by default (`repeat::for_curves`).
    #[command(flatten)]
    pub rounds: super::repeat::RoundsArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub test: TestArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// How a fleet or a mesh finds its servers (agents): more of them from a file, each address
/// of a name, and how long to wait for the agents the names resolve to. One set of flags for
/// both commands.
#[derive(Debug, Args)]
pub struct ReachArgs {
    /// Read more targets (a mesh's agents) from FILE, one per line (`#` starts a comment).
    #[arg(long = "targets", value_name = "FILE")]
    pub targets_file: Option<std::path::PathBuf>,
    /// Every name that resolves to several addresses (a Kubernetes headless service,
    /// round-robin DNS) becomes one target (agent) per address, labelled NAME/ADDRESS; a name
    /// with one address is pinned to it, labelled NAME.
    #[arg(long = "each-address")]
    pub each_address: bool,
    /// With --each-address: wait up to DURATION (e.g. 5m) until the agents the names resolve
    /// to all answer and none has come or gone for 10 s (30 s while an agent has served for
    /// less than a minute: a rollout), or --expect of them answer, instead of taking whatever
    /// answers at the start. For a Job that starts beside its agents.
    #[arg(long = "wait-agents", value_name = "DURATION", requires = "each_address", value_parser = seconds)]
    pub wait_agents: Option<std::time::Duration>,
    /// With --each-address: N agents are expected; start once N answer (with --wait-agents,
    /// wait for them; past the wait, fail naming those that answered).
    #[arg(long = "expect", value_name = "N", requires = "each_address", value_parser = |s: &str| whole::<usize>(s, 1..=4096))]
    pub expect: Option<usize>,
}

impl ReachArgs {
    /// The plan's wait.
    pub(super) fn plan(&self) -> crate::plan::fleet::AgentWait {
        crate::plan::fleet::AgentWait {
            wait: self.wait_agents.unwrap_or_default(),
            expect: self.expect,
        }
    }
}

/// The targets given on the command line, then those of `--targets FILE`: a fleet's servers,
/// a mesh's agents. Each without a port takes `port`.
pub(super) fn read_targets(
    given: &[String],
    file: Option<&std::path::Path>,
    port: u16,
) -> Result<Vec<Target>, String> {
    let mut targets: Vec<Target> =
        given.iter().map(|t| parse_target(t, port)).collect::<Result<_, _>>()?;
    if let Some(path) = file {
        let text = std::fs::read(path)
            .map_err(|e| format!("cannot read the targets file {}: {e}", path.display()))?;
        let more =
            parse_targets_file(&text, port).map_err(|e| format!("{}: {e}", path.display()))?;
        targets.extend(more);
    }
    Ok(targets)
}

/// Refuses, as `a NOUN cannot take …`, the first flag of `own` (the command's own refusals)
/// that was given, then any flag that shapes one client's test or text, which a command of
/// many tests (a fleet, a mesh) cannot honour.
pub(super) fn refuse_for_many(
    noun: &str,
    own: &[(bool, &str)],
    test: &TestArgs,
    net: &NetArgs,
) -> Result<(), String> {
    let log = &test.text.log;
    let shared = [
        (test.get_server_output, "--get-server-output is for iperf3 servers".to_string()),
        (test.repeating_payload, "--repeating-payload is for iperf3 servers".into()),
        (
            test.text.format.is_some() || test.text.verbose,
            format!(
                "-f or -V: they shape one client's text; a {noun} prints its own tables (-J for all)"
            ),
        ),
        (
            log.logfile.is_some() || log.timestamps.is_some() || log.forceflush,
            "--logfile, --timestamps or --forceflush yet; redirect its output instead".into(),
        ),
        (
            net.json_stream,
            format!("--json-stream follows one test; a {noun} writes one document: use -J"),
        ),
    ];
    let own = own.iter().map(|(bad, why)| (*bad, why.to_string()));
    match own.chain(shared).find(|(bad, _)| *bad) {
        Some((_, why)) => Err(format!("a {noun} cannot take {why}")),
        None => Ok(()),
    }
}

/// The longest interval sample a fleet's hosts take (`-i` may ask for shorter), ms.
pub const FLEET_SAMPLE_MS: u64 = 100;

/// The fleet plan: the targets, checked, and the test every one gets.
pub(super) fn fleet_plan(a: FleetArgs) -> Result<FleetPlan, String> {
    let port = a.net.port.unwrap_or(crate::plan::DEFAULT_PORT);
    let targets = read_targets(&a.targets, a.reach.targets_file.as_deref(), port)?;
    check_targets(&targets)?;
    let own = [
        (a.test.find_max, "--find-max searches one server's rate; run it per host"),
        (a.test.iperf3, "--iperf3: iperf3 servers cannot hold a start; run linerate server"),
        (a.test.under_load, "--under-load yet: its probes measure one path; run it per host"),
        (
            a.test.cport.is_some(),
            "--cport fixes local ports per stream; a fleet's hosts would share them",
        ),
        (
            a.test.run.interval.is_zero(),
            "-i 0: a fleet needs interval samples to find the window every host shared",
        ),
    ];
    refuse_for_many("fleet", &own, &a.test, &a.net)?;
    let mut base =
        super::test_plan::client_plan("fleet".into(), &a.net, &a.test, crate::plan::DEFAULT_TIME)?;
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
    let base = super::test_plan::with_store(base, &a.store);
    let resume = &a.rounds.resume;
    if resume.resume.is_some() && a.scale.is_none() {
        return Err("--resume continues a scaling curve (--scale): a single fleet run measures \
                    every host at one instant, so nothing of an interrupted one can be kept; \
                    run it again without --resume"
            .into());
    }
    let resume = resume.group(CURVE, a.store.no_store, base.store.path.is_some())?;
    let Rounds { repeat, until_ci, max_repeat, seed } = a.rounds.rounds();
    Ok(FleetPlan {
        targets,
        base,
        scale,
        repeat,
        seed,
        each_address: a.reach.each_address,
        agent_wait: a.reach.plan(),
        until_ci,
        max_repeat,
        resume,
        stop_after: a.rounds.resume.stop_after,
        key_file: a.net.psk_file.clone(),
    })
}
