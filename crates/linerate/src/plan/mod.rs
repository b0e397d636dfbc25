//! Typed plans: what the user asked for, parsed once by `cli/` and read by everything else.
//!
//! Nothing outside `cli/` sees raw flags; nothing here imports clap. Matrices, campaigns (many
//! tests) and searches live here too.

use std::net::IpAddr;
use std::time::Duration;

use linerate_proto::{EndCondition, TestSpec};

pub mod affinity;
pub mod buffers;
pub mod campaign;
pub mod campaign_de;
pub mod fleet;
pub mod host;
pub mod kubernetes;
pub mod matrix;
pub mod mesh;
pub mod placement;
pub mod pmtu;
pub mod rounds;
pub mod sample;
pub mod schedule;
pub mod search;
pub mod server;
pub mod size;
pub mod text;
pub mod threads;

/// The rounds of a repeated experiment (a matrix, a fleet) as its history group keeps them,
/// in `MatrixIdentity` and `FleetIdentity` alike; keys older releases did not store read as
/// their defaults.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredRounds {
    /// `--repeat`.
    #[serde(default)]
    pub repeat: u32,
    /// `--until-ci`.
    #[serde(default)]
    pub until_ci: Option<f64>,
    /// `--max-repeat`.
    #[serde(default)]
    pub max_repeat: Option<u32>,
}

impl StoredRounds {
    /// The rounds of a plan's `--repeat`, `--until-ci` and `--max-repeat`.
    pub fn of(repeat: u32, until_ci: Option<f64>, max_repeat: u32) -> Self {
        Self { repeat, until_ci, max_repeat: Some(max_repeat) }
    }
}

/// Default UDP rate per stream, bit/s: iperf3's (1024 × 1024, "1 Mbit/s"). UDP has no
/// congestion control, so an unpaced default could flood a shared path; a rate this low is
/// safe on any path, and people arriving from iperf3 expect it.
pub const DEFAULT_UDP_RATE: u64 = 1 << 20;
/// UDP datagram size before the path MTU is known: fits a 1500-byte IPv4 MTU.
pub const DEFAULT_UDP_DATAGRAM: u32 = 1472;
/// The fewest datagrams a second the automatic UDP size leaves a paced stream
/// ([`auto_udp_datagram`]).
pub const MIN_UDP_DATAGRAMS_PER_SECOND: u64 = 100;

/// The datagram size of `-u` without `-l`: the largest payload the path carries unfragmented
/// (`path_payload`: its MTU less the IP and UDP headers), as iperf3 sizes datagrams from the
/// path — but no larger than lets a stream paced at `bits_per_second` send
/// [`MIN_UDP_DATAGRAMS_PER_SECOND`]. Why the second bound: loopback's MTU is 65,536, and at
/// the default 1 Mbit/s its 65,507-byte datagrams went two a second — 5 in a 2 s test, the
/// first one sent at once, so the rate came out 25 % over `-b`, and one lost datagram would be
/// 20 % loss. With 100 a second a one-second interval counts 100 or more, so one datagram
/// more or less (the first goes at once) moves its rate by at most 1 %, inside the pacing
/// verdict's 2 % even on a one-second test, and its loss is read to 1 %. At the default rate
/// that is 1,310 bytes, on loopback and on a 1500-byte path alike (iperf3 takes 1,448 there:
/// 90 a second); from 1.2 Mbit/s a 1500-byte path's 1,472 bytes fit. Unpaced (`-b 0`) the
/// path alone decides. Never below 24 bytes (the datagram header).
pub fn auto_udp_datagram(path_payload: u32, bits_per_second: u64) -> u32 {
    let paced = match bits_per_second / 8 / MIN_UDP_DATAGRAMS_PER_SECOND {
        _ if bits_per_second == 0 => u32::MAX,
        b => u32::try_from(b).unwrap_or(u32::MAX),
    };
    path_payload
        .min(paced)
        .clamp(linerate_proto::spec::MIN_UDP_DATAGRAM, linerate_proto::spec::MAX_UDP_DATAGRAM)
}
/// Default TCP block size (bytes per write/read), as iperf3's.
pub const DEFAULT_TCP_BLOCK: u64 = 128 * 1024;
/// Default TCP port, the same as iperf3's so firewalls and habits carry over.
pub const DEFAULT_PORT: u16 = 5201;
/// A test's length when none is given (`-t`, a campaign's `time`), milliseconds: iperf3's.
pub const DEFAULT_TIME_MS: u64 = 10_000;
/// [`DEFAULT_TIME_MS`] as a duration.
pub const DEFAULT_TIME: Duration = Duration::from_millis(DEFAULT_TIME_MS);
/// A `selftest`'s length when none is given: long enough for a stable figure, short enough to
/// wait for.
pub const SELFTEST_TIME: Duration = Duration::from_secs(3);
/// The path's IP MTU assumed with a link speed when none is given (`--mtu`, a campaign's
/// `mtu`): Ethernet's.
pub const DEFAULT_MTU: u32 = 1500;
/// The MTUs a path may be given: IPv4's least datagram every host must take, to the largest
/// an IP packet can be.
pub const MTU_RANGE: std::ops::RangeInclusive<u64> = 576..=65536;
/// Runs per cell of a repeated experiment when not given (`--repeat`, a campaign's `repeat`).
pub const DEFAULT_REPEAT: u32 = 3;
/// The runs per cell one may ask for.
pub const REPEAT_RANGE: std::ops::RangeInclusive<u64> = 1..=1000;
/// The most completed runs per cell with `--until-ci` when not given (`--max-repeat`, a
/// campaign's `max_repeat`).
pub const DEFAULT_MAX_REPEAT: u32 = 10;
/// The most runs per cell one may allow: at least two, as an interval needs.
pub const MAX_REPEAT_RANGE: std::ops::RangeInclusive<u64> = 2..=1000;

