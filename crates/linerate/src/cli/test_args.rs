//! The argument groups many commands share: where to connect (`NetArgs`), the test
//! (`TestArgs`, `RrShapeArgs`), its text and log (`TextArgs`, `LogArgs`), where results go
//! (`StoreArgs`) and when tests repeat (`ScheduleArgs`). Each flag is defined here once;
//! `client`, `matrix`, `fleet`, `mesh` and the iperf3-style form flatten what they take.

use std::net::IpAddr;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::values::{
    RateArg, affinity, bitrate, count, percent, rate, scale, seconds, size, threads, whole,
};
use crate::units::{Bitrate, ByteCount};

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

/// The flags every test takes, defined once: a client's test, and each cell of a matrix (its
/// axes set the rest). How long it runs and reports, its pacing, warm-up, congestion control,
/// placement, title, connect limit and the link it is judged against.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Test length in seconds, each run's in a matrix [default: 10; selftest: 3].
    #[arg(short = 't', long = "time", value_name = "SECONDS", value_parser = seconds)]
    pub time: Option<Duration>,
    /// Seconds between interval reports (a matrix keeps them in each run's record); 0 turns
    /// them off.
    #[arg(short = 'i', long = "interval", value_name = "SECONDS", value_parser = seconds, default_value = "1")]
    pub interval: Duration,
    /// Pace each stream to this rate in bit/s (SI); 0 = unlimited [default: unlimited for TCP,
    /// 1M for UDP]. RATE/BURST, as iperf3's burst mode: BURST blocks (datagrams) back to back,
    /// then a wait until the rate has caught up with them (1..1000).
    #[arg(short = 'b', long = "bitrate", value_name = "RATE[/BURST]", value_parser = bitrate)]
    pub bitrate: Option<RateArg>,
    /// Warm-up seconds excluded from the summary (added to -t).
    #[arg(short = 'O', long = "omit", value_name = "SECONDS", value_parser = seconds)]
    pub omit: Option<Duration>,
    /// Congestion-control algorithm on both ends (e.g. cubic, bbr, reno).
    #[arg(short = 'C', long = "congestion", value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Disable Nagle's algorithm (TCP_NODELAY) on data sockets.
    #[arg(short = 'N', long = "no-delay")]
    pub no_delay: bool,
    /// Label carried into the output and the JSON record (a matrix: every run's).
    #[arg(short = 'T', long = "title", value_name = "TEXT")]
    pub title: Option<String>,
    /// Bind data threads to CPUs, as iperf3's -A n,m: the client's list, and after a comma
    /// the server's. A list is a CPU, a range or both joined by '+' (0, 0-3, 1+3); an end's
    /// threads (one per stream, or its pool workers) take its CPUs in turn. Or a loopback
    /// placement: auto (the default: the placement this host measured fastest, for each
    /// shape of test, calibrated once and kept in the history), pair (each stream's two ends
    /// on one CPU), split (on two), none (the system's scheduler places every thread). The
    /// result names it.
    #[arg(short = 'A', long = "affinity", value_name = "CPUS[,SERVER_CPUS]|auto|pair|split|none", value_parser = affinity)]
    pub affinity: Option<crate::plan::affinity::Affinity>,
    /// Give up on each TCP connect after this long.
    #[arg(long = "connect-timeout", value_name = "SECONDS", value_parser = seconds, default_value = "10")]
    pub connect_timeout: Duration,
    /// The path's link rate (SI bits per second, e.g. 10G): the summary shows the theoretical
    /// TCP maximum over such a link and the share reached; a matrix's findings say which cell
    /// first reaches 90 % of it.
    #[arg(long = "link-speed", value_name = "RATE", value_parser = rate)]
    pub link_speed: Option<Bitrate>,
    /// The path's IP MTU, with --link-speed.
    #[arg(long = "mtu", value_name = "BYTES", default_value_t = crate::plan::DEFAULT_MTU,
          requires = "link_speed", value_parser = |s: &str| whole::<u32>(s, crate::plan::MTU_RANGE))]
    pub mtu: u32,
}

