//! How much a TCP sender keeps queued in its socket but not yet sent (`TCP_NOTSENT_LOWAT`).
//!
//! By default Linux lets a bulk sender fill its whole send buffer (autotuned up to
//! `net.ipv4.tcp_wmem`'s 4 MiB here) with data TCP cannot send yet. Every byte of it was just
//! copied in by the sender and waits there until TCP sends it; with several streams, or both
//! directions at once, those queues together outgrow the CPU caches, so on loopback (where the
//! receiving copy reads the very bytes the sending copy wrote) the receiver's copy comes from
//! memory instead of cache, and the kernel holds megabytes per socket for nothing: the queue
//! does not make TCP send sooner. With the limit, the writer blocks once `limit` bytes wait
//! unsent and is woken when they drop below half, so the bytes move while still warm.
//!
//! Measured on this project's 2-vCPU machine (docs/PERFORMANCE.md, "The unsent queue"): on
//! loopback 128 KiB raised `-P 2`, `-P 4`, `--bidir` and `-P 8 -w 800K` by a third or more and
//! lowered CPU per GB; 32 KiB was slower again (the writer wakes too often), and 2 MiB gave
//! back most of the gain.
//!
//! What counts is the unsent bytes of all an end's senders together, so the automatic limit
//! starts at [`floor`]: [`END_BUDGET`] shared by the end's TCP senders, at least [`MIN`] and
//! at most [`FLOOR`] per stream (128 KiB for one or two streams, 64 KiB from four: at `-P 8`
//! 64 KiB beat 128 KiB by 20–50 % in two interleaved runs, and lower still did not help
//! reliably).
//!
//! On a real link the queue must still hold enough to keep TCP busy until the writer wakes:
//! 128 KiB last 10 µs at 100 Gbit/s, about one thread wake-up. So the automatic limit follows
//! the sender's own rate: the floor to start, then [`AUTO_SPAN`] of the rate measured over
//! [`RateFollower::WINDOW`], at most [`MAX`]. The span is short because on loopback every step up cost
//! throughput (a 100 µs span, about 580 KB for one 46 Gbit/s stream, was slower than 128 KiB
//! on most lines in interleaved runs); 25 µs keeps loopback at the floor up to 42 Gbit/s per
//! stream and gives a 100 Gbit/s stream 312 KB, about 12 µs to refill after its wake-up.
//! The limit bounds only unsent bytes, never what is in flight: a long fat path's window is
//! untouched. `--notsent-lowat BYTES` fixes it, `--notsent-lowat 0` leaves the system's
//! setting (`net.ipv4.tcp_notsent_lowat`, unlimited by default) alone. Each end reports what
//! its senders used (`cost.data_plane.notsent_lowat`).
//!
//! A test under load (`--under-load`) leaves the system's setting unless `--notsent-lowat`
//! is given: its load is there to fill the path's queues as an ordinary bulk application
//! does, and with the limit the standing queue behind a 1 MB tbf queue at 20 Mbit/s read
//! 5–8 % shorter (323–340 ms of delay in three runs, 348–356 ms without it, `-C cubic -P 4`).
//! Why is not established (the limit bounds unsent bytes, not the window); the load keeps the
//! behaviour the bufferbloat figures were calibrated with.
//!
//! Pool workers (many streams, `traffic::pool`) set the floor ([`MIN`] there) on each socket
//! under `auto`: each stream's share of the rate is small, and a worker has no per-socket
//! rate to follow.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use linerate_proto::NotsentLowat;

use super::follow::RateFollower;

/// The automatic limit's floor for one or two streams.
pub const FLOOR: u32 = 128 * 1024;
/// The least floor, however many streams share [`END_BUDGET`].
pub const MIN: u32 = 64 * 1024;
/// Unsent bytes an end's senders share at their floor.
pub const END_BUDGET: u32 = 256 * 1024;
/// The automatic limit's ceiling: the default send buffer's top (`tcp_wmem`).
pub const MAX: u32 = 4 * 1024 * 1024;
/// How much of the sender's rate the automatic limit holds.
pub const AUTO_SPAN: Duration = Duration::from_micros(25);

