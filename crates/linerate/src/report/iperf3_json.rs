//! A document shaped like `iperf3 -J` (`--json-format iperf3`), so the parsers and dashboards
//! people already have keep working. It is derived from the same record and summary as every
//! other view; fields iperf3 has and linerate does not measure are left out rather than faked.
//!
//! Shape (iperf3 3.x): `start` (connected sockets, version, timestamp, test_start), `intervals`
//! (this end's streams and their sum per interval), `end` (per-stream sender/receiver,
//! `sum_sent`, `sum_received`, and for --bidir `sum_sent_bidir_reverse` /
//! `sum_received_bidir_reverse`, `cpu_utilization_percent`, congestion control).

use std::io::Write;

use serde_json::{Value, json};

use linerate_proto::{Direction, EndCondition, Flow, StreamRole};

use crate::record::{Outcome, RunRecord};
use crate::stats::udp::{UdpSummary, udp_stream};
use crate::stats::{DirectionSummary, Figures, SideFigures, summarize};

/// Writes the run as an iperf3-style JSON document.
pub fn render_run(record: &RunRecord, out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &document(record)).map_err(std::io::Error::other)?;
    writeln!(out)
}

/// The iperf3-style document of a run.
pub fn document(record: &RunRecord) -> Value {
    let summary = summarize(record);
    let mut end = serde_json::Map::new();
    end.insert("streams".into(), Value::Array(end_streams(record)));
    let name = |flow: Flow, base: &str| sum_name(record, flow, base);
    for d in &summary.directions {
        let secs = d.sender.as_ref().map_or(0.0, |s| s.figures.seconds);
        let ours = client_sends(d.flow);
        let (sent, received) = match summary.udp.iter().find(|u| u.flow == d.flow) {
            Some(u) => {
                let (sent, received) = (d.sender.as_ref(), d.receiver.as_ref());
                // iperf3 -u -J has a combined `sum` per direction beside the two.
                end.insert(name(d.flow, "sum"), udp_sum(sent, received, secs, u, ours));
                let sent_sum = udp_sent_sum(sum(sent, secs, true), u);
                (sent_sum, udp_received_sum(sum(received, secs, false), u))
            }
            None => (sum(d.sender.as_ref(), secs, ours), sum(d.receiver.as_ref(), secs, ours)),
        };
        end.insert(name(d.flow, "sum_sent"), sent);
        end.insert(name(d.flow, "sum_received"), received);
    }
    let cpu = |end: &str| summary.cost.iter().find(|c| c.end == end);
    let pct = |v: Option<f64>| json!(v.unwrap_or(0.0));
    end.insert(
        "cpu_utilization_percent".into(),
        json!({
            "host_total": pct(cpu("client").and_then(|c| c.process_percent_of_core)),
            "host_user": pct(cpu("client").and_then(|c| c.process_user_percent_of_core)),
            "host_system": pct(cpu("client").and_then(|c| c.process_system_percent_of_core)),
            "remote_total": pct(cpu("server").and_then(|c| c.process_percent_of_core)),
            "remote_user": pct(cpu("server").and_then(|c| c.process_user_percent_of_core)),
            "remote_system": pct(cpu("server").and_then(|c| c.process_system_percent_of_core)),
        }),
    );
    if let Some(cc) = congestion(&summary.directions, true) {
        end.insert("sender_tcp_congestion".into(), json!(cc));
    }
    if let Some(cc) = congestion(&summary.directions, false) {
        end.insert("receiver_tcp_congestion".into(), json!(cc));
    }
    let mut doc = json!({ "start": start(record), "intervals": intervals(record), "end": Value::Object(end) });
    match &record.server_output {
        Some(Value::String(text)) => doc["server_output_text"] = json!(text),
        Some(other) => doc["server_output_json"] = other.clone(),
        None => {}
    }
    if let Outcome::Failed { error, .. } = &record.outcome {
        doc["error"] = json!(error);
    }
    doc
}

/// iperf3's name for a sum of `flow`: with `--bidir` the server's direction is the
/// `_bidir_reverse` one.
fn sum_name(record: &RunRecord, flow: Flow, base: &str) -> String {
    match (record.spec.direction, flow) {
        (Direction::Bidirectional, Flow::ServerToClient) => format!("{base}_bidir_reverse"),
        _ => base.to_string(),
    }
}

fn congestion(dirs: &[DirectionSummary], sender: bool) -> Option<String> {
    dirs.iter().find_map(|d| {
        if sender { d.sender.as_ref() } else { d.receiver.as_ref() }?.congestion.clone()
    })
}

