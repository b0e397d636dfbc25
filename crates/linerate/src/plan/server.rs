//! The server's operator settings: address and port, limits, admission (`--exclusive`), access
//! (key file, allow-list) and log lines, from flags and from a TOML file (`linerate server
//! --config FILE`, `/etc/linerate/server.toml` for the packaged service), merged with flags
//! winning.
//!
//! Both sources fill the same [`ServerSettings`] (every field optional), so a key and its flag
//! cannot drift apart: the file's keys are the flags' long names with `_` for `-`, for every
//! server flag but `--config` itself and `--json-format` (the shape of a client's document; a
//! server's JSON lines have one shape) — `cli/server_args.rs` tests that by walking the flags,
//! and that `packaging/server.toml` documents each key. Errors in
//! the file name its line and column and the fix, as campaign files do (the same helpers).
//! The only I/O is reading the key file ([`read_psk`]); the caller reads the config file.

use std::ops::Range;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use linerate_proto::auth::Psk;
use linerate_proto::{Direction, Limits, Protocol};
use serde::Deserialize;

use crate::plan::campaign::{explain, line_col};
use crate::plan::campaign_de::{DirectionItem, ProtocolItem, Rate, Seconds, SizeItem};

/// Operator settings as given; `None` = not given here.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// `--port`.
    pub port: Option<u16>,
    /// `--bind`: listen on this address only.
    pub bind: Option<IpAddr>,
    /// `--ipv4`: IPv4 only.
    pub ipv4: Option<bool>,
    /// `--ipv6`: IPv6 only.
    pub ipv6: Option<bool>,
    /// `--json`: log lines as JSON (as `log_format = "json"`).
    pub json: Option<bool>,
    /// `--json-stream`: on a server, the same as `--json`.
    pub json_stream: Option<bool>,
    /// `--one-off`: exit after one test.
    pub one_off: Option<bool>,
    /// `--timestamps=FORMAT`: a strftime(3) format before each log line.
    pub timestamps: Option<String>,
    /// `--logfile`: log lines go to this file, appended.
    pub logfile: Option<std::path::PathBuf>,
    /// `--forceflush`: each log line written out as soon as it is complete.
    pub forceflush: Option<bool>,
    /// `--max-tests`.
    pub max_tests: Option<u32>,
    /// `--max-streams`.
    pub max_streams: Option<u32>,
    /// `--max-duration`.
    pub max_duration: Option<Seconds>,
    /// `--max-bitrate` (0 = no cap).
    pub max_bitrate: Option<Rate>,
    /// `--max-total-bitrate` (0 = no cap).
    pub max_total_bitrate: Option<Rate>,
    /// `--max-bytes` (0 = no cap).
    pub max_bytes: Option<SizeItem>,
    /// `--allow-protocols`.
    pub allow_protocols: Option<Vec<ProtocolItem>>,
    /// `--allow-directions`.
    pub allow_directions: Option<Vec<DirectionItem>>,
    /// `--max-client-connections` (0 = no cap).
    pub max_client_connections: Option<u32>,
    /// `--max-client-tests-per-minute` (0 = no cap).
    pub max_client_tests_per_minute: Option<u32>,
    /// `--idle-timeout`.
    pub idle_timeout: Option<Seconds>,
    /// `--min-interval`.
    pub min_interval: Option<Seconds>,
    /// `--max-tests-per-address` (0 = no cap).
    pub max_tests_per_address: Option<u32>,
    /// `--min-rate` (0 = no floor).
    pub min_rate: Option<Rate>,
    /// `--max-block`.
    pub max_block: Option<SizeItem>,
    /// `--max-test-memory`.
    pub max_test_memory: Option<SizeItem>,
    /// `--exclusive`.
    pub exclusive: Option<bool>,
    /// `--queue`.
    pub queue: Option<u32>,
    /// `--psk-file`: clients must prove they know the key in this file.
    pub psk_file: Option<std::path::PathBuf>,
    /// `--allow`: only these client networks may connect.
    pub allow: Option<Vec<IpNet>>,
    /// `--log-format`: `text` or `json` (one JSON object per line).
    pub log_format: Option<LogFormat>,
    /// `--log-results`: `brief` or `full` figures in a JSON `test_ended` line.
    pub log_results: Option<LogResults>,
    /// `--threads`: how the server serves a test's TCP streams.
    pub threads: Option<crate::plan::threads::Threads>,
    /// `--max-connections`: connections not yet part of a test, all addresses together.
    pub max_connections: Option<u32>,
    /// `--max-memory`: memory all admitted tests may need together.
    pub max_memory: Option<SizeItem>,
    /// `--max-threads`: threads all admitted tests may use together.
    pub max_threads: Option<u32>,
    /// `--ipv4-prefix`: IPv4 addresses sharing this many leading bits are one client.
    pub ipv4_prefix: Option<u8>,
    /// `--ipv6-prefix`: IPv6 addresses sharing this many leading bits are one client.
    pub ipv6_prefix: Option<u8>,
    /// `--metrics`: serve Prometheus metrics (and `/probe`) on this address.
    pub metrics: Option<SocketAddr>,
    /// `--probe-allow`: the targets `/probe` may test; none = probes are off.
    pub probe_allow: Option<Vec<SocketAddr>>,
    /// `--probe-duration`: how long a probe's test runs.
    pub probe_duration: Option<Seconds>,
    /// `--probe-share`: the most of the time probes may keep one target's link busy, percent.
    pub probe_share: Option<u32>,
    /// `--probe-token-file`: `/probe` needs `Authorization: Bearer` and the token in this file.
    pub probe_token_file: Option<std::path::PathBuf>,
    /// `--node-name`: the node this server runs on, reported to clients.
    pub node_name: Option<String>,
    /// `--zone`: the zone it runs in, reported to clients.
    pub zone: Option<String>,
    /// `--network`: the network it serves on (e.g. `pod`, `host`), reported to clients.
    pub network: Option<String>,
    /// `--agent`: run tests against other agents when a client with the key asks.
    pub agent: Option<bool>,
    /// `--pair-allow`: the only targets an agent's pair tests may reach.
    pub pair_allow: Option<Vec<PairTarget>>,
}

