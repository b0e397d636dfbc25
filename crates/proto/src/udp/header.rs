//! The UDP datagram header: encode, decode, and extend 32-bit sequence numbers to 64 bits.
//!
//! The layout is iperf3's (all big-endian): `u32` seconds and `u32` microseconds of the
//! sender's monotonic clock at send time, then the sequence number as `u32` (iperf3's default)
//! or `u64` (when `udp_counters_64bit` is negotiated). Sequence numbers start at 1. linerate's
//! native datagrams always use the 64-bit layout and add the test's 64-bit secret after the
//! sequence number (24 bytes, see [`DatagramFormat`]); iperf3's datagrams stay iperf3's.
//!
//! **The secret** (native streams only) keeps off-path senders out of a result: a datagram
//! whose secret is not the test's is counted as invalid and nothing else (no bytes, no
//! sequence number, no jitter). It is derived from the test's cookie ([`secret_of`]), 128
//! random bits the server draws per test and sends only over the control connection, so both
//! ends know it without another message; an attacker who cannot read the control connection
//! or the data path guesses 64 bits. It is not encryption: an on-path attacker reads it.
//!
//! This module only converts between bytes and [`DatagramHeader`]; it keeps no per-stream
//! state except in [`Unwrapper`], and it must not allocate or panic on any input.

use std::time::Duration;

/// How wide the sequence-number field is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeqWidth {
    /// 4 bytes: iperf3's default. Wraps after 2^32 datagrams; see [`Unwrapper`].
    Bits32,
    /// 8 bytes: iperf3 with `udp_counters_64bit`, and every native linerate stream.
    Bits64,
}

/// Bytes the header occupies at the start of a datagram: 12 for [`SeqWidth::Bits32`], 16 for
/// [`SeqWidth::Bits64`].
pub const fn header_len(width: SeqWidth) -> usize {
    match width {
        SeqWidth::Bits32 => 12,
        SeqWidth::Bits64 => 16,
    }
}

/// Bytes of the test's secret in a native datagram, after the sequence number.
pub const SECRET_LEN: usize = 8;

/// The secret native datagrams of the test with `cookie` carry: the first 8 bytes of
/// SHA-256 of a fixed label and the cookie (so the wire never shows the cookie itself).
pub fn secret_of(cookie: &[u8; 16]) -> u64 {
    use sha2::{Digest, Sha256};
    let digest =
        Sha256::new().chain_update(b"linerate udp datagram secret v1").chain_update(cookie);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.finalize()[..8]);
    u64::from_be_bytes(first)
}

/// How one stream's datagrams are laid out: the sequence width and, on native linerate
/// streams, the test's secret right after the sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatagramFormat {
    /// Width of the sequence number.
    pub width: SeqWidth,
    /// The test's secret (native streams); None for iperf3's format.
    pub secret: Option<u64>,
}

/// What a received datagram is, by its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// A datagram of this test.
    Ours(DatagramHeader),
    /// Too short for the header, or a timestamp no sender writes.
    Malformed,
    /// Well formed but without the test's secret: not from the test's sender.
    Spoofed,
}

impl DatagramFormat {
    /// iperf3's layout (no secret) with sequence numbers `width` wide.
    pub const fn iperf3(width: SeqWidth) -> Self {
        Self { width, secret: None }
    }

    /// The native layout of the test with `cookie`: 64-bit sequence numbers and the secret.
    pub fn native(cookie: &[u8; 16]) -> Self {
        Self { width: SeqWidth::Bits64, secret: Some(secret_of(cookie)) }
    }

    /// Bytes of the header: 12 or 16 for iperf3's layouts, 24 for the native one.
    pub const fn header_bytes(self) -> usize {
        header_len(self.width) + if self.secret.is_some() { SECRET_LEN } else { 0 }
    }

