//! Human-readable output: live interval lines, the final summary, and server log lines.
//!
//! Byte counts are shown in IEC units (KiB, MiB, GiB) and rates in SI bits per second
//! (1 Gbit/s = 10^9 bit/s), always with the unit written out, so the two never mix.
//!
//! Every string that came from a peer or from the history is shown through
//! `units::peer_text` (docs/SECURITY.md, "Peer strings"): a record's strings all at once
//! before its summary is rendered, a live event's and a server note's one by one. The record
//! itself stays as received; only what is shown is escaped.

use std::io::Write;

use linerate_proto::{Flow, StreamRole, TestSpec};

use crate::plan::search::{SearchAnswer, SearchPlan, Trial};
use crate::record::{End, Outcome, RunRecord};
use crate::report::words::describe_spec;
use crate::session::server_note::ServerNote;
use crate::stats::{CostSummary, Figures, SideFigures, summarize};
use crate::units::peer_text::{escape, escape_lines, every_string};
use crate::units::scale::Scale;
use crate::units::{ByteCount, count_of, format_bits_per_second};

pub use super::live::LivePrinter;

/// Writes the final summary of a client run. Like iperf3's, it ends with the answer: the
/// details (per-stream table, granted socket options, cost, TCP internals, the verdict's
/// evidence, warnings, the server's output) come first, then each direction's sender and
/// receiver rates, the UDP accounting, the verdicts and the outcome as the last lines.
pub fn render_run(received: &RunRecord, out: &mut dyn Write) -> std::io::Result<()> {
    render_run_in(received, Scale::Auto, out)
}

/// [`render_run`] with rates and transfers in `scale` (`-f`).
pub fn render_run_in(
    received: &RunRecord,
    scale: Scale,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let shown = every_string(received, escape);
    let record = shown.as_ref().unwrap_or(received);
    let summary = summarize(record);
    writeln!(out, "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - -")?;
    writeln!(out, "Test: {}", describe_spec(&record.spec))?;
    details(record, received, &summary, scale, out)?;
    answer(record, &summary, scale, out)
}

/// Everything but the answer: what a reader consults to understand it. `received` is the
/// record as stored (the server's output keeps its own lines, escaped line by line).
fn details(
    record: &RunRecord,
    received: &RunRecord,
    summary: &crate::stats::Summary,
    scale: Scale,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if summary.streams.len() > 1 {
        writeln!(
            out,
            "{:<6} {:<5} {:>11} {:>14} {:>11} {:>14} {:>6}",
            "[ ID]", "Flow", "Sent", "Sender rate", "Received", "Receiver rate", "Retr"
        )?;
        for s in &summary.streams {
            writeln!(
                out,
                "[{:>4}] {:<5} {:>11} {:>14} {:>11} {:>14} {:>6}",
                s.id,
                s.flow.label(),
                bytes_or_na(s.sender.as_ref(), scale),
                rate_or_na(s.sender.as_ref(), scale),
                bytes_or_na(s.receiver.as_ref(), scale),
                rate_or_na(s.receiver.as_ref(), scale),
                s.retransmits.map_or("n/a".into(), |r| r.to_string())
            )?;
        }
    }
    for d in &summary.directions {
        granted_lines(out, d.flow, "sender  ", d.sender.as_ref())?;
        granted_lines(out, d.flow, "receiver", d.receiver.as_ref())?;
    }
    if !summary.cost.is_empty() {
        writeln!(out, "CPU and memory (each end, over the test):")?;
        for c in &summary.cost {
            cost_lines(out, c)?;
        }
        let mut na: Vec<&String> = summary.cost.iter().flat_map(|c| &c.unavailable).collect();
        na.dedup();
        for n in na {
            writeln!(out, "  n/a: {n}")?;
        }
    }
    if let Some(p) = &record.placement {
        writeln!(out, "Placement on loopback: {}, {}", p.placement.as_str(), p.why)?;
    }
    for d in &summary.directions {
        if let Some(t) = sender_tcp_line(record, d.flow) {
            writeln!(out, "TCP {} (sender's view): {t}", d.flow.label())?;
        }
    }
    server_sender_ticks(record, out)?;
    for v in summary.verdicts.iter().filter(|v| !v.evidence.is_empty() && !failed(record)) {
        writeln!(out, "Evidence for the verdict on {}:", v.flow.label())?;
        for e in &v.evidence {
            writeln!(out, "  - {e}")?;
        }
    }
    for w in record.warnings.iter().chain(&summary.warnings) {
        writeln!(out, "warning: {w}")?;
    }
    // The server's own multi-line text keeps its lines (and only its lines).
    match &received.server_output {
        Some(serde_json::Value::String(text)) => {
            writeln!(out, "Server output:\n{}", escape_lines(text.trim_end()))
        }
        Some(doc) => writeln!(out, "Server output (JSON):\n{doc:#}"),
        None => Ok(()),
    }
}