/// The shortest and longest probe a server runs (`--probe-duration`): a probe is a scrape's
/// answer, which Prometheus waits for (its default scrape timeout is 10 s), and it loads the
/// link being watched, so it is short.
pub const PROBE_DURATION: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(500)..=Duration::from_secs(5);

/// What `/probe` may do: off unless targets are allowed (docs/SECURITY.md, "Metrics").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    /// The only targets a probe may test, as `IP:PORT` (no names: what is allowed is what is
    /// tested, whatever a resolver later says); empty = probes are refused.
    pub allow: Vec<SocketAddr>,
    /// How long each probe's test runs.
    pub duration: Duration,
    /// `--probe-token-file`: a probe must carry `Authorization: Bearer TOKEN`.
    pub token: Option<Psk>,
    /// The most of the time probes may keep one target busy, percent (1 to 100): after a
    /// probe that took T, the next of that target waits T × (100 / share − 1).
    pub share: u32,
}

/// Probes keep a target's link busy at most this share of the time by default, percent: a
/// probe endpoint must not turn a scraper into a traffic generator.
pub const DEFAULT_PROBE_SHARE: u32 = 10;

impl Default for ProbePlan {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            duration: Duration::from_secs(1),
            share: DEFAULT_PROBE_SHARE,
            token: None,
        }
    }
}

/// Where a server runs, as its operator names it (`--node-name`, `--zone`; the Kubernetes
/// DaemonSet passes them from the downward API), sent to clients in the server's environment
/// (`Environment::node`, `::zone`) so that every result names its node: in a pod the host
/// name is the pod's, and an address says nothing about a zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// The node's name.
    pub node: Option<String>,
    /// The zone's name.
    pub zone: Option<String>,
    /// The network's name (`pod`, `host`, ...): a mesh sets networks side by side.
    pub network: Option<String>,
}

/// The longest node or zone name: a DNS name's (Kubernetes node names are DNS subdomains).
pub const MAX_PLACE_NAME: usize = 253;

impl Place {
    /// Writes the names into an environment snapshot this server sends.
    pub fn stamp(&self, e: &mut linerate_proto::Environment) {
        e.node.clone_from(&self.node);
        e.zone.clone_from(&self.zone);
        e.network.clone_from(&self.network);
    }

    /// A name as given, checked: empty (an unset downward-API label expands to "") means
    /// none; a name is at most [`MAX_PLACE_NAME`] bytes of printable text, because every
    /// client stores and prints it.
    fn name(what: &str, given: Option<&str>) -> Result<Option<String>, String> {
        let Some(v) = given.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        if v.len() > MAX_PLACE_NAME {
            return Err(format!(
                "{what} is {} bytes long; name it in at most {MAX_PLACE_NAME} (a DNS name's \
                 limit)",
                v.len()
            ));
        }
        if v.chars().any(char::is_control) {
            return Err(format!("{what} {v:?} holds a control character; name it in plain text"));
        }
        Ok(Some(v.to_string()))
    }
}

