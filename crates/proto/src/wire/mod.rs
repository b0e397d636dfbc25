//! The native wire format, byte for byte (specified in `docs/PROTOCOL.md`).
//!
//! A control connection starts, in each direction, with a 12-byte [`preamble`]: the 8-byte
//! [`CONTROL_MAGIC`] and a big-endian `u32` protocol version. Then come frames: a big-endian
//! `u32` length followed by that many bytes of one JSON object, a [`Message`]. Lengths are
//! checked against a cap before anything is allocated.
//!
//! A data connection starts with a 28-byte [`DataHello`]: [`DATA_MAGIC`], the test's 16-byte
//! cookie and the stream id. After that it carries only test payload.
//!
//! Both magics begin with byte 0x89, which is not ASCII: iperf3 clients always begin with a
//! printable cookie, so a server can tell the two protocols apart from the first byte.
//!
//! `linerate doctor`'s path-MTU probes and their echoes are UDP datagrams; see [`encode_probe`].
//!
//! This module encodes and decodes; it keeps no connection state and does no I/O.

mod data;
pub(crate) mod decode;
#[cfg(test)]
mod decode_tests;
mod frame;
mod messages;
mod probe;

pub use data::{Cookie, DATA_HELLO_LEN, DataHello, TRANSACTION_FLAG};
pub use frame::{
    CONTROL_MAGIC, DATA_MAGIC, FRAME_BUDGET_PER_BYTE, FrameDecoder, GRANT_ABOVE,
    MAX_FRAME_HANDSHAKE, MAX_FRAME_ITEMS, MAX_FRAME_RESULTS, MAX_FRAME_STRING, PREAMBLE_LEN,
    PROTOCOL_VERSION, encode_frame, frame_bounds, frame_memory, preamble,
};
pub use messages::{AbortReason, Capability, MAX_PAIR_TARGET, Message, StopReason};
pub use probe::{ECHO_LEN, PROBE_MIN_LEN, decode_echo, echo_for, encode_probe};
