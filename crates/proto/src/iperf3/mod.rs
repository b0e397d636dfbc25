//! iperf3's control protocol (versions 3.12 to 3.21), sans-IO, so linerate can test against
//! iperf3 servers. Written from a description of iperf3's protocol that was checked on the wire
//! against Debian's 3.12 and upstream 3.21 (docs/IPERF3.md); the recorded captures in
//! `captures.rs` replay real exchanges.
//!
//! The wire: the client sends a 37-byte cookie; then the server drives the test with single
//! *state bytes*, and two kinds of JSON (u32 big-endian length + compact JSON) travel: the
//! parameters (client to server) and the results (both ways). Data connections are TCP
//! connections to the same port that start with the same cookie.
//!
//! Like the native protocol, nothing here does I/O, reads a clock or draws random numbers.

#[cfg(test)]
mod captures;
mod client;
mod errors;
mod json;
mod params;
mod server;

use crate::error::ProtoError;

pub use client::{Iperf3Client, Iperf3Event, udp_end_wait};
pub use errors::{ServerError, errno, for_limit, version_at_least};
pub use json::{Iperf3Results, Iperf3Stream, results_from_side, stream_ids};
pub use params::{
    ClientExtras, Iperf3Refusal, Iperf3Request, MAX_PARAMS_JSON, params, request_from_params,
};
pub use server::{Iperf3Server, Iperf3ServerEvent};

/// Length of the cookie: 36 printable characters and a NUL.
pub const COOKIE_LEN: usize = 37;

/// The datagram an iperf3 client sends to open each UDP stream (3.12+: ASCII "9876").
pub const UDP_CONNECT: [u8; 4] = *b"9876";
/// The server's answer from the stream's connected socket (3.12+: ASCII "6789").
pub const UDP_REPLY: [u8; 4] = *b"6789";
/// The answer of servers before 3.12 (987654321 as a little-endian int).
pub const UDP_REPLY_LEGACY: [u8; 4] = [0xb1, 0x68, 0xde, 0x3a];
/// The connect datagram of clients before 3.12 (123456789 as a little-endian int).
pub const UDP_CONNECT_LEGACY: [u8; 4] = [0x15, 0xcd, 0x5b, 0x07];

/// Largest results JSON accepted from a peer (its whole `-J` output can ride along with
/// `--get-server-output`, so this is generous; parameters are far smaller).
pub const MAX_RESULTS_JSON: u32 = 16 << 20;

/// A cookie from 36 random bytes, the way iperf3 makes them: each byte mod 32 picks a
/// character of `abcdefghijklmnopqrstuvwxyz234567`; the 37th byte is NUL.
pub fn make_cookie(random: &[u8; 36]) -> [u8; COOKIE_LEN] {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut c = [0u8; COOKIE_LEN];
    for (dst, r) in c.iter_mut().zip(random) {
        *dst = ALPHABET[usize::from(r % 32)];
    }
    c
}

/// The length in the header of a length-prefixed JSON frame at the front of `inbuf`, checked
/// against `max` (before anything is buffered for it); None until the header arrived.
pub(crate) fn frame_len(inbuf: &[u8], max: u32, what: &str) -> Result<Option<u32>, ProtoError> {
    let Some(head) = inbuf.get(..4) else { return Ok(None) };
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    if len == 0 || len > max {
        return Err(ProtoError::Garbage(format!(
            "iperf3 {what} length {len} is out of range 1..={max}"
        )));
    }
    Ok(Some(len))
}

/// Takes one length-prefixed JSON frame if complete, read in place by `read`. Room for exactly
/// the frame is reserved once (growing by doubling would hold up to twice it), and a large
/// frame's room is not kept after it.
pub(crate) fn take_frame<T>(
    inbuf: &mut Vec<u8>,
    max: u32,
    what: &str,
    read: impl FnOnce(&[u8]) -> T,
) -> Result<Option<T>, ProtoError> {
    let Some(len) = frame_len(inbuf, max, what)? else { return Ok(None) };
    let total = 4 + len as usize;
    if inbuf.len() < total {
        inbuf.reserve_exact(total - inbuf.len());
        return Ok(None);
    }
    let got = read(&inbuf[4..total]);
    inbuf.drain(..total);
    let keep = crate::wire::GRANT_ABOVE as usize;
    if inbuf.capacity() > keep && inbuf.len() <= keep {
        inbuf.shrink_to(keep);
    }
    Ok(Some(got))
}

