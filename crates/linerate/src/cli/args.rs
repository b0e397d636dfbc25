//! The flag definitions. Help text here is the user documentation: the man page and the
//! shell completions are generated from it (`linerate generate man|bash|zsh|fish`).

use std::net::IpAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::plan::size::Size;
use crate::units::{self, Bitrate, ByteCount};

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

/// Running the test (`linerate client`) or the mesh (`linerate mesh`) on a schedule.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// Run again every DURATION (e.g. 15m), storing each run, so the history fills for
    /// `linerate report --trend` and a mesh's drop and drift findings; needs --for or --count.
    /// A failed run is stored and the schedule goes on; the exit status is that of the last
    /// failure, if any run failed.
    #[arg(long = "every", value_name = "DURATION", value_parser = seconds)]
    pub every: Option<Duration>,
    /// With --every: start no run after DURATION (e.g. 30d).
    #[arg(long = "for", value_name = "DURATION", value_parser = seconds, requires = "every", conflicts_with = "count")]
    pub for_: Option<Duration>,
    /// With --every: stop after N runs.
    #[arg(long = "count", value_name = "N", value_parser = count::<u32>, requires = "every")]
    pub count: Option<u32>,
    /// Start each run a random 0 to DURATION after its time (the first too; with --every, less
    /// than its period), so requesters on one schedule do not all start at once.
    #[arg(long = "slip", value_name = "DURATION", value_parser = seconds)]
    pub slip: Option<Duration>,
}

/// Where results are kept.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// History database [default: $XDG_DATA_HOME/linerate/history.sqlite].
    #[arg(long = "db", value_name = "PATH")]
    pub db: Option<std::path::PathBuf>,
    /// Do not store this run in the history.
    #[arg(long = "no-store", conflicts_with = "db")]
    pub no_store: bool,
    /// A label to find the run by later (repeatable), e.g. --label before-tuning.
    #[arg(long = "label", value_name = "TEXT")]
    pub label: Vec<String>,
}

/// Pass/fail gates for CI use.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Exit 1 if the received rate (a matrix: any cell's mean) is below RATE, e.g. 9G.
    #[arg(long = "fail-below", value_name = "RATE", value_parser = rate)]
    pub fail_below: Option<Bitrate>,
    /// Exit 1 if a cell is this much slower than in --baseline (significantly so, when both
    /// have two or more runs), e.g. 5%.
    #[arg(long = "fail-regression", value_name = "PERCENT", value_parser = percent, requires = "baseline")]
    pub fail_regression: Option<f64>,
    /// The stored run (`12`) or matrix (`m3`) to compare with for --fail-regression.
    #[arg(long = "baseline", value_name = "RUN", requires = "fail_regression")]
    pub baseline: Option<String>,
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

