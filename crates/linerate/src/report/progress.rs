//! The progress of matrices, curves, meshes and campaigns: on a terminal one bar, redrawn in
//! place before each run; in a log or a pipe (CI) one line per finished run, with its result.
//!
//! `[=========>          ] 12/40  30%  about 1 min 20 s left  P=2 (run 2)`
//! `[12/40] P=2 (run 2): 9.41 Gbit/s (about 1 min 20 s left)`
//!
//! The bar puts the counts and the time left first and the label last, cut to the terminal's
//! width, because a line that wraps cannot be redrawn with `\r`. Both are drawn from a
//! [`Progress`] value by `notice::Console`, which knows which one standard error gets. The
//! time left is the runner's estimate (the mean time per finished run times the runs left),
//! shown only once a run has finished.
//!
//! Labels and failures can hold a peer's words (an agent's node name, a server's or an agent's
//! error text): both lines pass them through `units::peer_text::escape`, so no control
//! character, line break or bidirectional override reaches the terminal.

use std::time::Duration;

use crate::record::{Outcome, RunRecord};
use crate::report::words::duration_words;
use crate::session::campaign::Finished;
use crate::session::grid;
use crate::stats::fleet::{HostInput, summarize_fleet};
use crate::stats::matrix::received_rate;
use crate::stats::summarize;
use crate::units::format_bits_per_second;
use crate::units::peer_text::escape;

/// Where a matrix, a curve, a mesh or a campaign is: what its progress line is drawn from.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Runs finished (with those of an earlier attempt).
    pub done: usize,
    /// Runs planned (grows with `--until-ci` rounds).
    pub planned: usize,
    /// In a campaign: the tier's name, its position (0-based) and the number of tiers.
    pub tier: Option<(String, usize, usize)>,
    /// In a mesh: the round (1-based) and the rounds planned so far.
    pub round: Option<(usize, usize)>,
    /// The label of the cell about to run.
    pub cell: String,
    /// Its repetition (1-based).
    pub repetition: u32,
    /// The estimated time left, once a run has finished.
    pub eta: Option<Duration>,
    /// After the run: its result in words (`9.41 Gbit/s`, `failed: …`); before it, None.
    pub finished: Option<String>,
}

impl Progress {
    /// The progress bar, at most `columns` characters wide.
    pub fn line(&self, columns: usize) -> String {
        bar_line(self.done, self.planned, &escape(&self.what()), self.eta, columns)
    }

    /// After a run, its line for a log: `[3/12] P=2 (run 1): 9.41 Gbit/s (about 2 min 00 s
    /// left)`; None before a run.
    pub fn finished_line(&self) -> Option<String> {
        let result = self.finished.as_deref()?;
        let left = match self.eta {
            Some(e) if self.done < self.planned => format!(" (about {} left)", duration_words(e)),
            _ => String::new(),
        };
        let (what, result) = (escape(&self.what()).into_owned(), escape(result));
        Some(format!("[{}/{}] {what}: {result}{left}", self.done, self.planned))
    }

    /// `tier 3/4 NAME: P=2 (run 1)`, `round 3/38: a -> b (run 1)`, or the run alone.
    fn what(&self) -> String {
        let run = format!("{} (run {})", self.cell, self.repetition);
        match (&self.tier, self.round) {
            (Some((name, index, tiers)), _) => format!("tier {}/{tiers} {name}: {run}", index + 1),
            (None, Some((round, rounds))) => format!("round {round}/{rounds}: {run}"),
            (None, None) => run,
        }
    }
}

/// What a finished run gave, in words: the rate received (a request/response run: its
/// transactions per second and p50, as in the matrix's table), or that it was interrupted or
/// failed and why.
fn result_words(record: &RunRecord) -> String {
    let summary = || summarize(record);
    match &record.outcome {
        Outcome::Completed if record.spec.rr.is_some() => {
            let s = summary();
            let l = s.latency.as_ref();
            format!(
                "{} transactions/s, p50 {}",
                crate::report::words::per_second(l.and_then(|l| l.transactions_per_second)),
                crate::report::words::lat(l.and_then(|l| l.p50_ns))
            )
        }
        Outcome::Completed => format_bits_per_second(received_rate(&summary())),
        Outcome::Interrupted => "interrupted".into(),
        Outcome::Failed { error, .. } => format!("failed: {error}"),
    }
}

impl Progress {
    /// The line a runner's progress is drawn from (`session::grid::Progress`: a matrix's,
    /// a curve's, a mesh's or a campaign's), its result put in words by `words`.
    pub fn of<R>(p: &grid::Progress<'_, R>, words: impl Fn(&R) -> String) -> Self {
        Self {
            done: p.done,
            planned: p.planned,
            tier: p.tier.map(|(name, index, tiers)| (name.to_string(), index, tiers)),
            round: p.round,
            cell: p.cell.clone(),
            repetition: p.slot.repetition,
            eta: p.eta,
            finished: p.finished.map(words),
        }
    }