/// Retr and Cwnd per interval of the directions the server sent: the live lines could not
/// show them (the client was the receiver), the server's samples arrived with its results.
fn server_sender_ticks(record: &RunRecord, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(server) = &record.server_results else { return Ok(()) };
    for flow in [Flow::ClientToServer, Flow::ServerToClient] {
        let sent = || server.streams.iter().filter(|s| s.flow == flow);
        let ticks = crate::stats::intervals::sender_ticks(sent());
        let tcp_sender = |s: &&linerate_proto::StreamResult| {
            s.role == StreamRole::Sender && s.udp_sender.is_none()
        };
        if ticks.is_empty() {
            if sent().any(|s| tcp_sender(&s)) && record.spec.interval_ms > 0 {
                writeln!(
                    out,
                    "Sender (server) per interval, {}: n/a (the server sent no per-interval TCP \
                     figures)",
                    flow.label()
                )?;
            }
            continue;
        }
        writeln!(out, "Sender (server) per interval, {}:", flow.label())?;
        writeln!(out, "  {:<18} {:>5} {:>10}", "Interval", "Retr", "Cwnd")?;
        for (start, end, t) in ticks {
            let when = format!("{:.2}-{:.2} sec", start as f64 / 1e6, end as f64 / 1e6);
            writeln!(out, "  {when:<18} {}", super::live::columns(Some(t)))?;
        }
    }
    Ok(())
}

/// The answer, last: rates per direction, UDP accounting, verdicts, the outcome.
fn answer(
    record: &RunRecord,
    summary: &crate::stats::Summary,
    scale: Scale,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(l) = &summary.latency {
        latency_lines(out, &record.spec, l)?;
    }
    for d in summary.directions.iter().filter(|_| summary.latency.is_none()) {
        writeln!(out, "{}:", direction_name(d.flow))?;
        side_line(out, "sender  ", d.sender.as_ref(), scale)?;
        side_line(out, "receiver", d.receiver.as_ref(), scale)?;
        if let (Some(j), Some(r)) = (d.jain, &d.receiver) {
            writeln!(
                out,
                "  fairness across the {} streams: Jain's index {j:.3} (1 = equal shares)",
                r.streams
            )?;
        }
    }
    if summary.latency.is_none()
        && let Some(each) = crate::stats::matrix::directions_words(
            &crate::stats::matrix::received_by_direction(summary),
        )
    {
        writeln!(out, "Both directions received: {each}")?;
    }
    for u in &summary.udp {
        udp_lines(out, u)?;
    }
    if let Some(u) = &summary.under_load {
        super::under_load::lines(out, u)?;
    }
    if let Outcome::Failed { error, .. } = &record.outcome {
        writeln!(out, "Verdict: n/a: the test failed: {error}")?;
    }
    // Request/response tests have no bulk verdict (`stats::summary` says why).
    for d in summary.directions.iter().filter(|_| !failed(record) && record.spec.rr.is_none()) {
        match summary.verdicts.iter().find(|v| v.flow == d.flow) {
            Some(v) => writeln!(out, "Verdict {}: {}", v.flow.label(), v.summary)?,
            None => writeln!(
                out,
                "Verdict {}: n/a: neither end reported this direction",
                d.flow.label()
            )?,
        }
    }
    match &record.outcome {
        Outcome::Completed => writeln!(out, "Test complete."),
        Outcome::Interrupted => {
            writeln!(out, "Test interrupted: figures cover the time until the interrupt.")
        }
        Outcome::Failed { .. } if has_figures(summary) => {
            writeln!(out, "Test FAILED: the figures above are partial.")
        }
        Outcome::Failed { .. } => writeln!(out, "Test FAILED: nothing was measured."),
    }
}