/// `linerate server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub net: NetArgs,
    /// Exit after one test.
    #[arg(short = '1', long = "one-off")]
    pub one_off: bool,
    #[command(flatten)]
    pub limits: super::server_args::LimitArgs,
    #[command(flatten)]
    pub log: LogArgs,
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
    /// Length of each run in seconds.
    #[arg(short = 't', long = "time", value_name = "SECONDS", value_parser = seconds, default_value = "10")]
    pub time: Duration,
    /// Interval samples in each run's record (0 = off).
    #[arg(short = 'i', long = "interval", value_name = "SECONDS", value_parser = seconds, default_value = "1")]
    pub interval: Duration,
    /// Pacing per stream (TCP: unlimited if not given; UDP cells: 1M if not given).
    #[arg(short = 'b', long = "bitrate", value_name = "RATE", value_parser = rate)]
    pub bitrate: Option<Bitrate>,
    /// Warm-up seconds excluded from each run.
    #[arg(short = 'O', long = "omit", value_name = "SECONDS", value_parser = seconds)]
    pub omit: Option<Duration>,
    /// Congestion control on both ends.
    #[arg(short = 'C', long = "congestion", value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Disable Nagle's algorithm.
    #[arg(short = 'N', long = "no-delay")]
    pub no_delay: bool,
    /// Label carried into every record.
    #[arg(short = 'T', long = "title", value_name = "TEXT")]
    pub title: Option<String>,
    /// Bind every cell's data threads to CPUs, as client -A: CPU lists, or a loopback
    /// placement: auto (the default: the placement this host measured fastest for each
    /// shape of cell), pair, split, none.
    #[arg(short = 'A', long = "affinity", value_name = "CPUS[,SERVER_CPUS]|auto|pair|split|none", value_parser = affinity)]
    pub affinity: Option<crate::plan::affinity::Affinity>,
    /// Give up on each TCP connect after this long.
    #[arg(long = "connect-timeout", value_name = "SECONDS", value_parser = seconds, default_value = "10")]
    pub connect_timeout: Duration,
    /// The path's link rate: findings say which cell first reaches 90 % of its theoretical
    /// TCP goodput.
    #[arg(long = "link-speed", value_name = "RATE", value_parser = rate)]
    pub link_speed: Option<Bitrate>,
    /// The path's IP MTU, with --link-speed.
    #[arg(long = "mtu", value_name = "BYTES", default_value_t = 1500, requires = "link_speed",
          value_parser = |s: &str| whole::<u32>(s, 576..=65536))]
    pub mtu: u32,
    /// Every cell a request/response test (netperf's TCP_RR): cells are judged by their
    /// transactions/s (mean ± 95 % CI across repetitions) and latency, not a bit rate.
    #[arg(long = "rr", group = "rr_mode")]
    pub rr: bool,
    #[command(flatten)]
    pub rr_shape: RrShapeArgs,
}

/// What each transaction of a request/response test (`--rr`) is: one set of flags for a
/// client and a matrix.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct RrShapeArgs {
    /// With --rr: bytes per request [default: 1].
    #[arg(long = "request-size", value_name = "SIZE", value_parser = size, requires = "rr_mode")]
    pub request_size: Option<ByteCount>,
    /// With --rr: bytes per response [default: 1].
    #[arg(long = "response-size", value_name = "SIZE", value_parser = size, requires = "rr_mode")]
    pub response_size: Option<ByteCount>,
    /// With --rr: transactions outstanding per stream (closed loop: always this many; open
    /// loop: at most this many) [default: 1].
    #[arg(long = "in-flight", value_name = "N", requires = "rr_mode", value_parser = count::<u32>)]
    pub in_flight: Option<u32>,
    /// With --rr: open loop at this many requests per second per stream (a whole number, up
    /// to 10000000), each latency measured from the request's intended send time
    /// (coordinated omission corrected); without it (or 0), a closed loop as fast as
    /// responses allow.
    #[arg(long = "rr-rate", value_name = "PER_SECOND", requires = "rr_mode",
          value_parser = |s: &str| whole::<u64>(s, 0..=linerate_proto::latency::MAX_RATE_PER_SECOND))]
    pub rr_rate: Option<u64>,
}

/// `--protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// `--direction` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirectionArg {
    /// The client sends.
    Send,
    /// The server sends (-R).
    Recv,
    /// Both at once (--bidir).
    Bidir,
}

impl From<ProtocolArg> for linerate_proto::Protocol {
    fn from(p: ProtocolArg) -> Self {
        match p {
            ProtocolArg::Tcp => Self::Tcp,
            ProtocolArg::Udp => Self::Udp,
        }
    }
}

impl From<DirectionArg> for linerate_proto::Direction {
    fn from(d: DirectionArg) -> Self {
        match d {
            DirectionArg::Send => Self::Upload,
            DirectionArg::Recv => Self::Download,
            DirectionArg::Bidir => Self::Bidirectional,
        }
    }
}

