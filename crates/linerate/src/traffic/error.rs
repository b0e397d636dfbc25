//! Why a stream's loop ended early, typed: what the sessions decide on (the controller
//! aborted the test, the peer closed the connection under the stream, or another failure
//! with what the loop was doing), with the words users see kept in one `Display`.
//!
//! The loops used to return their reasons as text, and the iperf3 sessions forgave an end
//! of test by looking for `"reset"` in it; a reworded message would have silently turned a
//! forgiven reset into a failed test. The decisions now match on the variant, and the text is
//! made only where the stream's result is written.

use std::fmt;
use std::io::{self, ErrorKind};

/// Why a stream's loop stopped before its end. Displayed as the stream's error in results
/// (`streams[].error`, docs/JSON.md): the words are those the loops always wrote.
#[derive(Debug)]
pub enum LoopError {
    /// The controller aborted the test ([`crate::traffic::TrafficControl::abort`]): the loop
    /// stopped at once, wherever it was. Displayed `aborted`.
    Aborted,
    /// The peer reset or closed the connection while the loop used it (`ECONNRESET`,
    /// `EPIPE`, `ECONNABORTED`): what the loop was doing and the system's answer. An end of
    /// test can look like this (iperf3 closes its data connections with a reset).
    PeerClosed {
        /// What the loop was doing, e.g. `receive failed`.
        doing: &'static str,
        /// The system's answer.
        error: io::Error,
    },
    /// Any other system call that failed: what the loop was doing and the system's answer.
    Io {
        /// What the loop was doing, e.g. `send failed`.
        doing: &'static str,
        /// The system's answer.
        error: io::Error,
    },
    /// A failure without a system error, in words: the peer broke the stream's rules (more
    /// responses than requests, a write that took nothing) or a limit was reached.
    Failed(String),
}

impl LoopError {
    /// A failed system call while `doing`: [`LoopError::PeerClosed`] when the answer says the
    /// peer reset or closed the connection, else [`LoopError::Io`].
    pub fn io(doing: &'static str, error: io::Error) -> Self {
        match error.kind() {
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::ConnectionAborted => {
                Self::PeerClosed { doing, error }
            }
            _ => Self::Io { doing, error },
        }
    }

    /// A [`LoopError::io`] maker for `map_err`.
    pub fn doing(doing: &'static str) -> impl Fn(io::Error) -> Self {
        move |e| Self::io(doing, e)
    }
}

impl fmt::Display for LoopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Aborted => f.write_str("aborted"),
            Self::PeerClosed { doing, error } | Self::Io { doing, error } => {
                write!(f, "{doing}: {error}")
            }
            Self::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for LoopError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::PeerClosed { error, .. } | Self::Io { error, .. } => Some(error),
            Self::Aborted | Self::Failed(_) => None,
        }
    }
}

impl Clone for LoopError {
    /// `io::Error` is not `Clone`: the copy keeps its kind and, for a system error, its
    /// number, so it reads the same (a pool worker gives one failure to all its streams).
    fn clone(&self) -> Self {
        let copy = |e: &io::Error| match e.raw_os_error() {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::new(e.kind(), e.to_string()),
        };
        match self {
            Self::Aborted => Self::Aborted,
            Self::PeerClosed { doing, error } => Self::PeerClosed { doing, error: copy(error) },
            Self::Io { doing, error } => Self::Io { doing, error: copy(error) },
            Self::Failed(why) => Self::Failed(why.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(n: i32) -> io::Error {
        io::Error::from_raw_os_error(n)
    }

    #[test]
    fn the_peer_closing_is_told_from_other_errors() {
        for n in [libc::ECONNRESET, libc::EPIPE, libc::ECONNABORTED] {
            let e = LoopError::io("receive failed", os(n));
            assert!(matches!(e, LoopError::PeerClosed { .. }), "{n}: {e:?}");
        }
        for n in [libc::ETIMEDOUT, libc::EHOSTUNREACH, libc::ENOBUFS, libc::EBADF] {
            let e = LoopError::io("receive failed", os(n));
            assert!(matches!(e, LoopError::Io { .. }), "{n}: {e:?}");
        }
    }

    #[test]
    fn the_words_are_the_ones_the_loops_always_wrote() {
        assert_eq!(LoopError::Aborted.to_string(), "aborted");
        let reset = LoopError::io("receive failed", os(libc::ECONNRESET));
        assert_eq!(reset.to_string(), format!("receive failed: {}", os(libc::ECONNRESET)));
        assert!(reset.to_string().starts_with("receive failed: Connection reset by peer"));
        let io = LoopError::io("send failed", os(libc::ENOBUFS));
        assert_eq!(io.to_string(), format!("send failed: {}", os(libc::ENOBUFS)));
        let failed = LoopError::Failed("the peer stopped accepting data (write returned 0)".into());
        assert_eq!(failed.to_string(), "the peer stopped accepting data (write returned 0)");
    }

    #[test]
    fn a_copy_reads_and_decides_the_same() {
        let custom = io::Error::other("epoll went away");
        for e in [
            LoopError::Aborted,
            LoopError::io("receive failed", os(libc::ECONNRESET)),
            LoopError::io("waiting for socket readiness failed", os(libc::EINTR)),
            LoopError::io("cannot watch the socket", custom),
            LoopError::Failed("why".into()),
        ] {
            let c = e.clone();
            assert_eq!(c.to_string(), e.to_string());
            assert_eq!(std::mem::discriminant(&c), std::mem::discriminant(&e));
        }
    }
}