/// Which address family to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Whatever the name resolves to (IPv6 and IPv4 on a dual-stack server).
    Any,
    /// IPv4 only (`-4`).
    V4,
    /// IPv6 only (`-6`).
    V6,
}

impl Family {
    /// True if `ip` is allowed by this choice.
    pub fn allows(self, ip: &IpAddr) -> bool {
        match self {
            Family::Any => true,
            Family::V4 => ip.is_ipv4(),
            Family::V6 => ip.is_ipv6(),
        }
    }
}

/// Which iperf3 version's `-J` document `--json-format iperf3` writes: iperf3 added keys over
/// its releases (docs/IPERF3.md, "Export"); see `report::iperf3_json` for why the default is
/// the newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Iperf3Schema {
    /// iperf3 3.12's keys (Debian 12's iperf3).
    V3_12,
    /// iperf3 3.21's keys: 3.12's and every key added since (`--json-format iperf3`).
    V3_21,
}

/// How results are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Live lines and a human summary.
    Text,
    /// One JSON document at the end (`-J`), documented in docs/JSON.md.
    Json,
    /// One JSON document shaped like `iperf3 -J` (`-J --json-format iperf3`), with the keys
    /// of that iperf3 version's documents.
    Iperf3Json(Iperf3Schema),
    /// One JSON line per interval while the test runs, then the run's document on one line
    /// (`--json-stream`).
    JsonStream,
}

/// Run one test against a server.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientPlan {
    /// `--repeating-payload`: ask an iperf3 server's senders for a repeating pattern
    /// (linerate's own senders always write one).
    pub repeating_payload: bool,
    /// How the text output reads (`-f`, `-V`, `--timestamps`, `--logfile`, `--forceflush`).
    pub text: text::TextOptions,
    /// The server's pre-shared key (`--psk-file`), for servers that require one.
    pub psk: Option<linerate_proto::auth::Psk>,
    /// Server host name or address.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// The test.
    pub spec: TestSpec,
    /// Address family.
    pub family: Family,
    /// Local address to bind (`-B`).
    pub bind: Option<IpAddr>,
    /// First local port for data streams (`--cport`); stream i uses cport + i - 1.
    pub cport: Option<u16>,
    /// How this end serves its TCP streams (`--threads`).
    pub threads: threads::Threads,
    /// CPUs this end's data threads are bound to in turn (`-A`, see `plan/affinity.rs`);
    /// empty = not pinned.
    pub cpus: Vec<u32>,
    /// Where a loopback test's ends run (`-A auto|pair|split|none`, `plan/placement.rs`);
    /// CPUs listed with `-A` leave it to them.
    pub placement: placement::Choice,
    /// For `-A auto`: the placement of each shape of test, calibrated on this host or
    /// decided by rule where it could not be (`cmd/placement.rs` fills it before the test);
    /// a shape missing here is paired by rule.
    pub calibrated: Vec<(placement::Shape, crate::record::Decision)>,
    /// Run only against an agent holding the same key (an agent's pair test, `mesh`).
    pub agents_only: bool,
    /// Limit for each TCP connect.
    pub connect_timeout: Duration,
    /// The longest to wait, in all, in an exclusive server's queue (`--queue-timeout`).
    pub queue_timeout: Duration,
    /// Output format.
    pub output: OutputFormat,
    /// The link the user says the path has (`--link-speed`, `--mtu`).
    pub link: Option<crate::record::LinkAssumption>,
    /// Speak iperf3's protocol to the server (`--iperf3`).
    pub iperf3: bool,
    /// Ask an iperf3 server for its own output (`--get-server-output`).
    pub get_server_output: bool,
    /// `-u` without `-l`: size datagrams to the path MTU once the control connection is up.
    pub udp_length_auto: bool,
    /// `-k`: the test ends after this many blocks per direction, of whatever size it runs
    /// with (see [`ClientPlan::sized`]).
    pub block_count: Option<u64>,
    /// `--find-max`: run a rate search instead of one test.
    pub find_max: Option<search::SearchPlan>,
    /// Where the run is stored.
    pub store: StorePlan,
    /// Pass/fail conditions (`--fail-below`, `--fail-regression`).
    pub gates: Gates,
    /// `--under-load`: latency probes on a connection of their own, idle first, then while
    /// the test loads the path.
    pub under_load: Option<UnderLoadPlan>,
    /// `--every`: run the test again and again on a schedule, storing each run.
    pub every: Option<Schedule>,
}

