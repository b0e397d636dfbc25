//! `linerate server` operator flags: limits and the config file. Every server flag (these,
//! the address flags and the log flags) has a key of the same name in the `--config` file
//! (see `plan::server`); a flag beats the file.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use linerate_proto::limits::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BLOCK, DEFAULT_MAX_CLIENT_CONNECTIONS,
    DEFAULT_MAX_CLIENT_TESTS_PER_MINUTE, DEFAULT_MAX_STREAMS, DEFAULT_MAX_TEST_MEMORY,
    DEFAULT_MAX_TESTS, DEFAULT_MIN_INTERVAL, DEFAULT_MIN_RATE, DEFAULT_QUEUE,
};

use super::test_args::{DirectionArg, LogArgs, NetArgs, ProtocolArg};
use super::values::{count, rate, seconds, size, threads, whole};
use crate::plan::ServerPlan;
use crate::plan::campaign_de::{DirectionItem, ProtocolItem, Rate, Seconds, SizeItem};
use crate::plan::server::{IpNet, LogFormat, LogResults, ServerSettings, parse_config};

use crate::units::{Bitrate, ByteCount};

/// Limits on what clients may ask for (docs/SECURITY.md lists them with their defaults).
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Read settings from a TOML file: every flag here but this one and --json-format is a
    /// key, named as the long flag with `_` for `-` (e.g. `max_streams = 8`, `port = 5201`);
    /// flags given here win over the file.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Tests running at once; more are refused as busy [default: 16].
    #[arg(long = "max-tests", value_name = "N", help_heading = "Limits", value_parser = count::<u32>)]
    pub max_tests: Option<u32>,
    /// Streams per direction a test may ask for (-P) [default: 128].
    #[arg(long = "max-streams", value_name = "N", help_heading = "Limits", value_parser = count::<u32>)]
    pub max_streams: Option<u32>,
    /// Longest test (duration plus warm-up) [default: 3600 s].
    #[arg(long = "max-duration", value_name = "SECONDS", value_parser = seconds, help_heading = "Limits")]
    pub max_duration: Option<Duration>,
    /// Highest requested rate of a whole test (all streams); unpaced tests are then refused
    /// [default: 0 = no cap].
    #[arg(long = "max-bitrate", value_name = "RATE", value_parser = rate, help_heading = "Limits")]
    pub max_bitrate: Option<Bitrate>,
    /// Highest requested rate of all running tests together; a test that would exceed it,
    /// or is unpaced, is refused [default: 0 = no cap].
    #[arg(long = "max-total-bitrate", value_name = "RATE", value_parser = rate, help_heading = "Limits")]
    pub max_total_bitrate: Option<Bitrate>,
    /// Most bytes one test may move; running tests are cut there [default: 0 = no cap].
    #[arg(long = "max-bytes", value_name = "SIZE", value_parser = size, help_heading = "Limits")]
    pub max_bytes: Option<ByteCount>,
    /// Protocols clients may test [default: tcp,udp].
    #[arg(
        long = "allow-protocols",
        value_name = "P,...",
        value_delimiter = ',',
        help_heading = "Limits"
    )]
    pub allow_protocols: Option<Vec<ProtocolArg>>,
    /// Directions clients may test: send (client sends), recv (-R, server sends), bidir
    /// [default: send,recv,bidir].
    #[arg(
        long = "allow-directions",
        value_name = "D,...",
        value_delimiter = ',',
        help_heading = "Limits"
    )]
    pub allow_directions: Option<Vec<DirectionArg>>,
    /// Connections from one address not yet part of a test (being identified or in the
    /// handshake); more are closed unread [default: 32; 0 = no cap].
    #[arg(long = "max-client-connections", value_name = "N", help_heading = "Limits", value_parser = count::<u32>)]
    pub max_client_connections: Option<u32>,
    /// New tests per minute from one address [default: 120; 0 = no cap].
    #[arg(long = "max-client-tests-per-minute", value_name = "N", help_heading = "Limits", value_parser = count::<u32>)]
    pub max_client_tests_per_minute: Option<u32>,
    /// Tests (and doctor sessions) one client address may hold at once, running or queued
    /// [default: a quarter of --max-tests, at least 1; 0 = no cap].
    #[arg(long = "max-tests-per-address", value_name = "N", help_heading = "Limits", value_parser = count::<u32>)]
    pub max_tests_per_address: Option<u32>,
    /// Lowest rate a test may ask for (-b × streams) and must keep moving: a running test
    /// that moves less than half of it over an --idle-timeout window is ended. Each request a
    /// request/response test (--rr, --crr) has answered counts 1024 bits besides its bytes,
    /// at admission (--rr-rate) and while it runs [default: 8k; 0 = no floor].
    #[arg(long = "min-rate", value_name = "RATE", value_parser = rate, help_heading = "Limits")]
    pub min_rate: Option<Bitrate>,
    /// Largest block (-l) a test may ask for [default: 1M; at most 64M].
    #[arg(long = "max-block", value_name = "SIZE", value_parser = size, help_heading = "Limits")]
    pub max_block: Option<ByteCount>,
    /// Most memory one test may need on the server: with a thread per stream its stream
    /// buffers plus 256 KiB per stream, with a pool (--threads) two blocks per worker plus
    /// 4 KiB per stream; a request/response stream's buffers are at most 512 KiB
    /// [default: 64M].
    #[arg(long = "max-test-memory", value_name = "SIZE", value_parser = size, help_heading = "Limits")]
    pub max_test_memory: Option<ByteCount>,
    /// Connections not yet part of a test, from all addresses together; when full, a new
    /// connection takes the place of the oldest from the address holding the most
    /// [default: a quarter of the open-file limit, at most 2048].
    #[arg(long = "max-connections", value_name = "N", help_heading = "Limits", value_parser = count::<u32>)]
    pub max_connections: Option<u32>,
    /// Memory all running tests may need together (each test's --max-test-memory estimate
    /// plus 4 MiB) [default: the address-space limit (ulimit -v) less 768 MiB, else half the
    /// machine's memory].
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = size, help_heading = "Limits")]
    pub max_memory: Option<ByteCount>,
    /// Threads all running tests may use together (a stream or pool worker each, plus 2 per
    /// test) [default: half of what the process may start].
    #[arg(long = "max-threads", value_name = "N", help_heading = "Limits", value_parser = count::<u32>)]
    pub max_threads: Option<u32>,
    /// IPv4 addresses that share this many leading bits count as one client for every
    /// per-address limit [default: 32].
    #[arg(long = "ipv4-prefix", value_name = "BITS", help_heading = "Limits", value_parser = count::<u8>)]
    pub ipv4_prefix: Option<u8>,
    /// IPv6 addresses that share this many leading bits count as one client (a /64 is one
    /// host or customer) [default: 64].
    #[arg(long = "ipv6-prefix", value_name = "BITS", help_heading = "Limits", value_parser = count::<u8>)]
    pub ipv6_prefix: Option<u8>,
    /// End a running test when no stream moved a byte or answered a request for this long (a
    /// stopped or silent peer whose connections stay up); also the window --min-rate is
    /// averaged over [default: 10 s].
    #[arg(long = "idle-timeout", value_name = "SECONDS", value_parser = seconds, help_heading = "Limits")]
    pub idle_timeout: Option<Duration>,
    /// Shortest sampling interval (-i) a test may ask for; -i 0 (no interval reports) is
    /// always allowed [default: 0.1 s; at least 0.01 s].
    #[arg(long = "min-interval", value_name = "SECONDS", value_parser = seconds, help_heading = "Limits")]
    pub min_interval: Option<Duration>,
    /// How the server serves a test's TCP streams: `auto` (a thread each up to 16 streams,
    /// above that one pool worker per core multiplexing them with epoll), `stream` (always a
    /// thread each) or N (a pool of N workers) [default: auto].
    #[arg(long = "threads", value_name = "auto|stream|N", value_parser = threads)]
    pub threads: Option<crate::plan::threads::Threads>,
    /// Run one test at a time: later requests wait in a queue, told their place and an
    /// estimated wait (iperf3 clients, which cannot wait, are told the server is busy).
    #[arg(long = "exclusive", help_heading = "Admission")]
    pub exclusive: bool,
    /// With --exclusive: how many requests may wait; more are refused [default: 8].
    #[arg(long = "queue", value_name = "N", help_heading = "Admission", value_parser = count::<u32>)]
    pub queue: Option<u32>,
    /// Only clients in these networks may connect, e.g. 127.0.0.0/8,::1,192.0.2.0/24;
    /// others are closed unread [default: everyone].
    #[arg(long = "allow", value_name = "NET,...", value_delimiter = ',', help_heading = "Access")]
    pub allow: Option<Vec<IpNet>>,
    /// Serve Prometheus/OpenMetrics metrics at http://ADDR:PORT/metrics (tests served and
    /// refused by reason, bytes, active tests, queue, a duration histogram) and, with
    /// --probe-allow, /probe?target=IP:PORT [default: off].
    #[arg(long = "metrics", value_name = "ADDR:PORT", help_heading = "Metrics")]
    pub metrics: Option<std::net::SocketAddr>,
    /// The only targets /probe may test, as IP:PORT (no host names); probes of any other
    /// target are refused with HTTP 403 [default: none, probes off].
    #[arg(
        long = "probe-allow",
        value_name = "IP:PORT,...",
        value_delimiter = ',',
        help_heading = "Metrics"
    )]
    pub probe_allow: Option<Vec<std::net::SocketAddr>>,
    /// How long each probe's test runs, 0.5 to 5 s [default: 1 s].
    #[arg(long = "probe-duration", value_name = "SECONDS", value_parser = seconds, help_heading = "Metrics")]
    pub probe_duration: Option<Duration>,
    /// The most of the time probes may keep one target's link busy, in percent [default: 10]:
    /// after a probe that took T, the next of that target is answered 429 with Retry-After
    /// until T × (100 / PERCENT − 1) has passed.
    #[arg(long = "probe-share", value_name = "PERCENT", value_parser = |s: &str| whole::<u32>(s, 1..=100), help_heading = "Metrics")]
    pub probe_share: Option<u32>,
    /// `/probe` answers only requests with `Authorization: Bearer TOKEN`, TOKEN the text of
    /// FILE (at least 16 bytes; surrounding whitespace is not part of it); others get 401.
    /// Prometheus sends it with `authorization: {credentials_file: FILE}` in its scrape job.
    /// Over plain HTTP the token is readable on the path: keep the metrics port inside the
    /// network that scrapes it.
    #[arg(long = "probe-token-file", value_name = "FILE", help_heading = "Metrics")]
    pub probe_token_file: Option<std::path::PathBuf>,
    /// Log lines as `text` or `json` (one object per line; the same as -J) [default: text].
    #[arg(long = "log-format", value_name = "FORMAT", value_parser = log_format)]
    pub log_format: Option<LogFormat>,
    /// How much of a test's figures a JSON log line carries: `brief` (who, what, how much,
    /// how it ended) or `full` (also both ends' streams, samples and costs: 10 KB and more
    /// a line) [default: brief].
    #[arg(long = "log-results", value_name = "brief|full", value_parser = log_results)]
    pub log_results: Option<LogResults>,
    /// The node this server runs on, sent to clients with its results so that each result
    /// names its node (in a pod the host name is the pod's); the Kubernetes DaemonSet sets
    /// the variable from the downward API. Empty = none.
    #[arg(
        long = "node-name",
        value_name = "NAME",
        env = "LINERATE_NODE_NAME",
        help_heading = "Place"
    )]
    pub node_name: Option<String>,
    /// The zone (failure domain, rack, site) this server runs in, sent to clients with its
    /// results. Empty = none.
    #[arg(long = "zone", value_name = "NAME", env = "LINERATE_ZONE", help_heading = "Place")]
    pub zone: Option<String>,
    /// The network this server serves on, as you name it (e.g. `pod`, `host`), sent to
    /// clients with its results: a mesh over agents of several networks on the same nodes
    /// tests each network's pairs and says what one costs against another. Empty = none.
    #[arg(long = "network", value_name = "NAME", env = "LINERATE_NETWORK", help_heading = "Place")]
    pub network: Option<String>,
    /// Be an agent of a mesh (`linerate mesh`): when a client proves the key (--psk-file,
    /// required), run a test against another agent it names and send it the record. Only
    /// agents holding the same key are ever tested, so an agent cannot be aimed elsewhere.
    #[arg(long = "agent", help_heading = "Access")]
    pub agent: bool,
    /// With --agent: the only targets its pair tests may reach, as networks (10.0.0.0/8, an
    /// address) or names whose addresses they must be (a headless Service: linerate); any
    /// other target is refused before it is contacted [default: targets on the agent's own
    /// kind of network: loopback, private, link-local or public, as the address it was
    /// reached at].
    #[arg(
        long = "pair-allow",
        value_name = "NET|NAME,...",
        value_delimiter = ',',
        help_heading = "Access"
    )]
    pub pair_allow: Option<Vec<crate::plan::server::PairTarget>>,
}

