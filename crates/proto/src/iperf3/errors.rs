//! What an iperf3 server can tell a client about a failure, and which pair to send for each
//! refusal.
//!
//! iperf3's protocol has no free-text error: SERVER_ERROR carries two integers, an iperf3
//! error number (`i_errno`, iperf_api.h) and a C `errno`. The client prints its own text for
//! the number; for the "perror" numbers (IENEWTEST, IESETTOS, IEAFFINITY, ...) every version
//! appends `strerror(errno)`, and 3.21 prints a non-zero errno after any number. So each
//! refusal sends the number whose text is true for it, and an errno that says why: iperf3's
//! own number for a limit it has too (streams ≤ 128), otherwise "unable to create a new test:
//! Operation not permitted" for a limit of this server's. linerate's log names the option and
//! the fix; the iperf3 user reads nothing false.

use crate::limits::LimitKind;

/// iperf3 error numbers a server sends back (iperf_api.h), and the C errno values sent with
/// them.
pub mod errno {
    /// Invalid duration.
    pub const DURATION: i32 = 5;
    /// Invalid number of streams.
    pub const NUM_STREAMS: i32 = 6;
    /// Invalid burst count (iperf3's maximum is 1000).
    pub const BURST: i32 = 15;
    /// Bad TOS value (must be 0..255).
    pub const BAD_TOS: i32 = 21;
    /// Invalid block size.
    pub const BLOCK_SIZE: i32 = 7;
    /// Invalid socket buffer size.
    pub const BUF_SIZE: i32 = 8;
    /// Invalid MSS.
    pub const MSS: i32 = 10;
    /// Invalid UDP datagram size.
    pub const UDP_BLOCK_SIZE: i32 = 20;
    /// Invalid omit period.
    pub const OMIT: i32 = 12;
    /// "Not implemented yet": an option this server does not support.
    pub const UNIMPLEMENTED: i32 = 13;
    /// "No SCTP support available".
    pub const NO_SCTP: i32 = 18;
    /// Reverse and bidirectional together.
    pub const REVERSE_BIDIR: i32 = 25;
    /// The server could not create the test (a perror number: the errno is printed).
    pub const NEW_TEST: i32 = 100;
    /// The parameters could not be read.
    pub const RECV_PARAMS: i32 = 114;
    /// "Unable to set IP TOS" (a perror number).
    pub const SET_TOS: i32 = 125;
    /// "Unable to set IPv6 flow label".
    pub const SET_FLOW: i32 = 127;
    /// The requested CPU affinity cannot be set (`IEAFFINITY`, a perror number).
    pub const AFFINITY: i32 = 132;
    /// The requested congestion control cannot be set.
    pub const SET_CONGESTION: i32 = 134;
    /// "Unable to set socket pacing" (a perror number).
    pub const SET_PACING: i32 = 140;
    /// No data for too long.
    pub const NO_MSG: i32 = 144;
    /// The server is terminating.
    pub const SERVER_TERM: i32 = 120;
    /// The requested rate is over the server's limit (`IETOTALRATE`).
    pub const TOTAL_RATE: i32 = 27;
    /// The test is longer than the server allows (`IEMAXSERVERTESTDURATIONEXCEEDED`, known
    /// to clients from 3.20; older ones print "int_errno=37").
    pub const MAX_DURATION: i32 = 37;

    /// C errno values that are the same on every Unix an iperf3 client runs on (the client
    /// prints its own `strerror` for the number).
    pub mod os {
        /// "Operation not permitted": a limit or policy of this server.
        pub const EPERM: i32 = 1;
        /// "Cannot allocate memory": the test is over the server's memory bound.
        pub const ENOMEM: i32 = 12;
        /// "Device or resource busy".
        pub const EBUSY: i32 = 16;
        /// "Invalid argument".
        pub const EINVAL: i32 = 22;
    }
}

/// What one SERVER_ERROR carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerError {
    /// The iperf3 error number.
    pub i_errno: i32,
    /// The C errno sent with it (0: none).
    pub errno: i32,
}

impl ServerError {
    /// A number with an errno that says why.
    pub const fn with(i_errno: i32, errno: i32) -> Self {
        Self { i_errno, errno }
    }

