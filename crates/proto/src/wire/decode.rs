//! Frame bodies decoded straight into [`Message`]s, within [`Bounds`].
//!
//! serde's derive for an internally tagged enum (`{"type": "results", ...}`) first buffers
//! the whole object into an untyped tree to find the tag, which costs many times the frame's
//! size for hostile input. Here a first pass reads only `type` (skipping everything else
//! without allocating); a second deserializes that message's fields directly into their types
//! with [`crate::bounded`]. Both passes are linear in the frame.
//!
//! Unknown fields are ignored and unknown types refused, as the protocol says.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::bounded::{self, Bounds, DecodeError};
use crate::environment::Environment;
use crate::error::ProtoError;
use crate::results::SideResults;
use crate::spec::TestSpec;
use crate::wire::{AbortReason, Message, StopReason};

#[derive(Deserialize)]
struct Tag {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct Hello {
    software: String,
    capabilities: Vec<String>,
    #[serde(default)]
    auth_nonce: Option<String>,
}

#[derive(Deserialize)]
struct Auth {
    client_nonce: String,
    tag: String,
}

#[derive(Deserialize)]
struct Request {
    spec: TestSpec,
}

#[derive(Deserialize)]
struct Accepted {
    cookie: String,
}

#[derive(Deserialize)]
struct Reason<R> {
    reason: R,
}

#[derive(Deserialize)]
struct Queued {
    position: u32,
    wait_ms: Option<u64>,
}

#[derive(Deserialize)]
struct Results {
    results: SideResults,
}

#[derive(Deserialize)]
struct Env {
    environment: Box<Environment>,
}

#[derive(Deserialize)]
struct EchoRequest {
    client_port: u16,
}

#[derive(Deserialize)]
struct EchoReady {
    port: u16,
    cookie: String,
}

#[derive(Deserialize)]
struct PairRequest {
    target: String,
    spec: TestSpec,
}

#[derive(Deserialize)]
struct PairResult {
    record: serde_json::Value,
}

#[derive(Deserialize)]
struct Abort {
    reason: AbortReason,
    message: String,
}

/// Decodes one frame body.
pub(crate) fn decode(body: &[u8], bounds: Bounds) -> Result<Message, ProtoError> {
    let kind = match bounded::from_slice::<Tag>(body, bounds) {
        Ok(t) => t.kind,
        Err(DecodeError::Syntax(e)) => {
            return Err(ProtoError::Garbage(format!("frame is not JSON ({e})")));
        }
        Err(_) if !body.trim_ascii_start().starts_with(b"{") => {
            return Err(ProtoError::Garbage("frame is JSON but not an object".into()));
        }
        Err(e) => return Err(ProtoError::Violation(format!("frame without a message type ({e})"))),
    };
    let msg = match kind.as_str() {
        "hello" => {
            let b: Hello = fields(body, bounds, &kind)?;
            Message::Hello {
                software: b.software,
                capabilities: b.capabilities,
                auth_nonce: b.auth_nonce,
            }
        }
        "auth" => {
            let b: Auth = fields(body, bounds, &kind)?;
            Message::Auth { client_nonce: b.client_nonce, tag: b.tag }
        }
        "test_request" => {
            Message::TestRequest { spec: fields::<Request>(body, bounds, &kind)?.spec }
        }
        "test_accepted" => {
            Message::TestAccepted { cookie: fields::<Accepted>(body, bounds, &kind)?.cookie }
        }
        "refused" => {
            Message::Refused { reason: fields::<Reason<String>>(body, bounds, &kind)?.reason }
        }
        "queued" => {
            let b: Queued = fields(body, bounds, &kind)?;
            Message::Queued { position: b.position, wait_ms: b.wait_ms }
        }
        "ready" => Message::Ready,
        "go" => Message::Go,
        "start" => Message::Start,
        "stop" => {
            Message::Stop { reason: fields::<Reason<StopReason>>(body, bounds, &kind)?.reason }
        }
        "results" => Message::Results { results: fields::<Results>(body, bounds, &kind)?.results },
        "environment_request" => Message::EnvironmentRequest,
        "environment" => {
            Message::Environment { environment: fields::<Env>(body, bounds, &kind)?.environment }
        }
        "echo_request" => Message::EchoRequest {
            client_port: fields::<EchoRequest>(body, bounds, &kind)?.client_port,
        },
        "echo_ready" => {
            let b: EchoReady = fields(body, bounds, &kind)?;
            Message::EchoReady { port: b.port, cookie: b.cookie }
        }
        "pair_test_request" => {
            let b: PairRequest = fields(body, bounds, &kind)?;
            Message::PairTestRequest { target: b.target, spec: b.spec }
        }
        "pair_result" => {
            Message::PairResult { record: fields::<PairResult>(body, bounds, &kind)?.record }
        }
        "abort" => {
            let b: Abort = fields(body, bounds, &kind)?;
            Message::Abort { reason: b.reason, message: b.message }
        }
        other => {
            let shown: String = other.chars().take(40).collect();
            return Err(ProtoError::Violation(format!("unknown message type {shown:?}")));
        }
    };
    Ok(msg)
}

/// The second pass: the fields of a message of type `kind`.
fn fields<T: DeserializeOwned>(body: &[u8], bounds: Bounds, kind: &str) -> Result<T, ProtoError> {
    bounded::from_slice(body, bounds).map_err(|e| match e {
        DecodeError::Limit(e) => ProtoError::Violation(format!("\"{kind}\" message refused: {e}")),
        e => ProtoError::Violation(format!("malformed \"{kind}\" message: {e}")),
    })
}