/// A request/response test's answer: the rate, the latency percentiles, the cost.
fn latency_lines(
    out: &mut dyn Write,
    spec: &TestSpec,
    l: &crate::stats::latency::LatencySummary,
) -> std::io::Result<()> {
    let lat = crate::report::words::lat;
    let rate = l.transactions_per_second.map_or("n/a".into(), |r| format!("{r:.0}"));
    let notes: Vec<String> = [
        (l.unanswered, "unanswered at the end"),
        (l.lost, "lost (no response within 1 s)"),
        (l.late_requests, "requests sent late"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join(", ")) };
    writeln!(
        out,
        "Transactions: {} over {} stream(s): {rate} per second{notes}",
        l.transactions, l.streams,
    )?;
    let from = crate::report::words::loop_words(spec, l);
    let pcts: Vec<String> = crate::stats::latency::PERCENTILES
        .iter()
        .zip(l.percentiles())
        .map(|((_, _, name), v)| format!("{name} {}", lat(v)))
        .collect();
    writeln!(
        out,
        "Latency ({from}): min {}, {}, max {}, mean {}",
        lat(l.min_ns),
        pcts.join(", "),
        lat(l.max_ns),
        lat(l.mean_ns)
    )?;
    if let Some(p) = &l.phases {
        let phase = |name: &str, f: &crate::stats::latency::PhaseFigures| {
            format!("{name} p50 {} p99 {} max {}", lat(f.p50_ns), lat(f.p99_ns), lat(f.max_ns))
        };
        writeln!(
            out,
            "Phases: {}; {}; {}",
            phase("connect", &p.connect),
            phase("first byte", &p.first_byte),
            phase("close", &p.close)
        )?;
    }
    let cpu = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.2} us"));
    writeln!(
        out,
        "CPU per transaction (process): client {}, server {}",
        cpu(l.client_cpu_us_per_transaction),
        cpu(l.server_cpu_us_per_transaction)
    )
}

fn failed(record: &RunRecord) -> bool {
    matches!(record.outcome, Outcome::Failed { .. })
}

/// Whether either end reported figures for any direction.
fn has_figures(summary: &crate::stats::Summary) -> bool {
    summary.directions.iter().any(|d| d.sender.is_some() || d.receiver.is_some())
}

/// The UDP accounting of one direction, in two lines.
fn udp_lines(out: &mut dyn Write, u: &crate::stats::udp::UdpSummary) -> std::io::Result<()> {
    let ms = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.3} ms"));
    let sent = u.sent.map_or("n/a (sender did not report)".into(), |s| s.to_string());
    let pct = u.loss_percent.map_or(String::new(), |p| format!(" ({p:.3}%)"));
    writeln!(
        out,
        "UDP {}: {} B datagrams: sent {sent}, received {}, lost {}{pct}, out of order {}, duplicates {}{}",
        u.flow.label(),
        u.datagram_bytes,
        u.received,
        u.lost,
        u.out_of_order,
        u.duplicates,
        if u.too_late + u.invalid > 0 {
            format!(", too late {}, not ours {}", u.too_late, u.invalid)
        } else {
            String::new()
        }
    )?;
    writeln!(
        out,
        "UDP {}: jitter {} (RFC 3550), transit variation p99 {} max {}; receiver kernel drops {}; sender burstiness {}; offload: sender GSO {}, receiver GRO {}{}",
        u.flow.label(),
        ms(u.jitter_ms),
        ms(u.ipdv_p99_ms),
        ms(u.ipdv_max_ms),
        u.kernel_drops.map_or("n/a".into(), |d| if u.gro {
            format!("{d} (GRO packets)")
        } else {
            d.to_string()
        }),
        u.burstiness.map_or("n/a (unpaced)".into(), |b| format!("{b:.2}x the even rate per ms")),
        if u.gso { "on" } else { "off" },
        if u.gro { "on" } else { "off" },
        u.nap_us_max.map_or(String::new(), |n| format!(
            "; receiver wake-ups batched by naps of up to {n} µs (unpaced: arrival times are \
             quantized by them)"
        )),
    )
}