    /// Writes `h` (and the secret) into the first [`Self::header_bytes`] bytes of `buf`.
    pub fn encode(self, h: &DatagramHeader, buf: &mut [u8]) -> Result<usize, BufferTooShort> {
        let needed_bytes = self.header_bytes();
        if buf.len() < needed_bytes {
            return Err(BufferTooShort { needed_bytes, len_bytes: buf.len() });
        }
        let at = h.encode(self.width, buf)?;
        if let Some(secret) = self.secret {
            buf[at..at + SECRET_LEN].copy_from_slice(&secret.to_be_bytes());
        }
        Ok(needed_bytes)
    }

    /// Reads the header of `buf` and checks the secret.
    pub fn decode(self, buf: &[u8]) -> Decoded {
        let Some(h) = DatagramHeader::decode(buf, self.width) else { return Decoded::Malformed };
        let Some(secret) = self.secret else { return Decoded::Ours(h) };
        let at = header_len(self.width);
        match buf.get(at..at + SECRET_LEN) {
            None => Decoded::Malformed,
            Some(got) if got == secret.to_be_bytes() => Decoded::Ours(h),
            Some(_) => Decoded::Spoofed,
        }
    }
}

/// The buffer given to [`DatagramHeader::encode`] cannot hold the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("datagram buffer of {len_bytes} bytes is shorter than the {needed_bytes}-byte header")]
pub struct BufferTooShort {
    /// Bytes the header needs.
    pub needed_bytes: usize,
    /// Bytes the buffer has.
    pub len_bytes: usize,
}

/// The decoded header of one test datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatagramHeader {
    /// The sender's monotonic clock at send time. Only differences between datagrams of one
    /// stream mean anything: the epoch is the sender's (often its uptime).
    pub send_time: Duration,
    /// Per-stream sequence number, starting at 1. Already extended to 64 bits when the wire
    /// field was 32 bits and the caller used an [`Unwrapper`].
    pub seq: u64,
}

impl DatagramHeader {
    /// Writes the header into the first [`header_len`] bytes of `buf` (the rest, the filler, is
    /// left as it is) and returns the number of bytes written.
    ///
    /// On the wire the seconds are taken modulo 2^32 and the sub-second part is truncated to
    /// whole microseconds; with [`SeqWidth::Bits32`] the sequence number is taken modulo 2^32
    /// (what iperf3 sends after 2^32 datagrams).
    pub fn encode(&self, width: SeqWidth, buf: &mut [u8]) -> Result<usize, BufferTooShort> {
        let needed_bytes = header_len(width);
        let Some(out) = buf.get_mut(..needed_bytes) else {
            return Err(BufferTooShort { needed_bytes, len_bytes: buf.len() });
        };
        let secs = self.send_time.as_secs() as u32;
        let micros = self.send_time.subsec_micros();
        out[0..4].copy_from_slice(&secs.to_be_bytes());
        out[4..8].copy_from_slice(&micros.to_be_bytes());
        match width {
            SeqWidth::Bits32 => out[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes()),
            SeqWidth::Bits64 => out[8..16].copy_from_slice(&self.seq.to_be_bytes()),
        }
        Ok(needed_bytes)
    }

    /// Reads a header from the start of `buf`. None if `buf` is shorter than [`header_len`] or
    /// the microseconds field is 10^6 or more (no sender writes that; the timestamp of such a
    /// datagram would poison the jitter figures, so the caller should count it as malformed,
    /// see `SequenceTracker::on_malformed`).
    ///
    /// A 32-bit sequence number is returned as is (0..2^32); extend it with an [`Unwrapper`].
    pub fn decode(buf: &[u8], width: SeqWidth) -> Option<Self> {
        let secs = u32::from_be_bytes(buf.get(0..4)?.try_into().ok()?);
        let micros = u32::from_be_bytes(buf.get(4..8)?.try_into().ok()?);
        let seq = match width {
            SeqWidth::Bits32 => u64::from(u32::from_be_bytes(buf.get(8..12)?.try_into().ok()?)),
            SeqWidth::Bits64 => u64::from_be_bytes(buf.get(8..16)?.try_into().ok()?),
        };
        if micros >= 1_000_000 {
            return None;
        }
        let send_time = Duration::new(u64::from(secs), micros * 1000);
        Some(Self { send_time, seq })
    }
}

