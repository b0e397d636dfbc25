//! Preamble and frame codec.

use crate::bounded::Bounds;
use crate::error::ProtoError;
use crate::machine::LargeFrame;
use crate::wire::Message;

/// First 8 bytes of every control connection, in both directions.
pub const CONTROL_MAGIC: [u8; 8] = *b"\x89LRC\r\n\x1a\n";
/// First 8 bytes of every data connection (client to server only).
pub const DATA_MAGIC: [u8; 8] = *b"\x89LRD\r\n\x1a\n";
/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Length of the control preamble: magic plus version.
pub const PREAMBLE_LEN: usize = 12;
/// Frame cap before a test is accepted: hello, request, accept, refuse. Small on purpose,
/// since this is what an unauthenticated peer can make us buffer.
pub const MAX_FRAME_HANDSHAKE: u32 = 64 * 1024;
/// Frame cap once a test runs: results with per-interval samples can be large.
pub const MAX_FRAME_RESULTS: u32 = 16 << 20;
/// Longest string accepted anywhere in a frame: names, reasons, abort messages, error texts.
pub const MAX_FRAME_STRING: usize = 4096;
/// Most items in any one list or map of a frame (interval samples of one stream included).
pub const MAX_FRAME_ITEMS: usize = 65536;
/// Memory one decoded frame may take, as a multiple of the frame cap in force: 32 MiB for a
/// results frame, 128 KiB before a test is accepted (see [`crate::bounded`]).
pub const FRAME_BUDGET_PER_BYTE: usize = 2;

/// Frames above this many bytes wait for a grant on a server ([`crate::Machine::large_frame`]):
/// the handshake cap, which every connection may buffer before it is even accepted.
pub const GRANT_ABOVE: u32 = MAX_FRAME_HANDSHAKE;

/// What receiving and decoding a frame of `len` bytes may take at most: the frame itself,
/// plus its decoding bound of four times its length (the decoding budget of
/// [`FRAME_BUDGET_PER_BYTE`] times the frame, half again while a list reallocates, and
/// serde_json's copy of one escaped string). A 16 MiB results frame: 80 MiB. What a server
/// reserves from its shared frame memory before buffering a large frame; iperf3's results
/// (decoded within the same budget per byte) cost the same.
pub fn frame_memory(len: u32) -> u64 {
    u64::from(len) * (1 + 2 * FRAME_BUDGET_PER_BYTE as u64)
}

/// What decoding one frame may take while frames of up to `max_frame` bytes are accepted.
pub fn frame_bounds(max_frame: u32) -> Bounds {
    Bounds {
        budget: (max_frame as usize).saturating_mul(FRAME_BUDGET_PER_BYTE),
        max_items: MAX_FRAME_ITEMS,
        max_string: MAX_FRAME_STRING,
    }
}

/// The 12-byte control preamble for `version`.
pub fn preamble(version: u32) -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..8].copy_from_slice(&CONTROL_MAGIC);
    p[8..].copy_from_slice(&version.to_be_bytes());
    p
}

/// Encodes one message as a frame: `u32` big-endian length, then the JSON bytes.
pub fn encode_frame(msg: &Message) -> Vec<u8> {
    // Serializing our own message types cannot fail: they contain only strings, numbers,
    // and maps with string keys.
    let body = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Incremental decoder for one direction of a control connection: first the preamble, then
/// frames. Feed bytes with [`FrameDecoder::push`], take results with the `poll_*` methods.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    preamble_done: bool,
    max_frame: u32,
    /// Frames above this size wait for [`FrameDecoder::grant`] (None: none waits).
    grant_above: Option<u32>,
    /// The frame at the front was granted.
    granted: bool,
}

