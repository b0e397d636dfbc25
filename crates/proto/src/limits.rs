//! The server operator's policy: what a client may ask for, checked against a validated
//! [`TestSpec`] before the server allocates anything for the test.
//!
//! [`TestSpec::validate`] enforces what the *protocol* allows (4096 streams, 7 days); these
//! limits are what *this server* allows, set by its operator and stricter by default. The
//! check is pure and runs for native and iperf3 clients alike; each refusal names the limit,
//! its value and the flag that raises it, so the client can print a sentence that needs no
//! manual ("server allows at most 8 streams (--max-streams)"). [`LimitKind`] lets the iperf3
//! session pick the iperf3 error number its clients understand.
//!
//! Limits that need a clock or the other tests (concurrency, rates per client address, the
//! running byte count) are enforced by the server driver with the same [`Refusal`] type.

use std::time::Duration;

use crate::spec::{Direction, EndCondition, Protocol, TestSpec};

/// Default for [`Limits::max_tests`]: concurrent tests.
pub const DEFAULT_MAX_TESTS: u32 = 16;
/// Default for [`Limits::max_streams`]: streams per direction (iperf3's own cap is 128).
pub const DEFAULT_MAX_STREAMS: u32 = 128;
/// Default for [`Limits::max_duration`]: one hour, warm-up included.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(3600);
/// Default for [`Limits::max_client_connections`]: connections from one address that are not
/// yet part of a test (being identified or in the handshake).
pub const DEFAULT_MAX_CLIENT_CONNECTIONS: u32 = 32;
/// Default for [`Limits::queue`].
pub const DEFAULT_QUEUE: u32 = 8;
/// Default for [`Limits::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default for [`Limits::max_client_tests_per_minute`].
pub const DEFAULT_MAX_CLIENT_TESTS_PER_MINUTE: u32 = 120;
/// Default for [`Limits::min_interval`]: iperf3's own floor for `-i`. Every tick reads TCP's
/// state on every stream and keeps a sample per stream, so the interval sets the server's
/// sampling work and its memory rate; shorter than this measures ACK clocking and scheduling
/// more than throughput on most paths.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Default for [`Limits::min_rate`]: 8 kbit/s per test (1000 bytes a second, all streams).
/// A trickle under it cannot hold a slot, and no measurement worth a slot asks for less: the
/// lowest rates people test (a voice call, a telemetry uplink) are tens of kbit/s, and at the
/// default 128 KiB block a test paced under about 100 kbit/s already stalls for seconds
/// between writes.
pub const DEFAULT_MIN_RATE: u64 = 8_000;
/// Default for [`Limits::max_block`]: 1 MiB, iperf3's own cap on `-l`; 8 times linerate's
/// default TCP block and far above any UDP datagram.
pub const DEFAULT_MAX_BLOCK: u32 = 1 << 20;
/// Default for [`Limits::max_test_memory`]: 64 MiB per test, so the default 16 tests hold
/// at most 1 GiB. Fits `-P 128` at the default block (48 MiB) and `-P 32 -l 1M` (40 MiB).
pub const DEFAULT_MAX_TEST_MEMORY: u64 = 64 << 20;
/// Default for [`Limits::ipv4_prefix`]: every IPv4 address is a client of its own.
pub const DEFAULT_IPV4_PREFIX: u8 = 32;
/// Default for [`Limits::ipv6_prefix`]: a /64 is one client. A host or a customer is handed at
/// least a /64 and may use any address in it, so counting IPv6 addresses one by one would
/// give one machine an unlimited supply of "addresses".
pub const DEFAULT_IPV6_PREFIX: u8 = 64;
/// What one stream costs its end besides its buffers, counted in a test's memory: the
/// address space of the stream's thread stack (256 KiB in linerate's driver).
pub const STREAM_OVERHEAD_BYTES: u64 = 256 << 10;
/// What one stream costs its end when a pool worker serves it: its state, counters and
/// interval samples. Its buffers are the worker's, counted once per worker. Measured: 10,000
/// streams for 10 s with 1 s intervals took under 20 MiB beside the process's own
/// (docs/PERFORMANCE.md, "10,000 flows").
pub const POOLED_STREAM_BYTES: u64 = 4 << 10;
/// What one answered request/response transaction counts for against `--min-rate`, besides
/// its request's bytes: 1024 bits, the two minimum Ethernet frames (64 bytes each) that its
/// request and its response take on a link whatever their payload.
///
/// A request/response test (`--rr`, `--crr`, the probes of `--under-load`) measures latency
/// and moves few bytes by design: `--rr --rr-rate 50` of 1-byte requests moves 400 bit/s, and
/// the byte floor cut it although every request was answered. Counted as frames it makes
/// 51.6 kbit/s. A transaction is worth no more, so that the floor still cuts a peer holding a
/// slot for next to nothing: a transaction costs the client a round trip of two packets, and
/// at the default floor a running test must answer about 4 a second (half of 8 kbit/s over
/// 1032 bits); one that answers a request a second, or none, is cut, as a bulk test moving
/// under 500 bytes a second is.
pub const TRANSACTION_BITS: u64 = 1024;

/// What a running test has moved, as the server's watchdog weighs it against `--min-rate` and
/// `--idle-timeout`: bytes on all its streams (both directions), and the request/response
/// transactions it answered, each worth [`TRANSACTION_BITS`] more.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes moved, all streams.
    pub bytes: u64,
    /// Requests answered (a response written whole), all streams.
    pub transactions: u64,
}

impl Progress {
    /// The bits this progress counts for: 8 per byte and [`TRANSACTION_BITS`] per transaction.
    pub fn bits(self) -> u64 {
        self.bytes
            .saturating_mul(8)
            .saturating_add(self.transactions.saturating_mul(TRANSACTION_BITS))
    }

    /// What was moved since `earlier`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            bytes: self.bytes.saturating_sub(earlier.bytes),
            transactions: self.transactions.saturating_sub(earlier.transactions),
        }
    }
}

/// How the serving end lays out its data plane, which decides what a test's streams cost it
/// in memory ([`test_memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLayout {
    /// A TCP test with more connections than this is served by a pool of workers.
    pub pool_above: u32,
    /// Workers in that pool.
    pub workers: u32,
    /// Set by the operator or user (`--threads`), not chosen by the stream count.
    pub explicit: bool,
}

impl StreamLayout {
    /// A thread (with its own buffer) for every stream, whatever their number.
    pub const PER_STREAM: Self = Self { pool_above: u32::MAX, workers: 1, explicit: false };

    /// Pool workers serving a test of `connections` streams of `protocol`; None for a thread
    /// per stream (always for UDP). Never more workers than streams.
    pub fn workers_for(self, connections: u32, protocol: Protocol) -> Option<u32> {
        (protocol == Protocol::Tcp && connections > self.pool_above)
            .then(|| self.workers.max(1).min(connections.max(1)))
    }
}