/// What the client asked for (`spec.notsent_lowat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsentPolicy {
    /// Follow the sender's rate (the default).
    Auto,
    /// This many bytes (`--notsent-lowat BYTES`).
    Fixed(u32),
    /// Leave the system's setting (`--notsent-lowat 0`).
    Off,
}

impl UnsentPolicy {
    /// The policy a spec's `notsent_lowat` names.
    pub fn of(spec: Option<u32>) -> Self {
        match spec {
            None => Self::Auto,
            Some(0) => Self::Off,
            Some(n) => Self::Fixed(n),
        }
    }

    fn mode(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Fixed(_) => "fixed",
            Self::Off => "off",
        }
    }

    fn first(self, floor: u32) -> Option<u32> {
        match self {
            Self::Auto => Some(floor),
            Self::Fixed(n) => Some(n),
            Self::Off => None,
        }
    }
}

/// One end's policy and what its senders set, shared by its sender threads and workers.
#[derive(Debug)]
pub struct UnsentLimit {
    policy: UnsentPolicy,
    floor: u32,
    used: AtomicBool,
    max: AtomicU64,
    refused: AtomicU32,
}

impl UnsentLimit {
    /// An end's limit under `policy` for its `senders` TCP bulk senders; nothing is reported
    /// until a sender starts.
    pub fn new(policy: UnsentPolicy, senders: usize) -> Self {
        Self {
            policy,
            floor: floor(senders),
            used: AtomicBool::new(false),
            max: AtomicU64::new(0),
            refused: AtomicU32::new(0),
        }
    }

    /// Sets `bytes` on `sock` and records it; a refusal is counted, not fatal (the sender
    /// then runs with the system's setting, which is only slower).
    fn set(&self, sock: &impl std::os::fd::AsFd, bytes: u32) -> bool {
        if crate::sys::set_notsent_lowat(sock, bytes).is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.max.fetch_max(u64::from(bytes), Ordering::Relaxed);
        true
    }

    /// A pool worker's sender socket: the policy's first value, kept.
    pub fn apply_fixed(&self, sock: &impl std::os::fd::AsFd) {
        self.used.store(true, Ordering::Relaxed);
        if let Some(first) = self.policy.first(self.floor) {
            self.set(sock, first);
        }
    }

    /// A sender thread's socket: the policy's first value set, and under `auto` (once that
    /// was set) the limiter that follows its rate.
    pub fn start<'a>(&'a self, sock: &impl std::os::fd::AsFd, now: Instant) -> Option<Limiter<'a>> {
        self.used.store(true, Ordering::Relaxed);
        let first = self.policy.first(self.floor).filter(|&b| self.set(sock, b))?;
        (self.policy == UnsentPolicy::Auto).then(|| Limiter {
            limit: self,
            follower: RateFollower::new(now, first, AUTO_SPAN, self.floor, MAX),
        })
    }

    /// What this end's senders used, for its results; None if it had no TCP bulk sender.
    pub fn report(&self) -> Option<NotsentLowat> {
        self.used.load(Ordering::Relaxed).then(|| NotsentLowat {
            mode: self.policy.mode().to_string(),
            max_bytes: self.max.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        })
    }
}

/// One sender thread's automatic limit: re-measures its rate every [`RateFollower::WINDOW`].
#[derive(Debug)]
pub struct Limiter<'a> {
    limit: &'a UnsentLimit,
    follower: RateFollower,
}

impl Limiter<'_> {
    /// Feeds the sender's running byte total; changes the limit when the rate says so (a
    /// refused change is counted, and the old limit stays).
    pub fn observe(&mut self, sock: &impl std::os::fd::AsFd, total: u64, now: Instant) {
        if let Some(target) = self.follower.propose(total, now)
            && self.limit.set(sock, target)
        {
            self.follower.keep(target);
        }
    }
}

/// The automatic limit's floor for an end with `senders` TCP bulk senders.
pub fn floor(senders: usize) -> u32 {
    let share = END_BUDGET as usize / senders.max(1);
    share.clamp(MIN as usize, FLOOR as usize) as u32
}