/// Addressing flags shared by client and server.
#[derive(Debug, Args)]
pub struct NetArgs {
    /// Server port [default: 5201]. A client may instead write it in the host, as HOST:PORT
    /// or [IPv6]:PORT, but not both ways.
    #[arg(short = 'p', long = "port", value_name = "PORT", value_parser = count::<u16>)]
    pub port: Option<u16>,
    /// Local address to bind (server: listen only there; client: send from there).
    #[arg(short = 'B', long = "bind", value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// IPv4 only.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// JSON output (client: one document at the end, see docs/JSON.md; server: one line per event).
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Pre-shared key file (at least 16 bytes; e.g. `head -c 32 /dev/urandom | base64`).
    /// Server: native clients must prove they know it (HMAC challenge) and iperf3 clients are
    /// refused. Client: answer a server that requires it.
    #[arg(long = "psk-file", value_name = "FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// With -J on a client: `linerate` (default, docs/JSON.md) or `iperf3` (shaped like iperf3
    /// -J, with the keys of iperf3 3.21's documents; `iperf3-3.12` for 3.12's, `iperf3-3.21`
    /// to name the version).
    #[arg(
        long = "json-format",
        value_enum,
        value_name = "FORMAT",
        requires = "json",
        default_value = "linerate"
    )]
    pub json_format: JsonFormat,
    /// Client: one JSON line per interval while the test runs, then the run's document as the
    /// last line (docs/JSON.md, "JSON lines while a test runs"); server: the same as -J.
    #[arg(long = "json-stream", conflicts_with = "json")]
    pub json_stream: bool,
}

/// JSON document shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JsonFormat {
    /// linerate's versioned schema (docs/JSON.md).
    Linerate,
    /// Shaped like `iperf3 -J`, for existing parsers: the newest schema linerate knows (3.21).
    Iperf3,
    /// Shaped like iperf3 3.12's `-J` (none of the keys later versions added).
    #[value(name = "iperf3-3.12")]
    Iperf3_3_12,
    /// Shaped like iperf3 3.21's `-J` (the same as `iperf3`, by name).
    #[value(name = "iperf3-3.21")]
    Iperf3_3_21,
}

