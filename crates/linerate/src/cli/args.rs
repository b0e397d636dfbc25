//! The flag definitions. Help text here is the user documentation: the man page and the
//! shell completions are generated from it (`linerate generate man|bash|zsh|fish`).

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::server_args::ServerArgs;
use super::test_args::{
    DirectionArg, GateArgs, NetArgs, ProtocolArg, RrShapeArgs, RunArgs, ScheduleArgs, StoreArgs,
    TestArgs,
};
use super::values::{count, optional_size, rate, seconds, whole};
use crate::plan::size::Size;
use crate::units::Bitrate;

/// Under the top-level help (and in the man page): units, examples, exit status.
const AFTER_HELP: &str = "\
Units:
  Sizes (-l, -w, -n): K = 1024, M = 1024^2, G = 1024^3 (like iperf); k = 1000, m = 10^6,
  g = 10^9; KiB/MiB/GiB and kB/MB/GB are accepted too. Example: -l 128K = 131072 bytes.
  Rates (-b) are SI bits per second whatever the case: 10G = 10^10 bit/s, 200M = 2*10^8.
  Times (-t, -i, -O, --connect-timeout) are seconds and may be fractional (0.5), or take a
  suffix: 250ms, 10s, 2m, 1h.
Output shows byte counts in IEC units (GiB = 2^30 bytes) and rates in SI (Gbit/s = 10^9 bit/s).

Examples:
  linerate                          the default methodology on loopback: an embedded server,
                                    1 and 2 streams, 3 runs each, a table and findings (~8 s)
  linerate selftest                 one 3 s test against an embedded loopback server
  linerate server                   serve tests on port 5201 (same as: linerate -s)
  linerate client HOST -P 4 -t 30   4 streams for 30 s   (same as: linerate -c HOST ...)
  linerate client HOST -R -w 800k   server sends; 800 kB socket buffers on both ends

Exit status:
  0    success
  1    a gate failed: the test ran and fell short (--fail-below, --fail-regression)
  2    usage or input error: flags, a plan or campaign file, an unknown run or group id,
       a report file that cannot be read
  3    the test could not run or failed (connection refused, the server refused, timed
       out, peer errors; runs of a matrix or campaign failed or it stopped early; a
       campaign's pre-flight could not reach a tier's server), or linerate's own
       environment failed (sockets, files, the history database)
  130  interrupted (SIGINT or SIGTERM), after the partial results were printed and stored
  A server stopped by SIGINT or SIGTERM exits 0.";

/// `linerate --version`: the package's version and the commit it was built from
/// (`crates/linerate/build.rs`: `0.1.0 (1a2b3c4d5e6f)`, `-dirty` after it when tracked files
/// had been edited, `unknown commit` when built outside a git checkout).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LINERATE_COMMIT"), ")");

/// Network throughput benchmark: client, multi-client server, honest figures.
#[derive(Debug, Parser)]
#[command(name = "linerate", version = VERSION, about, after_help = AFTER_HELP, args_conflicts_with_subcommands = true,
          disable_version_flag = true)]
