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
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub test: TestArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// The fleet plan: the targets, checked, and the test every one gets.
pub(super) fn fleet_plan(a: FleetArgs) -> Result<FleetPlan, String> {
    let port = a.net.port.unwrap_or(crate::plan::DEFAULT_PORT);
    let mut targets: Vec<Target> =
        a.targets.iter().map(|t| parse_target(t, port)).collect::<Result<_, _>>()?;
    if let Some(path) = &a.targets_file {
        let text = std::fs::read_to_string(path)
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
    let base =
        super::convert::client_plan("fleet".into(), &a.net, &a.test, super::convert::DEFAULT_TIME)?;
    if base.output == OutputFormat::Iperf3Json {
        return Err("a fleet writes linerate's JSON only: drop --json-format iperf3".into());
    }
    Ok(FleetPlan { targets, base: super::convert::with_store(base, &a.store) })
}
