//! Words for figures and settings, shared by every report: latencies (`n/a` when missing),
//! signed differences, rates per second, durations, a test's description, where an end ran,
//! a fleet's result in one line, and HTML escaping. A leaf: it imports nothing of `report/`,
//! so the sections, tables and progress lines that use it never import each other for it.

use std::time::Duration;

use linerate_proto::{Direction, EndCondition, Protocol, TestSpec};

use crate::stats::fleet::FleetSummary;
use crate::stats::latency::LatencySummary;
use crate::stats::trend::{Change, SeriesKey};
use crate::units::peer_text::escape;
use crate::units::{ByteCount, format_bits_per_second, format_latency_ns, utc};

/// A latency, or "n/a".
pub fn lat(v: Option<u64>) -> String {
    v.map_or("n/a".into(), format_latency_ns)
}

/// A signed difference of latencies, `+1.20 ms` or `-33.8 us`; "n/a" without one.
pub fn signed(v: Option<i64>) -> String {
    match v {
        Some(d) if d < 0 => format!("-{}", format_latency_ns(d.unsigned_abs())),
        Some(d) => format!("+{}", format_latency_ns(d.unsigned_abs())),
        None => "n/a".into(),
    }
}

/// Transactions per second as a whole number; "n/a" without a measured time.
pub fn per_second(v: Option<f64>) -> String {
    v.map_or("n/a (no measured time)".into(), |r| format!("{r:.0}"))
}

/// How the loop ran and where each latency starts, in words.
pub fn loop_words(spec: &TestSpec, l: &LatencySummary) -> String {
    if l.from_intended_send {
        let rate = spec.rr.map_or(0, |r| r.rate_per_second);
        format!("open loop at {rate}/s per stream, from each request's intended send time")
    } else if spec.rr.is_some_and(|r| r.connect_each) {
        "closed loop, from each connect call to the server's close".to_string()
    } else {
        "closed loop, from each request's write".to_string()
    }
}

/// `42 s`, `3 min 20 s`, `1 h 05 min`: how long, to the nearest second, and from an hour on
/// to the nearest minute.
pub fn duration_words(d: Duration) -> String {
    let s = (d.as_millis() as u64).saturating_add(500) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => {
            let min = (s + 30) / 60;
            format!("{} h {:02} min", min / 60, min % 60)
        }
    }
}

/// Where a server said it runs, as `node N, zone Z`; a node without a zone is `zone unknown`
/// (on Kubernetes before 1.35 the pod has no copy of its node's zone label unless the API
/// server's PodTopologyLabelsAdmission gate is on: docs/KUBERNETES.md), never a blank. None
/// when it named neither. The names are the server's: the table escapes them with every cell.
pub fn place_words(node: Option<&str>, zone: Option<&str>) -> Option<String> {
    match (node, zone) {
        (None, None) => None,
        (Some(n), None) => Some(format!("node {n}, zone {ZONE_UNKNOWN}")),
        (None, Some(z)) => Some(format!("zone {z}")),
        (Some(n), Some(z)) => Some(format!("node {n}, zone {z}")),
    }
}

/// What a place's missing zone (or node) reads as.
pub const ZONE_UNKNOWN: &str = "unknown";

/// What a fleet run gave, in a few words: each direction's total, or that it was partial.
pub fn fleet_result(summary: &FleetSummary) -> String {
    let totals: Vec<String> = summary
        .directions
        .iter()
        .map(|d| format!("{} {}", d.flow.label(), format_bits_per_second(d.total_bits_per_second)))
        .collect();
    let contended: Vec<&str> = summary
        .directions
        .iter()
        .flat_map(|d| &d.hosts)
        .filter(|h| h.limit.as_deref().is_some_and(crate::stats::scaling::cpu_contended))
        .map(|h| h.label.as_str())
        .collect();
    if summary.hosts_measured < summary.hosts_planned {
        format!("partial: {} of {} hosts measured", summary.hosts_measured, summary.hosts_planned)
    } else if !contended.is_empty() {
        format!("{} (CPU-contended: {})", totals.join(", "), contended.join(", "))
    } else if totals.is_empty() {
        "no figures".to_string()
    } else {
        totals.join(", ")
    }
}