pub struct Cli {
    /// Print the version, as iperf3's -v. (`-V` is verbose, as in iperf3.)
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    pub version: Option<bool>,
    /// What to do (default: selftest).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// iperf-style invocation: -s or -c HOST with the test flags.
    #[command(flatten)]
    pub compat: CompatArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a test against a linerate server.
    Client(ClientArgs),
    /// Serve tests to many clients at once.
    Server(ServerArgs),
    /// Start an embedded server on loopback and run a short test against it.
    Selftest(SelftestArgs),
    /// Run every combination of the given axes against a server, each repeated, in a random
    /// order, with statistics per cell and findings in plain words.
    Matrix(MatrixArgs),
    /// Run one test against many linerate servers at once, started together: totals, each
    /// host's share, and how fairly hosts and flows shared (see docs/METHODOLOGY.md, "Fleets").
    Fleet(super::fleet_args::FleetArgs),
    /// Ask agents (`linerate server --agent --psk-file FILE`) to test each other, every
    /// ordered pair one at a time, with statistics per pair, the pairs by zone and findings
    /// (see docs/METHODOLOGY.md, "Meshes").
    Mesh(super::mesh_args::MeshArgs),
    /// Run a campaign file: tiers (targets) in file order, each with its own matrix or a fleet
    /// of servers, then a summary across tiers (see docs/METHODOLOGY.md, "Campaigns", and
    /// examples/*.toml).
    Campaign(CampaignArgs),
    /// List stored runs, newest first.
    History {
        /// Only runs with this label.
        #[arg(long = "label", value_name = "TEXT")]
        label: Option<String>,
        /// Only runs against this server: HOST (any port) or HOST:PORT.
        #[arg(long = "server", visible_alias = "target", value_name = "HOST[:PORT]")]
        server: Option<String>,
        /// Only runs of the last DURATION, e.g. 30d, 12h, 2w.
        #[arg(long = "since", value_name = "DURATION", value_parser = seconds)]
        since: Option<Duration>,
        /// Only runs of this matrix or search (its group id).
        #[arg(long = "group", value_name = "ID", value_parser = count::<i64>)]
        group: Option<i64>,
        /// Only runs that failed, each with its error.
        #[arg(long = "failed", conflicts_with = "completed")]
        failed: bool,
        /// Only runs that completed (the ones figures are made of).
        #[arg(long = "completed")]
        completed: bool,
        /// At most this many.
        #[arg(long = "limit", value_name = "N", default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Show one stored run as the client printed it (or its JSON document).
    Show {
        /// Run id (from `linerate history`), or `last` for the newest run.
        #[arg(value_name = "RUN|last", default_value = "last")]
        run: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Compare two stored runs (`12`), matrices (`m3`) or campaigns (`c4`), cell by cell,
    /// or two fleets (`f5`) host by host and scaling curves point by point, with a
    /// significance test.
    Compare {
        /// The before: a run id, or `m`/`c`/`f` and a matrix's, campaign's or fleet's group
        /// id, or `last` (the newest run, or the matrix, campaign or fleet it belongs to).
        #[arg(value_name = "A")]
        a: String,
        /// The after.
        #[arg(value_name = "B")]
        b: String,
        /// Also write an HTML page with both on the same axes (self-contained, like
        /// `linerate report --format html`).
        #[arg(long = "html", value_name = "FILE")]
        html: Option<std::path::PathBuf>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Inspect this host (and HOST's linerate server and the path to it): interfaces, offloads,
    /// socket-buffer limits, CPU; the path's MTU and round trip; recommendations with commands.
    Doctor(DoctorArgs),
    /// Write a report on a stored run (`12`), matrix (`m3`) or campaign (`c4`), or on a saved
    /// JSON document: tables per tier, findings and warnings; as text, Markdown, CSV, JSON or
    /// one self-contained HTML file with charts.
    Report(ReportArgs),
    /// Print the man page, shell completions or Kubernetes manifests; with --dir, write every
    /// man page or each manifest.
    Generate {
        /// What to print.
        #[arg(value_enum)]
        what: GenerateWhat,
        /// With `man`: write linerate.1 and a page per subcommand (linerate-client.1, ...)
        /// into this directory instead of printing linerate(1) (what a package installs). With
        /// `kubernetes`: a file per object and a kustomization.yaml (deploy/kubernetes/base/).
        #[arg(long = "dir", value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
        #[command(flatten)]
        kubernetes: KubernetesArgs,
    },
}

/// `linerate generate kubernetes` options (deploy/kubernetes/ has them as overlays).
#[derive(Debug, Args)]
#[command(next_help_heading = "Kubernetes")]
pub struct KubernetesArgs {
    /// The namespace of every object [default: linerate].
    #[arg(long = "namespace", value_name = "NAME")]
    pub namespace: Option<String>,
    /// The image of the agents and of the fleet Job, as the cluster pulls it [default:
    /// localhost/linerate:VERSION, what packaging/build-image.sh tags].
    #[arg(long = "image", value_name = "IMAGE")]
    pub image: Option<String>,
    /// Agents on each node's own network (hostNetwork), listening on the node's address:
    /// node-to-node figures without the pod network; the namespace becomes privileged.
    #[arg(long = "host-network")]
    pub host_network: bool,
    /// Servers require the pre-shared key in this Secret (key `psk`), which the Job proves:
    /// kubectl create secret generic NAME --from-file=psk=KEYFILE.
    #[arg(long = "psk-secret", value_name = "NAME")]
    pub psk_secret: Option<String>,
    /// The servers are agents (`server --agent`) and a second Job runs `linerate mesh` over
    /// them: every node pair tested. Needs --psk-secret.
    #[arg(long = "mesh", requires = "psk_secret")]
    pub mesh: bool,
    /// With --mesh: the mesh is a CronJob on this schedule (cron syntax, e.g. "0 * * * *"), one
    /// at a time (concurrencyPolicy: Forbid), each mesh stored in the history claim.
    #[arg(long = "schedule", value_name = "CRON", requires = "mesh")]
    pub schedule: Option<String>,
    /// With --mesh: agents on both networks of every node, the pod network's and the node's
    /// own (a second DaemonSet, hostNetwork), and one mesh over both: each node pair tested on
    /// each network, and what the pod network costs against the host's. The namespace becomes
    /// privileged.
    #[arg(long = "both-networks", requires = "mesh", conflicts_with = "host_network")]
    pub both_networks: bool,
}

/// `linerate doctor [HOST]`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// A host running `linerate server`: its environment, the round trip and the path MTU
    /// to it are checked too.
    #[arg(value_name = "HOST")]
    pub host: Option<String>,
    /// Port, local address, address family and JSON output (docs/JSON.md, `linerate.doctor`).
    #[command(flatten)]
    pub net: NetArgs,
    /// The path's link rate (SI, e.g. 10G): socket-buffer limits are checked against its
    /// bandwidth-delay product. Default: the local test interface's link speed, if known.
    #[arg(long = "link-speed", value_name = "RATE", value_parser = rate)]
    pub link_speed: Option<Bitrate>,
}

/// Generated documentation.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GenerateWhat {
    /// roff man page
    Man,
    /// bash completions
    Bash,
    /// zsh completions
    Zsh,
    /// fish completions
    Fish,
    /// Kubernetes manifests: agents as a DaemonSet, a headless Service, a fleet Job
    Kubernetes,
}

/// `linerate -s` / `linerate -c HOST ...`.
#[derive(Debug, Args)]
pub struct CompatArgs {
    /// Run as a server (same as `linerate server`).
    #[arg(short = 's', long = "server", conflicts_with = "client")]
    pub server: bool,
    /// Run as a client of HOST (same as `linerate client HOST`).
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub client: Option<String>,
    /// Server: exit after one test.
    #[arg(short = '1', long = "one-off", requires = "server")]
    pub one_off: bool,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub test: TestArgs,
    /// With -c: where the run is kept (as `linerate client`).
    #[command(flatten)]
    pub store: StoreArgs,
    /// With -c: pass/fail gates (as `linerate client`).
    #[command(flatten)]
    pub gates: GateArgs,
}

/// `linerate client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Server host name or address; HOST:PORT, an IPv6 address, [IPv6] and [IPv6]:PORT work.
    #[arg(value_name = "HOST")]
    pub host: String,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub test: TestArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub gates: GateArgs,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
}

/// `linerate report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run id, `mN` (matrix), `cN` (campaign), `fN` (fleet) or `nN` (mesh) from `linerate
    /// history`, `last` (the default: the newest run, or the matrix, campaign, fleet or mesh it
    /// belongs to), or a file saved from `-J` output.
    #[arg(value_name = "RUN|mN|cN|fN|nN|last|FILE.json", default_value = "last")]
    pub what: String,
    /// Instead: one target's stored results over time, each test a series, with the changes
    /// found in it (method: docs/METHODOLOGY.md, "Trends"). HOST (any port) or HOST:PORT.
    #[arg(long = "trend", value_name = "HOST[:PORT]")]
    pub trend: Option<String>,
    /// With --trend: only runs of the last DURATION, e.g. 30d.
    #[arg(long = "since", value_name = "DURATION", value_parser = seconds, requires = "trend")]
    pub since: Option<Duration>,
    /// Output format.
    #[arg(long = "format", short = 'f', value_enum, default_value_t = ReportFormatArg::Text)]
    pub format: ReportFormatArg,
    /// CSV layout: one row per cell summary, or one per (run, stream, interval)
    /// (docs/CSV.md).
    #[arg(long = "csv-kind", value_enum, default_value_t = CsvKindArg::Cells)]
    pub csv_kind: CsvKindArg,
    /// Write to this file (replaced whole) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// History database [default: $XDG_DATA_HOME/linerate/history.sqlite].
    #[arg(long = "db", value_name = "PATH")]
    pub db: Option<std::path::PathBuf>,
}

