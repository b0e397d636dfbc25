//! The "Plan:" line a matrix or a campaign prints before its first run: how many runs, how
//! long each, and about how long in all (`plan::schedule` computes it).
//!
//! `Plan: 12 runs × (4 s + 2 s omit + ~0.5 s setup) ≈ 1 min 18 s`
//!
//! Must not compute figures beyond sums of the schedule's own.

use std::time::Duration;

use crate::plan::schedule::{Batch, SETUP_PER_RUN, Schedule};
use crate::report::words::duration_words;

/// The plan line, without a newline.
pub fn plan_line(s: &Schedule) -> String {
    let runs = s.runs();
    let mut line = format!("Plan: {}", count(runs));
    match s.batches.first() {
        Some(first) if s.uniform() && first.time.is_some() => {
            line += &format!(" × {}", per_run(first))
        }
        Some(_) if s.uniform() => line += &format!(", {}", per_run_words(None)),
        _ => {}
    }
    match s.total() {
        Some(t) => line += &format!(" ≈ {}", duration_words(t)),
        None => line += "; the total is not known ahead",
    }
    if !s.uniform() {
        let parts: Vec<String> = s
            .batches
            .iter()
            .map(|b| format!("{}: {} × {}", b.name.as_deref().unwrap_or("?"), b.runs, per_run(b)))
            .collect();
        line += &format!(" ({})", parts.join("; "));
    }
    if let Some(max) = s.max_runs().filter(|m| *m > runs) {
        let time = s.max_total().map_or(String::new(), |t| format!(" ≈ {}", duration_words(t)));
        line +=
            &format!("; up to {}{time} while a cell's 95% CI is wider than the target", count(max));
    }
    line
}

/// `1 run`, `12 runs`.
fn count(runs: usize) -> String {
    if runs == 1 { "1 run".into() } else { format!("{runs} runs") }
}

/// `(4 s + 2 s omit + ~0.5 s setup)`, or what ends a run after a byte count.
fn per_run(b: &Batch) -> String {
    match b.time {
        Some(_) => per_run_words(Some(b)),
        None => format!("({})", per_run_words(None)),
    }
}

/// A timed batch's `(time + omit + setup)`; for None, how runs that move a byte count end.
fn per_run_words(b: Option<&Batch>) -> String {
    let Some((b, time)) = b.and_then(|b| Some((b, b.time?))) else {
        return "each until its byte count is moved".into();
    };
    let omit =
        if b.omit.is_zero() { String::new() } else { format!(" + {} omit", seconds(b.omit)) };
    format!("({}{omit} + ~{} setup)", seconds(time), seconds(SETUP_PER_RUN))
}

/// A run's length as written in a plan: `60 s`, `0.3 s`, `1.25 s`.
fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        return format!("{} s", ms / 1000);
    }
    let text = format!("{:.3}", d.as_secs_f64());
    format!("{} s", text.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lengths_read_as_written() {
        assert_eq!(seconds(Duration::from_secs(60)), "60 s");
        assert_eq!(seconds(Duration::from_millis(300)), "0.3 s");
        assert_eq!(seconds(Duration::from_millis(1250)), "1.25 s");
        assert_eq!(count(1), "1 run");
    }
}
