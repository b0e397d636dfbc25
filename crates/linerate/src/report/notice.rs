//! Notices: what a command tells its user besides the results (warnings, notes, hints that
//! name the command to run next) as values, worded here, and the [`Console`] that sends them,
//! and the progress bar (`progress.rs`), where they belong.
//!
//! Where each kind goes:
//! - warnings and hints: standard error, in every output mode (a JSON document on standard
//!   output stays parseable, and a script's log still says what went wrong);
//! - notes (where results were stored or written, which embedded server runs): standard
//!   output with the results, in text mode only (`-J` and `--json` print nothing else);
//! - progress: standard error; on a terminal a bar redrawn in place before each run, in a log
//!   or a pipe (CI) one line per finished run with its result, so long work is never silent.
//!
//! Must not decide whether to say something (the command does) nor learn about the terminal
//! (`cmd` passes in whether standard error is one and how to read its width).

use std::cell::Cell;
use std::io::Write;
use std::path::Path;

use linerate_proto::TestSpec;

use super::progress::{DEFAULT_COLUMNS, Progress};
use crate::store::GroupKind;

/// Something a command tells its user that is not a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice<'a> {
    /// The history cannot be opened: the results are printed but not stored (the error).
    HistoryUnavailable(String),
    /// One run could not be stored (the error).
    RunNotStored(String),
    /// Where results were stored, with the commands that read them back.
    Stored(Stored),
    /// `compare --html`: the page was written there.
    HtmlWritten(&'a Path),
    /// The default job (`linerate` alone) runs against a server embedded on this port.
    DefaultJob {
        /// The embedded server's loopback port.
        port: u16,
    },
    /// `linerate selftest`: the embedded server's port and the test it runs.
    Selftest {
        /// The embedded server's loopback port.
        port: u16,
        /// The test.
        spec: &'a TestSpec,
    },
    /// A campaign's tier stopped early (its server went away, its runs kept failing): why,
    /// and what the campaign does next.
    TierStopped {
        /// The tier's name.
        tier: &'a str,
        /// Its position (0-based).
        index: usize,
        /// Number of tiers.
        tiers: usize,
        /// Why it stopped.
        why: &'a str,
        /// The tier that runs next, if there is one.
        next: Option<&'a str>,
    },
    /// A campaign's pre-flight did not reach these servers, a line each (shown when there is
    /// more than one; the error that stops the campaign names a single one itself).
    Unreached(&'a [String]),
    /// A stored matrix did not complete: how to run the rest.
    MatrixIncomplete {
        /// Its group (`mN`).
        group: i64,
    },
    /// A mesh stopped before every planned run completed: how to run the rest.
    MeshIncomplete {
        /// Its group (`nN`).
        group: i64,
    },
    /// A fleet scaling curve stopped before every run was whole: how to run the rest.
    CurveIncomplete {
        /// Its group (`fN`).
        group: i64,
    },
    /// `fleet`/`mesh --wait-agents`: where the wait for the agents stands (a line each time it
    /// changes).
    AwaitingAgents(&'a str),
    /// `fleet`/`mesh`: another requester holds the history's requester lock; this one waits
    /// (who holds it).
    AwaitingLock(&'a str),
    /// `client --every`: a run failed (the error); the schedule goes on.
    ScheduledRunFailed(String),
    /// `-A auto`: the loopback placement of this shape of test is being measured on this
    /// host, once (`plan/placement.rs`).
    Calibrating(crate::plan::placement::Shape),
    /// `-A auto`: what a calibration chose.
    Calibrated(&'a crate::record::Decision),
    /// `--every`: when the next run starts.
    NextRun {
        /// Its start, milliseconds since the Unix epoch.
        unix_ms: u64,
        /// Runs so far.
        done: u32,
    },
    /// `--every`: the schedule is over.
    ScheduleDone {
        /// Runs made.
        runs: u32,
        /// Of which failed.
        failed: u32,
        /// How to read the runs: "their trend: linerate report --trend HOST".
        then: &'a str,
    },
}

/// A stored run or group, named as `show`, `report` and `history` take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Run N.
    Run(i64),
    /// Run N, a test that failed: kept as the record of a failure, not as a result.
    FailedRun(i64),
    /// Matrix group mN.
    Matrix(i64),
    /// Campaign group N (cN).
    Campaign(i64),
    /// Fleet group N (fN).
    Fleet(i64),
    /// Mesh group N (nN).
    Mesh(i64),
}

/// What a notice is, which decides where it goes (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Something went wrong; the command carries on.
    Warning,
    /// Beside the results: what was stored or written, what ran.
    Note,
    /// What to run next.
    Hint,
}

/// `Stored as matrix m3 (linerate report m3 --format html -o m3.html; linerate compare m3
/// mN).`: a stored matrix or mesh, and what to run next.
fn stored_group(out: &mut dyn Write, kind: &GroupKind, id: i64) -> std::io::Result<()> {
    let (r, n) = (kind.reference(id), kind.placeholder());
    writeln!(
        out,
        "Stored as {kind} {r} (linerate report {r} --format html -o {r}.html; linerate compare \
         {r} {n})."
    )
}

impl Notice<'_> {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Notice::HistoryUnavailable(_)
            | Notice::RunNotStored(_)
            | Notice::TierStopped { .. }
            | Notice::Unreached(_)
            | Notice::ScheduledRunFailed(_) => Kind::Warning,
            Notice::AwaitingAgents(_) | Notice::AwaitingLock(_) => Kind::Hint,
            Notice::Stored(_)
            | Notice::HtmlWritten(_)
            | Notice::DefaultJob { .. }
            | Notice::Selftest { .. }
            | Notice::Calibrating(_)
            | Notice::Calibrated(_)
            | Notice::NextRun { .. } => Kind::Note,
            Notice::ScheduleDone { .. } => Kind::Hint,
            Notice::MatrixIncomplete { .. }
            | Notice::MeshIncomplete { .. }
            | Notice::CurveIncomplete { .. } => Kind::Hint,
        }
    }

    /// The notice as its one line (warnings marked `warning:`), or the lines of a list.
    pub fn render(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Notice::HistoryUnavailable(e) => {
                writeln!(out, "warning: results will not be stored: {e}")
            }
            Notice::RunNotStored(e) => writeln!(out, "warning: this run was not stored: {e}"),
            Notice::Stored(Stored::Run(id)) => {
                writeln!(out, "Stored as run {id} (linerate show {id}).")
            }
            Notice::Stored(Stored::FailedRun(id)) => {
                writeln!(
                    out,
                    "The failure is recorded as run {id} (linerate show {id}; `linerate history \
                     --failed` lists failures)."
                )
            }
            Notice::Stored(Stored::Matrix(g)) => stored_group(out, &GroupKind::Matrix, *g),
            Notice::Stored(Stored::Fleet(g)) => {
                let f = GroupKind::Fleet.reference(*g);
                writeln!(
                    out,
                    "Stored as fleet {f} (linerate report {f}; linerate history --group {g})."
                )
            }
            Notice::Stored(Stored::Mesh(g)) => stored_group(out, &GroupKind::Mesh, *g),
            Notice::Stored(Stored::Campaign(g)) => {
                let c = GroupKind::Campaign.reference(*g);
                writeln!(
                    out,
                    "Stored as campaign group {g} (linerate report {c} --format html -o \
                     {c}.html; linerate history --group {g})."
                )
            }
            Notice::HtmlWritten(path) => {
                writeln!(out, "HTML comparison written to {}", path.display())
            }
            Notice::DefaultJob { port } => writeln!(
                out,
                "linerate: the default methodology on loopback against an embedded server on \
                 127.0.0.1:{port} (run `linerate --help` for everything else)"
            ),
            Notice::Selftest { port, spec } => writeln!(
                out,
                "linerate selftest: embedded server on 127.0.0.1:{port}, {}",
                crate::report::words::describe_spec(spec)
            ),
            Notice::TierStopped { tier, index, tiers, why, next } => {
                let then = match next {
                    Some(n) => format!("the campaign goes on with tier {}/{tiers} {n}", index + 2),
                    None => "it was the last tier".into(),
                };
                writeln!(
                    out,
                    "warning: tier {}/{tiers} {tier} stopped early: {why}; {then}",
                    index + 1
                )
            }
            // Escaped: a server's detail may quote the peer.
            Notice::Unreached(lines) if lines.len() > 1 => lines
                .iter()
                .try_for_each(|l| writeln!(out, "{}", crate::units::peer_text::escape(l))),
            Notice::Unreached(_) => Ok(()),
            Notice::MeshIncomplete { group } => writeln!(
                out,
                "The mesh did not complete: its completed runs are stored; run the rest with \
                 the same command and `--resume {}`",
                GroupKind::Mesh.reference(*group)
            ),
            Notice::MatrixIncomplete { group } => writeln!(
                out,
                "The matrix did not complete: its completed runs are stored; run the rest with \
                 the same command and `--resume {}`",
                GroupKind::Matrix.reference(*group)
            ),
            Notice::CurveIncomplete { group } => writeln!(
                out,
                "The scaling curve did not complete: its fleet runs are stored; run the rest (and \
                 the runs a host missed) with the same command and `--resume {}`",
                GroupKind::Fleet.reference(*group)
            ),
            // Already escaped where a peer's words appear (`session::agents`).
            Notice::AwaitingAgents(s) => writeln!(out, "waiting for the agents: {s}"),
            Notice::AwaitingLock(who) => writeln!(
                out,
                "waiting for {} to finish: it holds the history's requester lock (fleets and \
                 meshes on one history run one after the other)",
                crate::units::peer_text::escape(who)
            ),
            Notice::ScheduledRunFailed(e) => writeln!(
                out,
                "warning: this run failed: {}; it is stored, and the schedule goes on",
                crate::units::peer_text::escape(e)
            ),
            Notice::Calibrating(shape) => writeln!(
                out,
                "Calibrating the loopback placement on this host, once: {} rounds of {} ms of each \
                 of pair, split and the system's placement ({}); the history keeps the result",
                crate::plan::placement::ROUNDS,
                crate::plan::placement::TRIAL.as_millis(),
                shape.words()
            ),
            Notice::Calibrated(d) => {
                writeln!(
                    out,
                    "Loopback placement on this host: {}, {}.",
                    d.placement.as_str(),
                    d.why
                )
            }
            Notice::NextRun { unix_ms, done } => {
                writeln!(out, "Next run at {} UTC ({done} done).", crate::units::utc(*unix_ms))
            }
            Notice::ScheduleDone { runs, failed, then } => {
                writeln!(out, "--every: {runs} runs, {failed} failed; {then}")
            }
        }
    }
}

