//! Why a test (or a command) failed, typed: a [`FailureKind`] that keeps whose fault it was,
//! and a [`Failure`] error that carries the kind with its one-line message through `anyhow` to
//! the edge, where the run record stores the kind and `main` turns it into the exit status.
//!
//! Errors are tagged where they arise (`Failure::new(kind, ..)`, or a [`ProtoError`] or an
//! I/O error whose kind says enough); [`FailureKind::of`] reads the tag back from an error
//! chain. Nothing here prints or decides an exit status.

use std::fmt;

use linerate_proto::ProtoError;
use linerate_proto::wire::AbortReason;
use serde::{Deserialize, Serialize};

/// Whose fault a failure was, and so what the user can do about it. Stored in the record as
/// `outcome.kind` (docs/JSON.md); the names are a public interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The peer sent bytes that are not the protocol (another program on the port).
    Garbage,
    /// The peer sent well-formed messages the protocol forbids, or aborted saying we did.
    Violation,
    /// The peer speaks the protocol but cannot do what was asked (version, capability).
    Incompatible,
    /// The server declined the test: its limits, its allow-list, its key, or busy.
    Refused,
    /// A deadline passed: no answer, or no data moved.
    TimedOut,
    /// The connection failed or the peer ended the test: connection refused or reset, no
    /// route, name not resolved, the peer closed the connection or aborted.
    Network,
    /// Our own side: the local OS, its resources or configuration (sockets, files, the
    /// history database), or a failure linerate cannot attribute to anyone else.
    Environment,
    /// The user's input: flags, a plan or campaign file, a run or group id that does not
    /// exist, a report file that cannot be read.
    Usage,
    /// Stopped by SIGINT or SIGTERM before the results could be exchanged.
    Interrupted,
}

impl FailureKind {
    /// The kind an error chain carries: the outermost [`Failure`], [`ProtoError`] or I/O
    /// error decides; an error with none of them is our own ([`FailureKind::Environment`]).
    pub fn of(e: &anyhow::Error) -> Self {
        // A `Failure` given as a context is found by anyhow's downcast, not by the chain.
        if let Some(f) = e.downcast_ref::<Failure>() {
            return f.kind;
        }
        e.chain()
            .find_map(|cause| {
                if let Some(f) = cause.downcast_ref::<Failure>() {
                    Some(f.kind)
                } else if let Some(p) = cause.downcast_ref::<ProtoError>() {
                    Some(Self::from(p))
                } else {
                    cause.downcast_ref::<std::io::Error>().map(|io| Self::from(io.kind()))
                }
            })
            .unwrap_or(Self::Environment)
    }

    /// The kind's name as stored (`timed_out`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Garbage => "garbage",
            Self::Violation => "violation",
            Self::Incompatible => "incompatible",
            Self::Refused => "refused",
            Self::TimedOut => "timed_out",
            Self::Network => "network",
            Self::Environment => "environment",
            Self::Usage => "usage",
            Self::Interrupted => "interrupted",
        }
    }

    /// The reason to give the peer when a failure of this kind ends a test early.
    pub fn abort_reason(self) -> AbortReason {
        match self {
            Self::TimedOut => AbortReason::Timeout,
            Self::Garbage | Self::Violation => AbortReason::ProtocolError,
            Self::Interrupted => AbortReason::Interrupted,
            _ => AbortReason::Other,
        }
    }
}

impl From<&ProtoError> for FailureKind {
    fn from(e: &ProtoError) -> Self {
        match e {
            ProtoError::Garbage(_) => Self::Garbage,
            ProtoError::Violation(_) => Self::Violation,
            ProtoError::Incompatible(_) => Self::Incompatible,
            ProtoError::Refused(_) => Self::Refused,
            ProtoError::TimedOut { .. } | ProtoError::QueueLimit { .. } => Self::TimedOut,
            ProtoError::Aborted { reason, .. } => match reason {
                AbortReason::Timeout => Self::TimedOut,
                AbortReason::ProtocolError => Self::Violation,
                AbortReason::ServerShutdown
                | AbortReason::Interrupted
                | AbortReason::StreamFailed
                | AbortReason::Other => Self::Network,
            },
            ProtoError::Closed(_) => Self::Network,
            ProtoError::Spec(_) => Self::Usage,
        }
    }
}