fn sum(side: Option<&SideFigures>, secs: f64, sender: bool) -> Value {
    let Some(s) = side else {
        return json!({ "start": 0, "end": secs, "seconds": secs, "bytes": 0, "bits_per_second": 0, "sender": sender });
    };
    let mut v = json!({
        "start": 0,
        "end": s.figures.seconds,
        "seconds": s.figures.seconds,
        "bytes": s.figures.bytes,
        "bits_per_second": s.figures.bits_per_second.unwrap_or(0.0),
        "sender": sender,
    });
    if let Some(r) = s.retransmits {
        v["retransmits"] = json!(r);
    }
    v
}

/// iperf3's `sender` flag: whether this end (the client) sends the stream or direction. In
/// iperf3 documents it is the same in a stream's `sender` and `receiver` parts and in
/// `sum_sent` and `sum_received` (UDP sums excepted, see [`udp_sent_sum`]).
fn client_sends(flow: Flow) -> bool {
    flow == Flow::ClientToServer
}

/// A UDP `sum_sent`: the sender knows no loss or jitter (iperf3 writes zeros), `sender` true.
fn udp_sent_sum(mut v: Value, u: &UdpSummary) -> Value {
    v["jitter_ms"] = json!(0.0);
    v["lost_packets"] = json!(0);
    v["packets"] = json!(u.sent.unwrap_or(u.received + u.lost));
    v["lost_percent"] = json!(0.0);
    v["sender"] = json!(true);
    v
}

/// A UDP `sum_received`: datagrams, loss (settled from both ends) and jitter, `sender` false.
fn udp_received_sum(mut v: Value, u: &UdpSummary) -> Value {
    udp_keys(&mut v, u);
    v["sender"] = json!(false);
    v
}

/// A UDP direction's `sum`: the bytes sent over the receiver's time, with the loss and
/// jitter; `sender` is whether the client sent.
fn udp_sum(
    sent: Option<&SideFigures>,
    received: Option<&SideFigures>,
    secs: f64,
    u: &UdpSummary,
    client_sends: bool,
) -> Value {
    let mut v = sum(received, secs, client_sends);
    if let Some(s) = sent {
        v["bytes"] = json!(s.figures.bytes);
    }
    udp_keys(&mut v, u);
    v
}

/// iperf3's UDP keys: datagrams, loss (settled from both ends) and jitter.
fn udp_keys(v: &mut Value, u: &UdpSummary) {
    v["jitter_ms"] = json!(u.jitter_ms.unwrap_or(0.0));
    v["lost_packets"] = json!(u.lost);
    v["packets"] = json!(u.sent.unwrap_or(u.received + u.lost));
    v["lost_percent"] = json!(u.loss_percent.unwrap_or(0.0));
}

fn start(record: &RunRecord) -> Value {
    let connected: Vec<Value> = record
        .client
        .iter()
        .flat_map(|c| &c.streams)
        .map(|s| {
            let (lh, lp) = split_addr(s.socket.local_address.as_deref());
            let (rh, rp) = split_addr(s.socket.peer_address.as_deref());
            json!({ "socket": s.id, "local_host": lh, "local_port": lp, "remote_host": rh, "remote_port": rp })
        })
        .collect();
    let spec = &record.spec;
    let (duration, bytes) = match spec.end {
        EndCondition::Duration { duration_ms } => (duration_ms / 1000, 0),
        EndCondition::Bytes { bytes } => (0, bytes),
    };
    let secs = record.started_unix_ms / 1000;
    let first = record.client.as_ref().and_then(|c| c.streams.first());
    json!({
        "connected": connected,
        "sndbuf_actual": first.and_then(|s| s.socket.send_buffer_bytes).unwrap_or(0),
        "rcvbuf_actual": first.and_then(|s| s.socket.recv_buffer_bytes).unwrap_or(0),
        "sock_bufsize": spec.window_bytes.unwrap_or(0),
        "tcp_mss_default": first.and_then(|s| s.socket.mss_bytes).unwrap_or(0),
        "target_bitrate": spec.bits_per_second,
        "version": record.software,
        "system_info": record.software,
        "timestamp": { "time": http_date(secs), "timesecs": secs },
        "connecting_to": { "host": record.server.rsplit_once(':').map_or(record.server.as_str(), |(h, _)| h), "port": record.server.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).unwrap_or(0) },
        "test_start": {
            "protocol": "TCP",
            "num_streams": spec.streams,
            "blksize": spec.block_bytes,
            "omit": spec.omit_ms / 1000,
            "duration": duration,
            "bytes": bytes,
            "blocks": 0,
            "reverse": i32::from(spec.direction == Direction::Download),
            "tos": 0,
            "target_bitrate": spec.bits_per_second,
            "bidir": i32::from(spec.direction == Direction::Bidirectional),
        },
    })
}

