//! Typed plans: what the user asked for, parsed once by `cli/` and read by everything else.
//!
//! Nothing outside `cli/` sees raw flags; nothing here imports clap. Later, matrices and
//! campaigns (many tests) will live here too.

use std::net::IpAddr;
use std::time::Duration;

use linerate_proto::TestSpec;

pub mod search;

/// Default TCP port, the same as iperf3's so firewalls and habits carry over.
pub const DEFAULT_PORT: u16 = 5201;

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

/// How results are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Live lines and a human summary.
    Text,
    /// One JSON document at the end (`-J`), documented in docs/JSON.md.
    Json,
    /// One JSON document shaped like `iperf3 -J` (`-J --json-format iperf3`).
    Iperf3Json,
}

/// Run one test against a server.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientPlan {
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
    /// Limit for each TCP connect.
    pub connect_timeout: Duration,
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
    /// `--find-max`: run a rate search instead of one test.
    pub find_max: Option<search::SearchPlan>,
}

/// Serve tests.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerPlan {
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
}

/// Print generated documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generated {
    /// The man page (roff).
    Man,
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
    /// Generated docs.
    Generate(Generated),
}
