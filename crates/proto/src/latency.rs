//! Request/response tests (`--rr`): what the client asks for, and what its streams measured.
//!
//! netperf's TCP_RR is the model: on each stream the client writes a request of
//! `request_bytes`, the server reads it whole and writes a response of `response_bytes`, and
//! the client times the round trip. Several transactions may be in flight per stream
//! (netperf's burst, neper's `--num-in-flight`); TCP keeps them in order, so neither end needs
//! a header and the bytes on the wire are exactly the sizes asked for.
//!
//! Two loops, named in every result so nobody mixes them up:
//!
//! - **Closed loop** (`rate_per_second` 0): each stream keeps `in_flight` transactions
//!   outstanding and sends the next request the moment a response completes. It measures the
//!   best transaction rate, but a stall of the server delays *sending* too, so a 200 ms stall
//!   costs one slow sample: the percentiles hide it (coordinated omission).
//! - **Open loop** (`rate_per_second` > 0): requests are due at fixed intervals whatever the
//!   responses do, up to `in_flight` outstanding; each latency is measured from the request's
//!   *intended* send time, so a request that could not even be sent during a stall counts
//!   the whole wait (coordinated-omission correction, as in wrk2 and HdrHistogram).
//!
//! Only the requesting end (the client) measures latency; the server answers and reports its
//! cost as for any test. Latencies go into a [`DurationHistogram`] (1.6 % precision), whose
//! counts are kept in the result so percentiles and the CDF can be recomputed from a stored run.

use serde::{Deserialize, Serialize};

use crate::histogram::DurationHistogram;
use crate::spec::{MAX_UDP_DATAGRAM, MIN_UDP_DATAGRAM, Protocol};

/// The largest request or response: 1 MiB.
pub const MAX_MESSAGE_BYTES: u32 = 1 << 20;
/// The most transactions in flight per stream.
pub const MAX_IN_FLIGHT: u32 = 1024;
/// The most requests per second per stream in an open loop.
pub const MAX_RATE_PER_SECOND: u64 = 10_000_000;
/// The most streams of a request/response test (each has a thread of its own on both ends).
pub const MAX_STREAMS: u32 = 1024;
/// The largest buffer the answering end (the server) holds per stream, for the requests it
/// reads and again for the responses it writes from (a pattern written as often as the
/// requests read ask for): 256 KiB, so a stream costs the server at most 512 KiB of buffers
/// whatever sizes and depth its client chose. Asking for `--in-flight` × `--response-size`
/// (up to 1 GiB) at once let clients that never read hold 1 GB of a server's memory with 16
/// tests (issue 35); one buffer of 256 KiB already lets each write fill a loopback socket's
/// send buffer, so the bound costs a large response a few more system calls, no throughput.
pub const ANSWER_BUFFER_MAX: u32 = 256 << 10;
/// The smallest of those buffers: a page's worth, so many 1-byte responses owed at once are
/// written in 4 KiB writes, not one system call each.
const ANSWER_BUFFER_MIN: u32 = 4096;

/// What a request/response test exchanges on each stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrSpec {
    /// Bytes of each request (client to server).
    pub request_bytes: u32,
    /// Bytes of each response (server to client).
    pub response_bytes: u32,
    /// Transactions outstanding per stream: always this many in a closed loop, at most this
    /// many in an open loop.
    pub in_flight: u32,
    /// Open loop: requests due per second per stream, at even intervals; 0 = closed loop.
    pub rate_per_second: u64,
    /// Connect/request/response/close (`--crr`, netperf's TCP_CRR): every transaction opens
    /// a TCP connection of its own and closes it; one at a time per stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub connect_each: bool,
}

impl RrSpec {
    /// netperf's TCP_RR defaults: 1-byte requests and responses, one in flight, closed loop.
    pub fn default_rr() -> Self {
        Self {
            request_bytes: 1,
            response_bytes: 1,
            in_flight: 1,
            rate_per_second: 0,
            connect_each: false,
        }
    }

    /// True for an open loop (latency from the intended send time).
    pub fn open_loop(&self) -> bool {
        self.rate_per_second > 0
    }

    /// Bytes of buffers one stream holds on either end: a read buffer and `in_flight` of the
    /// larger message to write.
    pub fn buffer_bytes(&self) -> u64 {
        let largest = u64::from(self.request_bytes.max(self.response_bytes));
        largest * u64::from(self.in_flight) + largest.max(64 * 1024)
    }