fn bytes_or_na(f: Option<&Figures>, scale: Scale) -> String {
    f.map_or("n/a".into(), |f| scale.bytes(f.bytes))
}

fn rate_or_na(f: Option<&Figures>, scale: Scale) -> String {
    f.and_then(|f| f.bits_per_second).map_or("n/a".into(), |r| scale.rate(r))
}

fn direction_name(flow: Flow) -> &'static str {
    match flow {
        Flow::ClientToServer => "Client -> server",
        Flow::ServerToClient => "Server -> client",
    }
}

fn side_line(
    out: &mut dyn Write,
    label: &str,
    side: Option<&SideFigures>,
    scale: Scale,
) -> std::io::Result<()> {
    let Some(s) = side else {
        return writeln!(out, "  {label} n/a (that end reported no figures)");
    };
    let f = &s.figures;
    let retr =
        s.retransmits.map(|r| format!(", {}", count_of(r, "retransmit"))).unwrap_or_default();
    writeln!(
        out,
        "  {label} ({:<6}) {:>14}  {} in {:.2} s over {} stream(s){retr}",
        s.end,
        rate_or_na(Some(f), scale),
        scale.bytes(f.bytes),
        f.seconds,
        s.streams
    )?;
    for e in &s.errors {
        writeln!(out, "           error: {e}")?;
    }
    Ok(())
}

/// What the kernel granted one end of a direction (socket buffers, MSS, congestion control).
fn granted_lines(
    out: &mut dyn Write,
    flow: Flow,
    label: &str,
    side: Option<&SideFigures>,
) -> std::io::Result<()> {
    let Some(s) = side else { return Ok(()) };
    let mut facts = Vec::new();
    if let Some(b) = s.send_buffer_bytes {
        facts.push(format!("send buffer {}", range_iec(b)));
    }
    if let Some(b) = s.recv_buffer_bytes {
        facts.push(format!("receive buffer {}", range_iec(b)));
    }
    if let Some((lo, hi)) = s.mss_bytes {
        facts.push(if lo == hi { format!("MSS {lo}") } else { format!("MSS {lo}-{hi}") });
    }
    if let Some(cc) = &s.congestion {
        facts.push(format!("congestion {cc}"));
    }
    if let Some((lo, hi)) = s.tos {
        facts.push(if lo == hi {
            format!("TOS {lo:#04x}")
        } else {
            format!("TOS {lo:#04x}-{hi:#04x}")
        });
    }
    if let Some((lo, _)) = s.max_pacing_rate_bps {
        facts.push(format!("fq pacing cap {}", format_bits_per_second(lo as f64)));
    }
    if facts.is_empty() {
        return Ok(());
    }
    writeln!(out, "{} {label} ({:<6}) granted: {}", flow.label(), s.end, facts.join(", "))
}

/// TCP_INFO's last delivery-rate sample, marked when the sender was application-limited
/// then: it says what the application offered (a paced or idle stream), never the stream's
/// rate or the path's (a stream paced to 8.7 Gbit/s showed "delivery 322 Mbit/s").
fn delivery(t: &linerate_proto::TcpInternals) -> String {
    match (t.delivery_rate_bits_per_second, t.delivery_rate_app_limited) {
        (None, _) => "n/a".into(),
        (Some(b), Some(true)) => {
            format!("{} (an application-limited sample)", format_bits_per_second(b as f64))
        }
        (Some(b), _) => format_bits_per_second(b as f64),
    }
}

/// RTT, cwnd and rates of the direction's first sending stream, plus the stream count.
fn sender_tcp_line(record: &RunRecord, flow: Flow) -> Option<String> {
    let streams = record.sender_tcp(flow);
    let n = streams.len() as u64;
    if n == 0 {
        return None;
    }
    let mean = |f: fn(&linerate_proto::TcpInternals) -> u64| streams.iter().map(f).sum::<u64>() / n;
    let rate = |v: Option<u64>| v.map_or("n/a".into(), |b| format_bits_per_second(b as f64));
    let first = &streams[0];
    // With several streams the delivery and pacing rates are the first stream's alone: say so
    // where they are, so that they do not read as the test's.
    let first_of = if n > 1 { format!("stream 1 of {n} alone") } else { "stream 1".into() };
    Some(format!(
        "mean RTT {} us (var {} us), mean cwnd {} segments, MSS {}, {}; {first_of}: delivery {}, pacing {}",
        mean(|t| u64::from(t.rtt_us)),
        mean(|t| u64::from(t.rttvar_us)),
        mean(|t| u64::from(t.cwnd_segments)),
        first.snd_mss_bytes,
        count_of(
            streams.iter().map(|t| u64::from(t.total_retrans)).sum::<u64>(),
            "retransmitted segment"
        ),
        delivery(first),
        rate(first.pacing_rate_bits_per_second),
    ))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.0}%"))
}