/// Extends 32-bit wire sequence numbers to 64 bits, like RTP's extended sequence numbers.
///
/// Each value is placed in the 2^32-cycle that puts it nearest to the highest extended value
/// seen so far, so a stream keeps counting past 2^32 datagrams (under an hour at 1.5 M
/// datagrams/s) and a datagram from just before a wrap that arrives just after it is still
/// recognised as late. A value exactly 2^31 away is taken as ahead. Values that would land
/// below 0 are taken from the current cycle instead. One `Unwrapper` per stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unwrapper {
    highest: Option<u64>,
}

const CYCLE: u64 = 1 << 32;
const HALF_CYCLE: u64 = 1 << 31;

impl Unwrapper {
    /// An unwrapper that has seen nothing; the first value is taken as is (cycle 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// The 64-bit sequence number nearest to the highest seen so far whose low 32 bits are
    /// `wire`; remembers it if it is the new highest.
    pub fn extend(&mut self, wire: u32) -> u64 {
        let Some(highest) = self.highest else {
            self.highest = Some(u64::from(wire));
            return u64::from(wire);
        };
        let candidate = (highest & !(CYCLE - 1)) | u64::from(wire);
        let extended = if candidate > highest && candidate - highest > HALF_CYCLE {
            // Far ahead within this cycle: it belongs to the previous one (a late datagram).
            candidate.checked_sub(CYCLE).unwrap_or(candidate)
        } else if candidate < highest && highest - candidate >= HALF_CYCLE {
            // Far behind within this cycle: the counter wrapped.
            candidate.saturating_add(CYCLE)
        } else {
            candidate
        };
        if extended > highest {
            self.highest = Some(extended);
        }
        extended
    }