/// `&`, `<`, `>`, `"` and `'` as HTML entities, after [`escape`] (a control or bidi character
/// is no more welcome in a page than on a terminal).
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One line describing a spec, e.g. "TCP upload, 4 streams, 10 s, 128 KiB blocks".
pub fn describe_spec(spec: &TestSpec) -> String {
    describe_spec_without(spec, &[])
}

/// [`describe_spec`] without the parts a matrix varied, named `protocol` (protocol and
/// direction), `streams`, `length` and `window`, so a matrix's fixed settings are not
/// described by whichever cell ran first.
pub fn describe_spec_without(spec: &TestSpec, skip: &[&str]) -> String {
    let dir = match spec.direction {
        Direction::Upload => "upload (client sends)",
        Direction::Download => "download (server sends, -R)",
        Direction::Bidirectional => "bidirectional",
    };
    let end = match spec.end {
        EndCondition::Duration { duration_ms } => format!("{} s", duration_ms as f64 / 1000.0),
        EndCondition::Bytes { bytes } => format!("{} per direction", ByteCount(bytes).iec()),
    };
    let (proto, unit) = match spec.protocol {
        Protocol::Tcp => ("TCP", "blocks"),
        Protocol::Udp => ("UDP", "datagrams"),
    };
    let keep = |part: &str| !skip.contains(&part);
    let mut parts = Vec::new();
    if let Some(rr) = &spec.rr {
        parts.push(format!(
            "{proto} {}, {} B requests, {} B responses, {} in flight per stream, {}",
            if rr.connect_each { "connect/request/response/close" } else { "request/response" },
            rr.request_bytes,
            rr.response_bytes,
            rr.in_flight,
            if rr.open_loop() {
                format!("open loop at {}/s per stream", rr.rate_per_second)
            } else {
                "closed loop".to_string()
            }
        ));
    } else if keep("protocol") {
        parts.push(format!("{proto} {dir}"));
    }
    if keep("streams") {
        parts.push(format!("{} stream(s)", spec.streams));
    }
    parts.push(end);
    if keep("length") && spec.rr.is_none() {
        parts.push(if spec.protocol == Protocol::Udp {
            format!("{} B {unit}", spec.block_bytes)
        } else {
            format!("{} {unit}", ByteCount(u64::from(spec.block_bytes)).iec())
        });
        if spec.protocol == Protocol::Tcp && spec.write_size() != spec.block_bytes {
            parts.push(format!(
                "written in up to {}",
                ByteCount(u64::from(spec.write_size())).iec()
            ));
        }
        if spec.protocol == Protocol::Tcp && spec.read_size() != spec.block_bytes {
            parts.push(format!("read in {}", ByteCount(u64::from(spec.read_size())).iec()));
        }
    }
    if spec.no_gro {
        parts.push("receive offload off (--no-gro)".into());
    }
    if let Some(w) = spec.window_bytes.filter(|_| keep("window")) {
        parts.push(format!("window {} requested", ByteCount(w).iec()));
    }
    if spec.bits_per_second > 0 {
        parts.push(format!(
            "paced at {} per stream",
            format_bits_per_second(spec.bits_per_second as f64)
        ));
    }
    if spec.omit_ms > 0 {
        parts.push(format!("first {} s omitted", spec.omit_ms as f64 / 1000.0));
    }
    if spec.zerocopy {
        parts.push("zero-copy send".into());
    }
    if let Some(cc) = &spec.congestion {
        parts.push(format!("congestion {cc}"));
    }
    if let Some(tos) = spec.tos.map(std::num::NonZeroU8::get) {
        parts.push(format!("TOS {tos:#04x} (DSCP {})", tos >> 2));
    }
    if let Some(r) = spec.fq_rate_bps.map(std::num::NonZeroU64::get) {
        parts.push(format!("fq pacing cap {}", format_bits_per_second(r as f64)));
    }
    if let Some(t) = &spec.title {
        parts.push(format!("title {t:?}"));
    }
    parts.join(", ")
}