/// The automatic limit for `bytes` sent in `elapsed`: [`AUTO_SPAN`] of that rate, within
/// `floor..=`[`MAX`] (what [`Limiter`]'s follower proposes; the tests' statement of the rule).
#[cfg(test)]
fn auto_target(bytes: u64, elapsed: Duration, floor: u32) -> u32 {
    super::follow::span_of_rate(bytes, elapsed, AUTO_SPAN).clamp(u64::from(floor), u64::from(MAX))
        as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_limit_holds_25_microseconds_of_the_rate_within_its_bounds() {
        let ms50 = Duration::from_millis(50);
        // 100 Gbit/s = 12.5 GB/s: 25 µs of it is 312.5 kB.
        assert_eq!(auto_target(625_000_000, ms50, FLOOR), 312_500);
        // Loopback's ~6 Gbit/s per stream at -P 8 stays at the floor.
        assert_eq!(auto_target(37_500_000, ms50, MIN), MIN);
        assert_eq!(auto_target(u64::MAX / 2, ms50, FLOOR), MAX);
        assert_eq!(auto_target(0, ms50, FLOOR), FLOOR);
        assert_eq!(auto_target(1, Duration::ZERO, MIN), MIN);
    }

    #[test]
    fn an_ends_senders_share_their_floor() {
        assert_eq!(floor(0), FLOOR);
        assert_eq!(floor(1), FLOOR);
        assert_eq!(floor(2), FLOOR);
        assert_eq!(floor(4), MIN);
        assert_eq!(floor(3), 87_381);
        assert_eq!(floor(10_000), MIN);
    }

    #[test]
    fn policies_come_from_the_spec_and_say_their_mode() {
        assert_eq!(UnsentPolicy::of(None), UnsentPolicy::Auto);
        assert_eq!(UnsentPolicy::of(Some(0)), UnsentPolicy::Off);
        assert_eq!(UnsentPolicy::of(Some(65536)), UnsentPolicy::Fixed(65536));
        assert_eq!(UnsentPolicy::Off.first(FLOOR), None);
        assert_eq!(UnsentPolicy::Auto.first(MIN), Some(MIN));
    }

    /// A real socket pair on loopback: the limit is set, read back by the kernel, recorded,
    /// and `off` leaves the socket alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn senders_set_the_limit_on_their_socket_and_the_end_reports_it() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let sock =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let read = |s: &std::net::TcpStream| {
            let mut v: libc::c_uint = 0;
            let mut len = std::mem::size_of::<libc::c_uint>() as libc::socklen_t;
            // SAFETY: valid fd, out-pointers to a c_uint and its length.
            let r = unsafe {
                libc::getsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_NOTSENT_LOWAT,
                    (&raw mut v).cast(),
                    &raw mut len,
                )
            };
            assert_eq!(r, 0);
            v
        };
        let before = read(&sock);
        let off = UnsentLimit::new(UnsentPolicy::Off, 1);
        assert!(off.start(&sock, Instant::now()).is_none(), "off follows nothing");
        assert_eq!(read(&sock), before, "off leaves the system's setting");
        let r = off.report().expect("a sender started");
        assert_eq!((r.mode.as_str(), r.max_bytes), ("off", 0));

        let auto = UnsentLimit::new(UnsentPolicy::Auto, 1);
        assert_eq!(auto.report(), None, "no sender, nothing to report");
        let t0 = Instant::now();
        let mut l = auto.start(&sock, t0).expect("auto follows the rate");
        assert_eq!(read(&sock), FLOOR);
        // 50 ms at 160 Gbit/s: 25 µs of it is 500 kB.
        l.observe(&sock, 1_000_000_000, t0 + RateFollower::WINDOW);
        assert_eq!(read(&sock), 500_000);
        let r = auto.report().expect("report");
        assert_eq!((r.mode.as_str(), r.max_bytes, r.refused), ("auto", 500_000, 0));

        let fixed = UnsentLimit::new(UnsentPolicy::Fixed(65536), 1);
        assert!(fixed.start(&sock, t0).is_none(), "a fixed limit does not follow the rate");
        assert_eq!(read(&sock), 65536, "a fixed limit does not follow the rate");
    }
}