/// `--format` of `linerate report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormatArg {
    /// Aligned tables for a terminal.
    Text,
    /// Markdown (pipe tables).
    Md,
    /// CSV (docs/CSV.md).
    Csv,
    /// The JSON document of docs/JSON.md.
    Json,
    /// One self-contained HTML file with SVG charts (no network needed to view it).
    Html,
}

/// `--csv-kind` of `linerate report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CsvKindArg {
    /// One row per cell summary.
    Cells,
    /// One row per (run, stream, interval).
    Intervals,
}

/// Only the database location (history commands).
#[derive(Debug, Args)]
pub struct DbArgs {
    /// History database [default: $XDG_DATA_HOME/linerate/history.sqlite].
    #[arg(long = "db", value_name = "PATH")]
    pub db: Option<std::path::PathBuf>,
    /// Print JSON.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
}

/// `linerate selftest`.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    /// Print the result as JSON.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    #[command(flatten)]
    pub test: TestArgs,
}

/// `linerate matrix HOST --parallel 1,2,4,8 --window default,800k --repeat 3`.
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// Server host name or address.
    #[arg(value_name = "HOST")]
    pub host: String,
    #[command(flatten)]
    pub net: NetArgs,
    /// Streams per direction to try (axis), e.g. 1,2,4,8.
    #[arg(short = 'P', long = "parallel", value_name = "N,...", value_delimiter = ',',
          value_parser = |s: &str| whole::<u32>(s, 1..=u64::from(linerate_proto::spec::MAX_STREAMS)))]
    pub parallel: Vec<u32>,
    /// Socket buffer sizes to try (axis): `default` (autotuning) or a size, e.g. default,800k.
    #[arg(short = 'w', long = "window", value_name = "SIZE,...", value_delimiter = ',', value_parser = optional_size)]
    pub window: Vec<Option<Size>>,
    /// Block or datagram sizes to try (axis): `default` or a size, e.g. 8K,64K,1M.
    #[arg(short = 'l', long = "length", value_name = "SIZE,...", value_delimiter = ',', value_parser = optional_size)]
    pub length: Vec<Option<Size>>,
    /// Protocols to try (axis): tcp, udp.
    #[arg(long = "protocol", value_name = "P,...", value_delimiter = ',', value_enum)]
    pub protocol: Vec<ProtocolArg>,
    /// Directions to try (axis): send (client sends), recv (-R), bidir.
    #[arg(long = "direction", value_name = "D,...", value_delimiter = ',', value_enum)]
    pub direction: Vec<DirectionArg>,
    #[command(flatten)]
    pub rounds: super::repeat::RoundsArgs,
    #[command(flatten)]
    pub test: MatrixTestArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub gates: GateArgs,
}

/// `linerate campaign FILE.toml [--resume [GROUP]]`.
#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// The campaign file (TOML).
    #[arg(value_name = "FILE")]
    pub file: std::path::PathBuf,
    #[command(flatten)]
    pub resume: super::repeat::ResumeArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// One JSON document with every tier at the end.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
}

/// The test flags that apply to every cell of a matrix (the axes set the rest).
#[derive(Debug, Args)]
pub struct MatrixTestArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Every cell a request/response test (netperf's TCP_RR): cells are judged by their
    /// transactions/s (mean ± 95 % CI across repetitions) and latency, not a bit rate.
    #[arg(long = "rr", group = "rr_mode")]
    pub rr: bool,
    #[command(flatten)]
    pub rr_shape: RrShapeArgs,
}
