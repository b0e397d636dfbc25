//! `linerate server` (and `-s`): serves tests until interrupted; its notes (listening, tests
//! accepted and ended, connections dropped) are rendered as text or JSON lines, to stdout or
//! a `--logfile`, stamped with `--timestamps` when asked.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;

use crate::plan::server::LogResults;
use crate::plan::text::TextOptions;
use crate::plan::{OutputFormat, ServerPlan};
use crate::report::{json, text};
use crate::session::Interrupt;
use crate::session::server::Server;
use crate::session::server_note::{NoteSink, Notes, ServerNote};

pub(super) fn note_sink(format: OutputFormat, text: TextOptions, results: LogResults) -> NoteSink {
    Arc::new(move |note: &ServerNote| {
        let mut out = super::output::text_out(&text);
        let _ = match (format, results) {
            (OutputFormat::Text, _) => text::render_server_note(note, &mut out),
            (_, LogResults::Full) => json::render_line(note, &mut out),
            (_, LogResults::Brief) => json::render_line(&note.brief(), &mut out),
        };
        let _ = out.flush();
    })
}

pub fn run(plan: &ServerPlan) -> Result<ExitCode> {
    crate::session::heap::tune_for_server();
    let interrupt = Interrupt::install()?;
    super::output::open_logfile(&plan.text)?;
    let server = Server::bind(plan)?;
    let sink = note_sink(plan.output, plan.text.clone(), plan.log_results);
    server.run(&interrupt, Notes { sink, text: text::server_notes_text })?;
    Ok(ExitCode::SUCCESS)
}