impl From<std::io::ErrorKind> for FailureKind {
    fn from(kind: std::io::ErrorKind) -> Self {
        use std::io::ErrorKind as K;
        match kind {
            K::TimedOut | K::WouldBlock => Self::TimedOut,
            K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::BrokenPipe
            | K::UnexpectedEof
            | K::HostUnreachable
            | K::NetworkUnreachable
            | K::NetworkDown => Self::Network,
            _ => Self::Environment,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failure with its kind and the one line the user reads (what happened and what to try).
/// Its `Display` is the message alone, so tagging an error does not change its wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Whose fault it was.
    pub kind: FailureKind,
    /// What happened and what to try.
    pub message: String,
}

impl Failure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// The user's input is wrong (exit status 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Usage, message)
    }

    /// What an error amounts to: its kind ([`FailureKind::of`]) and its whole chain as one
    /// line (`outer: inner`).
    pub fn of(e: &anyhow::Error) -> Self {
        Self::new(FailureKind::of(e), format!("{e:#}"))
    }

    /// The same error, marked as the user's: its chain flattened into the message.
    pub fn usage_of(e: &anyhow::Error) -> Self {
        Self::usage(format!("{e:#}"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use anyhow::Context;

    use super::*;

    #[test]
    fn every_proto_error_has_the_kind_of_its_blame() {
        let cases = [
            (ProtoError::Garbage("x".into()), FailureKind::Garbage),
            (ProtoError::Violation("x".into()), FailureKind::Violation),
            (ProtoError::Incompatible("x".into()), FailureKind::Incompatible),
            (ProtoError::Refused("x".into()), FailureKind::Refused),
            (
                ProtoError::TimedOut { what: "x".into(), waited: Duration::from_secs(1) },
                FailureKind::TimedOut,
            ),
            (ProtoError::Closed("x".into()), FailureKind::Network),
            (
                ProtoError::Aborted { reason: AbortReason::ServerShutdown, message: "x".into() },
                FailureKind::Network,
            ),
            (
                ProtoError::Aborted { reason: AbortReason::Timeout, message: "x".into() },
                FailureKind::TimedOut,
            ),
            (
                ProtoError::Aborted { reason: AbortReason::ProtocolError, message: "x".into() },
                FailureKind::Violation,
            ),
            (
                ProtoError::Spec(linerate_proto::SpecError::OutOfRange {
                    field: "-P",
                    value: "0".into(),
                    allowed: "1..".into(),
                }),
                FailureKind::Usage,
            ),
        ];
        for (err, kind) in cases {
            assert_eq!(FailureKind::from(&err), kind, "{err}");
            let wrapped = anyhow::Error::new(err.clone()).context("while testing");
            assert_eq!(FailureKind::of(&wrapped), kind, "through a context: {err}");
        }
    }

    #[test]
    fn the_outermost_tag_decides_and_the_message_is_kept() {
        let inner = anyhow::Error::new(ProtoError::Closed("during the test".into()));
        let tagged = inner.context(Failure::new(FailureKind::Interrupted, "interrupted"));
        assert_eq!(FailureKind::of(&tagged), FailureKind::Interrupted);
        let e: anyhow::Error = Failure::new(FailureKind::TimedOut, "no data moved").into();
        let e = e.context("data stream 2");
        let f = Failure::of(&e);
        assert_eq!(
            (f.kind, f.message.as_str()),
            (FailureKind::TimedOut, "data stream 2: no data moved")
        );
    }

    #[test]
    fn io_errors_and_untyped_errors() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = Err::<(), _>(refused).context("cannot connect").expect_err("err");
        assert_eq!(FailureKind::of(&e), FailureKind::Network);
        let e = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::AddrInUse));
        assert_eq!(FailureKind::of(&e), FailureKind::Environment);
        let e = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(FailureKind::of(&e), FailureKind::TimedOut);
        assert_eq!(FailureKind::of(&anyhow::anyhow!("no randomness")), FailureKind::Environment);
    }

    #[test]
    fn kinds_abort_with_the_matching_reason() {
        assert_eq!(FailureKind::Interrupted.abort_reason(), AbortReason::Interrupted);
        assert_eq!(FailureKind::TimedOut.abort_reason(), AbortReason::Timeout);
        assert_eq!(FailureKind::Garbage.abort_reason(), AbortReason::ProtocolError);
        assert_eq!(FailureKind::Network.abort_reason(), AbortReason::Other);
    }

    #[test]
    fn names_are_the_stored_form() {
        for kind in [FailureKind::TimedOut, FailureKind::Usage, FailureKind::Garbage] {
            assert_eq!(serde_json::to_value(kind).expect("json"), kind.name());
        }
    }
}
