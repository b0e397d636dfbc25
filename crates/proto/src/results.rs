//! The figures each end reports about its own streams, exchanged at the end of a test.
//!
//! Raw counters only: bytes, microseconds, interval samples, socket facts. Rates, sums and
//! verdicts are derived by the application's `stats` module, so results can be recomputed
//! from what was stored. Unknown fields are ignored on decode, so later versions can add
//! measurements without breaking older peers.

use serde::{Deserialize, Serialize};

use crate::spec::Flow;

/// Whether this end wrote or read the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamRole {
    /// This end wrote the stream's bytes.
    Sender,
    /// This end read the stream's bytes.
    Receiver,
}

/// One sampling interval of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// Start, microseconds since the test's start.
    pub start_us: u64,
    /// End, microseconds since the test's start.
    pub end_us: u64,
    /// Bytes moved during the interval.
    pub bytes: u64,
    /// True if the interval lies in the omitted warm-up.
    pub omitted: bool,
}

/// Socket options as requested and as the kernel granted them on this end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketReport {
    /// SO_SNDBUF read back after setup (Linux reports double the requested value).
    pub send_buffer_bytes: Option<u64>,
    /// SO_RCVBUF read back after setup.
    pub recv_buffer_bytes: Option<u64>,
    /// TCP_MAXSEG read back.
    pub mss_bytes: Option<u32>,
    /// TCP_CONGESTION read back.
    pub congestion: Option<String>,
    /// TCP_NODELAY read back.
    #[serde(default)]
    pub no_delay: Option<bool>,
    /// This end's address of the data connection.
    #[serde(default)]
    pub local_address: Option<String>,
    /// The other end's address of the data connection.
    #[serde(default)]
    pub peer_address: Option<String>,
}

/// One stream as seen by one end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamResult {
    /// Stream id (1-based).
    pub id: u32,
    /// Which way the stream flows.
    pub flow: Flow,
    /// Whether this end sent or received it.
    pub role: StreamRole,
    /// All bytes moved, warm-up included.
    pub bytes: u64,
    /// Bytes moved during the omitted warm-up.
    pub omitted_bytes: u64,
    /// From the test start until this end finished the stream (sent the last byte, or read
    /// end-of-stream), microseconds.
    pub duration_us: u64,
    /// Length of the omitted warm-up actually applied, microseconds.
    pub omitted_us: u64,
    /// Interval samples in time order (may be empty when intervals are off).
    #[serde(default)]
    pub intervals: Vec<IntervalSample>,
    /// Socket facts.
    pub socket: SocketReport,
    /// Retransmitted segments (senders only, where the OS reports them).
    pub retransmits: Option<u64>,
    /// Why the stream ended early, if it did.
    pub error: Option<String>,
}

impl StreamResult {
    /// Bytes counted in the summary: everything after the omitted warm-up.
    pub fn measured_bytes(&self) -> u64 {
        self.bytes.saturating_sub(self.omitted_bytes)
    }

    /// Duration counted in the summary, microseconds.
    pub fn measured_us(&self) -> u64 {
        self.duration_us.saturating_sub(self.omitted_us)
    }
}

/// Everything one end reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideResults {
    /// Name and version of the reporting implementation.
    pub software: String,
    /// Per-stream figures, ordered by id.
    pub streams: Vec<StreamResult>,
    /// True if per-interval samples were dropped to fit the frame cap.
    #[serde(default)]
    pub intervals_dropped: bool,
}

impl SideResults {
    /// Drops per-interval samples if the encoded results would exceed `max_bytes`, so results
    /// of very long or very wide tests still fit in one frame. Totals are always kept.
    pub fn fit_to(&mut self, max_bytes: usize) {
        let size = serde_json::to_vec(self).map(|v| v.len()).unwrap_or(usize::MAX);
        if size > max_bytes {
            for s in &mut self.streams {
                s.intervals = Vec::new();
            }
            self.intervals_dropped = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(intervals: usize) -> StreamResult {
        StreamResult {
            id: 1,
            flow: Flow::ClientToServer,
            role: StreamRole::Sender,
            bytes: 1000,
            omitted_bytes: 100,
            duration_us: 2_000_000,
            omitted_us: 500_000,
            intervals: (0..intervals as u64)
                .map(|i| IntervalSample { start_us: i, end_us: i + 1, bytes: i, omitted: false })
                .collect(),
            socket: SocketReport::default(),
            retransmits: None,
            error: None,
        }
    }

    #[test]
    fn measured_figures_exclude_warmup() {
        let s = stream(0);
        assert_eq!(s.measured_bytes(), 900);
        assert_eq!(s.measured_us(), 1_500_000);
    }

    #[test]
    fn fit_to_drops_intervals_only_when_too_big() {
        let mut r =
            SideResults { software: "t".into(), streams: vec![stream(1000)], ..Default::default() };
        r.fit_to(1 << 20);
        assert!(!r.intervals_dropped);
        assert_eq!(r.streams[0].intervals.len(), 1000);
        r.fit_to(1000);
        assert!(r.intervals_dropped);
        assert!(r.streams[0].intervals.is_empty());
        assert_eq!(r.streams[0].bytes, 1000);
    }
}