/// Which limit a refusal comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// Too many tests running (or queued) on the server.
    Busy,
    /// Too many streams.
    Streams,
    /// Too long.
    Duration,
    /// Too fast (or unpaced while a cap is set).
    Bitrate,
    /// Too many bytes.
    Bytes,
    /// A protocol or direction the server does not allow.
    NotAllowed,
    /// This client address opens too many connections or tests.
    ClientRate,
    /// The sampling interval (`-i`) is shorter than the server allows.
    Interval,
    /// The block (`-l`) is larger than the server allows.
    Block,
    /// The test would need more memory (streams × buffers) than the server allows.
    Memory,
    /// The test asks for (or moves) less than the server's minimum rate.
    MinRate,
}

/// Why a test is refused: a sentence for the client and which limit said no.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which limit.
    pub kind: LimitKind,
    /// A sentence the client prints, naming the limit and the flag that sets it.
    pub message: String,
}

impl Refusal {
    /// A refusal by `kind` saying `message`.
    pub fn new(kind: LimitKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A running test cut by a limit fails with its refusal, so the protocol can tell the peer
/// which limit in its own terms.
impl std::error::Error for Refusal {}

/// What a server allows. `None` means "no limit".
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Tests running at once (with `--exclusive`, 1 and the rest queue).
    pub max_tests: u32,
    /// Streams per direction.
    pub max_streams: u32,
    /// Requested duration plus warm-up; byte-bound tests are cut when they run this long.
    pub max_duration: Duration,
    /// Requested rate of the whole test (all streams, both directions), bits per second.
    pub max_bitrate: Option<u64>,
    /// Requested rates of all running tests together, bits per second (the driver keeps the
    /// sum; see [`Limits::total_rate_refusal`]).
    pub max_total_bitrate: Option<u64>,
    /// Bytes per test (both directions); duration-bound tests are cut when they reach it.
    pub max_bytes: Option<u64>,
    /// TCP tests allowed.
    pub allow_tcp: bool,
    /// UDP tests allowed.
    pub allow_udp: bool,
    /// Client-to-server tests allowed.
    pub allow_upload: bool,
    /// Server-to-client tests allowed (`-R`): the server sends, so this is the direction
    /// an abuser would use against the server's own link.
    pub allow_download: bool,
    /// Both directions at once allowed.
    pub allow_bidir: bool,
    /// Connections from one client address not yet part of a test.
    pub max_client_connections: u32,
    /// New tests per client address per minute (a token bucket of this size, refilled evenly).
    pub max_client_tests_per_minute: u32,
    /// A running test in which no stream moves a byte or answers a transaction for this long
    /// is ended (a silent or stopped peer whose connections are still up).
    pub idle_timeout: Duration,
    /// One test at a time; later requests wait in a queue (clients that cannot queue, such
    /// as iperf3, are refused as busy).
    pub exclusive: bool,
    /// With `exclusive`: how many requests may wait; more are refused.
    pub queue: u32,
    /// Shortest sampling interval (`-i`) a test may ask for; 0 (no sampling) is always
    /// allowed.
    pub min_interval: Duration,
    /// Tests (and doctor sessions) one client address may hold at once, running or queued;
    /// `None` = a quarter of `max_tests` (at least 1), `Some(0)` = no cap. See
    /// [`Limits::tests_per_address`].
    pub max_tests_per_address: Option<u32>,
    /// Bits per second a test must ask for and keep moving (all streams, both directions;
    /// a transaction counts [`TRANSACTION_BITS`]); 0 = no floor. See [`floor_rate`] and
    /// [`Limits::progress_refusal`].
    pub min_rate: u64,
    /// Largest block (`-l`) a test may ask for, bytes.
    pub max_block: u32,
    /// Most memory one test may need on the server ([`test_memory`]), bytes.
    pub max_test_memory: u64,
    /// The server's data plane, for [`test_memory`].
    pub layout: StreamLayout,
    /// Connections not yet part of a test, from all addresses together (being identified or
    /// in the handshake); `None` = derived from the process's file limit ([`Budgets`]).
    pub max_connections: Option<u32>,
    /// Memory all admitted tests may need together ([`test_cost`]); `None` = derived from the
    /// address-space limit or the machine's memory ([`Budgets`]).
    pub max_memory: Option<u64>,
    /// Threads all admitted tests may use together ([`test_cost`]); `None` = derived
    /// ([`Budgets`]).
    pub max_threads: Option<u32>,
    /// Prefix length that makes one IPv4 client for every per-address limit (32: each address).
    pub ipv4_prefix: u8,
    /// Prefix length that makes one IPv6 client (64: a /64, the block one host or one
    /// customer gets, so the addresses inside it are no free supply).
    pub ipv6_prefix: u8,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tests: DEFAULT_MAX_TESTS,
            max_streams: DEFAULT_MAX_STREAMS,
            max_duration: DEFAULT_MAX_DURATION,
            max_bitrate: None,
            max_total_bitrate: None,
            max_bytes: None,
            allow_tcp: true,
            allow_udp: true,
            allow_upload: true,
            allow_download: true,
            allow_bidir: true,
            max_client_connections: DEFAULT_MAX_CLIENT_CONNECTIONS,
            max_client_tests_per_minute: DEFAULT_MAX_CLIENT_TESTS_PER_MINUTE,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            exclusive: false,
            queue: DEFAULT_QUEUE,
            min_interval: DEFAULT_MIN_INTERVAL,
            max_tests_per_address: None,
            min_rate: DEFAULT_MIN_RATE,
            max_block: DEFAULT_MAX_BLOCK,
            max_test_memory: DEFAULT_MAX_TEST_MEMORY,
            layout: StreamLayout::PER_STREAM,
            max_connections: None,
            max_memory: None,
            max_threads: None,
            ipv4_prefix: DEFAULT_IPV4_PREFIX,
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }
}

impl Limits {
    /// No operator limits beyond the protocol's own (an embedded loopback server).
    pub fn unlimited() -> Self {
        Self {
            max_tests: u32::MAX,
            max_streams: crate::spec::MAX_STREAMS,
            max_duration: Duration::from_millis(crate::spec::MAX_DURATION_MS.saturating_mul(2)),
            max_client_connections: 0,
            max_client_tests_per_minute: 0,
            min_interval: Duration::from_millis(crate::spec::MIN_INTERVAL_MS),
            max_tests_per_address: Some(0),
            min_rate: 0,
            max_block: crate::spec::MAX_BLOCK_BYTES,
            max_test_memory: u64::MAX,
            ipv4_prefix: 32,
            ipv6_prefix: 128,
            ..Self::default()
        }
    }

    /// Checks a validated spec against this policy. Pure; call before allocating anything.
    pub fn check(&self, spec: &TestSpec) -> Result<(), Refusal> {
        self.check_kind(spec)?;
        if spec.streams > self.max_streams {
            return Err(Refusal::new(
                LimitKind::Streams,
                format!(
                    "server allows at most {} streams (--max-streams); ask for -P {} or fewer",
                    self.max_streams, self.max_streams
                ),
            ));
        }
        let max_ms = u64::try_from(self.max_duration.as_millis()).unwrap_or(u64::MAX);
        if let Some(ms) = spec.duration_ms()
            && ms.saturating_add(spec.omit_ms) > max_ms
        {
            return Err(Refusal::new(
                LimitKind::Duration,
                format!(
                    "server allows tests of at most {} s including warm-up (--max-duration); \
                     ask for a shorter -t/-O",
                    self.max_duration.as_secs()
                ),
            ));
        }
        self.check_rate(spec)?;
        self.check_min_rate(spec)?;
        self.check_memory(spec)?;
        self.check_interval(spec)?;
        if let (Some(max), EndCondition::Bytes { bytes }) = (self.max_bytes, spec.end) {
            let total = bytes.saturating_mul(directions(spec.direction));
            if total > max {
                return Err(bytes_refusal(max));
            }
        }
        Ok(())
    }