/// Below this rate an end's per-byte cost says more about its fixed costs than its bytes: at
/// 1 Mbit/s the machine line read 14,887 CPU-s/GB.
const FIXED_COSTS_DOMINATE_BELOW: f64 = 100e6;

fn cost_lines(out: &mut dyn Write, c: &CostSummary) -> std::io::Result<()> {
    let process = format!(
        "process {} of a core (user {}, system {})",
        pct(c.process_percent_of_core),
        pct(c.process_user_percent_of_core),
        pct(c.process_system_percent_of_core)
    );
    let machine = match (c.cores_busy, c.cpus, &c.machine) {
        (Some(busy), Some(cpus), Some(m)) => format!(
            "machine {busy:.2} of {cpus} cores busy ({:.0}%: user {:.0}, system {:.0}, softirq {:.0}, irq {:.0}, steal {:.0})",
            m.busy_percent,
            m.user_percent,
            m.system_percent,
            m.softirq_percent,
            m.irq_percent,
            m.steal_percent
        ),
        _ => "machine n/a".into(),
    };
    let busiest = match (c.busiest_cpu, &c.busiest) {
        (Some(cpu), Some(b)) => format!(
            "busiest cpu{cpu} {:.0}% (system {:.0}, softirq {:.0})",
            b.busy_percent, b.system_percent, b.softirq_percent
        ),
        _ => "busiest core n/a".into(),
    };
    writeln!(out, "  {:<7} {process}; {machine}; {busiest}", c.end)?;
    let per_gb = c.cpu_seconds_per_gb.map_or("n/a".into(), |v| format!("{v:.3}"));
    let cycles = match (c.cycles_per_bit, &c.cycles_method) {
        (Some(v), Some(m)) if m == "hardware_counter" => {
            format!("{v:.2} cycles/bit (hardware counter)")
        }
        (Some(v), Some(m)) => format!("{v:.2} cycles/bit (machine CPU time x clock from {m})"),
        _ => "cycles/bit n/a".into(),
    };
    let foreign = match c.foreign_percent_of_core {
        Some(f) => format!("other processes {f:.0}% of a core"),
        None => "other processes n/a".into(),
    };
    let rss = c.peak_rss_bytes.map_or("n/a".into(), |b| ByteCount(b).iec());
    writeln!(out, "          {per_gb} CPU-s/GB (machine), {cycles}; {foreign}; peak RSS {rss}")?;
    if let Some(rate) = c.machine_rate().filter(|r| *r < FIXED_COSTS_DOMINATE_BELOW) {
        writeln!(
            out,
            "          at {} a second of machine time is mostly work that does not grow with the \
             bytes (timers, pacing waits, the sampler, other processes): per-byte costs are \
             comparable between full-rate tests only",
            format_bits_per_second(rate)
        )?;
    }
    match &c.data_plane {
        Some(d) => writeln!(out, "          data plane: {d}"),
        None => Ok(()),
    }
}

fn range_iec((lo, hi): (u64, u64)) -> String {
    if lo == hi {
        ByteCount(lo).iec()
    } else {
        format!("{}-{}", ByteCount(lo).iec(), ByteCount(hi).iec())
    }
}

