//! The run record: everything one test produced, as raw figures, in a versioned form that is
//! written as JSON (and later stored in the history database).
//!
//! Summaries are derived from a record by `stats::summarize`; they are never stored in it, so
//! the record stays the single source of truth. Bump [`SCHEMA_VERSION`] on any incompatible
//! change and document it in docs/JSON.md.

use serde::{Deserialize, Serialize};

use linerate_proto::{Flow, SideResults, StreamResult, StreamRole, TcpInternals, TestSpec};

/// Version of the record (and of the JSON document around it).
pub const SCHEMA_VERSION: u32 = 1;

/// How a test ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Outcome {
    /// Ran to its end and both sides exchanged results.
    Completed,
    /// Stopped early by the user; results up to that point were exchanged.
    Interrupted,
    /// Failed; whatever results exist are partial.
    Failed {
        /// One line saying what happened and what to try.
        error: String,
    },
}

/// The link the user says the path has (`--link-speed`, `--mtu`), for the theoretical maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkAssumption {
    /// Link rate, bits per second.
    pub bits_per_second: u64,
    /// IP MTU, bytes.
    pub mtu_bytes: u32,
}

/// One test, as seen from the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Our software string.
    pub software: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// The server as the user named it, `host:port`.
    pub server: String,
    /// Local and remote control-connection addresses, once connected.
    pub local_address: Option<String>,
    /// The server's control address.
    pub remote_address: Option<String>,
    /// The server's software string, once known.
    pub server_software: Option<String>,
    /// The test that was requested.
    pub spec: TestSpec,
    /// The client's own stream figures (partial if the test failed).
    pub client: Option<SideResults>,
    /// The server's figures, as it reported them.
    pub server_results: Option<SideResults>,
    /// How it ended.
    pub outcome: Outcome,
    /// Things the user should know that did not stop the test.
    pub warnings: Vec<String>,
    /// The link the user said the path has, if any.
    #[serde(default)]
    pub link: Option<LinkAssumption>,
    /// What an iperf3 server printed for the test (`--get-server-output`), as text or as its
    /// `-J` document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output: Option<serde_json::Value>,
}

impl RunRecord {
    /// A completed record of `spec` with these two ends' results, for tests.
    #[cfg(test)]
    pub fn for_tests(spec: TestSpec, client: SideResults, server: SideResults) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            software: "t".into(),
            started_unix_ms: 0,
            server: "h:1".into(),
            local_address: None,
            remote_address: None,
            server_software: None,
            spec,
            client: Some(client),
            server_results: Some(server),
            outcome: Outcome::Completed,
            warnings: vec![],
            link: None,
            server_output: None,
        }
    }

    /// Every stream result of both ends, with the end's name (`client`, `server`).
    pub fn all_streams(&self) -> impl Iterator<Item = (&'static str, &StreamResult)> {
        [("client", self.client.as_ref()), ("server", self.server_results.as_ref())]
            .into_iter()
            .filter_map(|(end, r)| Some((end, r?)))
            .flat_map(|(end, r)| r.streams.iter().map(move |s| (end, s)))
    }

    /// The final TCP internals of one direction's sending streams, from whichever end sent.
    pub fn sender_tcp(&self, flow: Flow) -> Vec<TcpInternals> {
        self.all_streams()
            .filter(|(_, s)| s.flow == flow && s.role == StreamRole::Sender)
            .filter_map(|(_, s)| s.tcp)
            .collect()
    }
}

/// Milliseconds since the Unix epoch now (0 if the clock is before 1970).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An address as people write it (and as records store it): IPv4-mapped IPv6 (`[::ffff:10.0.0.1]:5201`, seen on a
/// dual-stack listener) becomes plain IPv4 (`10.0.0.1:5201`).
pub fn canonical(addr: std::net::SocketAddr) -> std::net::SocketAddr {
    match addr {
        std::net::SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => std::net::SocketAddr::new(v4.into(), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}
