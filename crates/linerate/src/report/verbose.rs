//! `-V` (verbose, as iperf3's): after the summary, every stream of both ends with its figures
//! and what its socket was granted, then both ends' environment. The summary already has the
//! answer; this is what a reader checks it against. Peer strings are escaped.

use std::io::Write;

use linerate_proto::{SocketReport, StreamResult, StreamRole};

use crate::record::{End, RunRecord};
use crate::units::peer_text::escape;
use crate::units::scale::Scale;

/// Writes the verbose part of a client run's text.
pub fn render(record: &RunRecord, scale: Scale, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "Streams (verbose):")?;
    for (end, side) in record.sides() {
        let Some(side) = side else {
            writeln!(out, "  {end}: no figures reported")?;
            continue;
        };
        for s in &side.streams {
            stream_line(end, s, scale, out)?;
        }
    }
    super::environment::render_ends(record, out)
}

fn stream_line(
    end: End,
    s: &StreamResult,
    scale: Scale,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let role = if s.role == StreamRole::Sender { "sender" } else { "receiver" };
    let secs = s.measured_us() as f64 / 1e6;
    let rate =
        if secs > 0.0 { scale.rate(s.measured_bytes() as f64 * 8.0 / secs) } else { "n/a".into() };
    let retr = s.retransmits.map(|r| format!(", {r} retr")).unwrap_or_default();
    writeln!(
        out,
        "  {end:<6} [{:>4}] {:<5} {role:<8} {} in {secs:.2} s, {rate}{retr}",
        s.id,
        s.flow.label(),
        scale.bytes(s.measured_bytes()),
    )?;
    writeln!(out, "         socket: {}", socket_text(&s.socket))?;
    if let Some(e) = &s.error {
        writeln!(out, "         error: {}", escape(e))?;
    }
    Ok(())
}

/// What one socket was granted, every fact known.
fn socket_text(k: &SocketReport) -> String {
    let mut parts = Vec::new();
    if let (Some(l), Some(p)) = (&k.local_address, &k.peer_address) {
        parts.push(format!("{} -> {}", escape(l), escape(p)));
    }
    let mut fact = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{name} {v}"));
        }
    };
    fact("send buffer", k.send_buffer_bytes.map(|b| b.to_string()));
    fact("receive buffer", k.recv_buffer_bytes.map(|b| b.to_string()));
    fact("MSS", k.mss_bytes.map(|m| m.to_string()));
    fact("congestion", k.congestion.as_deref().map(|c| escape(c).into_owned()));
    fact("no delay", k.no_delay.map(|n| if n { "on" } else { "off" }.to_string()));
    fact("TOS", k.tos.map(|t| format!("{t:#04x}")));
    fact("fq pacing cap", k.max_pacing_rate_bps.map(|r| Scale::Auto.rate(r as f64)));
    fact("don't fragment", k.dont_fragment.map(|d| if d { "on" } else { "off" }.to_string()));
    if parts.is_empty() { "not reported".into() } else { parts.join(", ") }
}