    fn check_kind(&self, spec: &TestSpec) -> Result<(), Refusal> {
        let (proto_ok, proto) = match spec.protocol {
            Protocol::Tcp => (self.allow_tcp, "TCP"),
            Protocol::Udp => (self.allow_udp, "UDP"),
        };
        if !proto_ok {
            return Err(Refusal::new(
                LimitKind::NotAllowed,
                format!("server does not allow {proto} tests (--allow-protocols)"),
            ));
        }
        let (dir_ok, dir) = match spec.direction {
            Direction::Upload => (self.allow_upload, "upload (client sends)"),
            Direction::Download => (self.allow_download, "reverse (-R, server sends)"),
            Direction::Bidirectional => (self.allow_bidir, "bidirectional (--bidir)"),
        };
        if !dir_ok {
            return Err(Refusal::new(
                LimitKind::NotAllowed,
                format!("server does not allow {dir} tests (--allow-directions)"),
            ));
        }
        Ok(())
    }

    fn check_rate(&self, spec: &TestSpec) -> Result<(), Refusal> {
        let Some(max) = self.max_bitrate else { return Ok(()) };
        let asked = requested_rate(spec);
        if asked.is_none_or(|r| r > max) {
            let asked = asked.map_or("an unpaced test".to_string(), si);
            return Err(Refusal::new(
                LimitKind::Bitrate,
                format!(
                    "server allows at most {} per test (--max-bitrate), asked for {asked}; \
                     ask for {} with streams × rate within it",
                    si(max),
                    pace_flag(spec)
                ),
            ));
        }
        Ok(())
    }

    fn check_min_rate(&self, spec: &TestSpec) -> Result<(), Refusal> {
        match floor_rate(spec) {
            Some(asked) if asked < self.min_rate => Err(Refusal::new(
                LimitKind::MinRate,
                format!(
                    "server requires tests of at least {} (--min-rate), asked for {}{}; ask for \
                     a higher {} (it is per stream)",
                    si(self.min_rate),
                    si(asked),
                    if spec.rr.is_some() {
                        " (each transaction counted as its request's bytes and 1024 bits)"
                    } else {
                        ""
                    },
                    pace_flag(spec)
                ),
            )),
            _ => Ok(()),
        }
    }

    fn check_memory(&self, spec: &TestSpec) -> Result<(), Refusal> {
        if spec.block_bytes > self.max_block {
            return Err(Refusal::new(
                LimitKind::Block,
                format!(
                    "server allows blocks of at most {} (--max-block), asked for -l {}; ask for a \
                     smaller -l",
                    size(self.max_block.into()),
                    size(spec.block_bytes.into())
                ),
            ));
        }
        if let Some(r) = buffer_refusal(spec, self.layout) {
            return Err(r);
        }
        let need = test_memory(spec, self.layout);
        if need > self.max_test_memory {
            return Err(Refusal::new(
                LimitKind::Memory,
                format!(
                    "server allows at most {} of memory per test (--max-test-memory); {} \
                     streams with their buffers need {}; ask for fewer streams (-P) or a \
                     smaller -l",
                    size(self.max_test_memory),
                    spec.connection_count(),
                    size(need)
                ),
            ));
        }
        Ok(())
    }

    /// The refusal for a running test that made `moved` progress (all streams, both
    /// directions, transactions at [`TRANSACTION_BITS`]) in the last `window`: less than half
    /// of [`Limits::min_rate`] over it. Half, because a paced sender writes whole blocks: a
    /// test paced at the floor whose blocks come at most a window apart always moves at least
    /// half the floor in any window. None when it kept up.
    pub fn progress_refusal(&self, moved: Progress, window: Duration) -> Option<Refusal> {
        let secs = window.as_secs_f64();
        let floor = self.min_rate as f64 * secs / 2.0;
        let rate = |bits: u64| si((bits as f64 / secs) as u64);
        (self.min_rate > 0 && secs > 0.0 && (moved.bits() as f64) < floor).then(|| {
            let what = match moved.transactions {
                0 => rate(moved.bits()),
                n => format!(
                    "{} and answered {n} transaction(s) ({} with each counted as 1024 bits)",
                    rate(moved.bytes.saturating_mul(8)),
                    rate(moved.bits())
                ),
            };
            Refusal::new(
                LimitKind::MinRate,
                format!(
                    "the test moved {what} in the last {secs:.1} s, under the server's floor of \
                     {} per test (--min-rate, averaged over --idle-timeout); the test was cut",
                    si(self.min_rate)
                ),
            )
        })
    }

    fn check_interval(&self, spec: &TestSpec) -> Result<(), Refusal> {
        let asked = Duration::from_millis(spec.interval_ms);
        if asked.is_zero() || asked >= self.min_interval {
            return Ok(());
        }
        let min = self.min_interval.as_secs_f64();
        Err(Refusal::new(
            LimitKind::Interval,
            format!(
                "server allows intervals of at least {min} s (--min-interval), asked for {} s; \
                 ask for -i {min} or more, or -i 0",
                asked.as_secs_f64()
            ),
        ))
    }

    /// The refusal for a test asking for `asked` (None = unpaced) while the running tests
    /// already asked for `in_use` in total; None when it fits [`Limits::max_total_bitrate`].
    pub fn total_rate_refusal(&self, in_use: u64, asked: Option<u64>) -> Option<Refusal> {
        let max = self.max_total_bitrate?;
        let fits = asked.is_some_and(|a| in_use.saturating_add(a) <= max);
        (!fits).then(|| {
            let asked = asked.map_or("an unpaced test".to_string(), si);
            Refusal::new(
                LimitKind::Bitrate,
                format!(
                    "server allows at most {} for all tests together (--max-total-bitrate) and \
                     {} is in use; asked for {asked}; try a lower -b or later",
                    si(max),
                    si(in_use)
                ),
            )
        })
    }

    /// The refusal for a test that moved more than [`Limits::max_bytes`] (the driver checks
    /// the running count).
    pub fn bytes_exceeded(&self, moved: u64) -> Option<Refusal> {
        self.max_bytes.filter(|max| moved > *max).map(bytes_refusal)
    }

    /// The refusal for a test that ran longer than [`Limits::max_duration`] plus `grace`.
    pub fn duration_exceeded(&self, ran: Duration, grace: Duration) -> Option<Refusal> {
        (ran > self.max_duration.saturating_add(grace)).then(|| {
            Refusal::new(
                LimitKind::Duration,
                format!(
                    "server allows tests of at most {} s (--max-duration); the test was cut",
                    self.max_duration.as_secs()
                ),
            )
        })
    }

    /// Tests that may run at once (1 when exclusive).
    pub fn slots(&self) -> u32 {
        if self.exclusive { 1 } else { self.max_tests }
    }