/// The test's flags (client, selftest, fleet and mesh).
#[derive(Debug, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Send this many bytes per direction instead of running for a time.
    #[arg(short = 'n', long = "bytes", value_name = "SIZE", value_parser = size, conflicts_with = "time")]
    pub bytes: Option<ByteCount>,
    /// Send this many blocks (of -l bytes; UDP: datagrams) per direction instead, as
    /// iperf3's -k.
    #[arg(short = 'k', long = "blockcount", value_name = "BLOCKS", conflicts_with_all = ["time", "bytes"],
          value_parser = count::<u64>)]
    pub blocks: Option<u64>,
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
    /// TCP maximum segment size (set before connecting).
    #[arg(short = 'M', long = "mss", visible_alias = "set-mss", value_name = "BYTES", value_parser = count::<u32>)]
    pub mss: Option<u32>,
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
    #[command(flatten)]
    pub text: TextArgs,
    /// The server is an iperf3 server (3.12 or later): speak its protocol, for TCP and UDP
    /// (-u) bulk tests; not --rr, --crr or --under-load, which need a linerate server
    /// (docs/IPERF3.md).
    #[arg(long = "iperf3")]
    pub iperf3: bool,
    /// With -u: search for the highest rate whose loss stays within --loss (RFC 2544 style):
    /// one unpaced trial (or one at -b), then a binary search; prints every trial.
    #[arg(long = "find-max", requires = "udp", conflicts_with_all = ["bytes", "iperf3"])]
    pub find_max: bool,
    /// With --find-max: the most loss a passing trial may have, in percent.
    #[arg(long = "loss", value_name = "PERCENT", requires = "find_max", value_parser = percent, default_value = "0.1")]
    pub loss: f64,
    /// With --find-max: length of each trial in seconds.
    #[arg(long = "trial", value_name = "SECONDS", requires = "find_max", value_parser = seconds, default_value = "5")]
    pub trial: Duration,
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

impl TestArgs {
    /// Every test flag at its default, as clap gives it when the flag is not given: what a
    /// matrix's cells start from, so that no default is written a second time by hand.
    pub(super) fn defaults() -> Result<TestArgs, String> {
        use clap::FromArgMatches;
        let command = TestArgs::augment_args(clap::Command::new("test"));
        let matches = command.try_get_matches_from(["test"]).map_err(|e| e.to_string())?;
        TestArgs::from_arg_matches(&matches).map_err(|e| e.to_string())
    }
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

// The defaults the help text states are the library's.
const _: () = assert!(crate::plan::DEFAULT_PORT == 5201);
const _: () =
    assert!(crate::plan::DEFAULT_TIME_MS == 10_000 && crate::plan::SELFTEST_TIME.as_secs() == 3);
const _: () = assert!(linerate_proto::QUEUE_LIMIT.as_secs() == 300);
const _: () = assert!(
    crate::plan::UnderLoadPlan::DEFAULT.probes_per_second == 100
        && crate::plan::UnderLoadPlan::DEFAULT.idle.as_secs() == 2
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_flags_own() {
        let d = TestArgs::defaults().expect("the test flags parse with none given");
        assert_eq!(d.run.time, None, "-t has no default of its own: the command gives it");
        assert_eq!(d.run.interval, Duration::from_secs(1));
        assert_eq!(d.run.connect_timeout, Duration::from_secs(10));
        assert_eq!(d.run.mtu, crate::plan::DEFAULT_MTU);
        assert_eq!(d.parallel, 1);
        assert_eq!(d.trial, Duration::from_secs(5));
        assert!((d.loss - 0.1).abs() < 1e-12, "{}", d.loss);
        assert!(!d.udp && !d.rr && !d.find_max && d.run.bitrate.is_none());
    }
}
