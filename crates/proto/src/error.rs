//! Protocol errors, classified by whose fault they are.
//!
//! Every error a peer can cause maps to a variant that names the blame, so the application can
//! print "the server refused", "the peer sent garbage" or "we timed out" rather than a bare
//! I/O error. Nothing here panics on peer input; nothing here prints.

use std::time::Duration;

use crate::spec::SpecError;

/// Whose fault an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The peer sent bytes or messages that break the protocol.
    Peer,
    /// The peer is a valid linerate endpoint but cannot do what was asked (version, capability,
    /// policy).
    Incompatible,
    /// Nobody broke a rule: a deadline passed, or the peer went away.
    Network,
    /// Our own side asked for something invalid.
    Local,
}

/// An error raised by the protocol state machines or codecs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtoError {
    /// The peer's bytes are not linerate protocol at all (wrong magic, bad length, not JSON).
    #[error("peer sent bytes that are not the linerate protocol: {0}")]
    Garbage(String),
    /// The peer sent well-formed messages in an order or with content the protocol forbids.
    #[error("peer broke the linerate protocol: {0}")]
    Violation(String),
    /// The peer speaks linerate but an incompatible version or lacks a needed capability.
    #[error("incompatible peer: {0}")]
    Incompatible(String),
    /// The server declined the test (policy, limits, bad parameters).
    #[error("the server refused the test: {0}")]
    Refused(String),
    /// A protocol deadline passed.
    #[error("timed out after {waited:?} {what}")]
    TimedOut {
        /// What we were waiting for, phrased to follow "timed out after N s".
        what: String,
        /// How long we waited.
        waited: Duration,
    },
    /// The peer aborted the test and told us why.
    #[error("the peer aborted the test: {message}")]
    Aborted {
        /// The machine-readable reason.
        reason: crate::wire::AbortReason,
        /// The peer's explanation.
        message: String,
    },
    /// The peer closed the control connection before the test finished.
    #[error("the peer closed the control connection {0}")]
    Closed(String),
    /// The test specification is invalid.
    #[error("invalid test: {0}")]
    Spec(#[from] SpecError),
    /// Waiting in an exclusive server's queue would take (or took) longer than this client
    /// waits: its limit passed, or the server's own estimate already exceeds what is left.
    #[error("{}", queue_words(*.position, *.waited, *.estimate, *.limit))]
    QueueLimit {
        /// The test's place in the queue when the client gave up (1 = next).
        position: u32,
        /// How long the client had waited in the queue.
        waited: Duration,
        /// The server's estimate of the wait still ahead, when that is why the client gave up.
        estimate: Option<Duration>,
        /// The longest the client waits in a queue.
        limit: Duration,
    },
}

/// The sentence of [`ProtoError::QueueLimit`].
fn queue_words(
    position: u32,
    waited: Duration,
    estimate: Option<Duration>,
    limit: Duration,
) -> String {
    let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    match estimate {
        Some(e) => format!(
            "the server's queue is too long: position {position}, its estimated wait {} (after {} \
             waited) exceeds the {} this client waits in a queue",
            secs(e),
            secs(waited),
            secs(limit)
        ),
        None => format!(
            "waited {} in the server's queue (still at position {position}), the longest this \
             client waits in a queue",
            secs(waited)
        ),
    }
}

impl ProtoError {
    /// Whose fault this error is.
    pub fn blame(&self) -> Blame {
        match self {
            Self::Garbage(_) | Self::Violation(_) => Blame::Peer,
            Self::Incompatible(_) | Self::Refused(_) => Blame::Incompatible,
            Self::TimedOut { .. }
            | Self::Closed(_)
            | Self::Aborted { .. }
            | Self::QueueLimit { .. } => Blame::Network,
            Self::Spec(_) => Blame::Local,
        }
    }
}
