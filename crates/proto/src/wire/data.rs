//! The data-connection hello: how a TCP data connection says which test and stream it is.

use crate::wire::DATA_MAGIC;

/// Length of a [`DataHello`] on the wire.
pub const DATA_HELLO_LEN: usize = 28;

/// A 16-byte secret the server hands out per test; data connections present it to be
/// associated with their test. It is random (the driver supplies the randomness).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; 16]);

impl Cookie {
    /// Lower-case hex, as carried in JSON messages.
    pub fn to_hex(&self) -> String {
        crate::auth::to_hex(&self.0)
    }

    /// Parses 32 hex digits; None for anything else.
    pub fn from_hex(s: &str) -> Option<Self> {
        crate::auth::from_hex(s).map(Self)
    }
}

impl std::fmt::Debug for Cookie {
    // Only a prefix: the cookie associates connections with a test and should not be logged whole.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cookie({}..)", &self.to_hex()[..8])
    }
}

/// Set in a [`DataHello`]'s stream id by a connect/request/response/close test's per-transaction
/// connections (`--crr`): the connection carries one transaction of the stream `id & !FLAG`,
/// after the stream's own connection attached; it is never a stream of its own.
pub const TRANSACTION_FLAG: u32 = 1 << 31;

/// First bytes of a data connection: magic, cookie, stream id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    /// The test's cookie.
    pub cookie: Cookie,
    /// The stream this connection carries (1-based, see `TestSpec::stream_plan`).
    pub stream_id: u32,
}

impl DataHello {
    /// The 28 wire bytes.
    pub fn encode(&self) -> [u8; DATA_HELLO_LEN] {
        let mut out = [0u8; DATA_HELLO_LEN];
        out[..8].copy_from_slice(&DATA_MAGIC);
        out[8..24].copy_from_slice(&self.cookie.0);
        out[24..].copy_from_slice(&self.stream_id.to_be_bytes());
        out
    }

    /// Parses the 28 wire bytes; None if the magic is wrong.
    pub fn decode(bytes: &[u8; DATA_HELLO_LEN]) -> Option<Self> {
        if bytes[..8] != DATA_MAGIC {
            return None;
        }
        let mut cookie = [0u8; 16];
        cookie.copy_from_slice(&bytes[8..24]);
        let stream_id = u32::from_be_bytes([bytes[24], bytes[25], bytes[26], bytes[27]]);
        Some(Self { cookie: Cookie(cookie), stream_id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_golden() {
        let h = DataHello { cookie: Cookie([0xab; 16]), stream_id: 258 };
        let b = h.encode();
        assert_eq!(&b[..8], b"\x89LRD\r\n\x1a\n");
        assert_eq!(&b[24..], &[0, 0, 1, 2]);
        assert_eq!(DataHello::decode(&b), Some(h));
        let mut bad = b;
        bad[1] = b'X';
        assert_eq!(DataHello::decode(&bad), None);
    }

    #[test]
    fn cookie_hex_round_trip_and_rejects() {
        let c = Cookie([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 254, 255]);
        assert_eq!(Cookie::from_hex(&c.to_hex()), Some(c));
        assert_eq!(Cookie::from_hex("zz"), None);
        assert_eq!(Cookie::from_hex(&"g".repeat(32)), None);
        assert!(!format!("{c:?}").contains(&c.to_hex()));
    }
}