/// The test's flags (client and selftest).
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Test length in seconds [default: 10; selftest: 3].
    #[arg(short = 't', long = "time", value_name = "SECONDS", value_parser = seconds, conflicts_with = "bytes")]
    pub time: Option<Duration>,
    /// Send this many bytes per direction instead of running for a time.
    #[arg(short = 'n', long = "bytes", value_name = "SIZE", value_parser = size)]
    pub bytes: Option<ByteCount>,
    /// Send this many blocks (of -l bytes; UDP: datagrams) per direction instead, as
    /// iperf3's -k.
    #[arg(short = 'k', long = "blockcount", value_name = "BLOCKS", conflicts_with_all = ["time", "bytes"],
          value_parser = count::<u64>)]
    pub blocks: Option<u64>,
    /// Seconds between interval reports; 0 turns them off.
    #[arg(short = 'i', long = "interval", value_name = "SECONDS", value_parser = seconds, default_value = "1")]
    pub interval: Duration,
    /// Parallel streams (per direction).
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1,
          value_parser = |s: &str| whole::<u32>(s, 1..=u64::from(linerate_proto::spec::MAX_STREAMS)))]
    pub parallel: u32,
    /// Socket buffer size (SO_SNDBUF and SO_RCVBUF) on both ends; the granted size is reported.
    #[arg(short = 'w', long = "window", value_name = "SIZE", value_parser = size)]
    pub window: Option<ByteCount>,
    /// Bytes per write/read call [default: 128K blocks; an unpaced TCP test without -l writes
    /// 1M a call]; with -u, bytes per datagram [default: the
    /// largest that fits the path MTU unfragmented, e.g. 1472 on Ethernet, and leaves -b 100
    /// datagrams a second: 1310 at the default 1M].
    #[arg(short = 'l', long = "length", value_name = "SIZE", value_parser = size)]
    pub length: Option<ByteCount>,
    /// Bytes per read call on TCP receivers, independent of -l [default: the larger of -l and
    /// 128K]: a receiver need not make one system call per small write of its sender.
    #[arg(long = "read-size", value_name = "SIZE", value_parser = size)]
    pub read_size: Option<ByteCount>,
    /// TCP senders keep at most SIZE bytes queued unsent in their socket (TCP_NOTSENT_LOWAT);
    /// 0 leaves the system's setting [default: auto, 256K shared by an end's senders, 64K-128K
    /// each, growing with a fast stream's rate to 25 µs of it]. Bytes in flight are not
    /// limited; see docs/PERFORMANCE.md.
    #[arg(long = "notsent-lowat", value_name = "SIZE", value_parser = size)]
    pub notsent_lowat: Option<ByteCount>,
    /// UDP receivers leave receive offload (UDP_GRO) off. By default they ask the kernel to
    /// coalesce arriving datagrams and account each one by its own header, so loss,
    /// reordering and jitter stay exact per datagram.
    #[arg(long = "no-gro", requires = "udp")]
    pub no_gro: bool,
    /// UDP instead of TCP: paced datagrams (-b, default 1M per stream; -b 0 = as fast as
    /// possible) with loss, reordering, duplicates and jitter measured at the receiver.
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long = "reverse", conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once, each with -P streams.
    #[arg(long = "bidir")]
    pub bidir: bool,
    /// Pace each stream to this rate in bit/s (SI); 0 = unlimited [default: unlimited for TCP,
    /// 1M for UDP]. RATE/BURST, as iperf3's burst mode: BURST blocks (datagrams) back to back,
    /// then a wait until the rate has caught up with them (1..1000).
    #[arg(short = 'b', long = "bitrate", value_name = "RATE[/BURST]", value_parser = bitrate)]
    pub bitrate: Option<RateArg>,
    /// TCP maximum segment size (set before connecting).
    #[arg(short = 'M', long = "mss", visible_alias = "set-mss", value_name = "BYTES", value_parser = count::<u32>)]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm (TCP_NODELAY) on data sockets.
    #[arg(short = 'N', long = "no-delay")]
    pub no_delay: bool,
    /// Congestion-control algorithm on both ends (e.g. cubic, bbr, reno).
    #[arg(short = 'C', long = "congestion", value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Warm-up seconds excluded from the summary (added to -t).
    #[arg(short = 'O', long = "omit", value_name = "SECONDS", value_parser = seconds)]
    pub omit: Option<Duration>,
    /// Zero-copy send: sendfile(2) from a memory-backed file instead of write(2).
    #[arg(short = 'Z', long = "zerocopy")]
    pub zerocopy: bool,
    /// IP type of service on every data socket of both ends (IP_TOS; IPV6_TCLASS on IPv6),
    /// as iperf3's -S: 0..255 in decimal, hex (0xb8) or octal (0270). The value the kernel
    /// set is reported per stream.
    #[arg(short = 'S', long = "tos", value_name = "TOS", value_parser = super::tos::tos, conflicts_with = "dscp")]
    pub tos: Option<u8>,
    /// DiffServ codepoint on every data socket of both ends, as iperf3's --dscp: a name (EF,
    /// VA, AF11..AF43, CS0..CS7) or a number 0..63; sets the type of service to DSCP << 2.
    #[arg(long = "dscp", value_name = "DSCP", value_parser = super::tos::dscp)]
    pub dscp: Option<u8>,
    /// Cap every data socket's sending rate with the kernel's fair-queue pacing
    /// (SO_MAX_PACING_RATE), in bit/s (SI), on both ends, as iperf3's --fq-rate.
    #[arg(long = "fq-rate", value_name = "RATE", value_parser = rate)]
    pub fq_rate: Option<Bitrate>,
    /// With -u: datagrams leave with the don't-fragment bit on both ends (IP_PMTUDISC_DO), as
    /// iperf3's --dont-fragment; one larger than the path MTU then fails to send.
    #[arg(long = "dont-fragment", requires = "udp")]
    pub dont_fragment: bool,
    /// Local port of the first data stream (stream i uses PORT + i - 1).
    #[arg(long = "cport", value_name = "PORT", value_parser = count::<u16>)]
    pub cport: Option<u16>,
    /// How this end serves its TCP streams: `auto` (a thread each up to 16 streams, above
    /// that one pool worker per core multiplexing them with epoll), `stream` (always a thread
    /// each) or N (a pool of N workers). The server chooses its own (`server --threads`).
    #[arg(long = "threads", value_name = "auto|stream|N", value_parser = threads, default_value = "auto")]
    pub threads: crate::plan::threads::Threads,
    /// Bind data threads to CPUs, as iperf3's -A n,m: the client's list, and after a comma
    /// the server's. A list is a CPU, a range or both joined by '+' (0, 0-3, 1+3); an end's
    /// threads (one per stream, or its pool workers) take its CPUs in turn. Or a loopback
    /// placement: auto (the default: the placement this host measured fastest, calibrated
    /// once and kept in the history), pair (each stream's two ends on one CPU), split (on
    /// two), none (the system's scheduler places every thread). The result names it.
    #[arg(short = 'A', long = "affinity", value_name = "CPUS[,SERVER_CPUS]|auto|pair|split|none", value_parser = affinity)]
    pub affinity: Option<crate::plan::affinity::Affinity>,
    /// Label carried into the output and the JSON record.
    #[arg(short = 'T', long = "title", value_name = "TEXT")]
    pub title: Option<String>,
    #[command(flatten)]
    pub text: TextArgs,
    /// The path's link rate (SI bits per second, e.g. 10G): the summary shows the theoretical
    /// TCP maximum over such a link and the share reached.
    #[arg(long = "link-speed", value_name = "RATE", value_parser = rate)]
    pub link_speed: Option<Bitrate>,
    /// The path's IP MTU, with --link-speed.
    #[arg(long = "mtu", value_name = "BYTES", default_value_t = 1500, requires = "link_speed",
          value_parser = |s: &str| whole::<u32>(s, 576..=65536))]
    pub mtu: u32,
    /// The server is an iperf3 server (3.12 or later): speak its protocol, for TCP and UDP
    /// (-u) bulk tests; not --rr, --crr or --under-load, which need a linerate server
    /// (docs/IPERF3.md).
    #[arg(long = "iperf3")]
    pub iperf3: bool,
    /// With -u: search for the highest rate whose loss stays within --loss (RFC 2544 style):
    /// one unpaced trial (or one at -b), then a binary search; prints every trial.
    #[arg(long = "find-max", requires = "udp", conflicts_with_all = ["bytes", "iperf3"])]
    pub find_max: bool,
    /// With --find-max: the most loss a passing trial may have, in percent [default: 0.1].
    #[arg(long = "loss", value_name = "PERCENT", requires = "find_max", value_parser = percent)]
    pub loss: Option<f64>,
    /// With --find-max: length of each trial [default: 5 s].
    #[arg(long = "trial", value_name = "SECONDS", requires = "find_max", value_parser = seconds)]
    pub trial: Option<Duration>,
    /// Payload of a repeating pattern, as iperf3's --repeating-payload: linerate's senders
    /// always write one (never all zeros, so compression cannot flatter a path); against an
    /// iperf3 server (--iperf3) its senders are asked to do the same.
    #[arg(long = "repeating-payload")]
    pub repeating_payload: bool,
    /// As iperf3's --udp-counters-64bit, for scripts that pass it: always in effect (with
    /// -u, linerate's datagrams carry 64-bit sequence numbers, and iperf3 servers are asked
    /// for them too).
    #[arg(long = "udp-counters-64bit")]
    pub udp_counters_64bit: bool,
    /// Against an iperf3 server: also fetch what it printed for the test (its text, or its
    /// JSON when it runs with -J). linerate servers always send their full figures.
    #[arg(long = "get-server-output")]
    pub get_server_output: bool,
    /// Give up on each TCP connect after this long.
    #[arg(long = "connect-timeout", value_name = "SECONDS", value_parser = seconds, default_value = "10")]
    pub connect_timeout: Duration,
    /// The longest to wait, in all, in the queue of a server that runs one test at a time
    /// (`linerate server --exclusive`); a server whose own estimate of the wait is longer is
    /// left at once [default: 300].
    #[arg(long = "queue-timeout", value_name = "SECONDS", value_parser = seconds)]
    pub queue_timeout: Option<Duration>,
    /// Request/response test (netperf's TCP_RR): each stream sends requests and times every
    /// response; reports transactions/s and latency percentiles instead of a bulk flow.
    #[arg(long = "rr", conflicts_with = "find_max", group = "rr_mode")]
    pub rr: bool,
    /// Connect/request/response/close test (netperf's TCP_CRR): every transaction opens a
    /// TCP connection of its own, one at a time per stream; reports the connect, first-byte
    /// and close times apart.
    #[arg(long = "crr", conflicts_with = "find_max", group = "rr_mode")]
    pub crr: bool,
    #[command(flatten)]
    pub rr_shape: RrShapeArgs,
    /// Latency under load: 1-byte request/response probes on a connection of their own,
    /// first with the path idle (--idle-time), then while this test loads it; reports idle
    /// and loaded latency, the added delay and a responsiveness figure (RPM).
    #[arg(long = "under-load", conflicts_with_all = ["rr", "crr", "find_max", "iperf3", "bytes"])]
    pub under_load: bool,
    /// With --under-load: probes per second (an open loop; 1 to 10000) [default: 100].
    #[arg(long = "probe-rate", value_name = "PER_SECOND", requires = "under_load",
          value_parser = |s: &str| whole::<u64>(s, 1..=10_000))]
    pub probe_rate: Option<u64>,
    /// With --under-load: seconds of probes on the idle path before the test [default: 2].
    #[arg(long = "idle-time", value_name = "SECONDS", value_parser = seconds, requires = "under_load")]
    pub idle_time: Option<Duration>,
}