    /// Tests one address may hold at once, running or queued (0 = no cap): the operator's
    /// `max_tests_per_address`, else a quarter of `max_tests`, at least 1. A quarter means
    /// one address can never take the whole server: it needs four addresses, each paying
    /// for its own tests, and a client from a fifth still finds a slot while fewer than four
    /// hold theirs. One machine rarely runs more than a few tests at once to one server.
    pub fn tests_per_address(&self) -> u32 {
        self.max_tests_per_address.unwrap_or((self.max_tests / 4).max(1))
    }

    /// The refusal for an address that already holds `held` tests (see
    /// [`Limits::tests_per_address`]).
    pub fn share_refusal(&self, held: u32) -> Option<Refusal> {
        let share = self.tests_per_address();
        (share > 0 && held >= share).then(|| {
            Refusal::new(
                LimitKind::ClientRate,
                format!(
                    "this address already holds {held} test(s) on the server, its share \
                     (--max-tests-per-address); try again when one has ended"
                ),
            )
        })
    }

    /// Doctor sessions that may run at once: a quarter of the slots, at least 1. They hold
    /// a slot each, as tests do; the quarter keeps a doctor flood from taking every slot.
    pub fn doctor_slots(&self) -> u32 {
        (self.slots() / 4).max(1)
    }

    /// The refusal for a doctor arriving while `running` doctor sessions hold their slots.
    pub fn doctors_busy(&self, running: u32) -> Option<Refusal> {
        (running >= self.doctor_slots()).then(|| {
            Refusal::new(
                LimitKind::Busy,
                format!(
                    "server is busy: it allows {} doctor session(s) at once (a quarter of \
                     --max-tests); try again in a few seconds",
                    self.doctor_slots()
                ),
            )
        })
    }

    /// The refusal for a test arriving while `running` tests already use every slot.
    pub fn busy(&self, running: u32) -> Option<Refusal> {
        if self.exclusive && running >= 1 {
            return Some(Refusal::new(
                LimitKind::Busy,
                "server is busy: it runs one test at a time (--exclusive); try again later",
            ));
        }
        (running >= self.max_tests).then(|| {
            Refusal::new(
                LimitKind::Busy,
                format!(
                    "server is busy: it allows at most {} test(s) at once (--max-tests); \
                     try again later",
                    self.max_tests
                ),
            )
        })
    }
}

impl Limits {
    /// The refusal for a request that would wait while the queue already holds `waiting`.
    pub fn queue_full(&self, waiting: usize) -> Option<Refusal> {
        (waiting >= self.queue as usize).then(|| {
            Refusal::new(
                LimitKind::Busy,
                format!(
                    "server is busy: it runs one test at a time (--exclusive) and its queue of \
                     {} is full (--queue); try again later",
                    self.queue
                ),
            )
        })
    }
}

fn bytes_refusal(max: u64) -> Refusal {
    Refusal::new(
        LimitKind::Bytes,
        format!(
            "server allows at most {max} bytes per test (--max-bytes); ask for less with -n/-t"
        ),
    )
}

/// The memory a test needs on the server laid out as `layout`: with a thread per stream, its
/// stream buffers ([`TestSpec::buffer_bytes`]) and [`STREAM_OVERHEAD_BYTES`] per stream; with
/// a pool, a send block and a read buffer per worker and [`POOLED_STREAM_BYTES`] per stream.
/// A request/response test's streams have a thread each and the answering end's bounded
/// buffers ([`crate::latency::RrSpec::answer_buffer_bytes`], at most 512 KiB), whatever the
/// sizes and depth the client holds itself.
pub fn test_memory(spec: &TestSpec, layout: StreamLayout) -> u64 {
    let conns = u64::from(spec.connection_count());
    if let Some(rr) = &spec.rr {
        return conns.saturating_mul(rr.answer_buffer_bytes() + STREAM_OVERHEAD_BYTES);
    }
    let per_stream = match layout.workers_for(spec.connection_count(), spec.protocol) {
        Some(_) => POOLED_STREAM_BYTES,
        None => STREAM_OVERHEAD_BYTES,
    };
    buffer_memory(spec, layout).saturating_add(conns.saturating_mul(per_stream))
}

/// The stream buffers a test needs on an end laid out as `layout`: a send and a receive
/// buffer ([`TestSpec::read_size`]) per pool worker, or every stream's own
/// ([`TestSpec::buffer_bytes`]).
pub fn buffer_memory(spec: &TestSpec, layout: StreamLayout) -> u64 {
    // Request/response streams always have a thread and buffers each (`TestSpec::buffer_bytes`).
    if spec.rr.is_some() {
        return spec.buffer_bytes();
    }
    match layout.workers_for(spec.connection_count(), spec.protocol) {
        Some(workers) => {
            u64::from(workers) * (u64::from(spec.block_bytes) + u64::from(spec.read_size()))
        }
        None => spec.buffer_bytes(),
    }
}

/// The refusal of a test whose stream buffers on an end laid out as `layout` exceed the
/// protocol's bound ([`crate::spec::MAX_TEST_BUFFER_BYTES`]), which no setting raises.
pub fn buffer_refusal(spec: &TestSpec, layout: StreamLayout) -> Option<Refusal> {
    let need = buffer_memory(spec, layout);
    (need > crate::spec::MAX_TEST_BUFFER_BYTES).then(|| {
        Refusal::new(
            LimitKind::Memory,
            format!(
                "{} streams with a thread and a {} buffer each need {} of stream buffers, above \
                 the protocol's 1 GiB per test; use fewer streams (-P), a smaller -l, or a pool \
                 of workers (--threads auto or N, on the server too)",
                spec.connection_count(),
                size(spec.block_bytes.into()),
                size(need)
            ),
        )
    })
}

/// `bytes` in binary units with up to two decimals, e.g. `64 MiB`, `1.25 MiB`, `512 bytes`.
fn size(bytes: u64) -> String {
    let b = bytes as f64;
    let (v, unit) = match bytes {
        0..1024 => return format!("{bytes} bytes"),
        1024..1_048_576 => (b / 1024.0, "KiB"),
        1_048_576..1_073_741_824 => (b / 1_048_576.0, "MiB"),
        _ => (b / 1_073_741_824.0, "GiB"),
    };
    let s = format!("{v:.2}");
    format!("{} {unit}", s.trim_end_matches('0').trim_end_matches('.'))
}

/// The rate a test asks for in total (every stream, both directions), bits per second; None
/// for an unpaced test (a bulk test without `-b`, a closed-loop request/response test). A
/// paced request/response test (`--rr-rate`) asks for its requests and responses' bytes.
pub fn requested_rate(spec: &TestSpec) -> Option<u64> {
    let per_stream = match &spec.rr {
        Some(rr) => rr
            .rate_per_second
            .saturating_mul(8 * (u64::from(rr.request_bytes) + u64::from(rr.response_bytes))),
        None => spec.bits_per_second,
    };
    (per_stream > 0).then(|| {
        per_stream
            .saturating_mul(u64::from(spec.streams))
            .saturating_mul(directions(spec.direction))
    })
}