fn split_addr(a: Option<&str>) -> (String, u16) {
    let Some(a) = a else { return (String::new(), 0) };
    match a.rsplit_once(':') {
        Some((h, p)) => (h.trim_matches(['[', ']']).to_string(), p.parse().unwrap_or(0)),
        None => (a.to_string(), 0),
    }
}

/// This end's interval samples, grouped by interval index, with a sum per interval and
/// direction (`sum`, and `sum_bidir_reverse` for the server's direction of `--bidir`).
fn intervals(record: &RunRecord) -> Vec<Value> {
    let Some(client) = &record.client else { return Vec::new() };
    let count = client.streams.iter().map(|s| s.intervals.len()).max().unwrap_or(0);
    (0..count)
        .map(|k| {
            let at_k: Vec<_> = client
                .streams
                .iter()
                .filter_map(|s| Some((s, s.intervals.get(k)?, previous_retrans(s, k))))
                .collect();
            let streams: Vec<Value> =
                at_k.iter().map(|&(s, iv, before)| interval_stream(s, iv, before)).collect();
            let mut doc = json!({ "streams": streams });
            for flow in [Flow::ClientToServer, Flow::ServerToClient] {
                let of_flow: Vec<Value> = streams
                    .iter()
                    .zip(&at_k)
                    .filter(|(_, (s, _, _))| s.flow == flow)
                    .map(|(v, _)| v.clone())
                    .collect();
                if !of_flow.is_empty() {
                    doc[sum_name(record, flow, "sum")] = interval_sum(&of_flow, client_sends(flow));
                }
            }
            doc
        })
        .collect()
}

/// TCP_INFO counts retransmits since the connection began: the total at the sample before.
fn previous_retrans(s: &linerate_proto::StreamResult, k: usize) -> u32 {
    k.checked_sub(1).and_then(|p| s.intervals.get(p)?.tcp).map_or(0, |p| p.total_retrans)
}

/// One stream's interval, with iperf3's TCP keys (senders) or UDP keys.
fn interval_stream(
    s: &linerate_proto::StreamResult,
    iv: &linerate_proto::IntervalSample,
    retrans_before: u32,
) -> Value {
    let (a, b) = (iv.start_us as f64 / 1e6, iv.end_us as f64 / 1e6);
    let secs = (b - a).max(1e-9);
    let sender = s.role == StreamRole::Sender;
    let mut v = json!({
        "socket": s.id, "start": a, "end": b, "seconds": b - a, "bytes": iv.bytes,
        "bits_per_second": iv.bytes as f64 * 8.0 / secs, "omitted": iv.omitted, "sender": sender,
    });
    if let Some(t) = iv.tcp.filter(|_| sender) {
        v["snd_cwnd"] = json!(u64::from(t.cwnd_segments) * u64::from(t.snd_mss_bytes));
        v["rtt"] = json!(t.rtt_us);
        v["rttvar"] = json!(t.rttvar_us);
        if let Some(w) = t.snd_wnd_bytes {
            v["snd_wnd"] = json!(w);
        }
        v["retransmits"] = json!(u64::from(t.total_retrans.saturating_sub(retrans_before)));
    }
    if let Some(u) = iv.udp {
        if sender {
            v["packets"] = json!(u.datagrams);
        } else {
            udp_interval_keys(&mut v, u.datagrams + u.lost, u.lost, u.jitter_ns as f64 / 1e6);
        }
    }
    v
}

/// A receiver's UDP keys for an interval: datagrams expected (received and gaps), gaps,
/// jitter.
fn udp_interval_keys(v: &mut Value, packets: u64, lost: u64, jitter_ms: f64) {
    v["jitter_ms"] = json!(jitter_ms);
    v["lost_packets"] = json!(lost);
    v["packets"] = json!(packets);
    let pct = if packets > 0 { lost as f64 * 100.0 / packets as f64 } else { 0.0 };
    v["lost_percent"] = json!(pct);
}

