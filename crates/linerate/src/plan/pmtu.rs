//! The path-MTU search of `linerate doctor HOST`: a binary search over IP packet sizes
//! between [`PMTU_MIN`] and [`PMTU_MAX`] (or the local interface's MTU, if lower), driven by
//! whether a probe of that size came back. Pure logic: the caller sends the probes (with the
//! don't-fragment bit) and reports each outcome.
//!
//! 576 is the smallest MTU every IPv4 path must carry; 9216 covers every jumbo-frame setting
//! in use. A probe is retried by the caller before it counts as lost, because one lost
//! datagram must not be read as "too big".

/// Smallest size searched: every IPv4 path carries 576-byte packets.
pub const PMTU_MIN: u32 = 576;
/// Largest size searched: the common jumbo-frame ceiling.
pub const PMTU_MAX: u32 = 9216;

/// The search state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MtuSearch {
    /// The largest size searched.
    top: u32,
    /// The largest size that came back.
    ok: Option<u32>,
    /// The smallest size that did not.
    bad: Option<u32>,
}

impl MtuSearch {
    /// A search up to `limit` (the local interface MTU), capped at [`PMTU_MAX`].
    pub fn new(limit: Option<u32>) -> Self {
        Self { top: limit.unwrap_or(PMTU_MAX).clamp(PMTU_MIN, PMTU_MAX), ok: None, bad: None }
    }

    /// The largest size searched.
    pub fn top(&self) -> u32 {
        self.top
    }

    /// The next size to probe, or None when done. The first probe is the smallest size (is
    /// anything echoed at all?), the second the largest (the common answer), then halving.
    pub fn next_size(&self) -> Option<u32> {
        let Some(ok) = self.ok else {
            return self.bad.is_none().then_some(PMTU_MIN);
        };
        let bad = match self.bad {
            None if ok < self.top => return Some(self.top),
            None => return None,
            Some(b) => b,
        };
        (bad - ok > 1).then(|| ok + (bad - ok) / 2)
    }

    /// Records whether a probe of `size` came back.
    pub fn record(&mut self, size: u32, echoed: bool) {
        if echoed {
            self.ok = Some(self.ok.map_or(size, |o| o.max(size)));
        } else {
            self.bad = Some(self.bad.map_or(size, |b| b.min(size)));
        }
    }

    /// The largest size that came back (None if even the smallest did not).
    pub fn result(&self) -> Option<u32> {
        self.ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a path that passes packets up to `mtu`.
    fn search(limit: Option<u32>, mtu: u32) -> (Option<u32>, usize) {
        let mut s = MtuSearch::new(limit);
        let mut probes = 0;
        while let Some(size) = s.next_size() {
            probes += 1;
            assert!(probes < 40, "the search ends");
            s.record(size, size <= mtu);
        }
        (s.result(), probes)
    }

    #[test]
    fn finds_the_exact_path_mtu_in_few_probes() {
        for mtu in [576, 1280, 1400, 1500, 8999, 9000] {
            let (got, probes) = search(Some(9000), mtu);
            assert_eq!(got, Some(mtu), "path {mtu}");
            assert!(probes <= 16, "path {mtu}: {probes} probes");
        }
        assert_eq!(search(Some(1500), 1500), (Some(1500), 2), "the common case: two probes");
        assert_eq!(search(None, 65536).0, Some(PMTU_MAX), "capped at the search's top");
        assert_eq!(search(Some(65536), 65536).0, Some(PMTU_MAX));
    }

    #[test]
    fn nothing_echoed_gives_no_answer() {
        assert_eq!(search(Some(1500), 100), (None, 1));
    }
}
