//! iperf3's parameter and results JSON.

use serde::de::Visitor;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::bounded::{self, Bounds};
use crate::results::{SideResults, StreamRole};

/// What decoding a peer's results JSON may take: twice its size cap in memory, like a native
/// results frame. Strings may be as long as the document, for `server_output_text`.
pub const RESULTS_BOUNDS: Bounds = Bounds {
    budget: 2 * super::MAX_RESULTS_JSON as usize,
    max_items: crate::wire::MAX_FRAME_ITEMS,
    max_string: super::MAX_RESULTS_JSON as usize,
};

/// iperf3's stream ids in creation order: 1, then 3, 4, 5, ... (a quirk kept for
/// compatibility: both ends number independently and agree only because order matches).
pub fn stream_ids(n: u32) -> Vec<u32> {
    (0..n).map(|k| if k == 0 { 1 } else { k + 2 }).collect()
}

/// iperf3 3.12 prints -1 as 18446744073709551615; map anything at or above 2^63 to -1.
/// Only numbers are accepted (nothing is buffered to find out).
fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct Lenient;
    impl Visitor<'_> for Lenient {
        type Value = i64;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an integer")
        }
        fn visit_i64<E>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_u64<E>(self, v: u64) -> Result<i64, E> {
            Ok(i64::try_from(v).unwrap_or(-1))
        }
        fn visit_f64<E>(self, v: f64) -> Result<i64, E> {
            Ok(v as i64)
        }
    }
    d.deserialize_any(Lenient)
}

/// [`lenient_i64`] for a key that may be missing.
fn lenient_opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    lenient_i64(d).map(Some)
}

/// One stream in an iperf3 results object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Iperf3Stream {
    /// iperf3 stream id (1, 3, 4, ...).
    #[serde(deserialize_with = "lenient_i64")]
    pub id: i64,
    /// Bytes sent (sender) or received (receiver) after the omit period.
    #[serde(deserialize_with = "lenient_i64")]
    pub bytes: i64,
    /// Retransmits, or -1 when not a sender with retransmit information.
    #[serde(deserialize_with = "lenient_i64")]
    pub retransmits: i64,
    /// UDP jitter, seconds (0 for TCP).
    #[serde(default)]
    pub jitter: f64,
    /// UDP lost datagrams (0 for TCP).
    #[serde(default, deserialize_with = "lenient_i64")]
    pub errors: i64,
    /// UDP datagrams (0 for TCP): sent (sender) or the highest sequence number seen
    /// (receiver), over the whole test, warm-up included.
    #[serde(default, deserialize_with = "lenient_i64")]
    pub packets: i64,
    /// Of `errors`, those counted during the warm-up (`-O`). Sent by iperf3 3.14 and later;
    /// those clients take a missing key to mean that every packet of a sender was in the
    /// warm-up and print its count as 0.
    #[serde(
        default,
        deserialize_with = "lenient_opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub omitted_errors: Option<i64>,
    /// Of `packets`, those counted during the warm-up (`-O`); see `omitted_errors`.
    #[serde(
        default,
        deserialize_with = "lenient_opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub omitted_packets: Option<i64>,
    /// Start, seconds (0).
    #[serde(default)]
    pub start_time: Option<f64>,
    /// End, seconds since the stream's start: the stream's duration.
    #[serde(default)]
    pub end_time: Option<f64>,
}

/// One side's iperf3 results object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Iperf3Results {
    /// Process CPU, % of one core.
    pub cpu_util_total: f64,
    /// User part.
    pub cpu_util_user: f64,
    /// System part.
    pub cpu_util_system: f64,
    /// 1 if this side sent TCP with retransmit figures, -1 if it only received, else 0.
    #[serde(deserialize_with = "lenient_i64")]
    pub sender_has_retransmits: i64,
    /// Congestion control used, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// Streams in creation order.
    pub streams: Vec<Iperf3Stream>,
    /// Server to client, with `--get-server-output`: what the server printed for this test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
    /// Server to client, with `--get-server-output`, from a server in JSON mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<Value>,
}

