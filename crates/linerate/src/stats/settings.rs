//! What differs between the tests two runs asked for: "direction upload → download, streams
//! 1 → 4". `linerate compare` says it next to the performance change, because comparing an
//! upload with one stream against a download with four is comparing two different tests.
//!
//! A test is flattened into `(setting, value)` pairs in a fixed order and the pairs are
//! diffed, as `stats::environment` does for environments. Pure: no I/O.

use linerate_proto::{Direction, EndCondition, Protocol, TestSpec};

use crate::record::RunRecord;
use crate::stats::environment::EnvChange;
use crate::units::{ByteCount, format_bits_per_second};

/// The settings of a run's test, in words, in a fixed order.
fn settings(record: &RunRecord) -> Vec<(&'static str, String)> {
    let s: &TestSpec = &record.spec;
    let on = |b: bool| if b { "on" } else { "off" }.to_string();
    vec![
        ("server", record.server.clone()),
        (
            "protocol",
            match s.protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            }
            .into(),
        ),
        (
            "direction",
            match s.direction {
                Direction::Upload => "upload",
                Direction::Download => "download",
                Direction::Bidirectional => "bidirectional",
            }
            .into(),
        ),
        ("streams", s.streams.to_string()),
        (
            "length",
            match s.end {
                EndCondition::Duration { duration_ms } => {
                    format!("{} s", duration_ms as f64 / 1000.0)
                }
                EndCondition::Bytes { bytes } => {
                    format!("{} per direction", ByteCount(bytes).iec())
                }
            },
        ),
        ("block", ByteCount(u64::from(s.block_bytes)).iec()),
        ("window", s.window_bytes.map_or("default".into(), |w| ByteCount(w).iec())),
        (
            "pacing",
            match s.bits_per_second {
                0 => "unlimited".into(),
                b => format!("{} per stream", format_bits_per_second(b as f64)),
            },
        ),
        ("MSS", s.mss_bytes.map_or("default".into(), |m| m.to_string())),
        ("no delay", on(s.no_delay)),
        ("congestion", s.congestion.clone().unwrap_or_else(|| "default".into())),
        ("omitted warm-up", format!("{} s", s.omit_ms as f64 / 1000.0)),
        ("zero-copy", on(s.zerocopy)),
        (
            "request/response",
            s.rr.map_or("off".into(), |r| {
                let rate = match r.rate_per_second {
                    0 => "closed loop".to_string(),
                    n => format!("open loop at {n}/s per stream"),
                };
                format!(
                    "{} B requests, {} B responses, {} in flight, {rate}",
                    r.request_bytes, r.response_bytes, r.in_flight
                )
            }),
        ),
        (
            "latency probes",
            record.probes.as_ref().map_or("off".into(), |p| {
                format!(
                    "{}/s, idle {} s",
                    p.probe.rate_per_second,
                    p.idle.duration_ms as f64 / 1000.0
                )
            }),
        ),
        ("type of service", s.tos.map_or("default".into(), |t| format!("{t:#04x}"))),
        (
            "fq pacing cap",
            s.fq_rate_bps.map_or("none".into(), |r| format_bits_per_second(r.get() as f64)),
        ),
    ]
}

/// The settings that differ from run `a`'s test to run `b`'s, in a stable order.
pub fn setting_changes(a: &RunRecord, b: &RunRecord) -> Vec<EnvChange> {
    settings(a)
        .into_iter()
        .zip(settings(b))
        .filter(|((_, x), (_, y))| x != y)
        .map(|((key, before), (_, after))| EnvChange { key: key.into(), before, after })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_with_one_stream_against_a_download_with_four() {
        let json = include_str!("../../tests/fixtures/records/tcp_upload.json");
        let up: RunRecord = serde_json::from_str(json).expect("fixture");
        let mut down = up.clone();
        down.spec.direction = Direction::Download;
        down.spec.streams = 4;
        let changes: Vec<String> = setting_changes(&up, &down)
            .iter()
            .map(|c| format!("{} {} → {}", c.key, c.before, c.after))
            .collect();
        assert_eq!(changes, ["direction upload → download", "streams 2 → 4"]);
        assert!(setting_changes(&up, &up).is_empty());
    }
}
