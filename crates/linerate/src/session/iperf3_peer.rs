//! Telling an iperf3 server by its first bytes: a linerate server's first byte is always
//! 0x89; iperf3 answers our hello with a state byte. The client, the preflight and the doctor
//! each ask, and each says what it means for them.

use anyhow::Result;

/// The server replied to our hello with an iperf3 state byte: PARAM_EXCHANGE (it took our
/// first 37 bytes for an iperf3 cookie) or ACCESS_DENIED (busy). A linerate server's first
/// byte is always 0x89.
#[derive(Debug)]
pub struct PeerIsIperf3;

impl std::fmt::Display for PeerIsIperf3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the server speaks iperf3's protocol")
    }
}

impl std::error::Error for PeerIsIperf3 {}

/// True if the first bytes from a server are an iperf3 state byte rather than our magic.
pub(crate) fn looks_like_iperf3(first: &[u8]) -> bool {
    matches!(first.first(), Some(9 | 0xff))
}

/// The first bytes of a server that speaks iperf3's protocol end the native attempt.
pub(crate) fn refuse_iperf3(first: &[u8]) -> Result<()> {
    if looks_like_iperf3(first) {
        return Err(PeerIsIperf3.into());
    }
    Ok(())
}
