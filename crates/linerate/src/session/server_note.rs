//! What a server tells its operator: [`ServerNote`]s, produced by the sessions as things
//! happen and sent to the operator's sink; only `report/` turns them into log lines.

use std::net::SocketAddr;
use std::sync::Arc;

use linerate_proto::{SideResults, TestSpec};

/// Something the server reports (the renderer turns these into log lines).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ServerNote {
    /// Listening.
    Listening {
        /// The bound address.
        addr: SocketAddr,
    },
    /// Right after `Listening`, when the server is an agent or was told where it runs: what it
    /// is and where (`--agent`, `--node-name`, `--zone`, `--network`), so that a log read
    /// alone — `kubectl logs` of one pod of many — says which agent it is.
    Serving {
        /// `--agent`.
        agent: bool,
        /// `--node-name`.
        #[serde(skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        /// `--zone`.
        #[serde(skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
        /// `--network`.
        #[serde(skip_serializing_if = "Option::is_none")]
        network: Option<String>,
    },
    /// A test was accepted.
    TestAccepted {
        /// Server-local test number.
        test: u64,
        /// The client's control address.
        peer: SocketAddr,
        /// The client's software, as it said (iperf3 clients: "iperf3 <version>").
        client: String,
        /// What it asked for.
        spec: TestSpec,
    },
    /// A test ended (normally or not).
    TestEnded {
        /// Server-local test number.
        test: u64,
        /// The client's control address.
        peer: SocketAddr,
        /// The server's own figures (absent from a brief line, `ServerNote::brief`).
        #[serde(skip_serializing_if = "Option::is_none")]
        server: Option<SideResults>,
        /// The client's figures, as it reported them (absent from a brief line).
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<SideResults>,
        /// Why it failed, if it did.
        error: Option<String>,
        /// The one-line summary: who, what, how much, how it ended.
        summary: crate::session::test_log::TestLogLine,
    },
    /// Serving metrics (`--metrics`).
    Metrics {
        /// The bound address.
        addr: SocketAddr,
    },
    /// A probe (`/probe?target=...`) ended.
    Probed {
        /// What it tested.
        target: SocketAddr,
        /// Why its test failed, if it did (the target's words possibly among them).
        error: Option<String>,
    },
    /// An agent's pair test (`linerate mesh`) ended.
    PairTested {
        /// Server-local test number.
        test: u64,
        /// The requester's control address.
        peer: SocketAddr,
        /// The agent it tested, as the requester named it.
        target: String,
        /// Why the test failed, if it did (the target's words possibly among them).
        error: Option<String>,
    },
    /// A doctor (`linerate doctor HOST`) was sent this server's environment.
    DoctorAnswered {
        /// The client's control address.
        peer: SocketAddr,
        /// The client's software, as it said.
        client: String,
    },
    /// A connection was dropped before it became part of a test.
    Rejected {
        /// Who.
        peer: SocketAddr,
        /// Why.
        reason: String,
    },
    /// More connections were dropped than the log shows (see `log_limit.rs`).
    Suppressed {
        /// How many drop lines were not written.
        count: u64,
    },
    /// Shutting down.
    ShuttingDown {
        /// Which signal.
        signal: &'static str,
        /// Tests still running.
        running: usize,
    },
}

impl ServerNote {
    /// The note as a brief JSON log line carries it (`--log-results brief`): a test's end
    /// without both ends' full results, which its summary sums up.
    pub fn brief(&self) -> std::borrow::Cow<'_, ServerNote> {
        match self {
            ServerNote::TestEnded { test, peer, error, summary, .. } => {
                std::borrow::Cow::Owned(ServerNote::TestEnded {
                    test: *test,
                    peer: *peer,
                    server: None,
                    client: None,
                    error: error.clone(),
                    summary: summary.clone(),
                })
            }
            other => std::borrow::Cow::Borrowed(other),
        }
    }
}

/// Where notes go. Called from many threads.
pub type NoteSink = Arc<dyn Fn(&ServerNote) + Send + Sync>;

/// How notes read as the server's log text (`report::text`), for an iperf3 client's
/// `--get-server-output`: sessions produce notes, only `report/` formats them.
pub type NoteText = fn(&[ServerNote]) -> String;

/// Where a server's notes go: the operator's sink, and the text renderer for clients that
/// ask for the server's output.
#[derive(Clone)]
pub struct Notes {
    /// Every note, as it happens.
    pub sink: NoteSink,
    /// Notes as log text.
    pub text: NoteText,
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notes")
    }
}
