//! Who holds the server's test slots, and which slot a full server takes back for a newcomer.
//!
//! A full server refuses a newcomer ("server is busy") unless one of two kinds of holder can
//! give its slot up:
//!
//! 1. **A test that has not started** after [`PREEMPT_AFTER`] (its streams never all connected,
//!    or a fleet's held start whose `go` has not come). It moves nothing and may otherwise
//!    hold its slot until its own deadline (the gate's 10 s): cycled, such tests from four
//!    addresses kept every other client out (issue 35). The oldest goes first.
//! 2. **A test running at the floor rate**, for a newcomer from a network that holds fewer
//!    such slots (issue 47). The progress floor (`--min-rate`, 8 kbit/s) makes a slot cost
//!    something, but little: 60 addresses each paying it filled all 16 slots, and legitimate
//!    tests got 0 of 2. So a running test whose last full second moved less than
//!    [`CHEAP_RATE`] (bytes, and 1024 bits per answered transaction) counts as *cheap*, and
//!    the cheap tests are kept in the same hierarchy as the connections at the door
//!    (`crowd.rs`: the IPv4 /24 or IPv6 /48 and /64, then the client): the one to give way
//!    belongs to the network holding the most cheap slots, in it to the client holding the
//!    most, and of that client it is the oldest test; it gives way only if, where its path
//!    and the newcomer's part, its side holds at least two more cheap slots than the
//!    newcomer's. Two, not one: after the exchange the newcomer's side holds no more than the
//!    victim's, so two sides never trade a slot back and forth — with one, the 24 addresses
//!    of a crowd took each other's slots as fast as they were measured, and a newcomer from
//!    elsewhere found none old enough to have a rate (0 of 10 served). A network thus keeps
//!    its share of the slots against a crowd of another that pays only the floor; a test that
//!    moves 1 Mbit/s or more is never taken back, so filling 16 slots for good costs a crowd
//!    16 Mbit/s, not 128 kbit/s. What this cannot do is tell networks apart that are each
//!    one slot strong: a crowd spread over 16 networks of its own holds 16 shares, as any
//!    rule by prefix must allow (`--allow` and `--psk-file` are the answer there).
//!
//! Why 1 Mbit/s: two orders of magnitude above the floor, far below any throughput test
//! worth a slot, and above the request/response tests people pace by hand (`--rr-rate 50`
//! counts about 55 kbit/s): those are the legitimate tests a newcomer may take a slot from,
//! and only when the server is full and the newcomer's network holds fewer cheap slots.
//! The session told to give way ends with the reason (`served.rs`); it is not penalized.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::session::crowd::Crowd;

/// How long an admitted test may hold its slot without starting before a test that finds
/// every slot held may take it: a test with 128 streams connects them in well under a
/// second on any path worth testing.
pub const PREEMPT_AFTER: Duration = Duration::from_secs(1);

/// Under this rate (bit/s over its last full [`CHEAP_PERIOD`]) a running test is cheap: a
/// full server may take its slot back for a newcomer from a network holding fewer.
pub const CHEAP_RATE: u64 = 1_000_000;

/// How often a running test's rate is judged against [`CHEAP_RATE`].
pub const CHEAP_PERIOD: Duration = Duration::from_secs(1);

/// One admitted test.
#[derive(Debug)]
struct Holder {
    /// Its client (the address cut to the server's client prefix).
    client: IpAddr,
    since: Instant,
    started: bool,
    cheap: bool,
    /// Set when it must give its slot up: its session ends it.
    preempted: Arc<AtomicBool>,
}

#[derive(Debug, Default)]
struct Inner {
    /// By test number, so the oldest comes first.
    holders: BTreeMap<u64, Holder>,
    /// The cheap running tests, by client and network (tokens are test numbers).
    cheap: Crowd,
}