fn log_results(s: &str) -> Result<LogResults, String> {
    match s {
        "brief" => Ok(LogResults::Brief),
        "full" => Ok(LogResults::Full),
        _ => Err(format!("{s:?} is not a way to log results; use brief or full")),
    }
}

fn log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err(format!("{s:?} is not a log format; use text or json")),
    }
}

// The defaults the help text states are the library's.
const _: () = assert!(DEFAULT_MAX_TESTS == 16 && DEFAULT_MAX_STREAMS == 128 && DEFAULT_QUEUE == 8);
const _: () = assert!(DEFAULT_IDLE_TIMEOUT.as_secs() == 10);
const _: () = assert!(DEFAULT_MIN_INTERVAL.as_millis() == 100);
const _: () = assert!(
    DEFAULT_MIN_RATE == 8_000
        && DEFAULT_MAX_BLOCK == 1 << 20
        && DEFAULT_MAX_TEST_MEMORY == 64 << 20
);
const _: () =
    assert!(DEFAULT_MAX_CLIENT_CONNECTIONS == 32 && DEFAULT_MAX_CLIENT_TESTS_PER_MINUTE == 120);

/// `linerate server ARGS`: the flags over the `--config` file.
pub fn server_plan(a: &ServerArgs) -> Result<ServerPlan, String> {
    let file = match &a.limits.config {
        None => ServerSettings::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!("cannot read the server config file {}: {e}", path.display())
            })?;
            parse_config(&text, &path.display().to_string()).map_err(|e| e.to_string())?
        }
    };
    let given = |b: bool| b.then_some(true);
    let flags = ServerSettings {
        port: a.net.port,
        bind: a.net.bind,
        ipv4: given(a.net.ipv4),
        ipv6: given(a.net.ipv6),
        json: given(a.net.json),
        json_stream: given(a.net.json_stream),
        one_off: given(a.one_off),
        timestamps: a.log.timestamps.clone(),
        logfile: a.log.logfile.clone(),
        forceflush: given(a.log.forceflush),
        psk_file: a.net.psk_file.clone(),
        ..a.limits.settings()
    };
    flags.or(file).plan()
}