    /// The answering end's buffers per TCP stream, bytes: (requests are read into, responses
    /// are written from), each sized for `in_flight` messages within 4 KiB ..=
    /// [`ANSWER_BUFFER_MAX`]. A UDP stream's are smaller (one datagram each, at most 64 KiB).
    pub fn answer_buffers(&self) -> (usize, usize) {
        let size = |message: u32| {
            let want = u64::from(message) * u64::from(self.in_flight);
            want.clamp(u64::from(ANSWER_BUFFER_MIN), u64::from(ANSWER_BUFFER_MAX)) as usize
        };
        (size(self.request_bytes), size(self.response_bytes))
    }

    /// Bytes of buffers one stream holds on the answering end: [`Self::answer_buffers`]
    /// together, at most twice [`ANSWER_BUFFER_MAX`].
    pub fn answer_buffer_bytes(&self) -> u64 {
        let (requests, responses) = self.answer_buffers();
        (requests + responses) as u64
    }

    /// A sentence naming the first field out of range for a test over `protocol`, if any:
    /// a message is 1 byte to 1 MiB over TCP, a datagram with linerate's header over UDP,
    /// and the range quoted is the one of the test's protocol.
    pub fn problem(&self, protocol: Protocol) -> Option<String> {
        let (least, most, why) = match protocol {
            Protocol::Tcp => (1, MAX_MESSAGE_BYTES, String::new()),
            Protocol::Udp => (
                MIN_UDP_DATAGRAM,
                MAX_UDP_DATAGRAM,
                format!(" over UDP (each datagram carries a {MIN_UDP_DATAGRAM}-byte header)"),
            ),
        };
        let size = |name: &str, v: u32| {
            (!(least..=most).contains(&v)).then(|| {
                format!("{name} = {v} is out of range; allowed{why}: {least}..={most} bytes")
            })
        };
        size("request size (--request-size)", self.request_bytes)
            .or_else(|| size("response size (--response-size)", self.response_bytes))
            .or_else(|| {
                (!(1..=MAX_IN_FLIGHT).contains(&self.in_flight)).then(|| {
                    format!(
                        "transactions in flight (--in-flight) = {} is out of range; allowed: 1..={MAX_IN_FLIGHT}",
                        self.in_flight
                    )
                })
            })
            .or_else(|| {
                (self.connect_each && self.in_flight > 1).then(|| {
                    "--crr runs one transaction at a time per stream (each on a connection of its own); drop --in-flight and use -P for concurrency".to_string()
                })
            })
            .or_else(|| {
                (self.rate_per_second > MAX_RATE_PER_SECOND).then(|| {
                    format!(
                        "request rate (--rr-rate) = {}/s is out of range; allowed: 0 (closed loop) ..= {MAX_RATE_PER_SECOND}/s per stream",
                        self.rate_per_second
                    )
                })
            })
    }
}

/// What the requesting end of one stream measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyResult {
    /// Transactions completed after the warm-up (`-O`): the ones in `histogram`.
    pub transactions: u64,
    /// Transactions completed during the warm-up (not in `histogram`).
    pub omitted_transactions: u64,
    /// Requests sent that had no response when the stream ended.
    pub unanswered: u64,
    /// UDP: requests with no response within the loss timeout (the request or the response
    /// was lost); their latency is in no figure.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    /// True when latencies run from each request's intended send time (open loop).
    pub from_intended_send: bool,
    /// Open loop: requests that went out later than due by more than one interval (the
    /// stream could not keep the rate: too many outstanding, or a busy sender).
    pub late_requests: u64,
    /// The latencies of `transactions`, nanoseconds (with `--crr`: from the connect call to
    /// the server's close).
    pub histogram: DurationHistogram,
    /// `--crr`: each transaction's phases: connect (the call until the connection is up),
    /// first byte (request written until the first response byte), close (last response
    /// byte until the server's close arrived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Box<CrrPhases>>,
}

/// The phases of connect/request/response/close transactions (`--crr`), nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrrPhases {
    /// From the connect call until the connection is up (the TCP handshake).
    pub connect: DurationHistogram,
    /// From the request written until the first response byte.
    pub first_byte: DurationHistogram,
    /// From the last response byte until the server's close (its FIN) arrived.
    pub close: DurationHistogram,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One interval's transactions on one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrIntervalSample {
    /// Transactions completed in the interval.
    pub transactions: u64,
    /// Their median latency, nanoseconds; None when none completed, or when samples were
    /// merged (a median of medians is not a median).
    pub p50_ns: Option<u64>,
    /// Their 99th percentile, nanoseconds; None as for `p50_ns`.
    pub p99_ns: Option<u64>,
    /// Their largest latency, nanoseconds (exact, also after merging).
    pub max_ns: Option<u64>,
}