/// Notes as the server's log text (what `--get-server-output` returns to an iperf3 client).
pub fn server_notes_text(notes: &[ServerNote]) -> String {
    let mut out = Vec::new();
    for n in notes {
        let _ = render_server_note(n, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes one server log line.
pub fn render_server_note(note: &ServerNote, out: &mut dyn Write) -> std::io::Result<()> {
    match note {
        ServerNote::Listening { addr } => writeln!(out, "Server listening on {addr}"),
        ServerNote::Serving { agent, node, zone, network } => {
            let what = if *agent { "Agent of meshes (--agent)" } else { "Server" };
            let mut at = crate::report::words::place_words(node.as_deref(), zone.as_deref())
                .map(|p| format!(" on {p}"))
                .unwrap_or_default();
            if let Some(n) = network {
                at.push_str(&format!(", network {n}"));
            }
            writeln!(out, "{}", escape(&format!("{what}{at}")))
        }
        ServerNote::TestAccepted { test, peer, client, spec } => {
            let client = escape(client);
            writeln!(out, "[test {test}] {peer} ({client}): accepted: {}", describe_spec(spec))
        }
        ServerNote::TestEnded { test, peer, server, error, summary, .. } => {
            let mut parts = Vec::new();
            for s in server
                .iter()
                .flat_map(|s| &s.streams)
                .map(|s| (s.flow, s.role))
                .collect::<std::collections::BTreeSet<_>>()
            {
                let f = Figures::of_streams(
                    server.iter().flat_map(|r| &r.streams).filter(|x| (x.flow, x.role) == s),
                );
                let verb = if s.1 == StreamRole::Sender { "sent" } else { "received" };
                parts.push(format!(
                    "{} {verb} {} at {}",
                    s.0.label(),
                    ByteCount(f.bytes).iec(),
                    rate_or_na(Some(&f), Scale::Auto)
                ));
            }
            let status = match error {
                None => "done".to_string(),
                Some(e) => format!("FAILED: {}", escape(e)),
            };
            let what = summary.spec.as_ref().map(describe_spec).unwrap_or_default();
            writeln!(
                out,
                "[test {test}] {peer}: {status}; {}; {} ({what}) held {:.1} s",
                if parts.is_empty() { "no data".into() } else { parts.join(", ") },
                escape(&summary.software),
                summary.seconds
            )?;
            // Names of other processes on this host: for the operator only, never the client.
            let busy =
                server.as_ref().and_then(|s| crate::stats::cost::cost_summary(End::Server, s));
            match busy.and_then(|c| Some((c.foreign_percent_of_core?, c.foreign_top))) {
                Some((f, top))
                    if f >= crate::stats::cost::FOREIGN_WARN_PERCENT && !top.is_empty() =>
                {
                    writeln!(
                        out,
                        "[test {test}] other processes used {f:.0}% of a core on this host during the test: {}",
                        top.join(", ")
                    )
                }
                _ => Ok(()),
            }
        }
        ServerNote::Metrics { addr } => {
            writeln!(out, "Metrics at http://{addr}/metrics")
        }
        ServerNote::Probed { target, error: None } => writeln!(out, "probe of {target}: done"),
        ServerNote::Probed { target, error: Some(e) } => {
            writeln!(out, "probe of {target}: FAILED: {}", escape(e))
        }
        ServerNote::PairTested { test, peer, target, error } => {
            let how = error.as_ref().map_or("done".into(), |e| format!("FAILED: {}", escape(e)));
            writeln!(out, "[test {test}] pair test for {peer} against {}: {how}", escape(target))
        }
        ServerNote::DoctorAnswered { peer, client } => {
            writeln!(out, "Doctor from {peer} ({}): environment sent", escape(client))
        }
        ServerNote::Rejected { peer, reason } => {
            writeln!(out, "connection from {peer} dropped: {}", escape(reason))
        }
        ServerNote::Suppressed { count } => {
            let max = crate::session::log_limit::PER_SECOND;
            writeln!(out, "{count} more dropped connection(s) not logged (at most {max} a second)")
        }
        ServerNote::ShuttingDown { signal, running } => {
            writeln!(out, "Shutting down on {signal}: telling {running} running test(s) why")
        }
    }
}

/// The line before the first `--find-max` trial.
pub fn render_search_start(
    spec: &TestSpec,
    plan: &SearchPlan,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let start = match plan.start_bits_per_second {
        0 => "unpaced".to_string(),
        r => format_bits_per_second(r as f64),
    };
    // Each trial sets its own pacing; the spec's -b is not the search's.
    let unpaced = TestSpec { bits_per_second: 0, ..spec.clone() };
    writeln!(
        out,
        "Searching for the highest rate with loss <= {}%: {}, first trial {start}",
        plan.max_loss * 100.0,
        describe_spec(&unpaced)
    )
}

/// One `--find-max` trial.
pub fn render_trial(n: usize, t: &Trial, out: &mut dyn Write) -> std::io::Result<()> {
    let target = match t.target_bits_per_second {
        0 => "unpaced".to_string(),
        r => format_bits_per_second(r as f64),
    };
    writeln!(
        out,
        "trial {n:>2}: {target:>14}: sent {:>14}, received {:>14}, lost {} of {} ({:.3}%): {}",
        format_bits_per_second(t.sent_bits_per_second),
        format_bits_per_second(t.received_bits_per_second),
        t.lost,
        t.sent,
        t.loss() * 100.0,
        if t.passed { "pass" } else { "FAIL" }
    )
}

/// The `--find-max` answer.
pub fn render_search_answer(
    a: &SearchAnswer,
    plan: &SearchPlan,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let limit = plan.max_loss * 100.0;
    match &a.best {
        Some(b) if a.sender_bound => writeln!(
            out,
            "Answer: {} with loss <= {limit}% — the sender's own maximum: the path may carry more",
            format_bits_per_second(b.received_bits_per_second)
        ),
        Some(b) => writeln!(
            out,
            "Answer: {} received with loss <= {limit}% (paced at {}, {} trials)",
            format_bits_per_second(b.received_bits_per_second),
            format_bits_per_second(b.target_bits_per_second as f64),
            a.trials.len()
        ),
        None => writeln!(
            out,
            "Answer: none — every trial lost more than {limit}%; try a lower -b to start from"
        ),
    }
}

#[cfg(test)]
mod delivery_tests {
    use super::delivery;
    use linerate_proto::TcpInternals;

    #[test]
    fn an_application_limited_delivery_sample_is_marked_as_such() {
        let t = |app: Option<bool>| TcpInternals {
            delivery_rate_bits_per_second: Some(322_000_000),
            delivery_rate_app_limited: app,
            ..TcpInternals::default()
        };
        assert_eq!(delivery(&t(Some(true))), "322 Mbit/s (an application-limited sample)");
        assert_eq!(delivery(&t(Some(false))), "322 Mbit/s");
        assert_eq!(delivery(&t(None)), "322 Mbit/s", "an older kernel does not say");
        assert_eq!(delivery(&TcpInternals::default()), "n/a");
    }
}

#[cfg(test)]
mod cost_tests {
    use super::cost_lines;
    use crate::stats::cost::CostSummary;

    /// An end whose machine was `busy` cores for `per_gb` CPU-s a GB.
    fn cost(busy: f64, per_gb: f64) -> CostSummary {
        CostSummary {
            end: crate::record::End::Client,
            window_seconds: 10.0,
            process_percent_of_core: Some(2.0),
            process_user_percent_of_core: Some(1.0),
            process_system_percent_of_core: Some(1.0),
            stream_threads_percent_of_core: None,
            cpus: Some(2),
            cores_busy: Some(busy),
            machine: None,
            busiest_cpu: None,
            busiest: None,
            foreign_percent_of_core: None,
            foreign_top: Vec::new(),
            peak_rss_bytes: None,
            cpu_seconds_per_gb: Some(per_gb),
            process_cpu_seconds_per_gb: None,
            cycles_per_bit: None,
            cycles_method: None,
            concurrent_tests: 1,
            unavailable: Vec::new(),
            data_plane: None,
        }
    }

    #[test]
    fn a_slow_tests_per_byte_cost_says_what_it_is_made_of() {
        let lines = |c: &CostSummary| {
            let mut out = Vec::new();
            cost_lines(&mut out, c).expect("render");
            String::from_utf8(out).expect("UTF-8")
        };
        // 1.86 cores busy at 14,887 CPU-s/GB: 1 Mbit/s, as issue 46 saw it.
        let slow = lines(&cost(1.86, 14_887.0));
        assert!(slow.contains("14887.000 CPU-s/GB"), "{slow}");
        assert!(slow.contains("at 1.00 Mbit/s") && slow.contains("does not grow with"), "{slow}");
        let fast = lines(&cost(1.5, 1.5));
        assert!(!fast.contains("does not grow"), "8 Gbit/s: the cost is the bytes'\n{fast}");
    }
}
