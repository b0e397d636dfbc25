//! Per-client bookkeeping for the server's limits (a client is an address cut to
//! `--ipv4-prefix`/`--ipv6-prefix` bits: an IPv6 /64 by default): connections from one address that
//! are not yet part of a test, the tests (and doctor sessions) it holds, and a token bucket of
//! new tests per address.
//!
//! The accept loop asks [`Admission::open`] before it spends a thread on a connection, so a
//! flood of slow or half-open connections from one address costs one map entry, not a
//! thread each; the [`Pending`] guard it returns gives the place back when the connection is
//! identified (or dropped). The bucket is consulted when a test is requested, after the
//! spec passed the pure checks in `linerate_proto::limits`.
//!
//! An admitted test's data connections may go past the pending cap (a `-P 128` test opens
//! its streams in a burst), but only as a one-time credit: each connection admitted over the
//! cap uses one of the connections the test declared, whether or not it turns out to be one
//! of them, and the rest of the credit is gone when the test starts or ends. A test that is
//! accepted but never starts therefore lends its address at most its own connections, once,
//! never a standing higher cap.
//!
//! Each address holds at most its share of tests ([`Limits::tests_per_address`]), running or
//! queued, through a [`Share`] that its session keeps until it ends.
//!
//! With `--exclusive` the server runs one test at a time and later requests wait in a FIFO
//! queue of [`Ticket`]s (a ticket leaves the queue when dropped, so a client that goes away
//! while waiting frees its place). The wait estimate is the running test's expected end plus
//! the expected length of every test ahead; a byte-bound test makes it unknown. Nothing here
//! reads sockets.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::limits::client_key;
use linerate_proto::{LimitKind, Limits, Refusal};

/// How long a client that held a slot without paying for it holds one test at a time.
pub(crate) const PENALTY: Duration = Duration::from_secs(60);

/// Above this many remembered addresses, idle ones are forgotten.
const PRUNE_ABOVE: usize = 4096;

#[derive(Debug)]
struct Client {
    pending: u32,
    /// Connections admitted tests from this address may still open over the pending cap
    /// (a one-time credit, used up by each connection admitted over it).
    expected: u32,
    /// Tests and doctor sessions this address holds (running or queued).
    held: u32,
    /// Connections its running `--crr` tests may have waiting over the pending cap: each
    /// transaction is a new connection, and a `-P 128` test opens 128 at once.
    transactions: u32,
    tokens: f64,
    refilled: Instant,
    /// Until then the client holds one test at a time: a test of its held a slot without
    /// paying for it ([`Admission::penalize`]).
    penalty_until: Option<Instant>,
}

impl Client {
    fn penalized(&self, now: Instant) -> bool {
        self.penalty_until.is_some_and(|t| now < t)
    }
}

/// Admission state shared by every connection of one server.
#[derive(Debug)]
pub(crate) struct Admission {
    pub(crate) limits: Limits,
    clients: Mutex<HashMap<IpAddr, Client>>,
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    /// Waiting tickets in order, with each test's expected length (None = unknown).
    waiting: std::collections::VecDeque<(u64, Option<Duration>)>,
    next: u64,
    /// When the running exclusive test is expected to end (None = unknown or none).
    running_until: Option<Instant>,
}

/// A place in the exclusive queue; dropping it leaves the queue.
#[derive(Debug)]
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut q = self.admission.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.waiting.retain(|(id, _)| *id != self.id);
    }
}

/// Where a ticket stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// 1 = next.
    pub(crate) position: u32,
    /// The estimated wait, if every test ahead has a known length.
    pub(crate) wait: Option<Duration>,
}

/// A count a client's entry holds until the guard drops: `n` of the field `count` picks. The
/// one shape of [`Pending`], [`Share`], [`Expected`] and [`Transactions`].
#[derive(Debug)]
pub(crate) struct Held {
    admission: Arc<Admission>,
    ip: IpAddr,
    n: u32,
    count: fn(&mut Client) -> &mut u32,
}

impl Drop for Held {
    fn drop(&mut self) {
        let (n, count) = (self.n, self.count);
        self.admission.update(self.ip, |c| {
            let field = count(c);
            *field = field.saturating_sub(n);
        });
    }
}

/// A connection counted against its client until it becomes part of a test or closes.
pub(crate) type Pending = Held;
/// One test or doctor session held by a client; dropping it gives the place back.
pub(crate) type Share = Held;
/// A running `--crr` test's allowance of transaction connections (see
/// [`Admission::allow_transactions`]).
pub(crate) type Transactions = Held;
/// Data connections an admitted test still awaits (see [`Admission::expect`]).
pub(crate) type Expected = Held;

