//! Per-client-address bookkeeping for the server's limits: connections from one address that
//! are not yet part of a test, and a token bucket of new tests per address.
//!
//! The accept loop asks [`Admission::open`] before it spends a thread on a connection, so a
//! flood of slow or half-open connections from one address costs one map entry, not a
//! thread each; the [`Pending`] guard it returns gives the place back when the connection is
//! identified (or dropped). The bucket is consulted when a test is requested, after the
//! spec passed the pure checks in `linerate_proto::limits`. Nothing here reads sockets.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::{LimitKind, Limits, Refusal};

/// Above this many remembered addresses, idle ones are forgotten.
const PRUNE_ABOVE: usize = 4096;

#[derive(Debug)]
struct Client {
    pending: u32,
    tokens: f64,
    refilled: Instant,
}

/// Admission state shared by every connection of one server.
#[derive(Debug)]
pub(crate) struct Admission {
    pub(crate) limits: Limits,
    clients: Mutex<HashMap<IpAddr, Client>>,
}

/// A connection counted against its address until it becomes part of a test or closes.
#[derive(Debug)]
pub(crate) struct Pending {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.admission.update(self.ip, |c| c.pending = c.pending.saturating_sub(1));
    }
}

impl Admission {
    pub(crate) fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self { limits, clients: Mutex::new(HashMap::new()) })
    }

    /// Counts a new connection from `ip`, or says why it is dropped unread.
    pub(crate) fn open(self: &Arc<Self>, ip: IpAddr) -> Result<Pending, Refusal> {
        let max = self.limits.max_client_connections;
        let admitted = self.update(ip, |c| {
            let ok = max == 0 || c.pending < max;
            if ok {
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
        Ok(Pending { admission: self.clone(), ip })
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

    /// Applies `f` to `ip`'s entry (created full), dropping entries with nothing to remember.
    fn update<R>(&self, ip: IpAddr, f: impl FnOnce(&mut Client) -> R) -> R {
        let mut map = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let cap = f64::from(self.limits.max_client_tests_per_minute);
        let c = map.entry(ip).or_insert_with(|| Client {
            pending: 0,
            tokens: cap,
            refilled: Instant::now(),
        });
        let r = f(c);
        if c.pending == 0 && c.tokens >= cap {
            map.remove(&ip);
        }
        if map.len() > PRUNE_ABOVE {
            // Entries idle for a minute have refilled: forgetting them changes nothing.
            map.retain(|_, c| c.pending > 0 || c.refilled.elapsed() < Duration::from_secs(60));
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
}
