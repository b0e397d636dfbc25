//! The flags of `linerate mesh`.

use clap::Args;

use super::repeat::Rounds;
use super::test_args::{NetArgs, ScheduleArgs, StoreArgs, TestArgs};
use super::values::whole;
use crate::plan::OutputFormat;
use crate::plan::mesh::{MeshPlan, check_agents};

/// `linerate mesh AGENT... --psk-file FILE [test flags]`.
#[derive(Debug, Args)]
pub struct MeshArgs {
    /// The agents (`linerate server --agent`): HOST[:PORT][=LABEL] each (IPv6 in brackets).
    /// An agent without a port uses -p. Given no label at all, agents are named by the node
    /// each reports (`server --node-name`), when every one reports a distinct node.
    #[arg(value_name = "AGENT")]
    pub agents: Vec<String>,
    #[command(flatten)]
    pub reach: super::fleet_args::ReachArgs,
    /// Test a sample of the ordered pairs instead of every one (n agents have n(n-1)): N, a
    /// seeded sample of about N pairs in which every agent sends and receives about equally;
    /// or zones[:R], every pair inside a zone and, between zones, every pair of R agents of
    /// each (default 2), by the zones the agents report (`server --zone`).
    #[arg(long = "sample", alias = "pairs", value_name = "N|zones[:R]", value_parser = crate::plan::sample::parse)]
    pub sample: Option<crate::plan::sample::Sample>,
    /// One pair at a time, as k8s-netperf does: for fabrics where disjoint pairs still share a
    /// bottleneck (a spine, an uplink). By default every agent takes part in at most one test
    /// at a time and a round's disjoint pairs run at once (about 2(N-1) rounds for N agents).
    #[arg(long = "serial", conflicts_with = "concurrency")]
    pub serial: bool,
    /// At most K pairs at once (each a thread and a control connection here; at most 512).
    #[arg(long = "concurrency", value_name = "K", value_parser = |s: &str| whole::<usize>(s, 1..=crate::plan::mesh::MAX_CONCURRENCY as u64))]
    pub concurrency: Option<usize>,
    /// After the rounds, run N sampled pairs again alone, one at a time, and say whether the
    /// pairs of a round disturbed each other (a shared spine or uplink); 0 skips the check.
    /// Not run with --serial.
    #[arg(long = "interference-sample", value_name = "N", default_value_t = crate::plan::mesh::DEFAULT_INTERFERENCE_SAMPLE, value_parser = |s: &str| whole::<usize>(s, 0..=10_000))]
    pub interference: usize,
    /// Print the plan (agents, pairs, rounds, schedule, estimated time) and exit: no test is
    /// run, and no agent is contacted unless --sample zones needs their zones (names are
    /// resolved with --each-address).
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    #[command(flatten)]
    pub rounds: super::repeat::RoundsArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub test: TestArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
}

/// The mesh plan: the agents, checked, the key, and the test every pair runs.
pub(super) fn mesh_plan(a: MeshArgs) -> Result<MeshPlan, String> {
    let port = a.net.port.unwrap_or(crate::plan::DEFAULT_PORT);
    let agents = super::fleet_args::read_targets(&a.agents, a.reach.targets_file.as_deref(), port)?;
    if !a.reach.each_address {
        check_agents(&agents)?;
    }
    let own = [
        (a.test.find_max, "--find-max; run it per pair with `linerate client`"),
        (a.test.iperf3, "--iperf3: agents are linerate servers"),
        (a.test.under_load, "--under-load yet; run it per pair with `linerate client`"),
        (a.test.cport.is_some(), "--cport: the agents choose their own ports"),
        (a.test.run.affinity.is_some(), "-A: the agents place their own threads"),
    ];
    super::fleet_args::refuse_for_many("mesh", &own, &a.test, &a.net)?;
    let base =
        super::test_plan::client_plan("mesh".into(), &a.net, &a.test, crate::plan::DEFAULT_TIME)?;
    if base.psk.is_none() {
        return Err("a mesh needs the agents' key: give --psk-file FILE (agents run tests only \
                    for a client that proves it)"
            .into());
    }
    if matches!(base.output, OutputFormat::Iperf3Json(_)) {
        return Err("a mesh writes linerate's JSON only: drop --json-format iperf3".into());
    }
    let base = super::test_plan::with_store(base, &a.store);
    let resume =
        a.rounds.resume.group(super::repeat::MESH, a.store.no_store, base.store.path.is_some())?;
    let Rounds { repeat, until_ci, max_repeat, seed } = a.rounds.rounds();
    let every = super::test_plan::schedule_of(&a.schedule)?;
    if every.is_some() && (a.dry_run || resume.is_some()) {
        return Err("--every and --slip run whole meshes on a schedule: --dry-run prints one \
                    mesh's plan and --resume continues one mesh; give them without a schedule"
            .into());
    }
    Ok(MeshPlan {
        agents,
        base,
        sample: a.sample.unwrap_or_default(),
        each_address: a.reach.each_address,
        agent_wait: a.reach.plan(),
        concurrency: match (a.serial, a.concurrency) {
            (true, _) => 1,
            (false, Some(k)) => k,
            (false, None) => crate::plan::mesh::MAX_CONCURRENCY,
        },
        dry_run: a.dry_run,
        interference: a.interference,
        repeat,
        until_ci,
        max_repeat,
        seed,
        resume,
        stop_after: a.rounds.resume.stop_after,
        every,
        key_file: a.net.psk_file.clone(),
    })
}