impl Admission {
    pub(crate) fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            clients: Mutex::new(HashMap::new()),
            queue: Mutex::new(Queue::default()),
        })
    }

    /// How many wait in the exclusive queue.
    pub(crate) fn queued(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).waiting.len()
    }

    /// True when nobody waits in the exclusive queue.
    pub(crate) fn queue_empty(&self) -> bool {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).waiting.is_empty()
    }

    /// Joins the exclusive queue with a test expected to run `expected`, or says it is full.
    pub(crate) fn join_queue(
        self: &Arc<Self>,
        expected: Option<Duration>,
    ) -> Result<Ticket, Refusal> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = self.limits.queue_full(q.waiting.len()) {
            return Err(r);
        }
        let id = q.next;
        q.next += 1;
        q.waiting.push_back((id, expected));
        Ok(Ticket { admission: self.clone(), id })
    }

    /// Where `t` waits now.
    pub(crate) fn place(&self, t: &Ticket, now: Instant) -> Place {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let idx = q.waiting.iter().position(|(id, _)| *id == t.id).unwrap_or(0);
        let running = q.running_until.map(|u| u.saturating_duration_since(now));
        let ahead = q.waiting.iter().take(idx).map(|(_, e)| *e);
        let wait = std::iter::once(running).chain(ahead).sum::<Option<Duration>>();
        Place { position: u32::try_from(idx + 1).unwrap_or(u32::MAX), wait }
    }

    /// True when `t` is at the head of the queue.
    pub(crate) fn is_next(&self, t: &Ticket) -> bool {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.waiting.front().is_some_and(|(id, _)| *id == t.id)
    }

    /// An exclusive test started and is expected to run `expected`.
    pub(crate) fn running(&self, expected: Option<Duration>, now: Instant) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.running_until = expected.map(|e| now + e);
    }

    /// Counts a new connection from `ip`, or says why it is dropped unread.
    pub(crate) fn open(self: &Arc<Self>, ip: IpAddr) -> Result<Pending, Refusal> {
        let max = self.limits.max_client_connections;
        let admitted = self.update(ip, |c| {
            let cap = max.saturating_add(c.transactions);
            let ok = max == 0 || c.pending < cap || c.expected > 0;
            if ok {
                if max > 0 && c.pending >= cap {
                    c.expected -= 1;
                }
                c.pending += 1;
            }
            ok
        });
        if !admitted {
            return Err(Refusal::new(
                LimitKind::ClientRate,
                format!(
                    "{max} connections from this address are already waiting to start a test \
                     (--max-client-connections)"
                ),
            ));
        }
        Ok(self.held(ip, 1, |c| &mut c.pending))
    }

    /// An admitted test from `ip` will open `n` data connections: until the guard drops (the
    /// test started or ended), up to `n` connections may be admitted over the pending cap,
    /// each using one up.
    pub(crate) fn expect(self: &Arc<Self>, ip: IpAddr, n: u32) -> Expected {
        self.update(ip, |c| c.expected = c.expected.saturating_add(n));
        self.held(ip, n, |c| &mut c.expected)
    }

    /// A running `--crr` test from `ip` opens a connection per transaction, up to `n` at
    /// once: until the guard drops (the test ended), `n` more may wait over the pending cap.
    /// Unlike [`Admission::expect`] this is a standing allowance, bounded by the test's own
    /// streams and counted in the server's descriptor budget (`TestCost::fds`).
    pub(crate) fn allow_transactions(self: &Arc<Self>, ip: IpAddr, n: u32) -> Transactions {
        self.update(ip, |c| c.transactions = c.transactions.saturating_add(n));
        self.held(ip, n, |c| &mut c.transactions)
    }

    /// Counts one more test (or doctor session) held by `ip`, or says it holds its share
    /// (one test while it is penalized).
    pub(crate) fn take_share(self: &Arc<Self>, ip: IpAddr) -> Result<Share, Refusal> {
        let limits = &self.limits;
        let now = Instant::now();
        self.update(ip, |c| {
            if c.penalized(now) && c.held >= 1 {
                let left = c.penalty_until.map_or(0.0, |t| (t - now).as_secs_f64().ceil());
                return Err(Refusal::new(
                    LimitKind::ClientRate,
                    format!(
                        "a test from this address held a slot without moving data (at least half of \
                         --min-rate), so it may hold one test at a time for {left:.0} s more, and \
                         it holds one"
                    ),
                ));
            }
            match limits.share_refusal(c.held) {
                Some(r) => Err(r),
                None => {
                    c.held += 1;
                    Ok(())
                }
            }
        })?;
        Ok(self.held(ip, 1, |c| &mut c.held))
    }

    /// A test from `ip` held a slot without paying for it (it never started — a held start
    /// whose `go` never came, streams that never connected — or the watchdog cut it for
    /// moving less than half of `--min-rate`): for
    /// [`PENALTY`] the client may hold one test at a time. Without this, a few addresses
    /// that each cycle their share of such tests keep every slot taken for free; with it,
    /// they hold one slot each, and a legitimate client that failed once is slowed, not
    /// refused.
    pub(crate) fn penalize(&self, ip: IpAddr, now: Instant) {
        self.update(ip, |c| c.penalty_until = Some(now + PENALTY));
    }

    /// Takes one new-test token for `ip`, or says when the next one is due.
    pub(crate) fn take_test_token(&self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        let per_minute = self.limits.max_client_tests_per_minute;
        if per_minute == 0 {
            return Ok(());
        }
        let cap = f64::from(per_minute);
        let per_sec = cap / 60.0;
        let wait = self.update(ip, |c| {
            let elapsed = now.saturating_duration_since(c.refilled).as_secs_f64();
            c.tokens = (c.tokens + elapsed * per_sec).min(cap);
            c.refilled = now;
            if c.tokens >= 1.0 {
                c.tokens -= 1.0;
                None
            } else {
                Some(Duration::from_secs_f64((1.0 - c.tokens) / per_sec))
            }
        });
        match wait {
            None => Ok(()),
            Some(w) => Err(Refusal::new(
                LimitKind::ClientRate,
                format!(
                    "server allows at most {per_minute} new tests per minute from one address \
                     (--max-client-tests-per-minute); try again in {:.0} s",
                    w.as_secs_f64().ceil()
                ),
            )),
        }
    }

    /// The guard that gives back `n` of `ip`'s `count` when it drops (counted already).
    fn held(self: &Arc<Self>, ip: IpAddr, n: u32, count: fn(&mut Client) -> &mut u32) -> Held {
        Held { admission: self.clone(), ip, n, count }
    }

    /// Applies `f` to `ip`'s entry (created full), dropping entries with nothing to remember.
    /// The entry is the client's: `ip` cut to the configured prefix (`client_key`), so the
    /// addresses of one IPv6 /64 share one count.
    fn update<R>(&self, ip: IpAddr, f: impl FnOnce(&mut Client) -> R) -> R {
        let ip = client_key(ip, &self.limits);
        let mut map = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let cap = f64::from(self.limits.max_client_tests_per_minute);
        let c = map.entry(ip).or_insert_with(|| Client {
            pending: 0,
            expected: 0,
            held: 0,
            transactions: 0,
            tokens: cap,
            refilled: Instant::now(),
            penalty_until: None,
        });
        let r = f(c);
        let now = Instant::now();
        if c.pending == 0
            && c.expected == 0
            && c.held == 0
            && c.transactions == 0
            && c.tokens >= cap
            && !c.penalized(now)
        {
            map.remove(&ip);
        }
        if map.len() > PRUNE_ABOVE {
            // Entries idle for a minute have refilled: forgetting them changes nothing.
            map.retain(|_, c| {
                c.pending > 0
                    || c.expected > 0
                    || c.held > 0
                    || c.transactions > 0
                    || c.penalized(now)
                    || c.refilled.elapsed() < Duration::from_secs(60)
            });
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn pending_connections_are_capped_per_address_and_given_back() {
        let a = Admission::new(Limits { max_client_connections: 2, ..Limits::default() });
        let p1 = a.open(ip(1)).expect("first");
        let _p2 = a.open(ip(1)).expect("second");
        let err = a.open(ip(1)).expect_err("third is over");
        assert!(err.message.contains("--max-client-connections"), "{err}");
        let _other = a.open(ip(2)).expect("another address has its own count");
        drop(p1);
        let _p3 = a.open(ip(1)).expect("a place was given back");
        let streams = a.expect(ip(1), 3);
        let burst: Vec<_> = (0..3).map(|_| a.open(ip(1)).expect("expected streams")).collect();
        assert!(a.open(ip(1)).is_err(), "only as many as the test has");
        drop(burst);
        assert!(a.open(ip(1)).is_err(), "the credit was used once, not a standing raise");
        drop(streams);
        assert!(a.open(ip(1)).is_err(), "back to the plain cap of 2 (two still held)");
    }

    #[test]
    fn each_address_holds_at_most_its_share_of_tests() {
        let a = Admission::new(Limits { max_tests: 8, ..Limits::default() });
        let held: Vec<_> = (0..2).map(|_| a.take_share(ip(1)).expect("within 8 / 4")).collect();
        let err = a.take_share(ip(1)).expect_err("over its share");
        assert!(err.message.contains("(--max-tests-per-address)"), "{err}");
        let _other = a.take_share(ip(2)).expect("another address has its own share");
        drop(held);
        let _again = a.take_share(ip(1)).expect("a place was given back");
    }

    #[test]
    fn new_tests_are_rate_limited_per_address_and_refill() {
        let a = Admission::new(Limits { max_client_tests_per_minute: 2, ..Limits::default() });
        let t0 = Instant::now();
        a.take_test_token(ip(1), t0).expect("1");
        a.take_test_token(ip(1), t0).expect("2");
        let err = a.take_test_token(ip(1), t0).expect_err("bucket empty");
        assert!(err.message.contains("try again in 30 s"), "{err}");
        a.take_test_token(ip(2), t0).expect("other address");
        a.take_test_token(ip(1), t0 + Duration::from_secs(30)).expect("refilled one");
    }

    #[test]
    fn exclusive_queue_is_fifo_bounded_and_estimates_the_wait() {
        let a = Admission::new(Limits { exclusive: true, queue: 2, ..Limits::default() });
        let t0 = Instant::now();
        a.running(Some(Duration::from_secs(10)), t0);
        let first = a.join_queue(Some(Duration::from_secs(5))).expect("1");
        let second = a.join_queue(None).expect("2");
        let err = a.join_queue(None).expect_err("full");
        assert!(err.message.contains("queue of 2 is full (--queue)"), "{err}");
        let p = a.place(&first, t0 + Duration::from_secs(4));
        assert_eq!(p, Place { position: 1, wait: Some(Duration::from_secs(6)) });
        assert!(a.is_next(&first) && !a.is_next(&second));
        let third = a.join_queue(Some(Duration::from_secs(1))).expect_err("still full");
        drop(third);
        drop(first);
        assert!(a.is_next(&second), "a dropped ticket leaves the queue");
        let last = a.join_queue(Some(Duration::from_secs(1))).expect("a place was freed");
        assert_eq!(a.place(&last, t0).wait, None, "a byte-bound test ahead: unknown wait");
    }

    #[test]
    fn zero_means_unlimited() {
        let a = Admission::new(Limits {
            max_client_connections: 0,
            max_client_tests_per_minute: 0,
            ..Limits::default()
        });
        let held: Vec<_> = (0..100).map(|_| a.open(ip(1)).expect("open")).collect();
        assert_eq!(held.len(), 100);
        for _ in 0..1000 {
            a.take_test_token(ip(1), Instant::now()).expect("no cap");
        }
    }

    #[test]
    fn one_ipv6_64_is_one_client_for_every_count() {
        let a = Admission::new(Limits { max_client_connections: 2, ..Limits::default() });
        let v6 = |last: u16| IpAddr::from([0x2001, 0xdb8, 0, 7, 0, 0, 0, last]);
        let _p: Vec<_> = (1..=2).map(|i| a.open(v6(i)).expect("two")).collect();
        assert!(a.open(v6(3)).is_err(), "a third address of the same /64 is over the cap");
        let other = IpAddr::from([0x2001, 0xdb8, 0, 8, 0, 0, 0, 1]);
        let _o = a.open(other).expect("another /64 is another client");
    }

    #[test]
    fn a_penalized_client_holds_one_test_at_a_time_for_a_while() {
        let a = Admission::new(Limits { max_tests: 16, ..Limits::default() });
        let t0 = Instant::now();
        a.penalize(ip(1), t0);
        let one = a.take_share(ip(1)).expect("one test");
        let err = a.take_share(ip(1)).expect_err("only one while penalized");
        assert!(err.message.contains("one test at a time"), "{err}");
        let _others: Vec<_> = (0..4).map(|_| a.take_share(ip(2)).expect("others: 4")).collect();
        drop(one);
        let _again = a.take_share(ip(1)).expect("its one place is back");
        a.update(ip(1), |c| c.penalty_until = Some(t0));
        let _second = a.take_share(ip(1)).expect("the penalty ended: its share is 4 again");
    }
}
