//! The test specification: what the client asks the server to run.
//!
//! A [`TestSpec`] is the typed, validated form of a test request. The CLI builds one from flags;
//! the server receives one from the wire and must call [`TestSpec::validate`] before acting on
//! it, because it is peer input. Every serialized key carries its unit.

use serde::{Deserialize, Serialize};

/// The most parallel streams a test may ask for (per direction). A pooled data plane serves
/// 10,000 on two cores; what stops a test first is usually the open-files limit.
pub const MAX_STREAMS: u32 = 16384;
/// The largest block (one write or read call) a test may ask for: 64 MiB.
pub const MAX_BLOCK_BYTES: u32 = 64 << 20;
/// Most CPUs in the server's `-A` list.
pub const MAX_AFFINITY_CPUS: usize = 1024;
/// Highest CPU number in an `-A` list.
pub const MAX_AFFINITY_CPU: u32 = 65_535;
/// A TCP receiver's read size when `--read-size` is unset: the larger of this and `-l`.
pub const DEFAULT_READ_BYTES: u32 = 128 * 1024;
/// Bytes per write call of an unpaced TCP bulk sender when `-l` is not given
/// ([`TestSpec::write_bytes`]; docs/PERFORMANCE.md, "Writing in 1 MiB").
pub const DEFAULT_WRITE_BYTES: u32 = 1 << 20;
/// The largest title accepted, in bytes.
pub const MAX_TITLE_BYTES: usize = 256;
/// The longest congestion-control name accepted (Linux TCP_CA_NAME_MAX is 16).
pub const MAX_CONGESTION_NAME: usize = 16;
/// The most stream-buffer memory one test may need on one end: 1 GiB. Without this bound a
/// peer could make a server allocate 16384 × 64 MiB. For TCP it depends on how the end lays
/// out its data plane (`limits::buffer_memory`), so the server checks it at admission; UDP
/// streams always have buffers of their own, so [`TestSpec::validate`] checks those.
pub const MAX_TEST_BUFFER_BYTES: u64 = 1 << 30;
/// Smallest UDP datagram: the 24-byte native header (send time, 64-bit sequence number and
/// the test's secret, `udp::DatagramFormat`).
pub const MIN_UDP_DATAGRAM: u32 = 24;
/// Smallest UDP datagram of an iperf3 test: iperf3's own lower bound for `-l`, which holds its
/// header with either counter width (12 or 16 bytes); its datagrams carry no secret.
pub const MIN_IPERF3_UDP_DATAGRAM: u32 = 16;
/// Largest UDP datagram over IPv4 (65535 − 20 − 8).
pub const MAX_UDP_DATAGRAM: u32 = 65507;
/// Datagram buffers a UDP receiver holds per stream (it reads up to this many per system
/// call), which the per-test memory bound counts.
pub const UDP_RECEIVE_BATCH: u64 = 64;
/// The smallest receive buffer a UDP receiver uses per datagram, whatever `-l` is.
pub const UDP_MIN_RECEIVE_BUFFER: u32 = 2048;
/// Buffers per receive call of a UDP receiver with GRO (each takes a coalesced buffer).
pub const UDP_GRO_BATCH: u64 = 8;
/// Bytes of one such buffer: the largest coalesced buffer the kernel delivers.
pub const UDP_GRO_BUFFER: u32 = 65_536;
/// The highest `--fq-rate`: the kernel takes `SO_MAX_PACING_RATE` in bytes per second as a
/// 64-bit value; this keeps the bit rate (× 8) within 64 bits.
pub const MAX_FQ_RATE_BPS: u64 = u64::MAX / 8 * 8;
/// The largest burst (`-b RATE/BURST`): iperf3's own limit (`MAX_BURST`).
pub const MAX_BURST: u16 = 1000;
/// The longest test duration accepted: 7 days.
pub const MAX_DURATION_MS: u64 = 7 * 24 * 3600 * 1000;
/// The shortest sampling interval accepted (0 turns sampling off): the client's own `-i`
/// floor. Servers refuse shorter than their `--min-interval` (100 ms by default).
pub const MIN_INTERVAL_MS: u64 = 10;