/// The slot holders of one server.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    inner: Mutex<Inner>,
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Test `test` of `client` took a slot; the flag is set if it must give it up.
    pub(crate) fn admitted(&self, test: u64, client: IpAddr, now: Instant) -> Arc<AtomicBool> {
        let preempted = Arc::new(AtomicBool::new(false));
        let holder = Holder {
            client,
            since: now,
            started: false,
            cheap: false,
            preempted: preempted.clone(),
        };
        self.lock().holders.insert(test, holder);
        preempted
    }

    /// Test `test` started: it is no longer taken back for not starting.
    pub(crate) fn started(&self, test: u64) {
        if let Some(h) = self.lock().holders.get_mut(&test) {
            h.started = true;
        }
    }

    /// Test `test` moved less than [`CHEAP_RATE`] over its last [`CHEAP_PERIOD`] (`cheap`), or
    /// not.
    pub(crate) fn moving(&self, test: u64, cheap: bool) {
        let mut inner = self.lock();
        let Inner { holders, cheap: crowd } = &mut *inner;
        let Some(h) = holders.get_mut(&test) else { return };
        if h.cheap != cheap && !h.preempted.load(Ordering::SeqCst) {
            h.cheap = cheap;
            if cheap {
                crowd.join(h.client, test);
            } else {
                crowd.leave(h.client, test);
            }
        }
    }

    /// Test `test` ended.
    pub(crate) fn ended(&self, test: u64) {
        let mut inner = self.lock();
        if let Some(h) = inner.holders.remove(&test)
            && h.cheap
        {
            inner.cheap.leave(h.client, test);
        }
    }

    /// Every slot is held and a test of `newcomer` (a client key) asks for one: takes one back
    /// by the module's rule (the oldest test unstarted after [`PREEMPT_AFTER`], else a cheap
    /// test of a network holding more cheap slots) and tells its session; None if no holder
    /// may give way.
    pub(crate) fn preempt(&self, newcomer: IpAddr, now: Instant) -> Option<()> {
        let mut inner = self.lock();
        let unstarted = inner
            .holders
            .iter()
            .find(|(_, h)| !h.started && now.saturating_duration_since(h.since) >= PREEMPT_AFTER);
        let test = match unstarted {
            Some((test, _)) => *test,
            None => inner.cheap.victim_by(Some(newcomer), 2)?.0,
        };
        let h = inner.holders.remove(&test)?;
        if h.cheap {
            inner.cheap.leave(h.client, test);
        }
        h.preempted.store(true, Ordering::SeqCst);
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn v4(c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, c, d))
    }

    #[test]
    fn an_unstarted_test_gives_way_after_a_second_and_the_oldest_first() {
        let slots = Slots::default();
        let t0 = Instant::now();
        let a = slots.admitted(1, v4(1, 1), t0);
        let b = slots.admitted(2, v4(1, 2), t0);
        let c = slots.admitted(3, v4(1, 3), t0);
        slots.started(3);
        assert_eq!(slots.preempt(v4(2, 1), t0 + Duration::from_millis(900)), None);
        assert_eq!(slots.preempt(v4(2, 1), t0 + PREEMPT_AFTER), Some(()));
        assert!(a.load(Ordering::SeqCst) && !b.load(Ordering::SeqCst));
        assert_eq!(slots.preempt(v4(2, 1), t0 + PREEMPT_AFTER), Some(()));
        assert!(b.load(Ordering::SeqCst));
        assert_eq!(slots.preempt(v4(2, 1), t0 + PREEMPT_AFTER), None, "3 started and is not cheap");
        assert!(!c.load(Ordering::SeqCst));
    }

    #[test]
    fn a_cheap_test_gives_way_to_a_network_holding_two_fewer_cheap_slots_only() {
        let slots = Slots::default();
        let t0 = Instant::now();
        // Network 10.0.1/24: three cheap tests of three clients and one fast test.
        let flags: Vec<_> = (1..=4u8)
            .map(|i| {
                let f = slots.admitted(u64::from(i), v4(1, i), t0);
                slots.started(u64::from(i));
                slots.moving(u64::from(i), i != 4);
                f
            })
            .collect();
        // Network 10.0.2/24: one cheap test.
        let other = slots.admitted(5, v4(2, 1), t0);
        slots.started(5);
        slots.moving(5, true);
        let later = t0 + Duration::from_secs(5);
        // Inside the crowd's network each client holds one: no client takes another's, and
        // its own client keeps it.
        assert_eq!(slots.preempt(v4(1, 9), later), None, "no churn inside a network");
        assert_eq!(slots.preempt(v4(1, 1), later), None, "its own client keeps it");
        // A network holding none takes from the one holding most, the oldest test first,
        // while that one holds at least two more.
        assert_eq!(slots.preempt(v4(3, 1), later), Some(()));
        assert!(flags[0].load(Ordering::SeqCst));
        assert_eq!(slots.preempt(v4(3, 1), later), Some(()));
        assert!(flags[1].load(Ordering::SeqCst));
        assert_eq!(slots.preempt(v4(3, 1), later), None, "one against none stays");
        assert!(!flags[2].load(Ordering::SeqCst) && !other.load(Ordering::SeqCst));
        // A test that speeds up leaves the cheap ones; the fast test is never taken.
        slots.moving(3, false);
        slots.moving(5, false);
        assert_eq!(slots.preempt(v4(3, 1), later), None);
        assert!(!flags[3].load(Ordering::SeqCst));
        // Cheap again, and two of network 2: they give way; ended tests are forgotten.
        let third = slots.admitted(6, v4(2, 2), t0);
        slots.started(6);
        slots.moving(6, true);
        slots.moving(5, true);
        slots.ended(5);
        assert_eq!(slots.preempt(v4(3, 1), later), None, "test 5 ended: network 2 holds one");
        assert!(!third.load(Ordering::SeqCst));
    }
}