/// Reads the terminal's width in columns, when it says.
pub type Columns = fn() -> Option<usize>;

/// Erases the line the cursor is on and returns to its start.
const CLEAR_LINE: &str = "\r\x1b[2K";

/// Sends notices and progress where they belong (see the module's doc). Output errors (a
/// closed pipe) are ignored: a notice must never stop a test or lose its results.
#[derive(Debug)]
pub struct Console {
    /// Whether the results are text (notes are shown only then).
    text: bool,
    /// Standard error is a terminal: how to read its width (None: a log or a pipe).
    terminal: Option<Columns>,
    /// A progress line is on the terminal (cleared before anything else is written there).
    bar: Cell<bool>,
}

impl Console {
    /// A console for results in text (`text`) or JSON, with a progress bar when `terminal` is
    /// given, else progress lines.
    pub fn new(text: bool, terminal: Option<Columns>) -> Self {
        Self { text, terminal, bar: Cell::new(false) }
    }

    /// Shows `notice` on standard output or standard error.
    pub fn show(&self, notice: &Notice<'_>) {
        self.show_to(notice, &mut std::io::stdout().lock(), &mut std::io::stderr().lock());
    }

    /// [`Console::show`] to the given streams.
    pub fn show_to<'w>(
        &self,
        notice: &Notice<'_>,
        stdout: &'w mut dyn Write,
        stderr: &'w mut dyn Write,
    ) {
        let out = match notice.kind() {
            Kind::Note if !self.text => return,
            Kind::Note => stdout,
            Kind::Warning | Kind::Hint => {
                self.clear_to(stderr);
                stderr
            }
        };
        let _ = notice.render(out);
        let _ = out.flush();
    }

    /// On a terminal, draws the bar of a run about to start over the previous one; elsewhere,
    /// writes the line of a run that finished.
    pub fn progress(&self, progress: &Progress) {
        self.progress_to(progress, &mut std::io::stderr().lock());
    }

    /// [`Console::progress`] to the given stream (standard error).
    pub fn progress_to(&self, progress: &Progress, stderr: &mut dyn Write) {
        let Some(columns) = self.terminal else {
            if let Some(line) = progress.finished_line() {
                let _ = writeln!(stderr, "{line}");
                let _ = stderr.flush();
            }
            return;
        };
        if progress.finished.is_some() {
            // The next run's bar says it.
            return;
        }
        let line = progress.line(columns().unwrap_or(DEFAULT_COLUMNS));
        let _ = write!(stderr, "{CLEAR_LINE}{line}");
        let _ = stderr.flush();
        self.bar.set(true);
    }

    /// Removes the progress line, if one is drawn (before the results are printed).
    pub fn end_progress(&self) {
        self.clear_to(&mut std::io::stderr().lock());
    }

    fn clear_to(&self, stderr: &mut dyn Write) {
        if self.bar.replace(false) {
            let _ = write!(stderr, "{CLEAR_LINE}");
            let _ = stderr.flush();
        }
    }
}

#[cfg(test)]
mod tests;