    /// The highest extended value seen so far; None before the first.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_64_bit() {
        let h = DatagramHeader {
            send_time: Duration::new(0x0102_0304, 999_999_999),
            seq: 0x1122_3344_5566_7788,
        };
        let mut buf = [0xeeu8; 20];
        assert_eq!(h.encode(SeqWidth::Bits64, &mut buf), Ok(16));
        let want: [u8; 20] = [
            0x01, 0x02, 0x03, 0x04, // seconds
            0x00, 0x0f, 0x42, 0x3f, // 999_999 microseconds
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // sequence
            0xee, 0xee, 0xee, 0xee, // filler untouched
        ];
        assert_eq!(buf, want);
        let back = DatagramHeader::decode(&buf, SeqWidth::Bits64).unwrap();
        assert_eq!(back.seq, h.seq);
        assert_eq!(back.send_time, Duration::new(0x0102_0304, 999_999_000));
    }

    #[test]
    fn golden_bytes_32_bit_truncates_seq_and_seconds() {
        let h =
            DatagramHeader { send_time: Duration::new((1 << 32) + 7, 1_500), seq: (1 << 32) + 5 };
        let mut buf = [0u8; 12];
        assert_eq!(h.encode(SeqWidth::Bits32, &mut buf), Ok(12));
        assert_eq!(buf, [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 5]);
        let back = DatagramHeader::decode(&buf, SeqWidth::Bits32).unwrap();
        assert_eq!(back, DatagramHeader { send_time: Duration::new(7, 1_000), seq: 5 });
    }

    #[test]
    fn iperf3_first_datagram_decodes() {
        // 12 s 345678 µs, sequence 1, as iperf3 writes it with 32-bit counters.
        let wire = [0, 0, 0, 12, 0x00, 0x05, 0x46, 0x4e, 0, 0, 0, 1, 0xab, 0xcd];
        let h = DatagramHeader::decode(&wire, SeqWidth::Bits32).unwrap();
        assert_eq!(h, DatagramHeader { send_time: Duration::new(12, 345_678_000), seq: 1 });
        let as64 = DatagramHeader::decode(&wire, SeqWidth::Bits64);
        assert_eq!(as64, None, "14 bytes cannot hold a 16-byte header");
    }

    #[test]
    fn short_buffers_and_bad_micros_are_refused() {
        let h = DatagramHeader { send_time: Duration::from_millis(1), seq: 1 };
        let mut small = [0u8; 15];
        assert_eq!(
            h.encode(SeqWidth::Bits64, &mut small),
            Err(BufferTooShort { needed_bytes: 16, len_bytes: 15 })
        );
        assert_eq!(h.encode(SeqWidth::Bits32, &mut small), Ok(12));
        for n in 0..12 {
            assert_eq!(DatagramHeader::decode(&small[..n], SeqWidth::Bits32), None);
        }
        let bad = [0, 0, 0, 1, 0x00, 0x0f, 0x42, 0x40, 0, 0, 0, 1]; // 1_000_000 µs
        assert_eq!(DatagramHeader::decode(&bad, SeqWidth::Bits32), None);
        assert_eq!(header_len(SeqWidth::Bits32), 12);
        assert_eq!(header_len(SeqWidth::Bits64), 16);
    }

    #[test]
    fn unwrapper_counts_across_wraps_and_keeps_late_ones_in_their_cycle() {
        let mut u = Unwrapper::new();
        assert_eq!(u.highest(), None);
        assert_eq!(u.extend(u32::MAX - 1), u64::from(u32::MAX - 1));
        assert_eq!(u.extend(u32::MAX), u64::from(u32::MAX));
        assert_eq!(u.extend(0), 1 << 32, "wrapped to 0 after 2^32 - 1");
        assert_eq!(u.extend(2), (1 << 32) + 2);
        assert_eq!(u.extend(u32::MAX - 3), u64::from(u32::MAX - 3), "late, from before the wrap");
        assert_eq!(u.extend(1), (1 << 32) + 1, "late, after the wrap");
        assert_eq!(u.highest(), Some((1 << 32) + 2));
    }

    #[test]
    fn unwrapper_never_goes_below_zero_and_takes_half_cycle_as_ahead() {
        let mut u = Unwrapper::new();
        assert_eq!(u.extend(5), 5);
        assert_eq!(u.extend(u32::MAX), u64::from(u32::MAX), "no cycle -1: taken as ahead");
        let mut v = Unwrapper::new();
        assert_eq!(v.extend(1), 1);
        assert_eq!(v.extend(1 + (1 << 31)), 1 + (1 << 31), "exactly half a cycle ahead");
        assert_eq!(v.extend(1), (1 << 32) + 1, "exactly half a cycle back: taken as ahead");
        assert_eq!(v.extend(0), 1 << 32, "one behind the new highest");
    }

    #[test]
    fn native_format_carries_the_secret_and_refuses_another() {
        let cookie = [7u8; 16];
        let f = DatagramFormat::native(&cookie);
        assert_eq!(f.header_bytes(), 24);
        assert_eq!(DatagramFormat::iperf3(SeqWidth::Bits32).header_bytes(), 12);
        let h = DatagramHeader { send_time: Duration::new(3, 4_000), seq: 9 };
        let mut buf = [0u8; 64];
        assert_eq!(f.encode(&h, &mut buf), Ok(24));
        assert_eq!(buf[16..24], secret_of(&cookie).to_be_bytes());
        assert_eq!(f.decode(&buf), Decoded::Ours(h));
        let other = DatagramFormat::native(&[8u8; 16]);
        assert_ne!(secret_of(&cookie), secret_of(&[8u8; 16]));
        assert_eq!(other.decode(&buf), Decoded::Spoofed);
        assert_eq!(f.decode(&buf[..20]), Decoded::Malformed, "no room for the secret");
        assert_eq!(
            f.encode(&h, &mut [0u8; 23]),
            Err(BufferTooShort { needed_bytes: 24, len_bytes: 23 })
        );
        // iperf3's layout neither writes nor checks one.
        let plain = DatagramFormat::iperf3(SeqWidth::Bits64);
        assert_eq!(plain.decode(&buf), Decoded::Ours(h));
    }

    #[test]
    fn unwrapper_follows_a_long_in_order_stream() {
        let mut u = Unwrapper::new();
        let mut seq: u64 = (1 << 32) - 1000;
        u.extend(seq as u32);
        for _ in 0..3000 {
            seq += 1;
            assert_eq!(u.extend(seq as u32), seq);
        }
    }
}