impl FrameDecoder {
    /// A decoder expecting a preamble first, with the handshake frame cap.
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            preamble_done: false,
            max_frame: MAX_FRAME_HANDSHAKE,
            grant_above: None,
            granted: false,
        }
    }

    /// Changes the largest frame accepted from now on.
    pub fn set_max_frame(&mut self, max: u32) {
        self.max_frame = max;
    }

    /// From now on, a frame larger than `above` bytes is neither given room nor decoded until
    /// [`FrameDecoder::grant`] (see [`crate::Machine::large_frame`]).
    pub fn grant_above(&mut self, above: u32) {
        self.grant_above = Some(above);
    }

    /// The frame at the front when its header arrived, it is within the cap and larger than
    /// [`FrameDecoder::grant_above`] allows unasked.
    pub fn large_frame(&self) -> Option<LargeFrame> {
        let above = self.grant_above?;
        let len = self.front_len().filter(|&len| len > above && len <= self.max_frame)?;
        Some(LargeFrame { len, granted: self.granted })
    }

    /// Lets the large frame at the front be buffered and decoded.
    pub fn grant(&mut self) {
        if self.large_frame().is_some() {
            self.granted = true;
        }
    }

    /// The length header of the frame at the front, once it arrived.
    fn front_len(&self) -> Option<u32> {
        let head = self.buf.get(..4).filter(|_| self.preamble_done)?;
        Some(u32::from_be_bytes([head[0], head[1], head[2], head[3]]))
    }

    /// Appends received bytes. Buffering is bounded: callers poll after each push, and a
    /// frame header over the cap is rejected before its body is buffered.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Decodes the preamble once enough bytes are in; returns the peer's version.
    pub fn poll_preamble(&mut self) -> Result<Option<u32>, ProtoError> {
        if self.preamble_done {
            return Err(ProtoError::Violation("preamble already received".into()));
        }
        let n = self.buf.len().min(8);
        if self.buf[..n] != CONTROL_MAGIC[..n] {
            return Err(ProtoError::Garbage(describe_bad_magic(&self.buf[..n])));
        }
        if self.buf.len() < PREAMBLE_LEN {
            return Ok(None);
        }
        let version = u32::from_be_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]]);
        self.buf.drain(..PREAMBLE_LEN);
        self.preamble_done = true;
        Ok(Some(version))
    }

    /// Decodes the next complete frame, if any.
    pub fn poll_frame(&mut self) -> Result<Option<Message>, ProtoError> {
        if !self.preamble_done {
            return Err(ProtoError::Violation("frame before preamble".into()));
        }
        let Some(len) = self.front_len() else { return Ok(None) };
        if len > self.max_frame {
            return Err(ProtoError::Garbage(format!(
                "frame length {len} exceeds the cap of {} bytes",
                self.max_frame
            )));
        }
        if self.large_frame().is_some_and(|f| !f.granted) {
            // Neither room nor decoding before the driver reserved the memory: it stops
            // reading meanwhile, so what is buffered is what one read brought.
            return Ok(None);
        }
        let total = 4 + len as usize;
        if self.buf.len() < total {
            // Room for exactly this frame, once: growing by doubling would hold up to twice it.
            self.buf.reserve_exact(total - self.buf.len());
            return Ok(None);
        }
        let msg = super::decode::decode(&self.buf[4..total], frame_bounds(self.max_frame));
        self.buf.drain(..total);
        self.granted = false;
        // A large frame's buffer is not kept for the rest of the connection.
        let keep = MAX_FRAME_HANDSHAKE as usize;
        if self.buf.capacity() > keep && self.buf.len() <= keep {
            self.buf.shrink_to(keep);
        }
        msg.map(Some)
    }
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

