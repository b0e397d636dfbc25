//! The `linerate` binary: parse, execute, and turn the outcome into the exit status and the
//! one line on stderr, in exactly one place.
//!
//! Exit status (the same table is in `--help`, the man page and README.md):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (a closed stdout, e.g. piping into `head`, is not an error) |
//! | 1 | a gate failed: the test ran and fell short (`--fail-below`, `--fail-regression`) |
//! | 2 | usage or input error: flags (clap's own errors), a plan or campaign file, a run or group id that does not exist, a report file that cannot be read |
//! | 3 | the test could not run or failed (refused, timed out, peer errors, runs of a matrix or campaign failed or it stopped early, a campaign's pre-flight found a tier's host that does not resolve or a server that does not answer), or linerate's own environment failed |
//! | 130 | interrupted by SIGINT (or SIGTERM), after the partial results were printed and stored |
//!
//! Commands return typed errors (`record::Failure` with its [`FailureKind`], [`GateFailed`]); an
//! error that carries neither counts as its [`FailureKind::of`] says (3 but for a usage error). A server stopped by SIGINT or SIGTERM has shut
//! down normally and exits 0.

use std::process::ExitCode;

use linerate::cmd::GateFailed;
use linerate::record::FailureKind;
use linerate::units::peer_text::escape;

/// The exit statuses, documented above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    GateFailed = 1,
    Usage = 2,
    Failed = 3,
    Interrupted = 130,
}

impl Status {
    /// The status an error from a command stands for.
    fn of(err: &anyhow::Error) -> Self {
        if err.downcast_ref::<GateFailed>().is_some() {
            return Self::GateFailed;
        }
        match FailureKind::of(err) {
            FailureKind::Usage => Self::Usage,
            FailureKind::Interrupted => Self::Interrupted,
            _ => Self::Failed,
        }
    }
}

fn main() -> ExitCode {
    let plan = match linerate::cli::parse(std::env::args_os()) {
        Ok(plan) => plan,
        // clap exits 2 on a usage error, 0 for --help and --version.
        Err(e) => e.exit(),
    };
    match linerate::cmd::execute(plan) {
        Ok(code) => code,
        Err(err) => {
            if closed_stdout(&err) {
                return ExitCode::SUCCESS;
            }
            let status = Status::of(&err);
            match status {
                // Not an error: the user asked for it, and the results are above.
                // The one line may quote a peer (its abort text, its refusal): shown escaped.
                Status::Interrupted => eprintln!("linerate: {}", escape(&format!("{err:#}"))),
                _ => eprintln!("linerate: error: {}", escape(&format!("{err:#}"))),
            }
            ExitCode::from(status as u8)
        }
    }
}

/// The reader of our output went away (`linerate show 35 -J | head -1`): not an error, as in
/// ripgrep; the reader had what it wanted. Found in every form a writer hands it back: an I/O
/// error, one wrapping another (`io::Error::other`), or serde_json's, which keeps the I/O
/// error inside it and names it by its kind only.
fn closed_stdout(err: &anyhow::Error) -> bool {
    fn broken(e: &(dyn std::error::Error + 'static)) -> bool {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::BrokenPipe
                || io.get_ref().is_some_and(|inner| broken(inner));
        }
        e.downcast_ref::<serde_json::Error>()
            .is_some_and(|j| j.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
    }
    err.chain().any(broken)
}

#[cfg(test)]
mod tests {
    use linerate::record::Failure;

    use super::*;

    #[test]
    fn a_closed_pipe_is_found_in_every_wrapping() {
        let pipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let json = || serde_json::Error::io(pipe());
        for err in [
            anyhow::Error::new(pipe()),
            anyhow::Error::new(pipe()).context("writing"),
            anyhow::Error::new(std::io::Error::other(json())),
            anyhow::Error::new(json()).context("writing the document"),
        ] {
            assert!(closed_stdout(&err), "{err:#}");
        }
        let other = std::io::Error::other(serde_json::Error::io(std::io::ErrorKind::Other.into()));
        assert!(!closed_stdout(&anyhow::Error::new(other)));
        assert!(!closed_stdout(&anyhow::anyhow!("Broken pipe")), "only a typed error counts");
    }

    #[test]
    fn typed_errors_map_to_their_status_through_contexts() {
        let gate: anyhow::Error = GateFailed("run: below".into()).into();
        assert_eq!(Status::of(&gate.context("gating")), Status::GateFailed);
        for (kind, status) in [
            (FailureKind::Usage, Status::Usage),
            (FailureKind::Interrupted, Status::Interrupted),
            (FailureKind::Refused, Status::Failed),
            (FailureKind::Environment, Status::Failed),
        ] {
            let e: anyhow::Error = Failure::new(kind, "x").into();
            assert_eq!(Status::of(&e.context("outer")), status, "{kind}");
        }
        assert_eq!(Status::of(&anyhow::anyhow!("untyped")), Status::Failed);
    }
}