impl LimitArgs {
    fn settings(&self) -> ServerSettings {
        ServerSettings {
            max_tests: self.max_tests,
            max_streams: self.max_streams,
            max_duration: self.max_duration.map(Seconds),
            max_bitrate: self.max_bitrate.map(|r| Rate(r.bits_per_second())),
            max_total_bitrate: self.max_total_bitrate.map(|r| Rate(r.bits_per_second())),
            max_bytes: self.max_bytes.map(|b| SizeItem(Some(b.bytes()))),
            allow_protocols: self
                .allow_protocols
                .as_ref()
                .map(|ps| ps.iter().map(|p| ProtocolItem((*p).into())).collect()),
            allow_directions: self
                .allow_directions
                .as_ref()
                .map(|ds| ds.iter().map(|d| DirectionItem((*d).into())).collect()),
            max_client_connections: self.max_client_connections,
            max_client_tests_per_minute: self.max_client_tests_per_minute,
            idle_timeout: self.idle_timeout.map(Seconds),
            min_interval: self.min_interval.map(Seconds),
            max_tests_per_address: self.max_tests_per_address,
            min_rate: self.min_rate.map(|r| Rate(r.bits_per_second())),
            max_block: self.max_block.map(|b| SizeItem(Some(b.bytes()))),
            max_test_memory: self.max_test_memory.map(|b| SizeItem(Some(b.bytes()))),
            exclusive: self.exclusive.then_some(true),
            queue: self.queue,
            allow: self.allow.clone(),
            log_format: self.log_format,
            log_results: self.log_results,
            threads: self.threads,
            max_connections: self.max_connections,
            max_memory: self.max_memory.map(|b| SizeItem(Some(b.bytes()))),
            max_threads: self.max_threads,
            ipv4_prefix: self.ipv4_prefix,
            ipv6_prefix: self.ipv6_prefix,
            metrics: self.metrics,
            probe_allow: self.probe_allow.clone(),
            probe_duration: self.probe_duration.map(Seconds),
            probe_share: self.probe_share,
            probe_token_file: self.probe_token_file.clone(),
            node_name: self.node_name.clone(),
            zone: self.zone.clone(),
            network: self.network.clone(),
            agent: self.agent.then_some(true),
            pair_allow: self.pair_allow.clone(),
            ..ServerSettings::default()
        }
    }
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
    pub limits: LimitArgs,
    #[command(flatten)]
    pub log: LogArgs,
}