/// `client` or `mesh --every DURATION --for DURATION | --count N [--slip D]`: the same test
/// (or mesh) on a fixed schedule,
/// so the history fills for `linerate report --trend`. Runs start at whole multiples of
/// `every` after the first; a run that overruns its slot makes the next start at the next
/// slot (slots are skipped, never run back to back to catch up, so a slow link is not
/// loaded harder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Time between the starts of two runs.
    pub every: Duration,
    /// When the schedule ends.
    pub until: ScheduleEnd,
    /// `--slip`: each run starts a random 0 to this after its slot.
    pub slip: Duration,
}

/// When a [`Schedule`] ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleEnd {
    /// No run starts this long after the first one started.
    For(Duration),
    /// After this many runs.
    Count(u32),
}

impl Schedule {
    /// When the next run starts, after the first started (`elapsed` ago) and `done` runs have
    /// ended; None when the schedule is over.
    pub fn next_start(&self, elapsed: Duration, done: u32) -> Option<Duration> {
        if let ScheduleEnd::Count(n) = self.until {
            if done >= n {
                return None;
            }
        }
        let every = self.every.as_nanos();
        // `--every 0`: back to back.
        let next = match elapsed.as_nanos().checked_div(every) {
            None => elapsed,
            Some(slots) => {
                Duration::from_nanos(u64::try_from((slots + 1) * every).unwrap_or(u64::MAX))
            }
        };
        match self.until {
            ScheduleEnd::For(d) if next >= d => None,
            _ => Some(next),
        }
    }
}

impl ClientPlan {
    /// A test of `spec` against `host`:`port` with every other setting at its default: not
    /// stored, text output, no key, no gates (a campaign's tiers and a server's probes start
    /// from it).
    pub fn to(host: &str, port: u16, spec: TestSpec) -> Self {
        Self {
            text: text::TextOptions::default(),
            repeating_payload: false,
            psk: None,
            host: host.to_string(),
            port,
            spec,
            family: Family::Any,
            bind: None,
            cport: None,
            threads: threads::Threads::Auto,
            cpus: Vec::new(),
            placement: placement::Choice::Auto,
            calibrated: Vec::new(),
            agents_only: false,
            connect_timeout: std::time::Duration::from_secs(10),
            queue_timeout: linerate_proto::QUEUE_LIMIT,
            output: OutputFormat::Text,
            link: None,
            iperf3: false,
            get_server_output: false,
            udp_length_auto: false,
            block_count: None,
            find_max: None,
            store: StorePlan::default(),
            gates: Gates::default(),
            under_load: None,
            every: None,
        }
    }

    /// The test with blocks (UDP: datagrams) of `block_bytes`, once the run knows their size
    /// (`-u` without `-l`): a `-k` count is of those blocks.
    pub fn sized(&self, block_bytes: u32) -> TestSpec {
        let mut spec = self.spec.clone();
        spec.block_bytes = block_bytes;
        if let Some(n) = self.block_count {
            spec.end = EndCondition::Bytes { bytes: n.saturating_mul(u64::from(block_bytes)) };
        }
        spec
    }
}

