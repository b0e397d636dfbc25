//! `--find-max`: an RFC 2544-style search for the highest UDP rate whose loss stays at or
//! below a threshold. Pure logic: [`RateSearch`] proposes the next trial rate from the results
//! so far; the caller runs the trials (`app.rs`) and reports every one.
//!
//! The first trial runs unpaced (or at `-b`): if even that loses no more than allowed, the
//! answer is what the sender achieved (the path is not the limit; the sender is). Otherwise a
//! binary search runs between 0 and the lower of that trial's rate and what it delivered
//! (+5 %), until the bracket is narrower than [`RESOLUTION`] of the upper end or
//! [`MAX_TRIALS`] trials ran. Loss is not monotonic in
//! rate on a noisy path, so the answer is the best passing trial actually measured, never an
//! interpolated rate.

use serde::Serialize;

/// Stop when the bracket is narrower than this share of its upper end (2 %).
pub const RESOLUTION: f64 = 0.02;
/// Never run more trials than this (12 halvings of the first bracket).
pub const MAX_TRIALS: usize = 14;
/// A failed trial caps the search at what it delivered times this.
pub const DELIVERED_MARGIN: f64 = 1.05;

/// What the user asked of the search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchPlan {
    /// Largest acceptable loss, as a fraction (0.001 = 0.1 %).
    pub max_loss: f64,
    /// The first (highest) rate to try, bit/s; 0 = unpaced.
    pub start_bits_per_second: u64,
}

/// One trial's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trial {
    /// The pacing rate asked for, bit/s (0 = unpaced).
    pub target_bits_per_second: u64,
    /// What the sender achieved, bit/s.
    pub sent_bits_per_second: f64,
    /// What the receiver got, bit/s.
    pub received_bits_per_second: f64,
    /// Datagrams sent and lost (settled).
    pub sent: u64,
    /// Datagrams lost.
    pub lost: u64,
    /// Whether the loss was within the threshold.
    pub passed: bool,
}

impl Trial {
    /// Loss as a fraction of datagrams sent.
    pub fn loss(&self) -> f64 {
        if self.sent == 0 { 0.0 } else { self.lost as f64 / self.sent as f64 }
    }
}

/// The search state.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSearch {
    plan: SearchPlan,
    trials: Vec<Trial>,
    lo: u64,
    hi: Option<u64>,
}

/// Where the search ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchAnswer {
    /// The best passing trial, if any passed.
    pub best: Option<Trial>,
    /// True when the first, unpaced trial already passed: the sender, not the path, limits.
    pub sender_bound: bool,
    /// Every trial in order.
    pub trials: Vec<Trial>,
}

impl RateSearch {
    /// A new search.
    pub fn new(plan: SearchPlan) -> Self {
        Self { plan, trials: Vec::new(), lo: 0, hi: None }
    }

    /// The next rate to try, or None when done.
    pub fn next_rate(&self) -> Option<u64> {
        let Some(hi) = self.hi else {
            return self.trials.is_empty().then_some(self.plan.start_bits_per_second);
        };
        let first_passed = self.trials.first().is_some_and(|t| t.passed);
        if first_passed || self.trials.len() >= MAX_TRIALS || hi == 0 {
            return None;
        }
        if hi.saturating_sub(self.lo) as f64 <= RESOLUTION * hi as f64 {
            return None;
        }
        Some(self.lo + (hi - self.lo) / 2)
    }

    /// Records a trial's result (`passed` is recomputed from the threshold).
    pub fn record(&mut self, mut t: Trial) -> Trial {
        t.passed = t.loss() <= self.plan.max_loss;
        let rate = if t.target_bits_per_second == 0 {
            t.sent_bits_per_second.max(0.0) as u64
        } else {
            t.target_bits_per_second
        };
        // A rate that lost datagrams bounds the answer twice: the answer is below it, and
        // (give or take the burst a shaper lets through) below what that trial delivered —
        // sending more never makes a path lose less. The second bound matters after an
        // unpaced first trial, which a sender can push far above any path (a qdisc drops at
        // the sender almost for free).
        let delivered = (t.received_bits_per_second * DELIVERED_MARGIN) as u64;
        let fail_bound = if delivered > 0 { rate.min(delivered) } else { rate };
        match self.hi {
            None if t.passed => self.hi = Some(rate),
            None => self.hi = Some(fail_bound),
            Some(_) if t.passed => self.lo = self.lo.max(rate),
            // A noisy path can fail below a rate that passed earlier: the bracket then closes
            // at the best passing rate rather than turning upside down.
            Some(h) => self.hi = Some(h.min(fail_bound).max(self.lo)),
        }
        self.trials.push(t);
        t
    }