impl Iperf3Results {
    /// Parses a peer's results JSON within [`RESULTS_BOUNDS`]; the error names what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        Self::parse_within(bytes, RESULTS_BOUNDS)
    }

    /// Parses within other bounds (the fuzz body tries tight ones).
    /// Bytes that are not UTF-8 inside its strings are read as U+FFFD: an iperf3 server
    /// copies what it took for the cookie into its JSON output (`server_output_json`) byte for
    /// byte, and a linerate client's greeting starts with the byte 0x89.
    pub(crate) fn parse_within(bytes: &[u8], bounds: Bounds) -> Result<Self, String> {
        let text = String::from_utf8_lossy(bytes);
        bounded::from_slice(text.as_bytes(), bounds)
            .map_err(|e| format!("iperf3 results are not valid ({e})"))
    }
}

/// Our figures in iperf3's shape: bytes after the warm-up, durations as end_time, and the
/// process CPU where we measured it (0 otherwise, which iperf3 prints as 0 %).
pub fn results_from_side(side: &SideResults) -> Iperf3Results {
    let ids = stream_ids(side.streams.len() as u32);
    let sends = side.streams.iter().any(|s| s.role == StreamRole::Sender);
    let has_retrans =
        side.streams.iter().any(|s| s.role == StreamRole::Sender && s.retransmits.is_some());
    let (total, user, system) = side
        .cost
        .as_ref()
        .and_then(|c| Some((c.process?, c.window_us)))
        .filter(|(_, w)| *w > 0)
        .map_or((0.0, 0.0, 0.0), |(p, w)| {
            let pct = |us: u64| us as f64 * 100.0 / w as f64;
            (pct(p.user_us + p.system_us), pct(p.user_us), pct(p.system_us))
        });
    Iperf3Results {
        cpu_util_total: total,
        cpu_util_user: user,
        cpu_util_system: system,
        sender_has_retransmits: if !sends {
            -1
        } else if has_retrans {
            1
        } else {
            0
        },
        congestion_used: side.streams.iter().find_map(|s| s.socket.congestion.clone()),
        streams: side
            .streams
            .iter()
            .zip(ids)
            .map(|(s, id)| Iperf3Stream {
                id: i64::from(id),
                bytes: i64::try_from(s.measured_bytes()).unwrap_or(i64::MAX),
                retransmits: match (s.role, s.retransmits) {
                    (StreamRole::Sender, Some(r)) => i64::try_from(r).unwrap_or(i64::MAX),
                    _ => -1,
                },
                jitter: s.udp_receiver.map_or(0.0, |r| r.jitter_ns as f64 / 1e9),
                errors: udp_errors(s).total,
                omitted_errors: Some(udp_errors(s).omitted),
                packets: udp_packets(s).total,
                omitted_packets: Some(udp_packets(s).omitted),
                start_time: Some(0.0),
                end_time: Some(s.measured_us() as f64 / 1e6),
            })
            .collect(),
        server_output_text: None,
        server_output_json: None,
    }
}

/// A count as iperf3 sends it: over the whole test, and the part of it in the warm-up (iperf3
/// subtracts the second from the first).
#[derive(Debug, Clone, Copy)]
struct WithOmitted {
    total: i64,
    omitted: i64,
}

impl WithOmitted {
    fn new(total: u64, omitted: u64) -> Self {
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        Self { total: int(total), omitted: int(omitted.min(total)) }
    }
}

/// UDP datagrams lost as iperf3 reports them: gaps the receiver saw (0 for senders and TCP).
fn udp_errors(s: &crate::results::StreamResult) -> WithOmitted {
    s.udp_receiver
        .map_or(WithOmitted::new(0, 0), |r| WithOmitted::new(r.counts.lost, r.omitted.lost))
}

