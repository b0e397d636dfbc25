//! The text lines of a test under load (`--under-load`): idle and loaded probe latency, the
//! delay the load added (and the queue it implies), the loaded connections' own round trip,
//! and the responsiveness figure with its rating and confidence.

use std::io::Write;

use crate::report::words::{lat, signed};
use crate::stats::under_load::{PhaseFigures, UnderLoadSummary};
use crate::units::{ByteCount, format_latency_ns};

fn phase_line(
    out: &mut dyn Write,
    name: &str,
    f: Option<&PhaseFigures>,
    error: Option<&String>,
) -> std::io::Result<()> {
    match (f, error) {
        (Some(f), _) => writeln!(
            out,
            "  {name}: p50 {}, p90 {}, p99 {}, max {} ({} probes{}); new connections: connect p50 {} ({})",
            lat(f.p50_ns),
            lat(f.p90_ns),
            lat(f.p99_ns),
            lat(f.max_ns),
            f.probes,
            if f.unanswered > 0 { format!(", {} unanswered", f.unanswered) } else { String::new() },
            lat(f.connect_p50_ns),
            f.connects.map_or("did not run".into(), |n| format!("{n} handshakes")),
        ),
        (None, e) => writeln!(
            out,
            "  {name}: n/a: {}",
            e.map_or("the probes reported nothing", String::as_str)
        ),
    }
}

/// The under-load block, after the throughput lines of the answer.
pub fn lines(out: &mut dyn Write, u: &UnderLoadSummary) -> std::io::Result<()> {
    writeln!(
        out,
        "Latency under load (1-byte request/response probes on a connection of their own, {} per second, from each probe's intended send time):",
        u.probes_per_second
    )?;
    phase_line(out, "idle  ", u.idle.as_ref(), u.idle_error.as_ref())?;
    phase_line(out, "loaded", u.loaded.as_ref(), u.loaded_error.as_ref())?;
    let queue = u.queue_bytes.map_or(String::new(), |b| {
        format!(" (at the rate reached, about {} waiting in a queue)", ByteCount(b).iec())
    });
    writeln!(
        out,
        "  added by the load: p50 {}, p99 {}{queue}",
        signed(u.added_p50_ns),
        signed(u.added_p99_ns)
    )?;
    let (connections, finding, responsiveness) = sentences(u);
    writeln!(out, "  {connections}")?;
    if let Some(f) = finding {
        writeln!(out, "  {f}")?;
    }
    writeln!(out, "{responsiveness}")
}

/// The loaded connections' round trip, the finding (None without both phases) and the
/// responsiveness figure, each a sentence: the client's text and `report` print the same.
pub fn sentences(u: &UnderLoadSummary) -> (String, Option<String>, String) {
    let connections = match &u.loaded_connections {
        Some(c) => format!(
            "on the loaded connections (their senders' smoothed TCP RTT, {} samples): median {}, max {}",
            c.samples,
            format_latency_ns(c.median_us * 1000),
            format_latency_ns(c.max_us * 1000)
        ),
        None => "on the loaded connections: n/a: no per-interval TCP figures in the loaded phase (-i 0?)".into(),
    };
    let responsiveness = match &u.responsiveness {
        Some(r) => format!(
            "Responsiveness: {:.0} RPM ({} by linerate's bands: low < 300, high > 1000), confidence {}; foreign probes {:.0} RPM, loaded connections {} (after draft-ietf-ippm-responsiveness, TCP without HTTP or TLS: docs/METHODOLOGY.md)",
            r.rpm,
            r.rating,
            r.confidence,
            r.foreign_rpm,
            r.loaded_rpm.map_or("n/a".into(), |v| format!("{v:.0} RPM"))
        ),
        None => "Responsiveness: n/a: no loaded probes".into(),
    };
    (connections, u.finding.clone(), responsiveness)
}