/// How much of a test's figures a JSON log line carries (`--log-results`). Brief by default:
/// a whole record per line (both ends' streams, samples and costs) ran to 10 KB for a
/// one-second test and grows with the test's length, past what log pipelines take in one
/// line; the summary says who, what, how much and how it ended, and the client's stored run
/// holds both ends' figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogResults {
    /// The summary only.
    #[default]
    Brief,
    /// The summary and both ends' full results.
    Full,
}

/// How the server writes its log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// One readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}

/// Who may use the server: a pre-shared key and an allow-list of client networks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Access {
    /// Native clients must answer an HMAC challenge with this key; iperf3 clients, which
    /// cannot, are refused.
    pub psk: Option<Psk>,
    /// Connections from elsewhere are closed unread; empty = everyone.
    pub allow: Vec<IpNet>,
}

impl Access {
    /// True when `ip` may connect.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|n| n.contains(ip))
    }
}

/// One entry of `--pair-allow`: a network (an address, or ADDRESS/PREFIX) or a name (a
/// headless Service's, whose addresses are the agents), resolved when a pair test asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairTarget {
    /// Addresses inside it.
    Net(IpNet),
    /// The addresses this name resolves to when the pair test is asked for.
    Name(String),
}

impl std::str::FromStr for PairTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Ok(net) = s.parse::<IpNet>() {
            return Ok(PairTarget::Net(net));
        }
        let name_ok = !s.is_empty()
            && s.len() <= 253
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !name_ok || s.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'/') {
            return Err(format!(
                "{s:?} is neither a network (10.0.0.0/8, fd00::/8, an address) nor a host name \
                 (linerate, linerate.ns.svc.cluster.local)"
            ));
        }
        Ok(PairTarget::Name(s.to_ascii_lowercase()))
    }
}

impl<'de> Deserialize<'de> for PairTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What kind of network an address is on, for an agent's default rule on pair targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetKind {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918, shared address space (100.64.0.0/10), unique local (fc00::/7).
    Private,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// Any other unicast address.
    Public,
    /// Unspecified, multicast, broadcast: never a target.
    Unusable,
}

impl NetKind {
    /// The kind in a word.
    pub fn word(self) -> &'static str {
        match self {
            NetKind::Loopback => "loopback",
            NetKind::Private => "private",
            NetKind::LinkLocal => "link-local",
            NetKind::Public => "public",
            NetKind::Unusable => "unusable",
        }
    }

    /// The kind of `ip` (an IPv4-mapped IPv6 address as its IPv4 address).
    pub fn of(ip: IpAddr) -> NetKind {
        match ip.to_canonical() {
            IpAddr::V4(a) => {
                let [o0, o1, ..] = a.octets();
                if a.is_loopback() {
                    NetKind::Loopback
                } else if a.is_private() || (o0 == 100 && (o1 & 0xc0) == 64) {
                    NetKind::Private
                } else if a.is_link_local() {
                    NetKind::LinkLocal
                } else if a.is_unspecified() || a.is_multicast() || a.is_broadcast() {
                    NetKind::Unusable
                } else {
                    NetKind::Public
                }
            }
            IpAddr::V6(a) => {
                let s0 = a.segments()[0];
                if a.is_loopback() {
                    NetKind::Loopback
                } else if (s0 & 0xfe00) == 0xfc00 {
                    NetKind::Private
                } else if (s0 & 0xffc0) == 0xfe80 {
                    NetKind::LinkLocal
                } else if a.is_unspecified() || a.is_multicast() {
                    NetKind::Unusable
                } else {
                    NetKind::Public
                }
            }
        }
    }
}