impl RrIntervalSample {
    /// The sample of one interval's histogram.
    pub fn of(h: &DurationHistogram) -> Self {
        let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Self {
            transactions: h.count(),
            p50_ns: h.quantile(0.5).map(ns),
            p99_ns: h.quantile(0.99).map(ns),
            max_ns: h.max().map(ns),
        }
    }

    /// Extends this sample by the next one (counts add, the maximum stays exact, percentiles
    /// of a merged sample are unknown).
    pub fn merge(&mut self, later: &Self) {
        self.transactions = self.transactions.saturating_add(later.transactions);
        self.p50_ns = None;
        self.p99_ns = None;
        self.max_ns = self.max_ns.max(later.max_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answering_end_holds_at_most_two_bounded_buffers_per_stream() {
        let one = RrSpec::default_rr();
        assert_eq!(one.answer_buffers(), (4096, 4096), "1-byte messages: a page each");
        let deep = RrSpec { in_flight: 16, response_bytes: 1000, ..one };
        assert_eq!(deep.answer_buffers(), (4096, 16_000));
        let huge = RrSpec { response_bytes: MAX_MESSAGE_BYTES, in_flight: MAX_IN_FLIGHT, ..one };
        assert_eq!(huge.answer_buffers(), (4096, ANSWER_BUFFER_MAX as usize));
        assert_eq!(huge.answer_buffer_bytes(), 4096 + (256 << 10));
        assert!(huge.buffer_bytes() > 1 << 30, "what the requesting end holds is not bounded");
    }

    #[test]
    fn problems_name_the_flag_and_the_range() {
        let tcp = Protocol::Tcp;
        assert_eq!(RrSpec::default_rr().problem(tcp), None);
        let bad = RrSpec { request_bytes: 0, ..RrSpec::default_rr() };
        assert!(bad.problem(tcp).unwrap().contains("--request-size"));
        let bad = RrSpec { response_bytes: MAX_MESSAGE_BYTES + 1, ..RrSpec::default_rr() };
        assert!(bad.problem(tcp).unwrap().contains("--response-size"));
        let bad = RrSpec { in_flight: 0, ..RrSpec::default_rr() };
        assert!(bad.problem(tcp).unwrap().contains("--in-flight"));
        let bad = RrSpec { rate_per_second: MAX_RATE_PER_SECOND + 1, ..RrSpec::default_rr() };
        assert!(bad.problem(tcp).unwrap().contains("--rr-rate"));
    }

    /// `--rr -u --request-size 0` quoted TCP's 1..=1048576: each protocol quotes its own.
    #[test]
    fn a_size_out_of_range_quotes_the_range_of_the_tests_protocol() {
        let zero = RrSpec { request_bytes: 0, ..RrSpec::default_rr() };
        let udp = zero.problem(Protocol::Udp).expect("0 bytes");
        assert!(udp.contains("--request-size") && udp.contains("24..=65507"), "{udp}");
        assert!(!udp.contains("1048576"), "{udp}");
        let tcp = zero.problem(Protocol::Tcp).expect("0 bytes");
        assert!(tcp.contains("1..=1048576"), "{tcp}");
        let big = RrSpec { request_bytes: 24, response_bytes: 65_508, ..RrSpec::default_rr() };
        assert!(big.problem(Protocol::Udp).expect("too big").contains("--response-size"));
        assert_eq!(big.problem(Protocol::Tcp), None);
    }

    #[test]
    fn interval_samples_merge_counts_and_maxima_only() {
        let mut h = DurationHistogram::new();
        for us in [10, 20, 30] {
            h.record(std::time::Duration::from_micros(us));
        }
        let mut a = RrIntervalSample::of(&h);
        assert_eq!(a.transactions, 3);
        assert!(a.p50_ns.is_some_and(|p| (19_000..21_000).contains(&p)), "{a:?}");
        assert_eq!(a.max_ns, Some(30_000));
        let b = RrIntervalSample {
            transactions: 2,
            p50_ns: Some(5),
            p99_ns: Some(9),
            max_ns: Some(40_000),
        };
        a.merge(&b);
        assert_eq!((a.transactions, a.p50_ns, a.p99_ns, a.max_ns), (5, None, None, Some(40_000)));
        assert_eq!(RrIntervalSample::of(&DurationHistogram::new()).max_ns, None);
    }
}