/// The probes of a test under load (`--under-load`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnderLoadPlan {
    /// Probes per second (an open loop of 1-byte requests and responses).
    pub probes_per_second: u64,
    /// How long the probes run alone before the test.
    pub idle: Duration,
}

impl UnderLoadPlan {
    /// The draft's most probes per second (MPS), and a second of idle probes first.
    pub const DEFAULT: Self = Self { probes_per_second: 100, idle: Duration::from_secs(2) };
}

/// Conditions under which a finished run or matrix exits 1.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Gates {
    /// Received rate below this (bit/s) fails.
    pub below: Option<u64>,
    /// A drop of more than this fraction against the baseline fails.
    pub regression: Option<(f64, HistoryRef)>,
}

/// Where results go in the history database.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StorePlan {
    /// The database file; None = do not store (`--no-store`, or no home directory).
    pub path: Option<std::path::PathBuf>,
    /// `--label` values.
    pub labels: Vec<String>,
}

/// A stored run or group, as the user names it: `12`, `m3` / `c3` (a matrix's or
/// campaign's group id), or `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryRef {
    /// One run.
    Run(i64),
    /// A matrix, campaign or search (its group id).
    Group(i64),
    /// The latest stored work: the newest run, or the matrix, campaign or fleet it belongs to (like
    /// `git show` without a revision). Resolved against the history when it is read.
    Last,
}

/// What to do with the history.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryCommand {
    /// List runs.
    List {
        /// Only runs with this label.
        label: Option<String>,
        /// Only runs against this server.
        server: Option<host::ServerMatch>,
        /// Only runs this recent.
        since: Option<std::time::Duration>,
        /// Only runs of this group.
        group: Option<i64>,
        /// Only runs with this outcome (`completed`, `failed`).
        outcome: Option<&'static str>,
        /// At most this many.
        limit: usize,
    },
    /// Show one run (`last`: the newest).
    Show(HistoryRef),
    /// Compare two runs or two groups; with a path, also write an HTML page of both.
    Compare(HistoryRef, HistoryRef, Option<std::path::PathBuf>),
}

/// A history command and its database.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPlan {
    /// The database file.
    pub db: std::path::PathBuf,
    /// JSON output.
    pub json: bool,
    /// What to do.
    pub command: HistoryCommand,
}

/// What `linerate report` reads.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportSource {
    /// A stored run or group, from the history at `db`.
    History {
        /// The database file.
        db: std::path::PathBuf,
        /// Which run or group.
        which: HistoryRef,
    },
    /// A saved JSON document (`-J` output of a run, matrix or campaign).
    File(std::path::PathBuf),
    /// One target's stored results over time (`--trend HOST`).
    Trend {
        /// The database file.
        db: std::path::PathBuf,
        /// The target as the user typed it.
        target: String,
        /// Which stored servers it names.
        server: host::ServerMatch,
        /// Only runs this recent.
        since: Option<std::time::Duration>,
    },
}

/// The formats of `linerate report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// Aligned tables for a terminal.
    Text,
    /// Markdown.
    Markdown,
    /// CSV (docs/CSV.md).
    Csv(CsvKind),
    /// The JSON document of docs/JSON.md.
    Json,
    /// One self-contained HTML file with SVG charts.
    Html,
}

/// Which CSV layout (docs/CSV.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvKind {
    /// One row per cell summary.
    Cells,
    /// One row per (run, stream, interval).
    Intervals,
}

/// `linerate report`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportPlan {
    /// What to report on.
    pub source: ReportSource,
    /// In which format.
    pub format: ReportFormat,
    /// Where to write it (None = stdout).
    pub output: Option<std::path::PathBuf>,
}

/// Serve tests.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerPlan {
    /// `--agent`: runs pair tests for clients with the key (never without one).
    pub agent: bool,
    /// `--pair-allow`: the only targets an agent's pair tests may reach (empty: the agent's own
    /// kind of network, `server::pair_target_refusal`).
    pub pair_allow: Vec<server::PairTarget>,
    /// Port to listen on.
    pub port: u16,
    /// Address to bind (`-B`); None = all addresses (dual-stack).
    pub bind: Option<IpAddr>,
    /// Address family.
    pub family: Family,
    /// Exit after the first test (`-1`).
    pub one_off: bool,
    /// Print one JSON line per finished test instead of text.
    pub output: OutputFormat,
    /// How much of a test's figures a JSON line carries (`--log-results`).
    pub log_results: server::LogResults,
    /// What clients may ask for.
    pub limits: linerate_proto::Limits,
    /// Who may connect.
    pub access: server::Access,
    /// Where Prometheus metrics (and `/probe`) are served (`--metrics`); None = nowhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// What `/probe` may test.
    pub probe: server::ProbePlan,
    /// Where the log lines go and how (`--logfile`, `--timestamps`, `--forceflush`).
    pub text: text::TextOptions,
    /// The node and zone it reports to clients (`--node-name`, `--zone`).
    pub place: server::Place,
}

