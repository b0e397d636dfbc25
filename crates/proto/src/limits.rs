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
    /// A running test in which no stream moves a byte for this long is ended (a silent or
    /// stopped peer whose connections are still up).
    pub idle_timeout: Duration,
    /// One test at a time; later requests wait in a queue (clients that cannot queue, such
    /// as iperf3, are refused as busy).
    pub exclusive: bool,
    /// With `exclusive`: how many requests may wait; more are refused.
    pub queue: u32,
    /// Shortest sampling interval (`-i`) a test may ask for; 0 (no sampling) is always
    /// allowed.
    pub min_interval: Duration,
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
                     ask for -b with streams × rate within it",
                    si(max)
                ),
            ));
        }
        Ok(())
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

/// The rate a test asks for in total (every stream, both directions), bits per second; None
/// for an unpaced test.
pub fn requested_rate(spec: &TestSpec) -> Option<u64> {
    (spec.bits_per_second > 0).then(|| {
        spec.bits_per_second
            .saturating_mul(u64::from(spec.streams))
            .saturating_mul(directions(spec.direction))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        TestSpec::default_tcp()
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
    fn busy_when_every_slot_is_taken() {
        let l = Limits { max_tests: 2, ..Limits::default() };
        assert!(l.busy(1).is_none());
        assert!(l.busy(2).expect("busy").message.contains("at most 2 test(s)"));
    }
}