/// How the client's text output reads, as iperf3's output flags.
#[derive(Debug, Args, Default)]
pub struct TextArgs {
    /// Unit of the text's rates and transfers, as iperf3: k m g t = rates in kbit/s .. Tbit/s,
    /// K M G T = rates in KiB/s .. TiB/s; transfers in KiB .. TiB [default: each figure in the
    /// unit that suits it].
    #[arg(short = 'f', long = "format", value_name = "k|m|g|t|K|M|G|T", value_parser = scale)]
    pub format: Option<crate::units::scale::Scale>,
    /// Verbose, as iperf3's -V: also each stream's figures and granted socket options, and
    /// both ends' environment. (`--version` prints the version.)
    #[arg(short = 'V', long = "verbose")]
    pub verbose: bool,
    #[command(flatten)]
    pub log: LogArgs,
}

/// Where output lines go and how, as iperf3's (client and server).
#[derive(Debug, Args, Default)]
pub struct LogArgs {
    /// Start each output line with the time, formatted by strftime(3) [default: "%c ", as
    /// iperf3]; give the format as --timestamps=FORMAT.
    #[arg(long = "timestamps", value_name = "FORMAT", num_args = 0..=1, require_equals = true,
          default_missing_value = crate::plan::text::DEFAULT_TIMESTAMP_FORMAT)]
    pub timestamps: Option<String>,
    /// Write what would go to stdout to FILE instead, appending, as iperf3's --logfile.
    #[arg(long = "logfile", value_name = "FILE")]
    pub logfile: Option<std::path::PathBuf>,
    /// Write each output line out as soon as it is complete, even to a file or a pipe.
    #[arg(long = "forceflush")]
    pub forceflush: bool,
}

