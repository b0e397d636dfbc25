//! The control messages: one JSON object per frame, tagged by `"type"`.
//!
//! Unknown fields are ignored (so newer peers can add fields); unknown `type`s are protocol
//! violations. Capabilities are strings so that a newer peer's unknown capability is simply
//! not in the intersection rather than a decode error.

use serde::{Deserialize, Serialize};

use crate::environment::Environment;
use crate::results::SideResults;
use crate::spec::TestSpec;

/// A feature a peer supports. Negotiated as the intersection of both hellos.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// TCP data streams.
    Tcp,
    /// The server sends (`-R`).
    Reverse,
    /// Both directions at once (`--bidir`).
    Bidir,
    /// Per-stream pacing (`-b`).
    Pacing,
    /// Zero-copy sending (`-Z`).
    Zerocopy,
    /// UDP data streams (`-u`).
    Udp,
    /// Answers `environment_request` (`linerate doctor`).
    Environment,
    /// Echoes path-MTU probes (`echo_request`, `linerate doctor HOST`).
    Echo,
    /// The client understands `queued` (it waits in an exclusive server's queue).
    Queue,
    /// Held starts: `ready` / `go` between the attached streams and `start` (fleets).
    HeldStart,
    /// UDP datagrams carry the test's secret (`udp::DatagramFormat::native`). Required by
    /// every UDP test: a peer without it sends and expects the older 16-byte header.
    UdpSecret,
    /// Request/response tests (`--rr`, `spec.rr`): the server answers requests on each
    /// stream instead of receiving a bulk flow.
    Latency,
    /// Connect/request/response/close tests (`--crr`, `spec.rr.connect_each`): each
    /// transaction comes on a connection of its own, its hello's stream id carrying
    /// `TRANSACTION_FLAG`.
    Crr,
    /// The IP type-of-service byte on data sockets (`-S/--tos`, `--dscp`, `spec.tos`).
    Tos,
    /// Fair-queue pacing caps on data sockets (`--fq-rate`, `spec.fq_rate_bps`).
    FqRate,
    /// UDP datagrams with the don't-fragment bit (`--dont-fragment`, `spec.dont_fragment`).
    DontFragment,
    /// Burst mode: paced senders send `spec.burst` blocks back to back (`-b RATE/BURST`).
    Burst,
    /// A TCP sender's unsent-queue limit chosen by the client (`--notsent-lowat`,
    /// `spec.notsent_lowat`). Without the field every sender uses its own default.
    NotsentLowat,
    /// Pairs each TCP stream's two ends on one CPU (`spec.pair_cpus`, loopback tests). A
    /// hint: the client leaves the field out for a server without it.
    PairCpus,
    /// The server is an agent (`linerate server --agent`, always with a key): an
    /// authenticated client may ask it to run a test against another agent
    /// (`pair_test_request`, `linerate mesh`). Advertised only by agents, never by a plain
    /// server or a client.
    Agent,
}

impl Capability {
    /// Every capability this crate knows, in a stable order.
    pub const ALL: [Capability; 20] = [
        Self::Tcp,
        Self::Reverse,
        Self::Bidir,
        Self::Pacing,
        Self::Zerocopy,
        Self::Udp,
        Self::Environment,
        Self::Echo,
        Self::Queue,
        Self::HeldStart,
        Self::UdpSecret,
        Self::Latency,
        Self::Crr,
        Self::Tos,
        Self::FqRate,
        Self::DontFragment,
        Self::Burst,
        Self::NotsentLowat,
        Self::PairCpus,
        Self::Agent,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Reverse => "reverse",
            Self::Bidir => "bidir",
            Self::Pacing => "pacing",
            Self::Zerocopy => "zerocopy",
            Self::Udp => "udp",
            Self::Environment => "environment",
            Self::Echo => "echo",
            Self::Queue => "queue",
            Self::HeldStart => "held_start",
            Self::UdpSecret => "udp_secret",
            Self::Latency => "latency",
            Self::Crr => "crr",
            Self::Tos => "tos",
            Self::FqRate => "fq_rate",
            Self::DontFragment => "dont_fragment",
            Self::Burst => "burst",
            Self::NotsentLowat => "notsent_lowat",
            Self::PairCpus => "pair_cpus",
            Self::Agent => "agent",
        }
    }

    /// Parses a wire name; None for names this version does not know.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// The longest `target` of a `pair_test_request`: a DNS name's 253 bytes and a port.
pub const MAX_PAIR_TARGET: usize = 260;

/// Why the client tells the server's senders to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The requested duration has elapsed on the client's clock.
    TimeElapsed,
    /// The user interrupted the client (Ctrl-C); results so far are still exchanged.
    Interrupted,
}

/// Why a peer aborts a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortReason {
    /// The server process is shutting down (SIGINT/SIGTERM).
    ServerShutdown,
    /// The user interrupted the client.
    Interrupted,
    /// A data connection failed.
    StreamFailed,
    /// A deadline passed.
    Timeout,
    /// The peer broke the protocol.
    ProtocolError,
    /// Anything else; see the message.
    #[serde(other)]
    Other,
}