    /// A test's progress (a matrix cell's, a mesh pair's), its result in words.
    pub fn of_test(p: &grid::Progress<'_, RunRecord>) -> Self {
        Progress::of(p, result_words)
    }

    /// A campaign's progress: a cell's result, or a fleet run's total.
    pub fn of_campaign(p: &grid::Progress<'_, Finished<'_>>) -> Self {
        Progress::of(p, |f| match f {
            Finished::Run(record) => result_words(record),
            Finished::Fleet(hosts) => {
                let inputs: Vec<_> = hosts.iter().map(HostInput::placed).collect();
                crate::report::words::fleet_result(&summarize_fleet(&inputs))
            }
        })
    }
}

/// Width of the bar between the brackets, in characters.
const BAR_WIDTH: usize = 20;

/// Columns assumed when the terminal does not say.
pub const DEFAULT_COLUMNS: usize = 80;

/// The progress line for run `done + 1` of `planned` (`done` finished), about to run `what`,
/// at most `columns` characters wide.
pub fn bar_line(
    done: usize,
    planned: usize,
    what: &str,
    eta: Option<Duration>,
    columns: usize,
) -> String {
    let planned = planned.max(done + 1);
    let filled = BAR_WIDTH * done / planned;
    let head = if filled < BAR_WIDTH { ">" } else { "" };
    let bar =
        format!("[{}{head}{}]", "=".repeat(filled), " ".repeat(BAR_WIDTH - filled - head.len()));
    let percent = 100 * done / planned;
    let left = eta.map_or(String::new(), |e| format!("  about {} left", duration_words(e)));
    let line = format!("{bar} {}/{planned}  {percent}%{left}  {what}", done + 1);
    cut(&line, columns.max(BAR_WIDTH + 2))
}

/// `line` cut to `columns` characters (not bytes: labels may hold any text), the cut marked.
fn cut(line: &str, columns: usize) -> String {
    if line.chars().count() <= columns {
        return line.to_string();
    }
    let mut kept: String = line.chars().take(columns.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_runs_done() {
        let first = bar_line(0, 4, "P=1 (run 1)", None, 80);
        assert_eq!(first, "[>                   ] 1/4  0%  P=1 (run 1)");
        let half = bar_line(2, 4, "P=2 (run 1)", Some(Duration::from_secs(75)), 80);
        assert_eq!(half, "[==========>         ] 3/4  50%  about 1 min 15 s left  P=2 (run 1)");
        let last = bar_line(3, 4, "x", None, 80);
        assert_eq!(last, "[===============>    ] 4/4  75%  x");
        // More runs done than planned (an `--until-ci` round not yet counted): never past full.
        let over = bar_line(9, 4, "x", None, 80);
        assert!(over.starts_with("[==================> ] 10/10  90%"), "{over}");
    }

    #[test]
    fn the_line_never_wraps_a_narrow_terminal() {
        let label = "tier 3/4 two-hosts-same-l2: P=8 w=800k l=128K tcp bidir (run 3)";
        for columns in [30, 60, 80] {
            let line = bar_line(7, 40, label, Some(Duration::from_secs(4000)), columns);
            assert!(line.chars().count() <= columns, "{columns}: {line}");
        }
        assert!(bar_line(7, 40, label, None, 30).ends_with('…'));
        assert!(bar_line(7, 40, "short", None, 200).ends_with("short"));
    }

    #[test]
    fn a_peers_words_reach_the_terminal_escaped() {
        let hostile = "\u{1b}[2J\u{7}\r\nnode\u{202e}x";
        let p = Progress {
            done: 3,
            planned: 12,
            tier: None,
            round: Some((2, 22)),
            cell: format!("a -> {hostile}"),
            repetition: 1,
            eta: None,
            finished: Some(format!("failed: the agent said {hostile}")),
        };
        let hidden = |c: char| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c);
        let log = p.finished_line().expect("a finished run's line");
        assert!(!log.chars().any(hidden), "{log:?}");
        assert!(log.contains("failed: the agent said") && log.contains("node"), "{log}");
        let bar = Progress { finished: None, ..p }.line(200);
        assert!(!bar.chars().any(hidden), "{bar:?}");
    }

    #[test]
    fn durations_read_in_words() {
        assert_eq!(duration_words(Duration::from_secs(42)), "42 s");
        assert_eq!(duration_words(Duration::from_millis(990)), "1 s");
        assert_eq!(duration_words(Duration::from_secs(200)), "3 min 20 s");
        assert_eq!(duration_words(Duration::from_secs(3900)), "1 h 05 min");
        assert_eq!(duration_words(Duration::from_secs(5808)), "1 h 37 min", "rounded");
        assert_eq!(duration_words(Duration::from_secs(7199)), "2 h 00 min");
    }
}