/// Why an agent on `own` (the address its requester reached it at) must not run a pair test
/// against `target` (as asked, `host:port`) resolved to `addrs`; None when it may. With an
/// allow-list (`--pair-allow`), every address must be inside one of its networks or among
/// what one of its names resolves to now (`names`: each name with its addresses); without
/// one, every address must be of the agent's own kind of network (`NetKind`): an agent on a
/// cluster's private network is not aimed at the Internet, nor one on loopback at anything
/// else. Either way a refused target is never contacted.
pub fn pair_target_refusal(
    allow: &[PairTarget],
    names: &[(String, Vec<IpAddr>)],
    own: IpAddr,
    target: &str,
    addrs: &[IpAddr],
) -> Option<String> {
    if addrs.is_empty() {
        return Some(format!("the pair test's target {target} resolves to no address"));
    }
    let allowed = |ip: &IpAddr| {
        allow.iter().any(|a| match a {
            PairTarget::Net(n) => n.contains(*ip),
            PairTarget::Name(name) => names.iter().any(|(n, found)| {
                n == name && found.iter().any(|f| f.to_canonical() == ip.to_canonical())
            }),
        })
    };
    if !allow.is_empty() {
        let out = addrs.iter().find(|ip| !allowed(ip))?;
        return Some(format!(
            "the pair test's target {target} ({out}) is not in this agent's --pair-allow"
        ));
    }
    let mine = NetKind::of(own);
    let other = addrs.iter().find(|ip| {
        let kind = NetKind::of(**ip);
        kind != mine || kind == NetKind::Unusable
    })?;
    Some(format!(
        "the pair test's target {target} ({other}, a {} address) is not on this agent's kind of \
         network ({}); an agent tests only its own kind unless --pair-allow names the target",
        NetKind::of(*other).word(),
        mine.word()
    ))
}

/// A network: an address and a prefix length (`10.0.0.0/8`, `::1`, `fe80::/10`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for IpNet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, p) = s.trim().split_once('/').map_or((s.trim(), None), |(a, p)| (a, Some(p)));
        let addr: IpAddr = a.parse().map_err(|_| {
            format!("{s:?} is not a network; write an address or ADDRESS/PREFIX, e.g. 10.0.0.0/8")
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0..={max}"))?,
        };
        Ok(Self { addr, prefix })
    }
}

impl IpNet {
    /// True when `ip` is inside this network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (a, b, bits) = match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                (u128::from(n.to_bits()), u128::from(i.to_bits()), 32)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => (n.to_bits(), i.to_bits(), 128),
            _ => return false,
        };
        let shift = bits - u32::from(self.prefix);
        shift >= bits || (a >> shift) == (b >> shift)
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a server config file was refused: where, and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong and the fix.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Parses a server config file; `file` names it in errors.
pub fn parse_config(text: &str, file: &str) -> Result<ServerSettings, ConfigError> {
    let at = |span: Option<Range<usize>>, message: String| {
        let (line, column) = line_col(text, span.map_or(0, |s| s.start));
        ConfigError { file: file.to_string(), line, column, message }
    };
    let settings: ServerSettings =
        toml::from_str(text).map_err(|e| at(e.span(), explain(text, &e)))?;
    settings.limits().map_err(|m| at(None, m))?;
    settings.probe().map_err(|m| at(None, m))?;
    Ok(settings)
}

