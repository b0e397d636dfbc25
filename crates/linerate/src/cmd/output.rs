//! Where a command's stdout lines go, as iperf3's output flags say: `--logfile` (stdout
//! appended to a file), `--timestamps` (each line stamped with the local time) and
//! `--forceflush` (each line written out at once). Shared by the client and the server.

use std::io::Write;

use anyhow::Result;

use crate::plan::text::TextOptions;
use crate::record::{Failure, FailureKind};

/// `--logfile FILE`: stdout goes to FILE from here on, appended to, as iperf3's.
pub(super) fn open_logfile(t: &TextOptions) -> Result<()> {
    let Some(path) = &t.logfile else { return Ok(()) };
    let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| {
        let why =
            format!("cannot open the --logfile {}: {e}; give a writable path", path.display());
        Failure::new(FailureKind::Usage, why)
    })?;
    crate::sys::stdio::redirect_stdout(&file).map_err(|e| {
        let why = format!("cannot send the output to the --logfile {}: {e}", path.display());
        Failure::new(FailureKind::Environment, why)
    })?;
    Ok(())
}

/// Stdout, each line stamped with the local time (`--timestamps`) and flushed at once
/// (`--forceflush`) when asked.
pub(super) fn text_out(t: &TextOptions) -> Box<dyn Write> {
    let stamp = t.timestamps.clone().map(|f| move || crate::sys::stdio::local_time(&f));
    if stamp.is_none() && !t.forceflush {
        return Box::new(std::io::stdout());
    }
    Box::new(crate::report::stamped::Stamped::new(std::io::stdout(), stamp, t.forceflush))
}