/// Transport protocol of the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// TCP streams.
    Tcp,
    /// UDP datagrams (`-u`), paced at `bits_per_second` (0 = as fast as possible).
    Udp,
}

/// Which way data flows in the whole test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The client sends, the server receives (iperf's default).
    Upload,
    /// The server sends, the client receives (`-R`).
    Download,
    /// Both at once, each with its own set of streams (`--bidir`).
    Bidirectional,
}

/// Which way data flows on one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// The client sends on this stream.
    ClientToServer,
    /// The server sends on this stream.
    ServerToClient,
}

impl Flow {
    /// A short label for tables: `C->S` or `S->C`.
    pub fn label(self) -> &'static str {
        match self {
            Self::ClientToServer => "C->S",
            Self::ServerToClient => "S->C",
        }
    }
}

/// When the senders stop. JSON: `{"kind": "duration", "duration_ms": N}` or
/// `{"kind": "bytes", "bytes": N}` (decoded field by field, not through serde's buffering
/// tagged-enum derive, because it arrives from peers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EndCondition {
    /// Send for this long (the client's clock decides; it tells the server with `Stop`).
    Duration {
        /// Test length in milliseconds, not counting the omitted warm-up.
        duration_ms: u64,
    },
    /// Send this many bytes in total per direction, over all streams of that direction.
    Bytes {
        /// Byte budget per direction.
        bytes: u64,
    },
}

impl<'de> Deserialize<'de> for EndCondition {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum Kind {
            Duration,
            Bytes,
        }
        #[derive(Deserialize)]
        struct Fields {
            kind: Kind,
            duration_ms: Option<u64>,
            bytes: Option<u64>,
        }
        let f = Fields::deserialize(d)?;
        let missing = serde::de::Error::missing_field;
        match f.kind {
            Kind::Duration => f
                .duration_ms
                .map(|duration_ms| Self::Duration { duration_ms })
                .ok_or(missing("duration_ms")),
            Kind::Bytes => f.bytes.map(|bytes| Self::Bytes { bytes }).ok_or(missing("bytes")),
        }
    }
}