/// One control message. Encoded by serde; decoded by `wire::decode` (not by serde's derive for
/// tagged enums, which would buffer a whole frame into an untyped tree first).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// First frame in each direction: who we are and what we can do.
    Hello {
        /// Name and version of the implementation, e.g. `linerate 0.1.0`.
        software: String,
        /// Capability names.
        capabilities: Vec<String>,
        /// Server only: 64 hex digits of a fresh nonce when the server requires a pre-shared
        /// key; the client must answer with `auth` before its request (see [`crate::auth`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth_nonce: Option<String>,
    },
    /// Client to server, when the server's hello carried `auth_nonce`: the answer.
    Auth {
        /// 64 hex digits of the client's fresh nonce.
        client_nonce: String,
        /// 64 hex digits of HMAC-SHA256(key, label, server nonce, client nonce).
        tag: String,
    },
    /// Client to server: run this test.
    TestRequest {
        /// The test.
        spec: TestSpec,
    },
    /// Server to client: accepted; connect the data streams presenting this cookie.
    TestAccepted {
        /// 32 hex digits.
        cookie: String,
    },
    /// Server to client: not accepted; the connection closes after this.
    Refused {
        /// A sentence the client prints.
        reason: String,
    },
    /// Server to client, between the request and `test_accepted`: the server runs one test at
    /// a time and this one waits. Repeated at least every [`crate::server::QUEUE_HEARTBEAT`]
    /// while it waits, so the client's deadline is reset by each.
    Queued {
        /// 1 = next to run.
        position: u32,
        /// The server's estimate of the wait, if it can tell (byte-bound tests ahead: no).
        wait_ms: Option<u64>,
    },
    /// Server to client, for a held start only: every data stream is associated; the server
    /// waits for `go`.
    Ready,
    /// Client to server, after `ready`: start now (the server answers `start`).
    Go,
    /// Server to client: every data stream is associated; start sending and timing now.
    Start,
    /// Client to server: stop the server's senders.
    Stop {
        /// Why.
        reason: StopReason,
    },
    /// Either way: this side's final results. Sent once, when all local streams are done.
    Results {
        /// The sender's figures.
        results: SideResults,
    },
    /// Client to server, instead of `test_request`: send your environment (`linerate doctor`).
    EnvironmentRequest,
    /// Server to client: the answer to `environment_request`.
    Environment {
        /// The server's environment, every interface that is up included.
        environment: Box<Environment>,
    },
    /// Client to server, after `environment`: echo path-MTU probes sent from this UDP port of
    /// the control connection's address.
    EchoRequest {
        /// The client's UDP source port for the probes.
        client_port: u16,
    },
    /// Server to client: probes go to this UDP port and carry this cookie; echoes go only to
    /// the control connection's address and the `client_port` asked for.
    EchoReady {
        /// The server's UDP port for probes.
        port: u16,
        /// 32 hex digits, carried by every probe and echo.
        cookie: String,
    },
    /// Client to an agent, after `auth`, instead of `test_request`: run `spec` yourself, as
    /// a client, against the agent at `target` (`host:port`), and send me its record. The
    /// agent answers `queued` (position 0) at least every [`crate::server::QUEUE_HEARTBEAT`]
    /// while the test runs, then `pair_result` or `refused`.
    PairTestRequest {
        /// The agent to test, `host:port` (at most [`MAX_PAIR_TARGET`] bytes).
        target: String,
        /// The test to run against it.
        spec: TestSpec,
    },
    /// Agent to client: the pair test's record (the agent's run record as JSON: its figures,
    /// both ends' results and environments, or why it failed). The connection ends after it.
    PairResult {
        /// The record, as the agent's linerate wrote it.
        record: serde_json::Value,
    },
    /// Either way: the test is over without a normal end.
    Abort {
        /// Machine-readable reason.
        reason: AbortReason,
        /// A sentence the other side prints.
        message: String,
    },
}

impl Message {
    /// The wire `type` name, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Hello { .. } => "hello",
            Self::Auth { .. } => "auth",
            Self::TestRequest { .. } => "test_request",
            Self::TestAccepted { .. } => "test_accepted",
            Self::Refused { .. } => "refused",
            Self::Queued { .. } => "queued",
            Self::Ready => "ready",
            Self::Go => "go",
            Self::Start => "start",
            Self::Stop { .. } => "stop",
            Self::Results { .. } => "results",
            Self::Abort { .. } => "abort",
            Self::EnvironmentRequest => "environment_request",
            Self::Environment { .. } => "environment",
            Self::EchoRequest { .. } => "echo_request",
            Self::EchoReady { .. } => "echo_ready",
            Self::PairTestRequest { .. } => "pair_test_request",
            Self::PairResult { .. } => "pair_result",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_names_round_trip() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.as_str()), Some(c));
        }
        assert_eq!(Capability::parse("teleport"), None);
    }

    #[test]
    fn unknown_abort_reason_decodes_as_other() {
        let body = br#"{"type":"abort","reason":"solar_flare","message":"x"}"#;
        let m = crate::wire::decode::decode(body, crate::wire::frame_bounds(1 << 16));
        assert_eq!(m, Ok(Message::Abort { reason: AbortReason::Other, message: "x".into() }));
    }

    #[test]
    fn golden_stop_json() {
        let s = serde_json::to_string(&Message::Stop { reason: StopReason::TimeElapsed })
            .expect("serializes");
        assert_eq!(s, r#"{"type":"stop","reason":"time_elapsed"}"#);
    }
}