/// A drift in one sentence, over the points `(noun, nouns)` (runs, meshes), its slope in
/// `unit`: "drift: −4.1 % a run over 14 runs (Mann–Kendall p = 0.0001, Theil–Sen slope
/// −8.2 Mbit/s a run): a decline …".
pub fn drift_sentence(
    d: &crate::stats::drift::Drift,
    (noun, nouns): (&str, &str),
    unit: fn(f64) -> String,
) -> String {
    let way = if d.slope_per_run < 0.0 { "a decline" } else { "a rise" };
    let slope = unit(d.slope_per_run.abs());
    let sign = if d.slope_per_run < 0.0 { "−" } else { "+" };
    format!(
        "drift: {:+.1} % a {noun} over {} {nouns} (Mann–Kendall p {}, Theil–Sen slope \
         {sign}{slope} a {noun}): {way} that a line fits better than steps",
        d.relative_per_run * 100.0,
        d.runs,
        p_words(d.p_value)
    )
}

/// A fresh drop (or, for a figure worse when higher, a rise) in one sentence, over the points
/// `(noun, nouns)` (runs, meshes), in `unit`: "fresh drop: the last 2 runs after a stable 12:
/// −40.0 % (200 Mbit/s → 120 Mbit/s), below every earlier run (p < 0.0001 for runs like
/// those)".
pub fn fresh_sentence(
    f: &crate::stats::drift::FreshDrop,
    (noun, nouns): (&str, &str),
    unit: fn(f64) -> String,
) -> String {
    let last = if f.runs == 1 {
        format!("the last {noun}")
    } else {
        format!("the last {} {nouns}", f.runs)
    };
    let (what, side) = if f.relative < 0.0 { ("drop", "below") } else { ("rise", "above") };
    format!(
        "fresh {what}: {last} after a stable {}: {:+.1} % ({} → {}), {side} every earlier {noun} \
         (p {} for {nouns} like those)",
        f.before_runs,
        f.relative * 100.0,
        unit(f.before),
        unit(f.after),
        p_words(f.p_value)
    )
}

/// A rate as the reports write it.
pub fn rate_words(bits_per_second: f64) -> String {
    format_bits_per_second(bits_per_second)
}

/// A change in one sentence.
pub fn change_sentence(c: &Change) -> String {
    let what = if c.regression { "a regression" } else { "an improvement" };
    format!(
        "run {}, {} UTC: {} → {} ({:+.1} %), p = {:.3}: {what}",
        c.run,
        utc(c.started_unix_ms),
        format_bits_per_second(c.before),
        format_bits_per_second(c.after),
        c.relative * 100.0,
        c.p_value
    )
}

/// The test a series is, in words: "TCP upload, 4 streams, 128 KiB blocks, default window,
/// unlimited rate, to 10.0.0.2:5201".
pub fn series_name(k: &SeriesKey) -> String {
    let window =
        k.window_bytes.map_or("default window".into(), |w| format!("{} window", ByteCount(w)));
    let rate = match k.target_bits_per_second {
        0 => "unlimited rate".to_string(),
        b => format!("paced at {}", format_bits_per_second(b as f64)),
    };
    let streams = if k.streams == 1 { "1 stream".into() } else { format!("{} streams", k.streams) };
    format!(
        "{} {}, {streams}, {} blocks, {window}, {rate}, to {}",
        k.protocol.to_uppercase(),
        k.direction,
        ByteCount(k.block_bytes),
        k.server
    )
}

/// A p-value in words that do not round a small one to zero: "< 0.0001", "= 0.0023".
pub fn p_words(p: f64) -> String {
    if p < 0.0001 { "< 0.0001".into() } else { format!("= {p:.4}") }
}