fn scale(s: &str) -> Result<crate::units::scale::Scale, String> {
    crate::units::scale::Scale::parse(s)
}

/// A percentage such as `0.1`, `0.1%` or `2%`, from 0 to 100.
pub(super) fn percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage; write e.g. 0.1 or 0.1%"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{s} is outside 0..100 %"));
    }
    Ok(v)
}

/// Integer types a flag may hold, with their largest value.
pub(super) trait Whole: TryFrom<u64> {
    /// The largest value, as a `u64`.
    const MAX: u64;
}

macro_rules! whole_types {
    ($($t:ty),*) => { $(impl Whole for $t { const MAX: u64 = <$t>::MAX as u64; })* };
}
whole_types!(u8, u16, u32, u64, usize, i64);

/// A whole number within `range` (a count, a port, requests per second): clap's own parser
/// answers `0.5` and `-1` with "invalid digit found in string"; this says what is accepted.
pub(super) fn whole<T: Whole>(s: &str, range: std::ops::RangeInclusive<u64>) -> Result<T, String> {
    let (low, high) = (*range.start(), (*range.end()).min(T::MAX));
    // "0 or more" rather than a bound of ten digits or more that no one means to reach.
    let accepted = if high == T::MAX && high >= u64::from(u32::MAX) {
        format!("give a whole number, {low} or more")
    } else {
        format!("give a whole number from {low} to {high}")
    };
    let t = s.trim();
    let n = match t.parse::<u64>() {
        Ok(n) => n,
        Err(_) if t.starts_with('-') => return Err(format!("{s} is negative: {accepted}")),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => u64::MAX,
        Err(_) if t.parse::<f64>().is_ok_and(f64::is_finite) => {
            return Err(format!("{s} is not a whole number: {accepted}"));
        }
        Err(_) => return Err(format!("{s:?} is not a number: {accepted}")),
    };
    if n < low {
        return Err(format!("{s} is too small: {accepted}"));
    }
    T::try_from(n)
        .ok()
        .filter(|_| n <= high)
        .ok_or_else(|| format!("{s} is too large: at most {high}"))
}