fn describe_bad_magic(got: &[u8]) -> String {
    let printable = got.iter().all(|b| b.is_ascii_graphic());
    if printable && got.len() == 8 {
        format!(
            "expected the linerate magic, got text {:?} (an iperf3 server or another service?)",
            String::from_utf8_lossy(got)
        )
    } else {
        format!("expected the linerate magic, got bytes {got:02x?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Message;

    fn ready_decoder() -> FrameDecoder {
        let mut d = FrameDecoder::new();
        d.push(&preamble(PROTOCOL_VERSION));
        assert_eq!(d.poll_preamble(), Ok(Some(PROTOCOL_VERSION)));
        d
    }

    #[test]
    fn preamble_golden_bytes() {
        assert_eq!(preamble(1), [0x89, b'L', b'R', b'C', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 1]);
    }

    #[test]
    fn frame_golden_bytes() {
        let bytes = encode_frame(&Message::Start);
        assert_eq!(&bytes[..4], &[0, 0, 0, 16]);
        assert_eq!(&bytes[4..], br#"{"type":"start"}"#);
    }

    #[test]
    fn decodes_byte_by_byte() {
        let mut d = ready_decoder();
        let frame = encode_frame(&Message::Refused { reason: "busy".into() });
        for (i, b) in frame.iter().enumerate() {
            d.push(&[*b]);
            let got = d.poll_frame().expect("valid");
            assert_eq!(got.is_some(), i == frame.len() - 1);
        }
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn oversize_length_rejected_before_body_arrives() {
        let mut d = ready_decoder();
        d.push(&0x7fff_fff0u32.to_be_bytes());
        let err = d.poll_frame().unwrap_err();
        assert!(matches!(err, ProtoError::Garbage(ref m) if m.contains("exceeds")), "{err}");
    }

    /// `{"type":"start"}` padded with whitespace to `len` bytes of JSON, as a frame.
    fn padded_start(len: usize) -> Vec<u8> {
        let body = format!("{{\"type\":\"start\"{}}}", " ".repeat(len - 16));
        [(body.len() as u32).to_be_bytes().as_slice(), body.as_bytes()].concat()
    }

    #[test]
    fn a_large_frame_waits_for_its_grant_before_room_is_made_or_it_is_decoded() {
        let mut d = ready_decoder();
        d.set_max_frame(MAX_FRAME_RESULTS);
        d.grant_above(GRANT_ABOVE);
        d.push(&padded_start(GRANT_ABOVE as usize));
        assert_eq!(d.poll_frame(), Ok(Some(Message::Start)), "up to the threshold: no grant");
        assert_eq!(d.large_frame(), None);
        let big = padded_start(1 << 20);
        d.push(&big[..4096]);
        assert_eq!(d.poll_frame(), Ok(None));
        assert_eq!(d.large_frame(), Some(LargeFrame { len: 1 << 20, granted: false }));
        assert!(d.buf.capacity() < 1 << 19, "no room made before the grant");
        d.push(&big[4096..]);
        assert_eq!(d.poll_frame(), Ok(None), "even whole, it is not decoded before the grant");
        d.grant();
        assert_eq!(d.large_frame(), Some(LargeFrame { len: 1 << 20, granted: true }));
        assert_eq!(d.poll_frame(), Ok(Some(Message::Start)));
        assert_eq!(d.large_frame(), None);
        d.push(&big);
        assert_eq!(d.large_frame().map(|f| f.granted), Some(false), "a grant is for one frame");
    }

    #[test]
    fn without_grants_every_frame_within_the_cap_is_decoded() {
        let mut d = ready_decoder();
        d.set_max_frame(MAX_FRAME_RESULTS);
        d.push(&padded_start(1 << 20));
        assert_eq!(d.large_frame(), None);
        assert_eq!(d.poll_frame(), Ok(Some(Message::Start)));
    }

    #[test]
    fn frame_memory_is_the_frame_and_four_times_it_for_decoding() {
        assert_eq!(frame_memory(MAX_FRAME_RESULTS), 80 << 20);
    }

    #[test]
    fn wrong_magic_is_garbage_and_names_iperf3_for_text() {
        let mut d = FrameDecoder::new();
        d.push(b"abcdefgh");
        let err = d.poll_preamble().unwrap_err();
        assert!(err.to_string().contains("iperf3"), "{err}");
        let mut d = FrameDecoder::new();
        d.push(&[0x89, b'X']);
        assert!(d.poll_preamble().is_err(), "mismatch is detected before 8 bytes");
    }

    #[test]
    fn non_object_and_unknown_type_are_errors() {
        let mut d = ready_decoder();
        d.push(&[0, 0, 0, 2]);
        d.push(b"[]");
        assert!(matches!(d.poll_frame(), Err(ProtoError::Garbage(_))));
        let mut d = ready_decoder();
        let body = br#"{"type":"launch_missiles"}"#;
        d.push(&(body.len() as u32).to_be_bytes());
        d.push(body);
        assert!(matches!(d.poll_frame(), Err(ProtoError::Violation(_))));
    }

    #[test]
    fn unknown_fields_are_ignored_for_forward_compatibility() {
        let mut d = ready_decoder();
        let body = br#"{"type":"refused","reason":"x","future_field":1}"#;
        d.push(&(body.len() as u32).to_be_bytes());
        d.push(body);
        assert_eq!(d.poll_frame(), Ok(Some(Message::Refused { reason: "x".into() })));
    }
}