/// Print generated documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Generated {
    /// The man page linerate(1) (roff), to standard output.
    Man,
    /// linerate(1) and a page per subcommand, written into this directory.
    ManPages(std::path::PathBuf),
    /// Shell completions.
    Completions(Shell),
}

/// Shells with completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// bash
    Bash,
    /// zsh
    Zsh,
    /// fish
    Fish,
}

/// Everything the program can be asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// A test against a server.
    Client(ClientPlan),
    /// A server.
    Server(ServerPlan),
    /// An embedded loopback server plus a client test against it.
    Selftest(ClientPlan),
    /// A matrix of tests against a server: the base test and the axes.
    Matrix(ClientPlan, matrix::MatrixPlan, matrix::MatrixRun),
    /// Read the history.
    History(HistoryPlan),
    /// An embedded loopback server plus a matrix against it (`linerate` with no arguments).
    SelftestMatrix(ClientPlan, matrix::MatrixPlan),
    /// One test against many servers at once (`linerate fleet`).
    Fleet(fleet::FleetPlan),
    /// `linerate mesh`.
    Mesh(mesh::MeshPlan),
    /// Tiers of matrices from a campaign file.
    Campaign(campaign::CampaignRun),
    /// Inspect this host and the path to a server.
    Doctor(DoctorPlan),
    /// A report on stored or saved results.
    Report(ReportPlan),
    /// Generated docs.
    Generate(Generated),
    /// Kubernetes manifests (`linerate generate kubernetes`).
    Kubernetes(kubernetes::KubernetesPlan),
}

/// `linerate doctor [HOST]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorPlan {
    /// A linerate server to inspect too, with the path to it.
    pub host: Option<String>,
    /// Its port.
    pub port: u16,
    /// Local address to connect and probe from (-B).
    pub bind: Option<IpAddr>,
    /// Address family.
    pub family: Family,
    /// JSON output.
    pub json: bool,
    /// `--link-speed`, bits per second.
    pub link_bits_per_second: Option<u64>,
    /// How long to wait for the connection.
    pub connect_timeout: Duration,
    /// The server's pre-shared key (`--psk-file`), for servers that require one.
    pub psk: Option<linerate_proto::auth::Psk>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_udp_size_fits_the_path_and_the_pacing_rate() {
        // Loopback (65,507 bytes fit) at the default rate: 100 a second of 1,310 bytes.
        assert_eq!(auto_udp_datagram(65_508, DEFAULT_UDP_RATE), 1310);
        // A 1500-byte path at 10 Mbit/s: the path is the bound.
        assert_eq!(auto_udp_datagram(1472, 10_000_000), 1472);
        assert_eq!(auto_udp_datagram(65_508, 10_000_000_000), 65_507, "the largest IPv4 one");
        assert_eq!(auto_udp_datagram(1472, 0), 1472, "unpaced: the path alone");
        assert_eq!(auto_udp_datagram(1472, 1000), 24, "never below the header");
    }
}

#[cfg(test)]
mod schedule_tests {
    use super::{Schedule, ScheduleEnd};
    use std::time::Duration;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn runs_start_on_their_slots_and_skip_the_ones_an_overrun_missed() {
        let s = Schedule { every: 10 * S, until: ScheduleEnd::For(35 * S), slip: Duration::ZERO };
        assert_eq!(s.next_start(2 * S, 1), Some(10 * S));
        assert_eq!(s.next_start(12 * S, 2), Some(20 * S));
        // The second run took 15 s: the slot at 20 s is gone, the next is at 30 s.
        assert_eq!(s.next_start(25 * S, 2), Some(30 * S));
        // No run starts at or after 35 s.
        assert_eq!(s.next_start(31 * S, 4), None);
    }

    #[test]
    fn a_count_ends_the_schedule_after_that_many_runs() {
        let s =
            Schedule { every: Duration::ZERO, until: ScheduleEnd::Count(3), slip: Duration::ZERO };
        assert_eq!(s.next_start(5 * S, 1), Some(5 * S));
        assert_eq!(s.next_start(6 * S, 2), Some(6 * S));
        assert_eq!(s.next_start(7 * S, 3), None);
    }
}