/// Everything the two ends must agree on to run one test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Transport protocol.
    pub protocol: Protocol,
    /// Which way data flows.
    pub direction: Direction,
    /// Streams per direction (`-P`).
    pub streams: u32,
    /// When senders stop.
    pub end: EndCondition,
    /// Bytes per write/read call (`-l`).
    pub block_bytes: u32,
    /// Requested SO_SNDBUF/SO_RCVBUF on every data socket of both ends (`-w`); None = autotuning.
    pub window_bytes: Option<u64>,
    /// Per-stream pacing target in bits per second (`-b`); 0 = unlimited.
    pub bits_per_second: u64,
    /// Requested TCP maximum segment size (`-M`).
    pub mss_bytes: Option<u32>,
    /// Disable Nagle's algorithm on data sockets (`-N`).
    pub no_delay: bool,
    /// Congestion-control algorithm for data sockets on both ends (`-C`).
    pub congestion: Option<String>,
    /// Warm-up excluded from the summary (`-O`), milliseconds.
    pub omit_ms: u64,
    /// Interval at which both ends sample their counters; 0 = no interval samples.
    pub interval_ms: u64,
    /// Senders use zero-copy sendfile(2) from a memory-backed file (`-Z`).
    pub zerocopy: bool,
    /// Free-form label carried into results (`-T`).
    pub title: Option<String>,
    /// A fleet start (`linerate fleet`): once every data stream is attached the server says
    /// `ready` and waits for the client's `go` instead of starting at once, so one
    /// coordinator can start many servers at one instant. Needs [`Capability::HeldStart`].
    ///
    /// [`Capability::HeldStart`]: crate::wire::Capability::HeldStart
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_start: bool,
    /// Bytes per read call on TCP receivers (`--read-size`); None = [`TestSpec::read_size`]'s
    /// default. Independent of `-l`: a receiver reading in the sender's small writes makes
    /// one system call per write (iperf3 does, and is slower than iperf2 with 1500-byte
    /// writes for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u32>,
    /// The most bytes per write call on TCP bulk senders, when not `-l`
    /// ([`TestSpec::write_size`]): an unpaced sender starts at the block and grows its calls up
    /// to this as its own rate allows (2 ms of it), a paced one writes 1 ms of its target rate
    /// a wake-up, within the same bounds. The client sets [`DEFAULT_WRITE_BYTES`] for a TCP
    /// bulk test without `-l`, `-Z` or a burst: with the unsent-queue limit, 1 MiB writes moved
    /// twice the bytes of 128 KiB ones between namespaces at the same CPU. An explicit `-l` is
    /// the write size, as in iperf3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes: Option<u32>,
    /// UDP receivers leave the kernel's receive offload off (`--no-gro`). By default they
    /// ask for `UDP_GRO` and account every datagram of a coalesced buffer by its own header.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_gro: bool,
    /// CPUs the server's data threads are bound to in turn (`-A CLIENT,SERVER`); empty = not
    /// pinned. The client's own list stays on the client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_cpus: Vec<u32>,
    /// A request/response test (`--rr`): each stream exchanges requests and responses of
    /// these sizes instead of a bulk flow, and the client measures every round trip. Needs
    /// [`Capability::Latency`]. See [`crate::latency`].
    ///
    /// [`Capability::Latency`]: crate::wire::Capability::Latency
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<crate::latency::RrSpec>,
    /// The IP type-of-service byte (`-S/--tos`, `--dscp` as DSCP << 2) of every data socket on
    /// both ends: `IP_TOS`, or `IPV6_TCLASS` on IPv6. None (or 0, iperf3's "unset") leaves the
    /// kernel's default. Needs [`Capability::Tos`].
    ///
    /// [`Capability::Tos`]: crate::wire::Capability::Tos
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<std::num::NonZeroU8>,
    /// The kernel's fair-queue pacing cap on every data socket of both ends (`--fq-rate`,
    /// `SO_MAX_PACING_RATE`), bits per second; None = uncapped. Needs
    /// [`Capability::FqRate`].
    ///
    /// [`Capability::FqRate`]: crate::wire::Capability::FqRate
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fq_rate_bps: Option<std::num::NonZeroU64>,
    /// UDP datagrams leave with the don't-fragment bit set and are never fragmented locally
    /// (`--dont-fragment`, `IP_PMTUDISC_DO`): one larger than the path MTU fails to send
    /// instead. Both ends' UDP data sockets. Needs [`Capability::DontFragment`].
    ///
    /// [`Capability::DontFragment`]: crate::wire::Capability::DontFragment
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dont_fragment: bool,
    /// iperf3's burst mode (`-b RATE/BURST`): paced senders send this many blocks (datagrams)
    /// back to back, then wait until the rate has caught up with all of them. None = every
    /// block paced on its own. Needs [`Capability::Burst`].
    ///
    /// [`Capability::Burst`]: crate::wire::Capability::Burst
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<std::num::NonZeroU16>,
    /// How much a TCP sender keeps queued in its socket but not yet sent
    /// (`--notsent-lowat`, the socket's `TCP_NOTSENT_LOWAT`): None = the sender's automatic
    /// limit (which follows its rate), `Some(0)` = the kernel's default (no limit),
    /// `Some(n)` = n bytes. Needs [`Capability::NotsentLowat`] when above 0 (a server without
    /// it leaves the system's setting, which is what 0 asks for).
    ///
    /// [`Capability::NotsentLowat`]: crate::wire::Capability::NotsentLowat
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<u32>,
    /// Both ends of a loopback test share one kernel: TCP stream `id`'s data thread on each
    /// end runs on CPU `pair_cpus[(id - 1) % len]`, so a stream's sender and receiver share
    /// a core (linerate's automatic placement on loopback, `-A none` turns it off). An end
    /// that cannot bind a thread there leaves it unpinned. Empty = no pairing. A hint, not
    /// a requirement: a client drops it for a server without [`Capability::PairCpus`].
    ///
    /// [`Capability::PairCpus`]: crate::wire::Capability::PairCpus
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pair_cpus: Vec<u32>,
    /// With [`pair_cpus`](Self::pair_cpus): the client's end of stream `id` runs on the
    /// list's next CPU, `pair_cpus[id % len]`, so each stream's ends are on two CPUs and every
    /// CPU carries as many ends (linerate's `split` placement). The server's end is where
    /// pairing puts it either way; the client places its own end, so a server that does not
    /// know this field still runs the placement.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pair_split: bool,
}