#[cfg(test)]
mod tests {
    use crate::plan::Plan;

    /// The server flags that are not config keys, and why.
    const NOT_KEYS: [(&str, &str); 2] = [
        ("config", "it names the file itself"),
        ("json-format", "the shape of a client's JSON document; a server's lines have one"),
    ];

    /// Values to try for a flag, by its value name: the first one the flag accepts and that
    /// is not its default is used.
    /// A new kind of value fails the walk below until it has an entry here.
    fn candidates(value_name: &str, key_file: &str) -> Vec<String> {
        let words: &[&str] = match value_name {
            "N" => &["5"],
            "BITS" => &["24"],
            "PORT" => &["5202"],
            "SECONDS" => &["2.5"],
            "RATE" => &["2G"],
            "SIZE" => &["256K", "1G"],
            "P,..." => &["udp"],
            "D,..." => &["send"],
            "NET,..." => &["127.0.0.0/8"],
            "ADDR" => &["127.0.0.1"],
            "ADDR:PORT" => &["127.0.0.1:9464"],
            "IP:PORT,..." => &["127.0.0.1:5201"],
            "auto|stream|N" => &["stream"],
            "brief|full" => &["full"],
            "FORMAT" => &["json", "%H:%M "],
            "FILE" => return vec![key_file.to_string()],
            "NAME" => &["node-a"],
            "PERCENT" => &["25"],
            "NET|NAME,..." => &["127.0.0.0/8"],
            _ => &[],
        };
        words.iter().map(|w| w.to_string()).collect()
    }