/// The sum of one direction's streams in an interval (built from their interval objects).
fn interval_sum(streams: &[Value], sender: bool) -> Value {
    let f = |v: &Value, key: &str| v[key].as_f64();
    let start = streams.iter().filter_map(|v| f(v, "start")).fold(f64::MAX, f64::min);
    let end = streams.iter().filter_map(|v| f(v, "end")).fold(0.0, f64::max);
    let total = |key: &str| -> Option<u64> {
        let present: Vec<u64> = streams.iter().filter_map(|v| v[key].as_u64()).collect();
        (!present.is_empty()).then(|| present.iter().sum())
    };
    let bytes = total("bytes").unwrap_or(0);
    let omitted = streams.iter().any(|v| v["omitted"] == true);
    let secs = (end - start).max(1e-9);
    let mut sum = json!({ "start": start, "end": end, "seconds": end - start, "bytes": bytes,
                          "bits_per_second": bytes as f64 * 8.0 / secs, "omitted": omitted,
                          "sender": sender });
    if let Some(r) = total("retransmits") {
        sum["retransmits"] = json!(r);
    }
    match (total("packets"), total("lost_packets")) {
        (Some(packets), Some(lost)) => {
            let jitters: Vec<f64> = streams.iter().filter_map(|v| f(v, "jitter_ms")).collect();
            let jitter = jitters.iter().sum::<f64>() / jitters.len().max(1) as f64;
            udp_interval_keys(&mut sum, packets, lost, jitter);
        }
        (Some(packets), None) => sum["packets"] = json!(packets),
        _ => {}
    }
    sum
}

/// Per stream: the sending and the receiving end's figures, from whichever end had each role;
/// a UDP stream is one `udp` object, as in iperf3.
fn end_streams(record: &RunRecord) -> Vec<Value> {
    record
        .spec
        .stream_plan()
        .iter()
        .map(|&(id, flow)| {
            let ours = client_sends(flow);
            let part = |role| stream_part(record, id, role, ours);
            match udp_stream(record, id) {
                Some(u) => {
                    let mut v = part(StreamRole::Sender)
                        .or_else(|| part(StreamRole::Receiver))
                        .unwrap_or_else(|| json!({ "socket": id, "sender": ours }));
                    udp_keys(&mut v, &u);
                    v["out_of_order"] = json!(u.out_of_order);
                    json!({ "udp": v })
                }
                None => {
                    json!({ "sender": part(StreamRole::Sender), "receiver": part(StreamRole::Receiver) })
                }
            }
        })
        .collect()
}

/// One end's part of stream `id`, if an end reported it; `ours` is iperf3's `sender` flag.
fn stream_part(record: &RunRecord, id: u32, role: StreamRole, ours: bool) -> Option<Value> {
    let (_, s) = record.all_streams().find(|(_, s)| s.id == id && s.role == role)?;
    let f = Figures::of_streams(std::iter::once(s));
    let mut v = json!({
        "socket": id, "start": 0, "end": f.seconds, "seconds": f.seconds, "bytes": f.bytes,
        "bits_per_second": f.bits_per_second.unwrap_or(0.0), "sender": ours,
    });
    if let Some(r) = s.retransmits {
        v["retransmits"] = json!(r);
    }
    if role == StreamRole::Sender && s.udp_sender.is_none() {
        tcp_extremes(&mut v, s);
    }
    Some(v)
}

/// A TCP sender's RTT and window extremes over its samples. iperf3 always has these keys;
/// where the sending end reported no TCP figures (an iperf3 server with `-R`: iperf3 itself
/// writes zeros there) they are null, not a made-up 0.
fn tcp_extremes(v: &mut Value, s: &linerate_proto::StreamResult) {
    let samples: Vec<_> = s.intervals.iter().filter_map(|i| i.tcp).chain(s.tcp).collect();
    let rtts = samples.iter().map(|t| u64::from(t.rtt_us));
    let cwnd = samples.iter().map(|t| u64::from(t.cwnd_segments) * u64::from(t.snd_mss_bytes));
    v["max_snd_cwnd"] = json!(cwnd.max());
    v["max_snd_wnd"] = json!(samples.iter().filter_map(|t| t.snd_wnd_bytes).max());
    v["max_rtt"] = json!(rtts.clone().max());
    v["min_rtt"] = json!(rtts.clone().min());
    v["mean_rtt"] = json!((!samples.is_empty()).then(|| rtts.sum::<u64>() / samples.len() as u64));
}

/// `Sun, 22 Nov 2026 05:56:01 GMT` from Unix seconds (iperf3's timestamp format).
fn http_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::http_date;

    #[test]
    fn dates_like_iperf3() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_795_326_961), "Sun, 22 Nov 2026 05:56:01 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }
}