/// iperf3's state bytes (signed on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Server: all streams connected.
    TestStart,
    /// Server: start sending.
    TestRunning,
    /// Client: end condition reached, stop.
    TestEnd,
    /// Server: send the parameters.
    ParamExchange,
    /// Server: open the data streams now.
    CreateStreams,
    /// Server: it is shutting down (signal).
    ServerTerminate,
    /// Client: it is shutting down (signal).
    ClientTerminate,
    /// Server: exchange results now (client first).
    ExchangeResults,
    /// Server: results exchanged; the client may finish.
    DisplayResults,
    /// Client: finished; the last byte of a session.
    IperfDone,
    /// Server: busy or bad cookie; it closes.
    AccessDenied,
    /// Server: an error; two big-endian i32 follow (iperf3 error number, errno).
    ServerError,
}

impl State {
    /// The wire byte.
    pub fn byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        v as u8
    }

    /// Parses a wire byte; None for values iperf3 never sends.
    pub fn from_byte(b: u8) -> Option<State> {
        [
            State::TestStart,
            State::TestRunning,
            State::TestEnd,
            State::ParamExchange,
            State::CreateStreams,
            State::ServerTerminate,
            State::ClientTerminate,
            State::ExchangeResults,
            State::DisplayResults,
            State::IperfDone,
            State::AccessDenied,
            State::ServerError,
        ]
        .into_iter()
        .find(|s| s.byte() == b)
    }
}

/// Human text for the iperf3 error numbers a server is likely to send (iperf_api.h).
pub fn error_text(i_errno: i32) -> &'static str {
    match i_errno {
        5 => "invalid duration",
        6 => "invalid number of streams",
        7 => "invalid block size",
        8 => "invalid socket buffer size",
        10 => "invalid MSS",
        11 => "zero-copy (sendfile) not supported",
        12 => "invalid omit period",
        27 => "requested rate over the server's total bitrate limit",
        37 => "test longer than the server's maximum duration",
        110 => "unknown control message",
        114 => "the server could not read the parameters",
        117 => "the server could not read the results",
        119 => "the client terminated",
        120 => "the server terminated",
        121 => "access denied",
        142 => "authentication failed",
        144 => "no data received for the receive timeout",
        160 => "the server's test duration expired",
        208 => "bad stream id",
        _ => "iperf3 error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_alphabet_and_nul() {
        let c = make_cookie(&[
            0, 1, 25, 26, 31, 32, 255, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
            23, 24, 25, 26, 27, 28, 29, 30, 31, 33, 34, 35, 36,
        ]);
        assert_eq!(&c[..7], b"abz27a7");
        assert_eq!(c[36], 0);
        assert!(c[..36].iter().all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(b)));
    }

    #[test]
    fn udp_handshake_bytes_are_the_ones_seen_on_the_wire() {
        // As seen on the wire from iperf3 on x86: 39 38 37 36 and 36 37 38 39.
        assert_eq!(UDP_CONNECT, [0x39, 0x38, 0x37, 0x36]);
        assert_eq!(UDP_REPLY, [0x36, 0x37, 0x38, 0x39]);
        assert_eq!(u32::from_le_bytes(UDP_REPLY_LEGACY), 987_654_321);
        assert_eq!(u32::from_le_bytes(UDP_CONNECT_LEGACY), 123_456_789);
    }

    #[test]
    fn state_bytes_round_trip_and_golden() {
        assert_eq!(State::ParamExchange.byte(), 9);
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        for b in 0..=255u8 {
            if let Some(s) = State::from_byte(b) {
                assert_eq!(s.byte(), b);
            }
        }
        assert_eq!(State::from_byte(3), None, "RESULT_REQUEST is never sent");
    }
}