impl ServerSettings {
    /// These settings, with `fallback`'s where these have none (flags over the file).
    pub fn or(self, fallback: ServerSettings) -> ServerSettings {
        // `-4` or `-6` given replaces the file's family: the two are one choice.
        let family_given = self.ipv4.is_some() || self.ipv6.is_some();
        let (ipv4, ipv6) =
            if family_given { (self.ipv4, self.ipv6) } else { (fallback.ipv4, fallback.ipv6) };
        ServerSettings {
            port: self.port.or(fallback.port),
            bind: self.bind.or(fallback.bind),
            ipv4,
            ipv6,
            json: self.json.or(fallback.json),
            json_stream: self.json_stream.or(fallback.json_stream),
            one_off: self.one_off.or(fallback.one_off),
            timestamps: self.timestamps.or(fallback.timestamps),
            logfile: self.logfile.or(fallback.logfile),
            forceflush: self.forceflush.or(fallback.forceflush),
            max_tests: self.max_tests.or(fallback.max_tests),
            max_streams: self.max_streams.or(fallback.max_streams),
            max_duration: self.max_duration.or(fallback.max_duration),
            max_bitrate: self.max_bitrate.or(fallback.max_bitrate),
            max_total_bitrate: self.max_total_bitrate.or(fallback.max_total_bitrate),
            max_bytes: self.max_bytes.or(fallback.max_bytes),
            allow_protocols: self.allow_protocols.or(fallback.allow_protocols),
            allow_directions: self.allow_directions.or(fallback.allow_directions),
            max_client_connections: self.max_client_connections.or(fallback.max_client_connections),
            max_client_tests_per_minute: self
                .max_client_tests_per_minute
                .or(fallback.max_client_tests_per_minute),
            idle_timeout: self.idle_timeout.or(fallback.idle_timeout),
            min_interval: self.min_interval.or(fallback.min_interval),
            max_tests_per_address: self.max_tests_per_address.or(fallback.max_tests_per_address),
            min_rate: self.min_rate.or(fallback.min_rate),
            max_block: self.max_block.or(fallback.max_block),
            max_test_memory: self.max_test_memory.or(fallback.max_test_memory),
            exclusive: self.exclusive.or(fallback.exclusive),
            queue: self.queue.or(fallback.queue),
            psk_file: self.psk_file.or(fallback.psk_file),
            allow: self.allow.or(fallback.allow),
            log_format: self.log_format.or(fallback.log_format),
            log_results: self.log_results.or(fallback.log_results),
            threads: self.threads.or(fallback.threads),
            max_connections: self.max_connections.or(fallback.max_connections),
            max_memory: self.max_memory.or(fallback.max_memory),
            max_threads: self.max_threads.or(fallback.max_threads),
            ipv4_prefix: self.ipv4_prefix.or(fallback.ipv4_prefix),
            ipv6_prefix: self.ipv6_prefix.or(fallback.ipv6_prefix),
            metrics: self.metrics.or(fallback.metrics),
            probe_allow: self.probe_allow.or(fallback.probe_allow),
            probe_duration: self.probe_duration.or(fallback.probe_duration),
            probe_share: self.probe_share.or(fallback.probe_share),
            probe_token_file: self.probe_token_file.or(fallback.probe_token_file),
            node_name: self.node_name.or(fallback.node_name),
            zone: self.zone.or(fallback.zone),
            network: self.network.or(fallback.network),
            agent: self.agent.or(fallback.agent),
            pair_allow: self.pair_allow.or(fallback.pair_allow),
        }
    }

    /// The server these settings describe: where it listens, its limits, who may connect
    /// and how it logs; reads the key file.
    pub fn plan(&self) -> Result<crate::plan::ServerPlan, String> {
        let family = match (self.ipv4 == Some(true), self.ipv6 == Some(true)) {
            (true, true) => return Err("ipv4 and ipv6 (-4, -6) are both set; keep one".into()),
            (true, false) => crate::plan::Family::V4,
            (false, true) => crate::plan::Family::V6,
            (false, false) => crate::plan::Family::Any,
        };
        if let Some(ip) = self.bind
            && !family.allows(&ip)
        {
            return Err(format!("-B {ip} does not match -4/-6; drop one of them"));
        }
        let json = [self.json, self.json_stream].contains(&Some(true))
            || self.log_format == Some(LogFormat::Json);
        let agent = self.agent.unwrap_or(false);
        if agent && self.psk_file.is_none() {
            return Err("agent (--agent) needs a key (--psk-file FILE): an agent runs tests \
                        against other hosts when asked, so only a client with the key may ask, \
                        and only agents holding the same key are tested"
                .into());
        }
        if self.pair_allow.is_some() && !agent {
            return Err("pair_allow (--pair-allow) limits where an agent's pair tests go: give \
                        --agent too, or drop it"
                .into());
        }
        Ok(crate::plan::ServerPlan {
            agent,
            pair_allow: self.pair_allow.clone().unwrap_or_default(),
            port: self.port.unwrap_or(crate::plan::DEFAULT_PORT),
            bind: self.bind,
            family,
            one_off: self.one_off.unwrap_or(false),
            output: if json {
                crate::plan::OutputFormat::Json
            } else {
                crate::plan::OutputFormat::Text
            },
            log_results: self.log_results.unwrap_or_default(),
            limits: self.limits()?,
            access: self.access()?,
            metrics: self.metrics,
            probe: ProbePlan { token: self.probe_token()?, ..self.probe()? },
            text: crate::plan::text::TextOptions {
                timestamps: self.timestamps.clone(),
                logfile: self.logfile.clone(),
                forceflush: self.forceflush.unwrap_or(false),
                ..Default::default()
            },
            place: Place {
                node: Place::name("node_name (--node-name)", self.node_name.as_deref())?,
                zone: Place::name("zone (--zone)", self.zone.as_deref())?,
                network: Place::name("network (--network)", self.network.as_deref())?,
            },
        })
    }