    fn parse(args: &[&str]) -> Result<Plan, String> {
        super::super::parse(["linerate", "server"].iter().chain(args)).map_err(|e| e.to_string())
    }

    /// `linerate server`'s flags with a long name (not --help): (long name, takes a value,
    /// value name, delimited list).
    fn server_flags() -> Vec<(String, bool, String, bool)> {
        let cmd = super::super::command();
        let server = cmd.find_subcommand("server").expect("server subcommand");
        server
            .get_arguments()
            .filter(|a| !matches!(a.get_action(), clap::ArgAction::Help | clap::ArgAction::Version))
            .filter_map(|a| {
                let name = a.get_value_names().and_then(|n| n.first()).map(|n| n.to_string());
                Some((
                    a.get_long()?.to_string(),
                    a.get_action().takes_values(),
                    name.unwrap_or_default(),
                    a.get_value_delimiter().is_some(),
                ))
            })
            .collect()
    }

    /// A flag's value as a TOML value: numbers bare, words quoted, lists in brackets.
    fn toml_value(value: &str, list: bool) -> String {
        let one =
            if value.parse::<f64>().is_ok() { value.to_string() } else { format!("{value:?}") };
        if list { format!("[{one}]") } else { one }
    }

    /// Every server flag is a config key: for each flag (read from the clap definition, so a
    /// flag added later is walked too), `KEY = VALUE` in a `--config` file gives the same plan
    /// as `--FLAG=VALUE`, and not the default plan.
    #[test]
    fn every_server_flag_is_a_config_key() {
        let dir = std::env::temp_dir().join(format!("linerate-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let key_file = dir.join("key");
        std::fs::write(&key_file, "a key of more than sixteen bytes\n").expect("key");
        let key_file = key_file.display().to_string();
        let config = dir.join("server.toml");
        let config_s = config.display().to_string();
        let default = parse(&[]).expect("plain server");
        let flags = server_flags();
        assert!(flags.len() > 30, "the walk found only {} flags", flags.len());
        let mut walked = 0;
        for (long, takes_value, value_name, list) in &flags {
            if NOT_KEYS.iter().any(|(n, _)| n == long) {
                continue;
            }
            let key = long.replace('-', "_");
            // `--agent` needs a key, `--pair-allow` an agent: both ways get them, and so does
            // what it is compared with.
            let psk = format!("--psk-file={key_file}");
            let with: Vec<&str> = match long.as_str() {
                "agent" => vec![&psk],
                "pair-allow" => vec![&psk, "--agent"],
                _ => Vec::new(),
            };
            let base = if with.is_empty() { default.clone() } else { parse(&with).expect("key") };
            let (flag, value) = if *takes_value {
                let tried = candidates(value_name, &key_file);
                let good = tried.iter().find(|v| {
                    parse(&[&with[..], &[&format!("--{long}={v}")]].concat())
                        .is_ok_and(|p| p != base)
                });
                let v = good.unwrap_or_else(|| {
                    panic!("--{long} {value_name}: no sample value it accepts; add one ({tried:?})")
                });
                (format!("--{long}={v}"), toml_value(v, *list))
            } else {
                (format!("--{long}"), "true".to_string())
            };
            let by_flag = parse(&[&with[..], &[flag.as_str()]].concat()).expect("the flag parses");
            std::fs::write(&config, format!("{key} = {value}\n")).expect("write config");
            let by_file = parse(&[&with[..], &["--config", &config_s]].concat())
                .unwrap_or_else(|e| panic!("--{long}: `{key} = {value}` in the file: {e}"));
            assert_eq!(by_file, by_flag, "`{key} = {value}` differs from {flag}");
            assert_ne!(by_flag, base, "{flag} changes nothing");
            walked += 1;
        }
        assert_eq!(walked + NOT_KEYS.len(), flags.len(), "every exception is a real flag");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The shipped /etc/linerate/server.toml documents every key (as a commented line
    /// `# key = value`), and with every such line uncommented it is a config that parses.
    #[test]
    fn packaged_config_documents_every_key() {
        let shipped = include_str!("../../../../packaging/server.toml");
        let keyed: Vec<(&str, &str)> = shipped
            .lines()
            .filter_map(|l| l.strip_prefix("# ")?.split_once(" = "))
            .filter(|(k, _)| {
                k.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
            })
            .collect();
        for (long, ..) in server_flags() {
            if NOT_KEYS.iter().any(|(n, _)| *n == long) {
                continue;
            }
            let key = long.replace('-', "_");
            let n = keyed.iter().filter(|(k, _)| *k == key).count();
            assert_eq!(n, 1, "packaging/server.toml documents `{key}` {n} times, not once");
        }
        let all: String = keyed.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        if let Err(e) = crate::plan::server::parse_config(&all, "server.toml, uncommented") {
            panic!("{e}\n{all}");
        }
    }
}
