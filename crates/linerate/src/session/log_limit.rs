//! Keeps a flood from becoming a flood of log lines: at most [`PER_SECOND`] "connection
//! dropped" lines a second; the rest are counted and reported as one line when the next
//! second's first drop is logged. Test lines (accepted, ended) are never limited: they are
//! bounded by the test limits already.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Drop lines logged per second before the rest are only counted.
pub const PER_SECOND: u32 = 20;

/// A one-second window of logged and suppressed lines.
#[derive(Debug)]
pub(crate) struct LogLimit {
    window: Mutex<(Instant, u32, u64)>,
}

/// What to do with one line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Log it; first say how many were suppressed before it (if any).
    Log { suppressed_before: u64 },
    /// Count it only.
    Suppress,
}

impl LogLimit {
    pub(crate) fn new() -> Self {
        Self { window: Mutex::new((Instant::now(), 0, 0)) }
    }

    /// Decides about one line at `now`.
    pub(crate) fn admit(&self, now: Instant) -> Verdict {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let (start, logged, suppressed) = &mut *w;
        let mut before = 0;
        if now.saturating_duration_since(*start) >= Duration::from_secs(1) {
            (*start, *logged, before) = (now, 0, std::mem::take(suppressed));
        }
        if *logged < PER_SECOND {
            *logged += 1;
            Verdict::Log { suppressed_before: before }
        } else {
            *suppressed += 1;
            Verdict::Suppress
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_lines_per_second_and_reports_the_rest() {
        let l = LogLimit::new();
        let t0 = Instant::now();
        for _ in 0..PER_SECOND {
            assert_eq!(l.admit(t0), Verdict::Log { suppressed_before: 0 });
        }
        for _ in 0..5 {
            assert_eq!(l.admit(t0), Verdict::Suppress);
        }
        let later = t0 + Duration::from_secs(1);
        assert_eq!(l.admit(later), Verdict::Log { suppressed_before: 5 });
        assert_eq!(l.admit(later), Verdict::Log { suppressed_before: 0 });
    }
}