/// UDP datagram count as iperf3 reports it: sent (sender) or the highest sequence number seen
/// (receiver); 0 for TCP.
fn udp_packets(s: &crate::results::StreamResult) -> WithOmitted {
    match (s.udp_sender, s.udp_receiver) {
        (Some(tx), _) => WithOmitted::new(tx.datagrams, tx.omitted_datagrams),
        (_, Some(rx)) => WithOmitted::new(rx.counts.highest_seq, rx.omitted.highest_seq),
        _ => WithOmitted::new(0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_iperf3_quirk() {
        assert_eq!(stream_ids(4), vec![1, 3, 4, 5]);
        assert_eq!(stream_ids(1), vec![1]);
    }

    fn udp_stream(role: StreamRole) -> crate::results::StreamResult {
        use crate::udp::{UdpCounts, UdpReceiverResult, UdpSenderResult};
        let counts = |highest_seq, lost| UdpCounts {
            highest_seq,
            received: highest_seq - lost,
            lost,
            ..UdpCounts::default()
        };
        crate::results::StreamResult {
            id: 1,
            flow: crate::spec::Flow::ServerToClient,
            role,
            bytes: 1000,
            omitted_bytes: 100,
            duration_us: 2_000_000,
            omitted_us: 1_000_000,
            intervals: Vec::new(),
            socket: crate::results::SocketReport::default(),
            retransmits: None,
            tcp: None,
            thread_cpu: None,
            thread_wait_us: None,
            udp_sender: (role == StreamRole::Sender).then(|| UdpSenderResult {
                datagrams: 900,
                omitted_datagrams: 300,
                ..UdpSenderResult::default()
            }),
            udp_receiver: (role == StreamRole::Receiver).then(|| UdpReceiverResult {
                counts: counts(890, 7),
                omitted: counts(280, 2),
                ..UdpReceiverResult::default()
            }),
            error: None,
            latency: None,
        }
    }

    /// iperf3 3.14+ clients print a sender's packets as `packets - omitted_packets`, and take
    /// a missing `omitted_packets` for "all of them": a server that left it out showed the
    /// sender of `-u -R` as 0 packets. Both are sent, as iperf3's server sends them (totals,
    /// and the warm-up's part).
    #[test]
    fn udp_results_carry_totals_and_the_warm_up_part_the_way_iperf3_does() {
        let side =
            SideResults { streams: vec![udp_stream(StreamRole::Sender)], ..SideResults::default() };
        let v = serde_json::to_value(results_from_side(&side)).expect("json");
        let st = &v["streams"][0];
        assert_eq!((&st["packets"], &st["omitted_packets"]), (&900.into(), &300.into()), "{st}");
        assert_eq!((&st["errors"], &st["omitted_errors"]), (&0.into(), &0.into()), "{st}");
        assert_eq!(st["bytes"], 900, "bytes are after the warm-up, as iperf3 resets them");
        let side = SideResults {
            streams: vec![udp_stream(StreamRole::Receiver)],
            ..SideResults::default()
        };
        let v = serde_json::to_value(results_from_side(&side)).expect("json");
        let st = &v["streams"][0];
        assert_eq!((&st["packets"], &st["omitted_packets"]), (&890.into(), &280.into()), "{st}");
        assert_eq!((&st["errors"], &st["omitted_errors"]), (&7.into(), &2.into()), "{st}");
        // A 3.12 peer sends neither key.
        let text = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":5,"retransmits":-1,"jitter":0,"errors":1,"packets":9}]}"#;
        let r = Iperf3Results::parse(text).expect("parses");
        assert_eq!((r.streams[0].omitted_packets, r.streams[0].omitted_errors), (None, None));
    }

    #[test]
    fn results_parse_3_12_unsigned_minus_one() {
        let text = br#"{"cpu_util_total":71.5,"cpu_util_user":1.2,"cpu_util_system":70.3,"sender_has_retransmits":18446744073709551615,"streams":[{"id":1,"bytes":20971520000,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":5.000126}]}"#;
        let r = Iperf3Results::parse(text).expect("parses");
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[0].end_time, Some(5.000126));
        assert!(Iperf3Results::parse(b"{\"streams\":[]}").is_err(), "cpu fields are required");
    }

    #[test]
    fn results_with_bytes_that_are_not_utf8_in_a_string_parse() {
        // What iperf3 -s -J sends with --get-server-output when its cookie was a linerate
        // greeting: the byte 0x89 raw inside a string.
        let mut text = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[],"server_output_json":{"start":{"cookie":""#.to_vec();
        text.extend_from_slice(b"\x89LRC\\r\\n\\u001a\\n");
        text.extend_from_slice(br#""}}}"#);
        let r = Iperf3Results::parse(&text).expect("parses");
        let cookie = r.server_output_json.expect("server output")["start"]["cookie"].clone();
        assert_eq!(cookie, "\u{fffd}LRC\r\n\u{1a}\n", "{cookie}");
    }
}