    /// What `/probe` may do.
    pub fn probe(&self) -> Result<ProbePlan, String> {
        let mut probe = ProbePlan::default();
        if let Some(d) = self.probe_duration {
            if !PROBE_DURATION.contains(&d.0) {
                return Err(format!(
                    "probe_duration (--probe-duration) must be {} ..= {} s",
                    PROBE_DURATION.start().as_secs_f64(),
                    PROBE_DURATION.end().as_secs_f64()
                ));
            }
            probe.duration = d.0;
        }
        if let Some(share) = self.probe_share {
            if !(1..=100).contains(&share) {
                return Err(format!(
                    "probe_share (--probe-share) is {share}: give a percentage, 1 to 100"
                ));
            }
            probe.share = share;
        }
        probe.allow = self.probe_allow.clone().unwrap_or_default();
        Ok(probe)
    }

    /// The token `/probe` asks for, read from its file (`--probe-token-file`), if one is set.
    pub fn probe_token(&self) -> Result<Option<Psk>, String> {
        let read =
            |p: &std::path::PathBuf| read_psk(p).map_err(|e| format!("--probe-token-file: {e}"));
        self.probe_token_file.as_ref().map(read).transpose()
    }

    /// Who may use the server; reads the key file.
    pub fn access(&self) -> Result<Access, String> {
        let psk = match &self.psk_file {
            None => None,
            Some(path) => Some(read_psk(path)?),
        };
        Ok(Access { psk, allow: self.allow.clone().unwrap_or_default() })
    }

    /// The limits these settings give, over the defaults.
    pub fn limits(&self) -> Result<Limits, String> {
        let layout = self.threads.unwrap_or_default().layout(crate::plan::threads::cores());
        let mut l = Limits { layout, ..Limits::default() };
        if let Some(n) = self.max_tests {
            if n == 0 {
                return Err("max_tests (--max-tests) must be at least 1".into());
            }
            l.max_tests = n;
        }
        if let Some(n) = self.max_streams {
            if n == 0 {
                return Err("max_streams (--max-streams) must be at least 1".into());
            }
            l.max_streams = n;
        }
        if let Some(d) = self.max_duration {
            if d.0.is_zero() {
                return Err("max_duration (--max-duration) must be more than 0 s".into());
            }
            l.max_duration = d.0;
        }
        if let Some(r) = self.max_bitrate {
            l.max_bitrate = (r.0 > 0).then_some(r.0);
        }
        if let Some(r) = self.max_total_bitrate {
            l.max_total_bitrate = (r.0 > 0).then_some(r.0);
        }
        if let Some(b) = self.max_bytes {
            l.max_bytes = b.0.filter(|b| *b > 0);
        }
        if let Some(ps) = &self.allow_protocols {
            l.allow_tcp = ps.iter().any(|p| p.0 == Protocol::Tcp);
            l.allow_udp = ps.iter().any(|p| p.0 == Protocol::Udp);
        }
        if let Some(ds) = &self.allow_directions {
            let has = |d: Direction| ds.iter().any(|x| x.0 == d);
            l.allow_upload = has(Direction::Upload);
            l.allow_download = has(Direction::Download);
            l.allow_bidir = has(Direction::Bidirectional);
        }
        if let Some(n) = self.max_client_connections {
            l.max_client_connections = n;
        }
        if let Some(n) = self.max_client_tests_per_minute {
            l.max_client_tests_per_minute = n;
        }
        if let Some(d) = self.idle_timeout {
            if d.0 < std::time::Duration::from_millis(500) {
                return Err("idle_timeout (--idle-timeout) must be at least 0.5 s".into());
            }
            l.idle_timeout = d.0;
        }
        if let Some(d) = self.min_interval {
            let floor = std::time::Duration::from_millis(linerate_proto::spec::MIN_INTERVAL_MS);
            if d.0 < floor {
                return Err(format!(
                    "min_interval (--min-interval) must be at least {} s, the protocol's floor",
                    floor.as_secs_f64()
                ));
            }
            l.min_interval = d.0;
        }
        self.budgets(&mut l)?;
        l.exclusive = self.exclusive.unwrap_or(false);
        if let Some(n) = self.queue {
            l.queue = n;
        }
        Ok(l)
    }
}