    /// The result so far.
    pub fn answer(&self) -> SearchAnswer {
        let best = self
            .trials
            .iter()
            .filter(|t| t.passed)
            .max_by(|a, b| a.received_bits_per_second.total_cmp(&b.received_bits_per_second))
            .copied();
        SearchAnswer {
            best,
            sender_bound: self.trials.first().is_some_and(|t| t.passed),
            trials: self.trials.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that carries `cap` bit/s and drops everything above it.
    fn path(cap: f64, target: u64, sender_max: f64) -> Trial {
        let offered = if target == 0 { sender_max } else { (target as f64).min(sender_max) };
        let got = offered.min(cap);
        let sent = (offered / 8000.0) as u64;
        Trial {
            target_bits_per_second: target,
            sent_bits_per_second: offered,
            received_bits_per_second: got,
            sent,
            lost: sent - (got / 8000.0) as u64,
            passed: false,
        }
    }

    fn run(cap: f64, sender_max: f64) -> SearchAnswer {
        let mut s = RateSearch::new(SearchPlan { max_loss: 0.001, start_bits_per_second: 0 });
        while let Some(rate) = s.next_rate() {
            s.record(path(cap, rate, sender_max));
        }
        s.answer()
    }

    #[test]
    fn finds_a_shaped_rate_within_the_resolution() {
        let a = run(480e6, 2e9);
        let best = a.best.expect("some trial passed");
        assert!(best.received_bits_per_second <= 480e6);
        assert!(best.received_bits_per_second >= 480e6 * (1.0 - 2.0 * RESOLUTION), "{best:?}");
        assert!(!a.sender_bound);
        assert!(a.trials.len() <= 8, "the delivered rate bounds the search: {}", a.trials.len());
        assert!(!a.trials[0].passed, "the unpaced trial overloads the path");
    }

    #[test]
    fn a_path_faster_than_the_sender_ends_after_one_trial() {
        let a = run(10e9, 2e9);
        assert!(a.sender_bound);
        assert_eq!(a.trials.len(), 1);
        assert_eq!(a.best.map(|b| b.received_bits_per_second), Some(2e9));
    }

    #[test]
    fn a_failure_below_an_earlier_pass_closes_the_search_at_that_pass() {
        // Seen under load: 300 Mbit/s passed, then 400 Mbit/s failed having delivered only
        // 100 Mbit/s. The bound from the failure is below the pass; the search must end on
        // the pass, not wrap the bracket around (it panicked in debug builds).
        let mut s = RateSearch::new(SearchPlan { max_loss: 0.001, start_bits_per_second: 0 });
        s.record(path(500e6, 0, 2e9)); // unpaced: fails, bounds the search at ~525 Mbit/s
        let first = s.next_rate().expect("a second trial");
        let mut pass = path(10e9, first, 2e9);
        pass.target_bits_per_second = first;
        s.record(pass);
        let next = s.next_rate().expect("a third trial");
        s.record(path(100e6, next, 2e9));
        assert_eq!(s.next_rate(), None, "the bracket closed");
        let a = s.answer();
        assert_eq!(a.best.map(|b| b.target_bits_per_second), Some(first));
    }

    #[test]
    fn a_path_that_always_loses_has_no_answer() {
        let mut s = RateSearch::new(SearchPlan { max_loss: 0.0, start_bits_per_second: 1_000_000 });
        while let Some(rate) = s.next_rate() {
            let mut t = path(0.0, rate, 1e9);
            t.lost = t.sent.max(1);
            t.sent = t.sent.max(1);
            s.record(t);
        }
        let a = s.answer();
        assert_eq!(a.best, None);
        assert!(a.trials.len() <= MAX_TRIALS);
    }
}
