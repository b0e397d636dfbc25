//! The server's one line per test: who asked (address, software), what (the spec), how much
//! moved each way, how long it held its slot and how it ended. Operators grep or ship these
//! (text, or JSON lines with `--log-format json`); the full per-stream figures travel beside
//! it in the same note for tools that want them.
//!
//! Built only from what the server already has; it never carries secrets (keys are not part
//! of any note, and refusals never quote a client's tag).

use linerate_proto::{Flow, SideResults, TestSpec};
use serde::Serialize;

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Both results were exchanged.
    Completed,
    /// It ended early; the note's `error` says why.
    Failed,
}

/// The summary of one served test.
#[derive(Debug, Clone, Serialize)]
pub struct TestLogLine {
    /// The client's software, as it said.
    pub software: String,
    /// What it asked for (None only if it never got that far).
    pub spec: Option<TestSpec>,
    /// How it ended.
    pub outcome: Outcome,
    /// From admission to the end.
    pub seconds: f64,
    /// Bytes the server counted on client-to-server streams.
    pub bytes_client_to_server: u64,
    /// Bytes the server counted on server-to-client streams.
    pub bytes_server_to_client: u64,
}

impl TestLogLine {
    /// The line for a test that ran `seconds`, from the server's own figures.
    pub fn new(
        software: String,
        spec: Option<TestSpec>,
        seconds: f64,
        server: Option<&SideResults>,
        failed: bool,
    ) -> Self {
        let bytes = |flow: Flow| -> u64 {
            server.iter().flat_map(|s| &s.streams).filter(|s| s.flow == flow).map(|s| s.bytes).sum()
        };
        Self {
            software,
            spec,
            outcome: if failed { Outcome::Failed } else { Outcome::Completed },
            seconds,
            bytes_client_to_server: bytes(Flow::ClientToServer),
            bytes_server_to_client: bytes(Flow::ServerToClient),
        }
    }
}