impl ServerSettings {
    /// The per-address share, the rate floor and the memory caps.
    fn budgets(&self, l: &mut Limits) -> Result<(), String> {
        if let Some(n) = self.max_tests_per_address {
            l.max_tests_per_address = Some(n);
        }
        if let Some(r) = self.min_rate {
            l.min_rate = r.0;
        }
        if let Some(b) = self.max_block {
            let b = b.0.unwrap_or(0);
            let max = linerate_proto::spec::MAX_BLOCK_BYTES;
            l.max_block =
                u32::try_from(b).ok().filter(|b| (1..=max).contains(b)).ok_or_else(|| {
                    "max_block (--max-block) must be 1 byte ..= 64 MiB (the protocol's cap)"
                        .to_string()
                })?;
        }
        if let Some(m) = self.max_test_memory {
            l.max_test_memory = m.0.filter(|m| *m > 0).ok_or_else(|| {
                "max_test_memory (--max-test-memory) must be more than 0".to_string()
            })?;
        }
        self.totals(l)
    }

    /// The server's totals and what makes one client.
    fn totals(&self, l: &mut Limits) -> Result<(), String> {
        if let Some(n) = self.max_connections {
            if n == 0 {
                return Err("max_connections (--max-connections) must be at least 1".into());
            }
            l.max_connections = Some(n);
        }
        if let Some(m) = self.max_memory {
            let m = m.0.filter(|m| *m >= l.max_test_memory).ok_or_else(|| {
                "max_memory (--max-memory) must be at least --max-test-memory (one test must fit)"
                    .to_string()
            })?;
            l.max_memory = Some(m);
        }
        if let Some(n) = self.max_threads {
            if n < 4 {
                return Err("max_threads (--max-threads) must be at least 4".into());
            }
            l.max_threads = Some(n);
        }
        if let Some(p) = self.ipv4_prefix {
            if !(8..=32).contains(&p) {
                return Err("ipv4_prefix (--ipv4-prefix) must be 8..=32".into());
            }
            l.ipv4_prefix = p;
        }
        if let Some(p) = self.ipv6_prefix {
            if !(16..=128).contains(&p) {
                return Err("ipv6_prefix (--ipv6-prefix) must be 16..=128".into());
            }
            l.ipv6_prefix = p;
        }
        Ok(())
    }
}