/// The rate `--min-rate` weighs a test's request at, bits per second; None for an unpaced
/// test. [`requested_rate`], except for a paced request/response test: each transaction
/// counts its request's bytes and [`TRANSACTION_BITS`], exactly what the server counts while
/// the test runs ([`Progress`]: it reads the requests, and answers them).
pub fn floor_rate(spec: &TestSpec) -> Option<u64> {
    let Some(rr) = &spec.rr else { return requested_rate(spec) };
    let per_transaction = 8 * u64::from(rr.request_bytes) + TRANSACTION_BITS;
    (rr.rate_per_second > 0).then(|| {
        rr.rate_per_second.saturating_mul(per_transaction).saturating_mul(u64::from(spec.streams))
    })
}

/// The flag that paces `spec`: `-b`, or `--rr-rate` for a request/response test.
fn pace_flag(spec: &TestSpec) -> &'static str {
    if spec.rr.is_some() { "--rr-rate" } else { "-b" }
}

fn directions(d: Direction) -> u64 {
    if d == Direction::Bidirectional { 2 } else { 1 }
}

/// `bits` as SI bits per second with three significant figures, e.g. `1.00 Gbit/s`.
fn si(bits: u64) -> String {
    let b = bits as f64;
    let (v, unit) = match bits {
        0..1_000 => return format!("{bits} bit/s"),
        1_000..1_000_000 => (b / 1e3, "kbit/s"),
        1_000_000..1_000_000_000 => (b / 1e6, "Mbit/s"),
        1_000_000_000..1_000_000_000_000 => (b / 1e9, "Gbit/s"),
        _ => (b / 1e12, "Tbit/s"),
    };
    format!("{v:.2} {unit}")
}

/// The key every per-address limit counts a client by: its address cut to
/// [`Limits::ipv4_prefix`] or [`Limits::ipv6_prefix`] bits (an IPv4-mapped IPv6 address counts
/// as the IPv4 address it carries).
pub fn client_key(ip: std::net::IpAddr, limits: &Limits) -> std::net::IpAddr {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(a) & prefix_mask_32(limits.ipv4_prefix);
            IpAddr::V4(bits.into())
        }
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => client_key(IpAddr::V4(v4), limits),
            None => {
                let bits = u128::from(a) & prefix_mask_128(limits.ipv6_prefix);
                IpAddr::V6(bits.into())
            }
        },
    }
}

fn prefix_mask_32(prefix: u8) -> u32 {
    match prefix.min(32) {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p)),
    }
}

fn prefix_mask_128(prefix: u8) -> u128 {
    match prefix.min(128) {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p)),
    }
}

/// What an admitted test takes from the server's totals ([`Budgets`]) until it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestCost {
    /// Bytes: [`test_memory`] plus [`SESSION_BYTES`].
    pub memory: u64,
    /// Threads: one per stream (or pool worker) plus [`SESSION_THREADS`].
    pub threads: u32,
    /// File descriptors: one per data connection, [`TRANSACTION_FDS_PER_STREAM`] more per
    /// `--crr` stream, and the control connection.
    pub fds: u32,
}

impl TestCost {
    /// Both costs together (each figure saturating).
    pub fn plus(self, other: TestCost) -> TestCost {
        TestCost {
            memory: self.memory.saturating_add(other.memory),
            threads: self.threads.saturating_add(other.threads),
            fds: self.fds.saturating_add(other.fds),
        }
    }

    /// This cost less `other` (each figure at least 0).
    pub fn minus(self, other: TestCost) -> TestCost {
        TestCost {
            memory: self.memory.saturating_sub(other.memory),
            threads: self.threads.saturating_sub(other.threads),
            fds: self.fds.saturating_sub(other.fds),
        }
    }
}

/// What a test's session costs the server besides its streams: the session thread's stack
/// (2 MiB of address space), the interval samples of both ends (at most about 2 MiB, see
/// docs/SECURITY.md) and the control connection's buffers.
pub const SESSION_BYTES: u64 = 4 << 20;
/// Threads a test's session uses besides its streams: the session and, for `--crr`, the
/// router that hands transactions to their streams.
pub const SESSION_THREADS: u32 = 2;
/// Transaction connections one `--crr` stream may have open on the server at once besides
/// its anchor: the one being answered and the next one arriving (the client runs one
/// transaction at a time per stream).
pub const TRANSACTION_FDS_PER_STREAM: u32 = 2;

/// What `spec` takes from the server's totals on an end laid out as `layout`.
pub fn test_cost(spec: &TestSpec, layout: StreamLayout) -> TestCost {
    let conns = spec.connection_count();
    let threads = match spec.rr {
        Some(_) => conns,
        None => layout.workers_for(conns, spec.protocol).unwrap_or(conns),
    };
    let crr = spec.rr.is_some_and(|rr| rr.connect_each);
    let transactions = if crr { conns.saturating_mul(TRANSACTION_FDS_PER_STREAM) } else { 0 };
    TestCost {
        memory: test_memory(spec, layout).saturating_add(SESSION_BYTES),
        threads: threads.saturating_add(SESSION_THREADS),
        fds: conns.saturating_add(transactions).saturating_add(1),
    }
}

/// File descriptors kept out of every budget: the listener, the UDP port, epoll, standard
/// streams, the log file and what libraries open.
pub const FD_RESERVE: u64 = 64;
/// Address space kept out of the memory budget when it is derived from `RLIMIT_AS`: the
/// program and its libraries (about 40 MiB), the allocator's arenas (one per core, at most
/// eight, 64 MiB of address space each: 512 MiB), the threads that are not a test's (front
/// door, UDP acceptor, main), the waiting connections and the results frames being decoded
/// at once (96 MiB).
pub const ADDRESS_SPACE_RESERVE: u64 = 768 << 20;
/// The largest derived total of connections not yet part of a test: each costs a file
/// descriptor, about 1 KiB of state and at most [`crate::wire::MAX_FRAME_HANDSHAKE`] (64 KiB)
/// of buffered handshake, so 2048 of them hold at most 128 MiB even when every peer claims a
/// full-size frame and sends nothing more.
pub const MAX_DERIVED_CONNECTIONS: u64 = 2048;

/// What the machine and the process's resource limits allow, read by the server at start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// `RLIMIT_NOFILE` (after raising the soft limit to the hard one).
    pub files: u64,
    /// `RLIMIT_AS`, if set.
    pub address_space: Option<u64>,
    /// Physical memory, if known.
    pub memory: Option<u64>,
    /// Threads the process may have: the least of `RLIMIT_NPROC` and the kernel's
    /// `threads-max`, if known.
    pub threads: Option<u64>,
}

/// The server's totals, fixed at start: the operator's settings where given, else derived
/// from [`Resources`] (see [`Budgets::derive`] for each rule and why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Connections not yet part of a test, from all addresses.
    pub connections: u32,
    /// File descriptors admitted tests may hold together.
    pub fds: u64,
    /// Bytes admitted tests may need together.
    pub memory: u64,
    /// Threads admitted tests may use together.
    pub threads: u64,
}

