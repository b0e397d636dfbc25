//! Keeps a flood from becoming a flood of log lines: at most [`PER_SECOND`] "connection
//! dropped" lines a second; the rest are counted and reported as one line when the next
//! second's first drop is logged. Test lines (accepted, ended) are never limited: they are
//! bounded by the test limits already.
//!
//! It also bounds what one line can say: [`bounding`] puts the operator's sink behind a guard
//! that escapes every string a peer chose (software, client version, abort and error text,
//! the client's reported results) and caps it (docs/SECURITY.md, "Peer strings"), so no peer,
//! authenticated or not, can forge a log line, send the operator's terminal control
//! sequences or write megabytes of log per test.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::session::server_note::{NoteSink, ServerNote};
use crate::units::peer_text::{LOG_NAME_CHARS, LOG_REASON_CHARS, bounded, every_string};

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

/// `sink`, receiving every note with its peer strings escaped and capped.
pub(crate) fn bounding(sink: NoteSink) -> NoteSink {
    Arc::new(move |note: &ServerNote| match bounded_note(note) {
        Some(clean) => sink(&clean),
        None => sink(note),
    })
}

/// `note` with its peer strings escaped and capped, or None when they already were.
fn bounded_note(note: &ServerNote) -> Option<ServerNote> {
    let dirty = |s: &str, max: usize| matches!(bounded(s, max), Cow::Owned(_));
    let fix = |s: &mut String, max: usize| *s = bounded(s, max).into_owned();
    match note {
        ServerNote::TestAccepted { client, .. } | ServerNote::DoctorAnswered { client, .. }
            if dirty(client, LOG_NAME_CHARS) =>
        {
            let mut n = note.clone();
            if let ServerNote::TestAccepted { client, .. }
            | ServerNote::DoctorAnswered { client, .. } = &mut n
            {
                fix(client, LOG_NAME_CHARS);
            }
            Some(n)
        }
        ServerNote::Rejected { peer, reason } if dirty(reason, LOG_REASON_CHARS) => {
            Some(ServerNote::Rejected {
                peer: *peer,
                reason: bounded(reason, LOG_REASON_CHARS).into(),
            })
        }
        ServerNote::Probed { target, error: Some(e) } if dirty(e, LOG_REASON_CHARS) => {
            let error = Some(bounded(e, LOG_REASON_CHARS).into_owned());
            Some(ServerNote::Probed { target: *target, error })
        }
        ServerNote::PairTested { test, peer, target, error }
            if dirty(target, LOG_NAME_CHARS)
                || error.as_deref().is_some_and(|e| dirty(e, LOG_REASON_CHARS)) =>
        {
            Some(ServerNote::PairTested {
                test: *test,
                peer: *peer,
                target: bounded(target, LOG_NAME_CHARS).into_owned(),
                error: error.as_deref().map(|e| bounded(e, LOG_REASON_CHARS).into_owned()),
            })
        }
        ServerNote::TestEnded { test, peer, server, client, error, summary } => {
            let reported = client.as_ref().map(|c| every_string(c, |s| bounded(s, LOG_NAME_CHARS)));
            let error_dirty = error.as_deref().is_some_and(|e| dirty(e, LOG_REASON_CHARS));
            if !error_dirty
                && !dirty(&summary.software, LOG_NAME_CHARS)
                && reported.as_ref().and_then(Option::as_ref).is_none()
            {
                return None;
            }
            let mut summary = summary.clone();
            fix(&mut summary.software, LOG_NAME_CHARS);
            Some(ServerNote::TestEnded {
                test: *test,
                peer: *peer,
                server: server.clone(),
                client: match reported {
                    Some(Some(c)) => Some(c),
                    _ => client.clone(),
                },
                error: error.as_deref().map(|e| bounded(e, LOG_REASON_CHARS).into_owned()),
                summary,
            })
        }
        _ => None,
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

    #[test]
    fn peer_strings_in_notes_are_escaped_and_capped_and_clean_notes_pass_untouched() {
        let peer = "127.0.0.1:9".parse().expect("addr");
        let version = format!("iperf3 3.16\x1b[2J\r\nServer listening on x{}", "v".repeat(500));
        let spec = linerate_proto::TestSpec::default_tcp();
        let note = ServerNote::TestAccepted { test: 1, peer, client: version, spec: spec.clone() };
        let Some(ServerNote::TestAccepted { client, .. }) = bounded_note(&note) else {
            panic!("a hostile client version is rewritten")
        };
        assert!(client.starts_with("iperf3 3.16\\x1b[2J\\r\\nServer listening on x"), "{client}");
        assert!(client.ends_with("bytes cut)") && client.chars().count() < 230, "{client}");
        let reason = "bad hello: \u{202e}".to_string();
        let Some(ServerNote::Rejected { reason, .. }) =
            bounded_note(&ServerNote::Rejected { peer, reason })
        else {
            panic!("rewritten")
        };
        assert_eq!(reason, "bad hello: \\u{202e}");
        let clean = ServerNote::TestAccepted { test: 2, peer, client: "linerate 1".into(), spec };
        assert!(bounded_note(&clean).is_none(), "nothing to change: no copy");
    }
}