/// Reads a pre-shared key file (its bytes, surrounding whitespace trimmed).
pub fn read_psk(path: &std::path::Path) -> Result<Psk, String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("cannot read the key file {}: {e}", path.display()))?;
    Psk::from_file_text(&text).map_err(|e| format!("key file {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_target_is_checked_by_the_list_or_else_by_kind() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let allow = |items: &[&str]| -> Vec<PairTarget> {
            items.iter().map(|s| s.parse().expect(s)).collect()
        };
        let own = ip("10.244.0.5");
        // No list: the agent's own kind only.
        let check = |target: &[&str]| {
            let addrs: Vec<IpAddr> = target.iter().map(|t| ip(t)).collect();
            pair_target_refusal(&[], &[], own, "t:5201", &addrs)
        };
        assert_eq!(check(&["10.244.1.7"]), None);
        assert_eq!(check(&["fd00::7"]), None, "a unique local address is private too");
        let e = check(&["10.244.1.7", "8.8.4.4"]).expect("one public address");
        assert!(e.contains("a public address") && e.contains("--pair-allow"), "{e}");
        assert!(check(&["127.0.0.1"]).is_some() && check(&["224.0.0.1"]).is_some());
        assert!(check(&[]).expect("no address").contains("no address"));
        let on_lo = pair_target_refusal(&[], &[], ip("127.0.0.1"), "t", &[ip("127.0.0.9")]);
        assert_eq!(on_lo, None, "loopback to loopback");
        // A list: its networks and what its names resolve to now, nothing else.
        let list = allow(&["10.244.0.0/16", "linerate"]);
        let names = vec![("linerate".to_string(), vec![ip("10.96.0.9")])];
        let with = |t: &str| pair_target_refusal(&list, &names, own, "t", &[ip(t)]);
        assert_eq!(with("10.244.3.3"), None);
        assert_eq!(with("10.96.0.9"), None, "an address of an allowed name");
        assert!(with("10.96.0.10").expect("refused").contains("--pair-allow"));
        assert!(with("203.0.113.5").is_some());
        for bad in ["", "a b", "10.0.0.0/99", "1.2.3"] {
            assert!(bad.parse::<PairTarget>().is_err(), "{bad:?}");
        }
        assert_eq!("Linerate.NS.svc".parse(), Ok(PairTarget::Name("linerate.ns.svc".into())));
    }
    use std::time::Duration;

    #[test]
    fn file_keys_become_limits() {
        let s = parse_config(
            "max_tests = 2\nmax_streams = 8\nmax_duration = \"5m\"\nmax_bitrate = \"1G\"\nmax_total_bitrate = \"5G\"\n\
             max_bytes = \"10G\"\nallow_protocols = [\"tcp\"]\nallow_directions = [\"send\"]\n\
             max_client_connections = 4\nmax_client_tests_per_minute = 0\nexclusive = true\n\
             queue = 3\nidle_timeout = 2.5\nmin_interval = 0.5\nmax_tests_per_address = 1\n\
             min_rate = \"1M\"\nmax_block = \"256K\"\nmax_test_memory = \"32M\"\n",
            "s.toml",
        )
        .expect("valid");
        let l = s.limits().expect("limits");
        assert_eq!((l.max_tests, l.max_streams), (2, 8));
        assert_eq!(l.max_duration, Duration::from_secs(300));
        assert_eq!(l.max_bitrate, Some(1_000_000_000));
        assert_eq!(l.max_total_bitrate, Some(5_000_000_000));
        assert_eq!(l.max_bytes, Some(10 << 30), "G is 1024-based, as -n");
        assert!(l.allow_tcp && !l.allow_udp && l.allow_upload && !l.allow_download);
        assert_eq!((l.max_client_connections, l.max_client_tests_per_minute), (4, 0));
        assert!(l.exclusive && l.queue == 3);
        assert_eq!(l.idle_timeout, Duration::from_millis(2500));
        assert_eq!(l.min_interval, Duration::from_millis(500));
        assert_eq!((l.max_tests_per_address, l.min_rate), (Some(1), 1_000_000));
        assert_eq!((l.max_block, l.max_test_memory), (256 << 10, 32 << 20));
        let e = parse_config("max_block = \"128M\"\n", "s.toml").expect_err("over 64 MiB");
        assert!(e.message.contains("max_block (--max-block) must be"), "{e}");
        let e = parse_config("min_interval = 0.001\n", "s.toml").expect_err("under the floor");
        assert!(e.message.contains("at least 0.01 s"), "{e}");
    }

    #[test]
    fn errors_point_at_line_and_column_with_a_hint() {
        let e = parse_config("max_tests = 2\nmax_stream = 8\n", "s.toml").expect_err("typo");
        assert_eq!((e.line, e.column), (2, 1), "{e}");
        assert!(e.message.contains("did you mean \"max_streams\""), "{e}");
        let e = parse_config("max_bitrate = \"fast\"\n", "s.toml").expect_err("bad rate");
        assert_eq!(e.line, 1, "{e}");
        assert!(e.to_string().starts_with("s.toml:1:"), "{e}");
        let e = parse_config("max_tests = 0\n", "s.toml").expect_err("zero");
        assert!(e.message.contains("at least 1"), "{e}");
    }

    #[test]
    fn networks_parse_and_contain() {
        let n: IpNet = "127.0.0.0/8".parse().expect("net");
        assert!(n.contains("127.9.9.9".parse().expect("ip")));
        assert!(n.contains("::ffff:127.0.0.1".parse().expect("mapped")));
        assert!(!n.contains("10.0.0.1".parse().expect("ip")));
        let one: IpNet = "::1".parse().expect("host");
        assert!(
            one.contains("::1".parse().expect("ip")) && !one.contains("::2".parse().expect("ip"))
        );
        let all: IpNet = "0.0.0.0/0".parse().expect("all");
        assert!(all.contains("8.8.8.8".parse().expect("ip")));
        assert!("10.0.0.0/33".parse::<IpNet>().unwrap_err().contains("0..=32"));
        assert!("example.com".parse::<IpNet>().unwrap_err().contains("ADDRESS/PREFIX"));
        let s =
            parse_config("allow = [\"10.0.0.0/8\", \"nonsense\"]\n", "s.toml").expect_err("bad");
        assert_eq!(s.line, 1, "{s}");
        let a = Access { psk: None, allow: vec![n] };
        assert!(
            a.allows("127.0.0.1".parse().expect("ip"))
                && !a.allows("10.1.1.1".parse().expect("ip"))
        );
        assert!(Access::default().allows("10.1.1.1".parse().expect("ip")));
    }

    #[test]
    fn flags_win_over_the_file() {
        let file =
            ServerSettings { max_streams: Some(8), max_tests: Some(2), ..Default::default() };
        let flags = ServerSettings { max_streams: Some(4), ..Default::default() };
        let l = flags.or(file).limits().expect("limits");
        assert_eq!((l.max_streams, l.max_tests), (4, 2));
    }
}