impl Budgets {
    /// The totals for `limits` on a machine with `r`:
    /// - connections not yet part of a test: a quarter of the file descriptors (after
    ///   [`FD_RESERVE`]), at most [`MAX_DERIVED_CONNECTIONS`], at least 16: a crowd of
    ///   handshakes never takes the descriptors admitted tests need;
    /// - admitted tests' descriptors: the rest;
    /// - memory: `RLIMIT_AS` less [`ADDRESS_SPACE_RESERVE`] when set (thread stacks and buffers
    ///   are address space, and running out of it aborts the process), else half the
    ///   machine's memory, else unbounded; never under one test's `--max-test-memory`;
    /// - threads: half of what the process may start (the rest is for the machine's other
    ///   work and the server's own threads), at least 64; unbounded when unknown.
    pub fn derive(limits: &Limits, r: Resources) -> Budgets {
        let files = r.files.saturating_sub(FD_RESERVE);
        let derived = (files / 4).clamp(16, MAX_DERIVED_CONNECTIONS);
        let connections = limits.max_connections.map_or(derived, u64::from);
        let connections = u32::try_from(connections).unwrap_or(u32::MAX);
        let memory = limits.max_memory.unwrap_or_else(|| {
            let derived = match (r.address_space, r.memory) {
                (Some(a), _) => a.saturating_sub(ADDRESS_SPACE_RESERVE),
                (None, Some(m)) => m / 2,
                (None, None) => u64::MAX,
            };
            derived.max(limits.max_test_memory.saturating_add(SESSION_BYTES))
        });
        let threads = limits
            .max_threads
            .map(u64::from)
            .unwrap_or_else(|| r.threads.map_or(u64::MAX, |t| (t / 2).max(64)));
        Budgets { connections, fds: files.saturating_sub(u64::from(connections)), memory, threads }
    }

