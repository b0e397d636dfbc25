//! How a client's text output is shown, as iperf3's output flags: `-f` (the unit of figures),
//! `-V` (verbose), `--timestamps` (a time before each line), `--logfile` (to a file instead of
//! stdout) and `--forceflush` (each line written out at once). They change only how the
//! text reads, never what is measured or stored.

use std::path::PathBuf;

use crate::units::scale::Scale;

/// iperf3's default `--timestamps` format (strftime's date and time, then a space).
pub const DEFAULT_TIMESTAMP_FORMAT: &str = "%c ";

/// Text output settings of a client run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextOptions {
    /// `-f`: the unit of rates and transfers.
    pub scale: Scale,
    /// `-V`: the per-stream table, each stream's socket and the environment of both ends.
    pub verbose: bool,
    /// `--timestamps[=FORMAT]`: a strftime(3) format printed before each line.
    pub timestamps: Option<String>,
    /// `--logfile FILE`: stdout goes to FILE (appended to), as iperf3's.
    pub logfile: Option<PathBuf>,
    /// `--forceflush`: every line is written out as soon as it is complete.
    pub forceflush: bool,
}