/// Why a [`TestSpec`] is invalid. Messages name the field and the allowed range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A numeric field is outside its allowed range.
    #[error("{field} = {value} is out of range; allowed: {allowed}")]
    OutOfRange {
        /// The field's flag-style name.
        field: &'static str,
        /// The offending value.
        value: String,
        /// The allowed range in words.
        allowed: String,
    },
    /// A text field is malformed.
    #[error("{field} is invalid: {reason}")]
    BadText {
        /// The field's flag-style name.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn out_of_range(
    field: &'static str,
    value: impl ToString,
    allowed: impl Into<String>,
) -> SpecError {
    SpecError::OutOfRange { field, value: value.to_string(), allowed: allowed.into() }
}

impl TestSpec {
    /// Blocks (datagrams) per burst of a paced sender: `-b RATE/BURST`'s BURST, else 1.
    pub fn burst_blocks(&self) -> u64 {
        self.burst.map_or(1, |b| u64::from(b.get()))
    }

    /// A spec with iperf3-like defaults: one TCP upload stream for 10 s in 128 KiB blocks.
    pub fn default_tcp() -> Self {
        Self {
            protocol: Protocol::Tcp,
            direction: Direction::Upload,
            streams: 1,
            end: EndCondition::Duration { duration_ms: 10_000 },
            block_bytes: 128 * 1024,
            window_bytes: None,
            bits_per_second: 0,
            mss_bytes: None,
            no_delay: false,
            congestion: None,
            omit_ms: 0,
            interval_ms: 1000,
            zerocopy: false,
            title: None,
            held_start: false,
            read_bytes: None,
            write_bytes: None,
            no_gro: false,
            server_cpus: Vec::new(),
            rr: None,
            tos: None,
            fq_rate_bps: None,
            dont_fragment: false,
            burst: None,
            notsent_lowat: None,
            pair_cpus: Vec::new(),
            pair_split: false,
        }
    }