    /// The refusal for a test costing `cost` while admitted tests already take `used`.
    pub fn refusal(&self, used: TestCost, cost: TestCost) -> Option<Refusal> {
        let after = used.plus(cost);
        let why = if after.memory > self.memory {
            format!(
                "running tests already need {} of its {} memory budget (--max-memory) and this \
                 one needs {}",
                size(used.memory),
                size(self.memory),
                size(cost.memory)
            )
        } else if u64::from(after.threads) > self.threads {
            format!(
                "running tests already use {} of its {} threads (--max-threads) and this one \
                 needs {}",
                used.threads, self.threads, cost.threads
            )
        } else if u64::from(after.fds) > self.fds {
            format!(
                "running tests already hold {} of the {} file descriptors it keeps for tests \
                 (its open-file limit) and this one needs {}",
                used.fds, self.fds, cost.fds
            )
        } else {
            return None;
        };
        Some(Refusal::new(LimitKind::Busy, format!("server is busy: {why}; try again later")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        TestSpec::default_tcp()
    }

    #[test]
    fn bounds_stream_buffers_by_layout() {
        let mut s = TestSpec { streams: 1024, block_bytes: 1 << 20, ..TestSpec::default_tcp() };
        let per = StreamLayout::PER_STREAM;
        let pool = StreamLayout { pool_above: 16, workers: 2, explicit: false };
        assert_eq!(buffer_refusal(&s, per), None, "1024 x 1 MiB = 1 GiB is allowed");
        s.direction = Direction::Bidirectional;
        let r = buffer_refusal(&s, per).expect("2 GiB with a thread per stream");
        assert!(r.message.contains("1 GiB") && r.message.contains("--threads"), "{r}");
        assert_eq!(buffer_refusal(&s, pool), None, "a pool holds 4 blocks");
        assert_eq!(buffer_memory(&s, pool), 4 << 20);
        s.streams = crate::spec::MAX_STREAMS;
        s.block_bytes = crate::spec::MAX_BLOCK_BYTES;
        assert!(buffer_refusal(&s, per).is_some());
        assert_eq!(buffer_refusal(&s, pool), None);
        let unlimited = Limits { layout: per, ..Limits::unlimited() };
        assert_eq!(
            unlimited.check(&s).unwrap_err().kind,
            LimitKind::Memory,
            "no setting raises it"
        );
    }

    #[test]
    fn request_response_streams_count_their_own_buffers_whatever_the_layout() {
        let rr = crate::latency::RrSpec {
            request_bytes: 1 << 20,
            in_flight: 16,
            ..crate::latency::RrSpec::default_rr()
        };
        let s = TestSpec { streams: 64, rr: Some(rr), ..TestSpec::default_tcp() };
        let pool = StreamLayout { pool_above: 16, workers: 2, explicit: false };
        // A thread each: 64 × (16 × 1 MiB + 1 MiB), never a pool's two blocks per worker.
        assert_eq!(buffer_memory(&s, pool), (64 * 17) << 20);
        assert_eq!(buffer_memory(&s, pool), s.buffer_bytes());
        assert!(s.validate().is_err(), "over 1 GiB: the spec itself is refused");
    }

    #[test]
    fn defaults_allow_the_default_test() {
        assert_eq!(Limits::default().check(&spec()), Ok(()));
    }

    #[test]
    fn streams_refusal_names_the_flag_and_value() {
        let l = Limits { max_streams: 8, ..Limits::default() };
        let mut s = spec();
        s.streams = 8;
        assert_eq!(l.check(&s), Ok(()));
        s.streams = 9;
        let r = l.check(&s).unwrap_err();
        assert_eq!(r.kind, LimitKind::Streams);
        assert!(r.message.starts_with("server allows at most 8 streams (--max-streams)"), "{r}");
    }

    #[test]
    fn duration_counts_the_warm_up() {
        let l = Limits { max_duration: Duration::from_secs(10), ..Limits::default() };
        let mut s = spec();
        assert_eq!(l.check(&s), Ok(()));
        s.omit_ms = 1;
        assert_eq!(l.check(&s).map_err(|r| r.kind), Err(LimitKind::Duration));
        assert!(l.duration_exceeded(Duration::from_secs(12), Duration::from_secs(1)).is_some());
        assert!(l.duration_exceeded(Duration::from_secs(11), Duration::from_secs(1)).is_none());
    }

    #[test]
    fn bitrate_cap_counts_every_stream_and_refuses_unpaced() {
        let l = Limits { max_bitrate: Some(100_000_000), ..Limits::default() };
        let mut s = spec();
        let r = l.check(&s).unwrap_err();
        assert!(r.message.contains("100.00 Mbit/s") && r.message.contains("unpaced"), "{r}");
        s.bits_per_second = 25_000_000;
        s.streams = 2;
        s.direction = Direction::Bidirectional;
        assert_eq!(l.check(&s), Ok(()));
        s.streams = 3;
        assert!(l.check(&s).unwrap_err().message.contains("150.00 Mbit/s"));
    }

    #[test]
    fn total_rate_counts_what_runs_and_refuses_unpaced() {
        let l = Limits { max_total_bitrate: Some(10_000_000), ..Limits::default() };
        assert!(l.total_rate_refusal(4_000_000, Some(6_000_000)).is_none());
        let r = l.total_rate_refusal(4_000_000, Some(6_000_001)).expect("over");
        assert!(r.message.contains("(--max-total-bitrate) and 4.00 Mbit/s is in use"), "{r}");
        assert!(l.total_rate_refusal(0, None).is_some(), "unpaced cannot be accounted");
        assert!(Limits::default().total_rate_refusal(u64::MAX, None).is_none(), "no cap");
        let mut s = spec();
        s.bits_per_second = 1000;
        s.streams = 3;
        s.direction = Direction::Bidirectional;
        assert_eq!(requested_rate(&s), Some(6000));
    }

    #[test]
    fn bytes_cap_applies_to_requests_and_running_counts() {
        let l = Limits { max_bytes: Some(1000), ..Limits::default() };
        let mut s = spec();
        s.end = EndCondition::Bytes { bytes: 600 };
        assert_eq!(l.check(&s), Ok(()));
        s.direction = Direction::Bidirectional;
        assert_eq!(l.check(&s).map_err(|r| r.kind), Err(LimitKind::Bytes));
        assert!(l.bytes_exceeded(1001).is_some() && l.bytes_exceeded(1000).is_none());
    }

    #[test]
    fn protocols_and_directions_can_be_forbidden() {
        let l = Limits { allow_udp: false, allow_download: false, ..Limits::default() };
        let mut s = spec();
        s.direction = Direction::Download;
        assert!(l.check(&s).unwrap_err().message.contains("reverse (-R"));
        s.direction = Direction::Upload;
        s.protocol = Protocol::Udp;
        assert!(l.check(&s).unwrap_err().message.contains("UDP"));
    }

    #[test]
    fn short_intervals_are_refused_with_the_flag_named() {
        let mut s = spec();
        s.interval_ms = 50;
        let r = Limits::default().check(&s).unwrap_err();
        assert_eq!(r.kind, LimitKind::Interval);
        assert!(
            r.message.starts_with(
                "server allows intervals of at least 0.1 s (--min-interval), asked for 0.05 s"
            ),
            "{r}"
        );
        s.interval_ms = 100;
        assert_eq!(Limits::default().check(&s), Ok(()));
        s.interval_ms = 0;
        assert_eq!(Limits::default().check(&s), Ok(()), "no sampling is always allowed");
        s.interval_ms = 10;
        assert_eq!(Limits::unlimited().check(&s), Ok(()), "the protocol's floor");
    }

    #[test]
    fn memory_per_test_and_block_size_are_capped() {
        let l = Limits::default();
        let mut s = spec();
        s.direction = Direction::Download;
        s.streams = 16;
        s.block_bytes = 64 << 20;
        let r = l.check(&s).unwrap_err();
        assert_eq!(r.kind, LimitKind::Block);
        assert!(
            r.message.starts_with(
                "server allows blocks of at most 1 MiB (--max-block), asked for -l 64 MiB"
            ),
            "{r}"
        );
        s.block_bytes = 1 << 20;
        s.streams = 64;
        let r = l.check(&s).unwrap_err();
        assert_eq!(r.kind, LimitKind::Memory);
        assert!(r.message.contains("at most 64 MiB of memory per test (--max-test-memory); 64 streams with their buffers need 80 MiB"), "{r}");
        s.streams = 32;
        assert_eq!(l.check(&s), Ok(()), "32 × 1.25 MiB");
        s.block_bytes = 128 * 1024;
        s.streams = 128;
        assert_eq!(test_memory(&s, StreamLayout::PER_STREAM), 48 << 20);
        let pool = StreamLayout { pool_above: 16, workers: 2, explicit: false };
        assert_eq!(test_memory(&s, pool), (512 << 10) + (128 << 12), "2 workers' blocks");
        s.streams = 16;
        assert_eq!(test_memory(&s, pool), 6 << 20, "16 streams have a thread each");
        s.streams = 128;
        assert_eq!(l.check(&s), Ok(()), "-P 128 at the default block fits");
        s.protocol = Protocol::Udp;
        s.block_bytes = 1460;
        assert_eq!(test_memory(&s, pool), 96 << 20, "8 GRO buffers of 64 KiB per stream");
        s.no_gro = true;
        assert_eq!(test_memory(&s, pool), 48 << 20, "64 receive buffers of 2 KiB per stream");
        assert_eq!(
            Limits::unlimited().check(&TestSpec { streams: 1024, block_bytes: 1 << 20, ..spec() }),
            Ok(())
        );
    }

    #[test]
    fn min_rate_refuses_trickles_and_cuts_tests_that_fall_under_half_of_it() {
        let l = Limits::default();
        let mut s = spec();
        s.bits_per_second = 8;
        let r = l.check(&s).unwrap_err();
        assert_eq!(r.kind, LimitKind::MinRate);
        assert!(
            r.message.starts_with(
                "server requires tests of at least 8.00 kbit/s (--min-rate), asked for 8 bit/s"
            ),
            "{r}"
        );
        s.bits_per_second = 4000;
        s.streams = 2;
        assert_eq!(l.check(&s), Ok(()), "the floor is per test, all streams");
        s.bits_per_second = 0;
        assert_eq!(l.check(&s), Ok(()), "unpaced asks for no particular rate");
        let w = Duration::from_secs(10);
        let bytes = |bytes| Progress { bytes, transactions: 0 };
        assert!(l.progress_refusal(bytes(5000), w).is_none(), "half the floor over the window");
        let r = l.progress_refusal(bytes(4999), w).expect("under half");
        assert!(r.message.contains("(--min-rate, averaged over --idle-timeout)"), "{r}");
        assert!(Limits { min_rate: 0, ..l }.progress_refusal(bytes(0), w).is_none(), "no floor");
    }

    fn rr_spec(rate_per_second: u64, request_bytes: u32) -> TestSpec {
        let rr = crate::latency::RrSpec {
            rate_per_second,
            request_bytes,
            ..crate::latency::RrSpec::default_rr()
        };
        TestSpec { rr: Some(rr), ..spec() }
    }

    #[test]
    fn transactions_count_against_the_floor_at_admission_and_while_running() {
        let l = Limits::default();
        // 1-byte requests: 8 + 1024 bits each.
        assert_eq!(floor_rate(&rr_spec(50, 1)), Some(51_600));
        assert_eq!(l.check(&rr_spec(50, 1)), Ok(()), "--rr-rate 50 of 1 byte");
        assert_eq!(l.check(&rr_spec(8, 1)), Ok(()), "8 × 1032 bits");
        let r = l.check(&rr_spec(7, 1)).unwrap_err();
        assert_eq!(r.kind, LimitKind::MinRate);
        assert!(
            r.message.starts_with(
                "server requires tests of at least 8.00 kbit/s (--min-rate), asked for 7.22 kbit/s \
                 (each transaction counted as its request's bytes and 1024 bits); ask for a \
                 higher --rr-rate"
            ),
            "{r}"
        );
        let four = TestSpec { streams: 4, ..rr_spec(2, 1) };
        assert_eq!(floor_rate(&four), Some(8256), "the rate is per stream");
        assert_eq!(l.check(&rr_spec(0, 1)), Ok(()), "a closed loop asks for no rate");
        assert_eq!(floor_rate(&rr_spec(0, 1)), None);
        // Running: 50 transactions a second for 10 s clear half the floor; 3 a second do not.
        let w = Duration::from_secs(10);
        let ran = |transactions: u64| Progress { bytes: transactions, transactions };
        assert!(l.progress_refusal(ran(500), w).is_none());
        assert!(l.progress_refusal(ran(39), w).is_none(), "39 × 1032 bits ≥ 40 kbit");
        let r = l.progress_refusal(ran(30), w).expect("3 a second");
        assert!(
            r.message.starts_with(
                "the test moved 24 bit/s and answered 30 transaction(s) (3.10 kbit/s with each \
                 counted as 1024 bits) in the last 10.0 s"
            ),
            "{r}"
        );
        assert!(l.progress_refusal(ran(0), w).is_some(), "nothing answered");
        let now = Progress { bytes: 100, transactions: 7 };
        assert_eq!(now.since(ran(5)), Progress { bytes: 95, transactions: 2 });
        assert_eq!(now.bits(), 800 + 7 * 1024);
    }

    #[test]
    fn a_paced_request_response_test_asks_for_its_bytes_under_rate_caps() {
        let mut s = rr_spec(1000, 100);
        if let Some(rr) = s.rr.as_mut() {
            rr.response_bytes = 400;
        }
        s.streams = 2;
        assert_eq!(requested_rate(&s), Some(8_000_000), "2 × 1000/s × 500 bytes");
        let l = Limits { max_bitrate: Some(4_000_000), ..Limits::default() };
        let r = l.check(&s).unwrap_err();
        assert!(r.message.contains("asked for 8.00 Mbit/s; ask for --rr-rate"), "{r}");
        assert_eq!(Limits { max_bitrate: Some(8_000_000), ..l.clone() }.check(&s), Ok(()));
        assert_eq!(requested_rate(&rr_spec(0, 1)), None, "a closed loop is unpaced");
    }

    #[test]
    fn request_response_tests_count_the_answering_ends_bounded_buffers() {
        let rr = crate::latency::RrSpec {
            response_bytes: 1 << 20,
            in_flight: 60,
            ..crate::latency::RrSpec::default_rr()
        };
        let s = TestSpec { streams: 4, rr: Some(rr), ..spec() };
        // 4 × (4 KiB + 256 KiB + 256 KiB of stack), not 4 × 61 MiB.
        assert_eq!(test_memory(&s, StreamLayout::PER_STREAM), 4 * ((4 << 10) + (512 << 10)));
        assert_eq!(Limits::default().check(&s), Ok(()));
        assert!(buffer_memory(&s, StreamLayout::PER_STREAM) > 200 << 20, "the client's own");
    }

    #[test]
    fn each_address_gets_a_quarter_of_the_slots_by_default() {
        let l = Limits::default();
        assert_eq!(l.tests_per_address(), 4);
        assert!(l.share_refusal(3).is_none());
        let r = l.share_refusal(4).expect("at its share");
        assert!(
            r.message.contains(
                "already holds 4 test(s) on the server, its share (--max-tests-per-address)"
            ),
            "{r}"
        );
        assert_eq!(Limits { max_tests: 2, ..Limits::default() }.tests_per_address(), 1);
        let off = Limits { max_tests_per_address: Some(0), ..Limits::default() };
        assert!(off.share_refusal(1000).is_none());
        assert_eq!(
            (l.doctor_slots(), Limits { exclusive: true, ..l.clone() }.doctor_slots()),
            (4, 1)
        );
        assert!(l.doctors_busy(3).is_none() && l.doctors_busy(4).is_some());
    }

    #[test]
    fn busy_when_every_slot_is_taken() {
        let l = Limits { max_tests: 2, ..Limits::default() };
        assert!(l.busy(1).is_none());
        assert!(l.busy(2).expect("busy").message.contains("at most 2 test(s)"));
    }

    #[test]
    fn clients_are_counted_by_prefix_ipv6_per_64_by_default() {
        let l = Limits::default();
        let key = |s: &str| client_key(s.parse().expect("address"), &l);
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:ffff::9"), "one /64");
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"), "another /64");
        assert_ne!(key("127.0.0.1"), key("127.0.0.2"), "IPv4: every address");
        assert_eq!(key("::ffff:127.0.0.1"), key("127.0.0.1"), "mapped = the IPv4 address");
        let l24 = Limits { ipv4_prefix: 24, ipv6_prefix: 128, ..l };
        let key24 = |s: &str| client_key(s.parse().expect("address"), &l24);
        assert_eq!(key24("10.1.2.3"), key24("10.1.2.200"));
        assert_ne!(key24("2001:db8::1"), key24("2001:db8::2"), "/128: each address");
        let l0 = Limits { ipv4_prefix: 0, ipv6_prefix: 0, ..l };
        assert_eq!(client_key("10.1.2.3".parse().expect("a"), &l0).to_string(), "0.0.0.0");
    }

    #[test]
    fn budgets_come_from_the_settings_or_the_process_limits() {
        let l = Limits::default();
        let r = Resources {
            files: 20_000,
            address_space: Some(2 << 30),
            memory: Some(24 << 30),
            threads: Some(100_000),
        };
        let b = Budgets::derive(&l, r);
        assert_eq!(b.connections, 2048, "a quarter of 19,936 fds, capped");
        assert_eq!(b.fds, 19_936 - 2048);
        assert_eq!(b.memory, (2 << 30) - ADDRESS_SPACE_RESERVE, "RLIMIT_AS wins over RAM");
        assert_eq!(b.threads, 50_000);
        let small = Budgets::derive(&l, Resources { files: 1024, ..r });
        assert_eq!(small.connections, 240, "(1024 - 64) / 4");
        let no_as = Budgets::derive(&l, Resources { address_space: None, ..r });
        assert_eq!(no_as.memory, 12 << 30, "half the machine's memory");
        let tight = Budgets::derive(&l, Resources { address_space: Some(300 << 20), ..r });
        assert_eq!(tight.memory, l.max_test_memory + SESSION_BYTES, "one test always fits");
        let set = Limits {
            max_connections: Some(100),
            max_memory: Some(1 << 30),
            max_threads: Some(500),
            ..l
        };
        let b = Budgets::derive(&set, r);
        assert_eq!((b.connections, b.memory, b.threads), (100, 1 << 30, 500));
    }

    #[test]
    fn a_test_costs_its_streams_session_and_transactions_and_budgets_refuse_past_them() {
        let spec = TestSpec { streams: 8, ..TestSpec::default_tcp() };
        let c = test_cost(&spec, StreamLayout::PER_STREAM);
        assert_eq!((c.threads, c.fds), (10, 9));
        assert_eq!(c.memory, test_memory(&spec, StreamLayout::PER_STREAM) + SESSION_BYTES);
        let rr =
            crate::latency::RrSpec { connect_each: true, ..crate::latency::RrSpec::default_rr() };
        let crr = TestSpec { streams: 4, rr: Some(rr), ..TestSpec::default_tcp() };
        assert_eq!(test_cost(&crr, StreamLayout::PER_STREAM).fds, 4 + 8 + 1);
        let b = Budgets { connections: 10, fds: 20, memory: c.memory * 2, threads: 1000 };
        assert!(b.refusal(TestCost::default(), c).is_none());
        let r = b.refusal(c, c).map(|r| r.message);
        assert!(r.is_none(), "two fit exactly: {r:?}");
        let used = TestCost { memory: c.memory * 2, ..c };
        let r = b.refusal(used, c).expect("memory full");
        assert_eq!(r.kind, LimitKind::Busy);
        assert!(r.message.contains("(--max-memory)"), "{r}");
        let r = b.refusal(TestCost { fds: 15, ..TestCost::default() }, c).expect("fds");
        assert!(r.message.contains("file descriptors"), "{r}");
    }
}
