//! The path-MTU probe and its echo (`linerate doctor`), byte for byte.
//!
//! A probe is a UDP datagram of the size being tested: `PROBE_MAGIC`, the doctor session's
//! 16-byte cookie, the probe's sequence number (u32 big-endian), then padding to the size. The
//! echo is short whatever the probe's size: `ECHO_MAGIC`, the cookie, the sequence number and
//! the number of bytes the server received (u32 big-endian). Echoes are never larger than the
//! probe that caused them, so the echo cannot amplify traffic toward anyone.

use crate::wire::Cookie;

/// First bytes of a probe.
pub const PROBE_MAGIC: [u8; 4] = *b"\x89LRP";
/// First bytes of an echo.
pub const ECHO_MAGIC: [u8; 4] = *b"\x89LRE";
/// Smallest probe: magic, cookie, sequence number.
pub const PROBE_MIN_LEN: usize = 24;
/// Length of an echo.
pub const ECHO_LEN: usize = 28;

/// A probe of `len` bytes (at least [`PROBE_MIN_LEN`]).
pub fn encode_probe(cookie: &Cookie, seq: u32, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.max(PROBE_MIN_LEN)];
    out[..4].copy_from_slice(&PROBE_MAGIC);
    out[4..20].copy_from_slice(&cookie.0);
    out[20..24].copy_from_slice(&seq.to_be_bytes());
    out
}

/// The echo for a received probe, if `datagram` is a probe carrying `cookie`.
pub fn echo_for(datagram: &[u8], cookie: &Cookie) -> Option<[u8; ECHO_LEN]> {
    if datagram.len() < PROBE_MIN_LEN || datagram[..4] != PROBE_MAGIC {
        return None;
    }
    if datagram[4..20] != cookie.0 {
        return None;
    }
    let mut out = [0u8; ECHO_LEN];
    out[..4].copy_from_slice(&ECHO_MAGIC);
    out[4..24].copy_from_slice(&datagram[4..24]);
    let len = u32::try_from(datagram.len()).unwrap_or(u32::MAX);
    out[24..].copy_from_slice(&len.to_be_bytes());
    Some(out)
}

/// `(sequence number, bytes the server received)` of an echo carrying `cookie`.
pub fn decode_echo(datagram: &[u8], cookie: &Cookie) -> Option<(u32, u32)> {
    if datagram.len() != ECHO_LEN || datagram[..4] != ECHO_MAGIC || datagram[4..20] != cookie.0 {
        return None;
    }
    let word = |i: usize| {
        u32::from_be_bytes([datagram[i], datagram[i + 1], datagram[i + 2], datagram[i + 3]])
    };
    Some((word(20), word(24)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_echo_round_trip_and_foreign_cookies() {
        let c = Cookie([7; 16]);
        let probe = encode_probe(&c, 42, 1372);
        assert_eq!(probe.len(), 1372);
        let echo = echo_for(&probe, &c).expect("echoed");
        assert_eq!(decode_echo(&echo, &c), Some((42, 1372)));
        assert!(echo.len() < probe.len(), "the echo never amplifies");
        assert_eq!(echo_for(&probe, &Cookie([8; 16])), None, "another session's probe");
        assert_eq!(decode_echo(&echo, &Cookie([8; 16])), None);
        assert_eq!(echo_for(&probe[..10], &c), None, "too short");
        assert_eq!(echo_for(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &c), None);
        assert_eq!(encode_probe(&c, 1, 3).len(), PROBE_MIN_LEN);
    }
}