    /// "unable to create a new test: Operation not permitted": a limit or policy of this
    /// server that iperf3 has no number of its own for.
    pub const NOT_PERMITTED: Self = Self::with(errno::NEW_TEST, errno::os::EPERM);

    /// The eight bytes that follow the SERVER_ERROR state byte.
    pub fn wire(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.i_errno.to_be_bytes());
        b[4..].copy_from_slice(&self.errno.to_be_bytes());
        b
    }
}

impl From<i32> for ServerError {
    /// A number alone, for the numbers whose text says everything.
    fn from(i_errno: i32) -> Self {
        Self::with(i_errno, 0)
    }
}

/// The refusal for one of the server's limits; None for the refusals iperf3 signals with
/// ACCESS_DENIED ("the server is busy running a test"). `client_version` is what the client
/// said it is: numbers newer than the client would print as "int_errno=N".
pub fn for_limit(kind: LimitKind, client_version: Option<&str>) -> Option<ServerError> {
    Some(match kind {
        LimitKind::Busy | LimitKind::ClientRate => return None,
        LimitKind::Duration if version_at_least(client_version, (3, 20)) => {
            errno::MAX_DURATION.into()
        }
        LimitKind::Bitrate => errno::TOTAL_RATE.into(),
        LimitKind::Memory => ServerError::with(errno::NEW_TEST, errno::os::ENOMEM),
        // iperf3's own numbers for these print iperf3's maximum (`-P` 128, `-l` 1 MiB), not
        // this server's: the client would read a limit that is not the one it hit.
        LimitKind::Streams
        | LimitKind::Duration
        | LimitKind::Block
        | LimitKind::Bytes
        | LimitKind::Interval
        | LimitKind::MinRate
        | LimitKind::NotAllowed => ServerError::NOT_PERMITTED,
    })
}

/// True if `version` ("3.12", "3.21+", "3.20-rc1") is at least `min` (major, minor); an
/// unknown version is taken as old.
pub fn version_at_least(version: Option<&str>, min: (u32, u32)) -> bool {
    let Some(v) = version else { return false };
    let mut parts = v.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= min,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert!(version_at_least(Some("3.21"), (3, 20)));
        assert!(version_at_least(Some("3.20+"), (3, 20)));
        assert!(version_at_least(Some("4.0"), (3, 20)));
        assert!(!version_at_least(Some("3.12"), (3, 20)));
        assert!(!version_at_least(Some("3.9"), (3, 20)));
        assert!(!version_at_least(Some("linerate"), (3, 20)));
        assert!(!version_at_least(None, (3, 20)));
    }

    /// The issue's cases: `--max-streams 2` read "maximum = 128" and `-t 0` read "test
    /// duration too long". Server limits never send a number whose text names iperf3's own
    /// maximum, and a client too old for a number gets one it knows.
    #[test]
    fn limits_never_send_a_number_whose_text_is_false() {
        let kinds = [
            LimitKind::Streams,
            LimitKind::Duration,
            LimitKind::Bitrate,
            LimitKind::Bytes,
            LimitKind::NotAllowed,
            LimitKind::Interval,
            LimitKind::Block,
            LimitKind::Memory,
            LimitKind::MinRate,
        ];
        for kind in kinds {
            for v in [Some("3.12"), Some("3.21"), None] {
                let e = for_limit(kind, v).expect("an error, not busy");
                assert!(
                    ![errno::NUM_STREAMS, errno::BLOCK_SIZE, errno::DURATION, errno::UNIMPLEMENTED]
                        .contains(&e.i_errno),
                    "{kind:?} {v:?}: {e:?}"
                );
                if e.i_errno == errno::NEW_TEST {
                    assert_ne!(e.errno, 0, "IENEWTEST prints strerror(errno): {kind:?}");
                }
            }
        }
        assert_eq!(for_limit(LimitKind::Duration, Some("3.12")), Some(ServerError::NOT_PERMITTED));
        assert_eq!(for_limit(LimitKind::Duration, Some("3.21")), Some(errno::MAX_DURATION.into()));
        assert_eq!(for_limit(LimitKind::Busy, Some("3.21")), None);
    }

    #[test]
    fn wire_bytes_are_two_big_endian_ints() {
        assert_eq!(ServerError::NOT_PERMITTED.wire(), [0, 0, 0, 100, 0, 0, 0, 1]);
    }
}