/// A whole number, 0 up to what `T` holds.
pub(super) fn count<T: Whole>(s: &str) -> Result<T, String> {
    whole(s, 0..=T::MAX)
}

pub(super) fn affinity(s: &str) -> Result<crate::plan::affinity::Affinity, String> {
    crate::plan::affinity::Affinity::parse(s)
}

pub(super) fn threads(s: &str) -> Result<crate::plan::threads::Threads, String> {
    crate::plan::threads::Threads::parse(s)
}

pub(super) fn seconds(s: &str) -> Result<Duration, String> {
    units::parse_seconds(s).map_err(|e| e.to_string())
}

pub(super) fn size(s: &str) -> Result<ByteCount, String> {
    units::parse_size(s).map_err(|e| e.to_string())
}

/// `default` (None) or a size, keeping the user's words for the matrix's labels.
fn optional_size(s: &str) -> Result<Option<Size>, String> {
    if s.eq_ignore_ascii_case("default") {
        Ok(None)
    } else {
        Size::spelled(s).map(Some).map_err(|e| e.to_string())
    }
}

/// `-b RATE[/BURST]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateArg {
    /// The pacing rate.
    pub rate: Bitrate,
    /// iperf3's burst: blocks sent back to back per pacing slot.
    pub burst: Option<std::num::NonZeroU16>,
}

impl RateArg {
    /// The rate in bit/s.
    pub fn bits_per_second(self) -> u64 {
        self.rate.bits_per_second()
    }
}

/// `-b`: a rate, or iperf3's `RATE/BURST`.
fn bitrate(s: &str) -> Result<RateArg, String> {
    // "200Mbit/s" is a rate; "200M/16" is iperf3's burst of 16 blocks.
    let digits = |n: &&str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    let Some((r, n)) = s.rsplit_once('/').filter(|(_, n)| digits(n)) else {
        return rate(s).map(|rate| RateArg { rate, burst: None });
    };
    let max = linerate_proto::spec::MAX_BURST;
    let burst = n.parse::<u16>().ok().filter(|b| (1..=max).contains(b)).ok_or_else(|| {
        format!("{s:?}: the burst after the slash is 1..{max} blocks (iperf3's limit), e.g. {r}/10")
    })?;
    Ok(RateArg { rate: rate(r)?, burst: std::num::NonZeroU16::new(burst) })
}

pub(super) fn rate(s: &str) -> Result<Bitrate, String> {
    units::parse_rate(s).map_err(|e| e.to_string())
}
