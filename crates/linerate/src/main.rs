//! The `linerate` binary: parse, execute, and print a fatal error in exactly one place.
//!
//! Exit codes: 0 success, 1 the test or server failed, 2 bad usage. A closed stdout (e.g.
//! piping into `head`) is not an error.

use std::process::ExitCode;

fn main() -> ExitCode {
    let plan = match linerate::cli::parse(std::env::args_os()) {
        Ok(plan) => plan,
        Err(e) => e.exit(),
    };
    match linerate::cmd::execute(plan) {
        Ok(code) => code,
        Err(err) => {
            let broken_pipe = err.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return ExitCode::SUCCESS;
            }
            eprintln!("linerate: error: {err:#}");
            ExitCode::from(1)
        }
    }
}