    /// Checks every field against the protocol's limits. Servers call this on peer input.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.validate_with_udp_min(MIN_UDP_DATAGRAM)
    }

    /// [`TestSpec::validate`] for a test whose datagrams may be as small as `min_udp` bytes
    /// (an iperf3 test: [`MIN_IPERF3_UDP_DATAGRAM`]).
    pub fn validate_with_udp_min(&self, min_udp: u32) -> Result<(), SpecError> {
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(out_of_range("streams (-P)", self.streams, format!("1..={MAX_STREAMS}")));
        }
        if self.block_bytes == 0 || self.block_bytes > MAX_BLOCK_BYTES {
            return Err(out_of_range(
                "block size (-l)",
                self.block_bytes,
                format!("1..={MAX_BLOCK_BYTES} bytes"),
            ));
        }
        match self.end {
            EndCondition::Duration { duration_ms: 0 } => {
                return Err(out_of_range("duration (-t)", "0 s", "more than 0 s"));
            }
            EndCondition::Duration { duration_ms } if duration_ms > MAX_DURATION_MS => {
                return Err(out_of_range("duration (-t)", duration_ms, "at most 7 days"));
            }
            EndCondition::Bytes { bytes: 0 } => {
                return Err(out_of_range("bytes (-n)", 0, "at least 1 byte"));
            }
            _ => {}
        }
        if self.omit_ms > MAX_DURATION_MS {
            return Err(out_of_range("omit (-O)", self.omit_ms, "at most 7 days"));
        }
        if self.interval_ms > MAX_DURATION_MS || (1..MIN_INTERVAL_MS).contains(&self.interval_ms) {
            return Err(out_of_range(
                "interval (-i)",
                format!("{} ms", self.interval_ms),
                format!("0 (off) or {MIN_INTERVAL_MS} ms ..= 7 days"),
            ));
        }
        if let Some(w) = self.window_bytes
            && (w == 0 || w > i32::MAX as u64)
        {
            return Err(out_of_range("window (-w)", w, "1 byte ..= 2 GiB"));
        }
        if let Some(r) = self.read_bytes
            && (r == 0 || r > MAX_BLOCK_BYTES)
        {
            return Err(out_of_range(
                "read size (--read-size)",
                r,
                format!("1..={MAX_BLOCK_BYTES} bytes"),
            ));
        }
        if let Some(w) = self.write_bytes
            && (w == 0 || w > MAX_BLOCK_BYTES)
        {
            return Err(out_of_range("write size", w, format!("1..={MAX_BLOCK_BYTES} bytes")));
        }
        if let Some(n) = self.notsent_lowat
            && n > MAX_BLOCK_BYTES
        {
            return Err(out_of_range(
                "unsent-queue limit (--notsent-lowat)",
                n,
                format!("0 (the kernel's default) or 1..={MAX_BLOCK_BYTES} bytes"),
            ));
        }
        for (field, cpus) in
            [("server CPUs (-A)", &self.server_cpus), ("paired CPUs", &self.pair_cpus)]
        {
            if cpus.len() > MAX_AFFINITY_CPUS || cpus.iter().any(|c| *c > MAX_AFFINITY_CPU) {
                return Err(out_of_range(
                    field,
                    format!("{} CPUs", cpus.len()),
                    format!("at most {MAX_AFFINITY_CPUS} CPUs numbered 0..={MAX_AFFINITY_CPU}"),
                ));
            }
        }
        if let Some(m) = self.mss_bytes
            && !(88..=65535).contains(&m)
        {
            return Err(out_of_range("MSS (-M)", m, "88..=65535 bytes"));
        }
        if let Some(b) = self.burst.map(std::num::NonZeroU16::get) {
            if b > MAX_BURST {
                return Err(out_of_range("burst (-b RATE/BURST)", b, format!("1..={MAX_BURST}")));
            }
            if self.bits_per_second == 0 {
                return Err(SpecError::BadText {
                    field: "burst (-b RATE/BURST)",
                    reason: "a burst needs a rate to pace to; give e.g. -b 100M/10".into(),
                });
            }
        }
        if self.dont_fragment && self.protocol != Protocol::Udp {
            return Err(SpecError::BadText {
                field: "don't fragment (--dont-fragment)",
                reason: "it applies to UDP (-u); TCP sets the bit and finds the path MTU itself"
                    .into(),
            });
        }
        if let Some(r) = self.fq_rate_bps.map(std::num::NonZeroU64::get)
            && !(8..=MAX_FQ_RATE_BPS).contains(&r)
        {
            return Err(out_of_range(
                "fair-queue pacing rate (--fq-rate)",
                format!("{r} bit/s"),
                format!("8 ..= {MAX_FQ_RATE_BPS} bit/s"),
            ));
        }
        if self.protocol == Protocol::Udp {
            self.validate_udp(min_udp)?;
        }
        if let Some(rr) = &self.rr {
            self.validate_rr(rr)?;
        }
        self.validate_text()
    }

    /// A request/response test: its sizes, and the bulk-flow settings that make no sense
    /// with it (each named, with what to use instead).
    fn validate_rr(&self, rr: &crate::latency::RrSpec) -> Result<(), SpecError> {
        if let Some(reason) = rr.problem(self.protocol) {
            return Err(SpecError::BadText { field: "request/response (--rr)", reason });
        }
        let max = crate::latency::MAX_STREAMS;
        if self.streams > max {
            return Err(out_of_range(
                "streams of a request/response test (-P with --rr)",
                self.streams,
                format!("1..={max} (each stream has a thread on both ends)"),
            ));
        }
        if self.protocol == Protocol::Udp && rr.connect_each {
            return Err(SpecError::BadText {
                field: "request/response (--crr)",
                reason: "--crr opens a TCP connection per transaction; drop -u".into(),
            });
        }
        let conflicts = [
            (
                self.direction != Direction::Upload,
                "-R/--bidir: requests flow from the client and responses back, so a request/response test has one direction",
            ),
            (self.bits_per_second > 0, "-b: pace transactions with --rr-rate instead"),
            (self.zerocopy, "-Z: requests and responses are written from memory"),
            (
                matches!(self.end, EndCondition::Bytes { .. }),
                "-n/-k: a request/response test runs for a time (-t)",
            ),
        ];
        if let Some((_, what)) = conflicts.iter().find(|(set, _)| *set) {
            return Err(SpecError::BadText {
                field: "request/response (--rr)",
                reason: format!("it does not combine with {what}"),
            });
        }
        let buffers = u64::from(self.streams) * rr.buffer_bytes();
        if buffers > MAX_TEST_BUFFER_BYTES {
            return Err(out_of_range(
                "streams × in flight × message size (-P × --in-flight × the larger of --request-size and --response-size)",
                format!("{buffers} bytes"),
                "at most 1 GiB of buffers per test",
            ));
        }
        Ok(())
    }

    fn validate_udp(&self, min_udp: u32) -> Result<(), SpecError> {
        if !(min_udp..=MAX_UDP_DATAGRAM).contains(&self.block_bytes) {
            return Err(out_of_range(
                "UDP datagram size (-l)",
                self.block_bytes,
                format!("{min_udp}..={MAX_UDP_DATAGRAM} bytes"),
            ));
        }
        let buffers = self.buffer_bytes();
        if buffers > MAX_TEST_BUFFER_BYTES {
            return Err(out_of_range(
                "UDP streams × datagram size (-P × -l)",
                format!(
                    "{} × {} bytes (× {UDP_RECEIVE_BATCH} receive buffers) = {buffers} bytes",
                    self.connection_count(),
                    self.block_bytes
                ),
                "at most 1 GiB of receive buffers per test; use fewer streams, a smaller -l, or --no-gro (512 KiB of receive buffers per stream with GRO)",
            ));
        }
        let tcp_only = [
            (self.mss_bytes.is_some(), "-M (MSS)"),
            (self.no_delay, "-N (no delay)"),
            (self.congestion.is_some(), "-C (congestion control)"),
            (self.zerocopy, "-Z (zero copy)"),
            (self.read_bytes.is_some(), "--read-size (UDP receivers read whole datagrams)"),
            (self.notsent_lowat.is_some(), "--notsent-lowat"),
            (self.write_bytes.is_some(), "a write size (UDP sends one datagram a call)"),
        ];
        if let Some((_, flag)) = tcp_only.iter().find(|(set, _)| *set) {
            return Err(SpecError::BadText {
                field: "protocol",
                reason: format!("{flag} applies to TCP only; drop it or drop -u"),
            });
        }
        Ok(())
    }

    fn validate_text(&self) -> Result<(), SpecError> {
        if let Some(cc) = &self.congestion {
            let ok = !cc.is_empty()
                && cc.len() <= MAX_CONGESTION_NAME
                && cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok {
                return Err(SpecError::BadText {
                    field: "congestion control (-C)",
                    reason: format!(
                        "{cc:?} is not an algorithm name (1-{MAX_CONGESTION_NAME} letters, digits, '_' or '-')"
                    ),
                });
            }
        }
        if let Some(t) = &self.title
            && (t.len() > MAX_TITLE_BYTES || t.chars().any(char::is_control))
        {
            return Err(SpecError::BadText {
                field: "title (-T)",
                reason: format!("at most {MAX_TITLE_BYTES} bytes and no control characters"),
            });
        }
        Ok(())
    }

    /// Every stream of the test: its id (1-based) and which way it flows. In a bidirectional
    /// test ids `1..=N` flow client to server and `N+1..=2N` server to client.
    pub fn stream_plan(&self) -> Vec<(u32, Flow)> {
        let n = self.streams;
        let mut plan = Vec::new();
        let up = matches!(self.direction, Direction::Upload | Direction::Bidirectional);
        let down = matches!(self.direction, Direction::Download | Direction::Bidirectional);
        if up {
            plan.extend((1..=n).map(|id| (id, Flow::ClientToServer)));
        }
        if down {
            let base = if up { n } else { 0 };
            plan.extend((1..=n).map(|i| (base + i, Flow::ServerToClient)));
        }
        plan
    }

    /// Total number of data connections the client opens.
    pub fn connection_count(&self) -> u32 {
        match self.direction {
            Direction::Bidirectional => self.streams.saturating_mul(2),
            _ => self.streams,
        }
    }

    /// The flow of stream `id`, or None if the test has no such stream.
    pub fn flow_of(&self, id: u32) -> Option<Flow> {
        if id == 0 || id > self.connection_count() {
            return None;
        }
        match self.direction {
            Direction::Upload => Some(Flow::ClientToServer),
            Direction::Download => Some(Flow::ServerToClient),
            Direction::Bidirectional if id <= self.streams => Some(Flow::ClientToServer),
            Direction::Bidirectional => Some(Flow::ServerToClient),
        }
    }

    /// The stream buffers one end may hold for this test: per TCP stream one block or read
    /// buffer, whichever is larger ([`TestSpec::read_size`]); per UDP
    /// stream a receiver's batch of [`UDP_RECEIVE_BATCH`] datagram buffers of at least
    /// [`UDP_MIN_RECEIVE_BUFFER`] bytes, or with GRO [`UDP_GRO_BATCH`] buffers of
    /// [`UDP_GRO_BUFFER`] (the larger of what either role needs).
    pub fn buffer_bytes(&self) -> u64 {
        let conns = u64::from(self.connection_count());
        if let Some(rr) = &self.rr {
            return conns * rr.buffer_bytes();
        }
        match self.protocol {
            Protocol::Tcp => {
                conns * u64::from(self.block_bytes.max(self.read_size()).max(self.write_size()))
            }
            Protocol::Udp => {
                let plain =
                    u64::from(self.block_bytes.max(UDP_MIN_RECEIVE_BUFFER)) * UDP_RECEIVE_BATCH;
                let gro = if self.no_gro { 0 } else { UDP_GRO_BATCH * u64::from(UDP_GRO_BUFFER) };
                conns * plain.max(gro)
            }
        }
    }

    /// Bytes per read call on a TCP receiver: `--read-size`, else the larger of `-l` and
    /// [`DEFAULT_READ_BYTES`].
    pub fn read_size(&self) -> u32 {
        self.read_bytes.unwrap_or(self.block_bytes.max(DEFAULT_READ_BYTES))
    }

    /// Whether [`TestSpec::write_bytes`] applies: a TCP bulk test without `-Z` or a burst
    /// (`-b RATE/N`'s bursts are blocks, `-Z` sends its file in blocks, a transaction has its
    /// own sizes).
    pub fn writes_bulk(&self) -> bool {
        self.protocol == Protocol::Tcp
            && self.rr.is_none()
            && self.burst_blocks() <= 1
            && !self.zerocopy
    }

    /// The most bytes per write call on a TCP bulk sender: [`TestSpec::write_bytes`] where it
    /// applies ([`TestSpec::writes_bulk`]), else `-l`.
    pub fn write_size(&self) -> u32 {
        match self.write_bytes {
            Some(w) if self.writes_bulk() => w,
            _ => self.block_bytes,
        }
    }

    /// The requested duration, if the test is time-bound.
    pub fn duration_ms(&self) -> Option<u64> {
        match self.end {
            EndCondition::Duration { duration_ms } => Some(duration_ms),
            EndCondition::Bytes { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_bulk_writes_in_its_write_size_and_everything_else_in_blocks() {
        let mut s = TestSpec { write_bytes: Some(DEFAULT_WRITE_BYTES), ..TestSpec::default_tcp() };
        assert_eq!(s.write_size(), DEFAULT_WRITE_BYTES);
        assert_eq!(s.buffer_bytes(), u64::from(DEFAULT_WRITE_BYTES), "one stream's buffer");
        s.bits_per_second = 1_000_000_000;
        assert_eq!(s.write_size(), DEFAULT_WRITE_BYTES, "paced: steps up to the write size");
        s.burst = std::num::NonZeroU16::new(4);
        assert_eq!(s.write_size(), s.block_bytes, "-b RATE/4: bursts of blocks");
        s.burst = None;
        s.bits_per_second = 0;
        s.zerocopy = true;
        assert_eq!(s.write_size(), s.block_bytes, "-Z sends its file in blocks");
        s.zerocopy = false;
        s.write_bytes = None;
        assert_eq!(s.write_size(), s.block_bytes, "-l given");
        s.write_bytes = Some(0);
        assert!(s.validate().is_err(), "0 bytes a write");
        s.write_bytes = Some(DEFAULT_WRITE_BYTES);
        s.protocol = Protocol::Udp;
        assert!(s.validate().is_err(), "UDP sends a datagram a call");
    }

    #[test]
    fn default_is_valid() {
        assert_eq!(TestSpec::default_tcp().validate(), Ok(()));
    }

    #[test]
    fn rejects_out_of_range_fields_with_named_field() {
        let mut s = TestSpec::default_tcp();
        s.streams = 0;
        assert!(s.validate().unwrap_err().to_string().contains("-P"));
        s.streams = MAX_STREAMS + 1;
        assert!(s.validate().is_err());
        let mut s = TestSpec::default_tcp();
        s.block_bytes = 0;
        assert!(s.validate().unwrap_err().to_string().contains("-l"));
        let mut s = TestSpec::default_tcp();
        s.end = EndCondition::Duration { duration_ms: 0 };
        assert!(s.validate().unwrap_err().to_string().contains("-t"));
        let mut s = TestSpec::default_tcp();
        s.end = EndCondition::Bytes { bytes: 0 };
        assert!(s.validate().is_err());
        let mut s = TestSpec::default_tcp();
        s.mss_bytes = Some(10);
        assert!(s.validate().unwrap_err().to_string().contains("-M"));
        let mut s = TestSpec::default_tcp();
        s.window_bytes = Some(0);
        assert!(s.validate().is_err());
        let mut s = TestSpec::default_tcp();
        s.interval_ms = 1;
        assert!(s.validate().unwrap_err().to_string().contains("-i"));
        s.interval_ms = 0;
        assert_eq!(s.validate(), Ok(()), "0 turns sampling off");
        s.interval_ms = MIN_INTERVAL_MS;
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn bounds_udp_receive_buffers() {
        let mut s =
            TestSpec { protocol: Protocol::Udp, block_bytes: 65507, ..TestSpec::default_tcp() };
        s.streams = 256;
        assert_eq!(s.validate(), Ok(()), "256 x 64 x 65507 bytes is just under 1 GiB");
        s.streams = 257;
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("receive buffers") && err.contains("1 GiB"), "{err}");
        // Tiny datagrams still cost GRO's 8 x 64 KiB each: 2048 streams is the limit.
        s.block_bytes = MIN_UDP_DATAGRAM;
        s.streams = 1024;
        s.direction = Direction::Bidirectional;
        assert_eq!(s.validate(), Ok(()), "exactly 1 GiB");
        s.streams = 1025;
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("--no-gro"), "{err}");
        // Without GRO the minimum buffer each: 8192 x 64 x 2048 is the limit.
        s.no_gro = true;
        s.streams = 4096;
        assert_eq!(s.validate(), Ok(()), "exactly 1 GiB");
        s.block_bytes = 2049;
        assert!(s.validate().is_err(), "one byte more per buffer is over 1 GiB");
    }

    #[test]
    fn rejects_bad_text() {
        let mut s = TestSpec::default_tcp();
        s.congestion = Some("cubic; rm -rf".into());
        assert!(s.validate().unwrap_err().to_string().contains("-C"));
        s.congestion = Some("bbr".into());
        assert_eq!(s.validate(), Ok(()));
        s.title = Some("a\nb".into());
        assert!(s.validate().is_err());
    }

    #[test]
    fn stream_plan_numbers_bidir_streams() {
        let mut s = TestSpec::default_tcp();
        s.streams = 2;
        s.direction = Direction::Bidirectional;
        assert_eq!(
            s.stream_plan(),
            vec![
                (1, Flow::ClientToServer),
                (2, Flow::ClientToServer),
                (3, Flow::ServerToClient),
                (4, Flow::ServerToClient)
            ]
        );
        assert_eq!(s.flow_of(3), Some(Flow::ServerToClient));
        assert_eq!(s.flow_of(5), None);
        assert_eq!(s.flow_of(0), None);
        s.direction = Direction::Download;
        assert_eq!(s.stream_plan(), vec![(1, Flow::ServerToClient), (2, Flow::ServerToClient)]);
    }
}
