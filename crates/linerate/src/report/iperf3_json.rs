//! A document shaped like `iperf3 -J` (`--json-format iperf3`), so the parsers and dashboards
//! people already have keep working. It is derived from the same record and summary as every
//! other view; fields iperf3 has and linerate does not measure are left out rather than faked.
//!
//! Shape (iperf3 3.x): `start` (connected sockets, version, timestamp, test_start), `intervals`
//! (this end's streams and their sum per interval), `end` (per-stream sender/receiver,
//! `sum_sent`, `sum_received`, and for --bidir `sum_sent_bidir_reverse` /
//! `sum_received_bidir_reverse`, `cpu_utilization_percent`, congestion control).
//!
//! Versions ([`Iperf3Schema`]): iperf3 has added keys over its releases and removed none —
//! `start.fq_rate` and `test_start.bidir`/`fqrate` in 3.13, `test_start.interval` in 3.17,
//! `timestamp.timemillisecs` and TCP senders' `reorder` in 3.20, `test_start.gso`/`gro` in
//! 3.21 (checked by running 3.12 and 3.21 with `-J` for every mode, and the rest against
//! iperf3's history). Which keys an iperf3 document has is decided by the iperf3 that writes
//! it — the client — never by the server: a 3.21 client against a 3.12 server writes all of
//! 3.21's keys, a 3.12 client against a 3.21 server none of them. So `--json-format iperf3`
//! writes the newest schema (3.21), whatever the server: it is what an up-to-date iperf3 client
//! of the same test writes, and as a superset of every older one a dashboard written for
//! 3.12 still finds each key it reads. `--json-format iperf3-3.12` writes exactly 3.12's keys,
//! for parsers that reject keys they do not know. The schema is never switched by what the
//! peer is: the same command always gives the same keys, and no iperf3 client does that
//! either. What the peer's results reveal of its version is kept in the record
//! (`server_results.software`, see `session::iperf3`).
//!
//! Values are linerate's own measurements: a key whose figure this run did not measure is
//! null (iperf3 writes 0 there, indistinguishable from a measured 0), never a made-up figure.

use std::io::Write;

use serde_json::{Value, json};

use linerate_proto::udp::UdpIntervalSample;
use linerate_proto::{
    Direction, EndCondition, Flow, IntervalSample, Protocol, StreamResult, StreamRole,
};

use crate::plan::Iperf3Schema;
use crate::record::{End, Outcome, RunRecord};
use crate::stats::udp::{UdpSummary, summarize_udp, udp_stream};
use crate::stats::{DirectionSummary, Figures, SideFigures, summarize};

/// The iperf3 release (3.x) that added a key to its `-J` documents.
mod added_in {
    /// `start.fq_rate`, `start.test_start.bidir` and `start.test_start.fqrate`.
    pub const FQ_RATE_BIDIR: u32 = 13;
    /// `start.test_start.interval`.
    pub const INTERVAL: u32 = 17;
    /// `start.timestamp.timemillisecs` and TCP senders' `reorder`.
    pub const MILLIS_REORDER: u32 = 20;
    /// `start.test_start.gso` and `gro`.
    pub const GSO_GRO: u32 = 21;
}

/// Whether documents of `schema` have the keys iperf3 3.`minor` added.
fn has(schema: Iperf3Schema, minor: u32) -> bool {
    let newest = match schema {
        Iperf3Schema::V3_12 => 12,
        Iperf3Schema::V3_21 => 21,
    };
    newest >= minor
}

/// Writes the run as an iperf3-style JSON document with `schema`'s keys.
pub fn render_run(
    record: &RunRecord,
    schema: Iperf3Schema,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &document(record, schema))
        .map_err(std::io::Error::other)?;
    writeln!(out)
}

/// The iperf3-style document of a run, with `schema`'s keys.
pub fn document(record: &RunRecord, schema: Iperf3Schema) -> Value {
    let summary = summarize(record);
    let mut end = serde_json::Map::new();
    end.insert("streams".into(), Value::Array(end_streams(record, schema)));
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
    let cpu = |end: End| summary.cost.iter().find(|c| c.end == end);
    let pct = |v: Option<f64>| json!(v.unwrap_or(0.0));
    end.insert(
        "cpu_utilization_percent".into(),
        json!({
            "host_total": pct(cpu(End::Client).and_then(|c| c.process_percent_of_core)),
            "host_user": pct(cpu(End::Client).and_then(|c| c.process_user_percent_of_core)),
            "host_system": pct(cpu(End::Client).and_then(|c| c.process_system_percent_of_core)),
            "remote_total": pct(cpu(End::Server).and_then(|c| c.process_percent_of_core)),
            "remote_user": pct(cpu(End::Server).and_then(|c| c.process_user_percent_of_core)),
            "remote_system": pct(cpu(End::Server).and_then(|c| c.process_system_percent_of_core)),
        }),
    );
    if let Some(cc) = congestion(&summary.directions, true) {
        end.insert("sender_tcp_congestion".into(), json!(cc));
    }
    if let Some(cc) = congestion(&summary.directions, false) {
        end.insert("receiver_tcp_congestion".into(), json!(cc));
    }
    let intervals = intervals(record, schema);
    let end = Value::Object(end);
    let mut doc = json!({ "start": start(record, schema), "intervals": intervals, "end": end });
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

fn start(record: &RunRecord, schema: Iperf3Schema) -> Value {
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
    let fq_rate = spec.fq_rate_bps.map_or(0, std::num::NonZeroU64::get);
    // The host as named, without the brackets of an IPv6 address with a port.
    let (host, port) = match record.server.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => {
            (h.trim_matches(['[', ']']), p.parse().unwrap_or(0))
        }
        _ => (record.server.as_str(), 0u16),
    };
    let mut v = json!({
        "connected": connected,
        "sndbuf_actual": first.and_then(|s| s.socket.send_buffer_bytes).unwrap_or(0),
        "rcvbuf_actual": first.and_then(|s| s.socket.recv_buffer_bytes).unwrap_or(0),
        "sock_bufsize": spec.window_bytes.unwrap_or(0),
        "target_bitrate": spec.bits_per_second,
        "version": record.software,
        "system_info": record.software,
        "timestamp": { "time": http_date(secs), "timesecs": secs },
        "connecting_to": { "host": host, "port": port },
        "test_start": {
            "protocol": if spec.protocol == Protocol::Udp { "UDP" } else { "TCP" },
            "num_streams": spec.streams,
            "blksize": spec.block_bytes,
            "omit": spec.omit_ms / 1000,
            "duration": duration,
            "bytes": bytes,
            "blocks": 0,
            "reverse": i32::from(spec.direction == Direction::Download),
            "tos": spec.tos.map_or(0, std::num::NonZeroU8::get),
            "target_bitrate": spec.bits_per_second,
        },
    });
    // TCP only: the MSS asked for (`-M`), else the one the first connection got.
    match (spec.protocol, spec.mss_bytes) {
        (Protocol::Udp, _) => {}
        (Protocol::Tcp, Some(mss)) => v["tcp_mss"] = json!(mss),
        (Protocol::Tcp, None) => {
            v["tcp_mss_default"] = json!(first.and_then(|s| s.socket.mss_bytes).unwrap_or(0));
        }
    }
    if has(schema, added_in::FQ_RATE_BIDIR) {
        v["fq_rate"] = json!(fq_rate);
        v["test_start"]["bidir"] = json!(i32::from(spec.direction == Direction::Bidirectional));
        v["test_start"]["fqrate"] = json!(fq_rate);
    }
    if has(schema, added_in::INTERVAL) {
        // Whole seconds as an integer, as iperf3 (cJSON) writes a whole number.
        v["test_start"]["interval"] = match spec.interval_ms % 1000 {
            0 => json!(spec.interval_ms / 1000),
            _ => json!(spec.interval_ms as f64 / 1000.0),
        };
    }
    if has(schema, added_in::MILLIS_REORDER) {
        v["timestamp"]["timemillisecs"] = json!(record.started_unix_ms);
    }
    if has(schema, added_in::GSO_GRO) {
        // Whether this end's UDP senders segmented in the kernel and its receivers had
        // receive offload on (0 for TCP, as in iperf3 without --gsro).
        let udp = summarize_udp(record);
        let ours = |flow: Flow| udp.iter().filter(move |u| u.flow == flow);
        let gso = ours(Flow::ClientToServer).any(|u| u.gso);
        let gro = ours(Flow::ServerToClient).any(|u| u.gro);
        v["test_start"]["gso"] = json!(i32::from(gso));
        v["test_start"]["gro"] = json!(i32::from(gro));
    }
    v
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
fn intervals(record: &RunRecord, schema: Iperf3Schema) -> Vec<Value> {
    let Some(client) = &record.client else { return Vec::new() };
    // With `-i 0` iperf3 still writes one interval, the whole test after the warm-up.
    let whole: Vec<Vec<IntervalSample>>;
    let samples: Vec<&[IntervalSample]> = if client.streams.iter().all(|s| s.intervals.is_empty()) {
        whole = client.streams.iter().map(|s| vec![whole_test(s)]).collect();
        whole.iter().map(Vec::as_slice).collect()
    } else {
        client.streams.iter().map(|s| s.intervals.as_slice()).collect()
    };
    let count = samples.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..count)
        .map(|k| {
            let at_k: Vec<_> = client
                .streams
                .iter()
                .zip(&samples)
                .filter_map(|(s, ivs)| Some((s, ivs.get(k)?, previous_retrans(ivs, k))))
                .collect();
            let streams: Vec<Value> = at_k
                .iter()
                .map(|&(s, iv, before)| interval_stream(s, iv, before, schema))
                .collect();
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

/// A stream's whole test after the warm-up as one interval, from its measured totals.
fn whole_test(s: &StreamResult) -> IntervalSample {
    let sent = s.udp_sender.map(|u| UdpIntervalSample {
        datagrams: u.measured_datagrams(),
        ..UdpIntervalSample::default()
    });
    let received = s.udp_receiver.map(|r| {
        let m = r.measured();
        UdpIntervalSample {
            datagrams: m.received,
            lost: m.lost,
            out_of_order: m.out_of_order,
            jitter_ns: r.jitter_ns,
        }
    });
    IntervalSample {
        start_us: s.omitted_us,
        end_us: s.duration_us.max(s.omitted_us),
        bytes: s.bytes.saturating_sub(s.omitted_bytes),
        omitted: false,
        tcp: s.tcp,
        udp: sent.or(received),
        rr: None,
    }
}

/// TCP_INFO counts retransmits since the connection began: the total at the sample before.
fn previous_retrans(samples: &[IntervalSample], k: usize) -> u32 {
    k.checked_sub(1).and_then(|p| samples.get(p)?.tcp).map_or(0, |p| p.total_retrans)
}

/// One stream's interval, with iperf3's TCP keys (senders) or UDP keys.
fn interval_stream(
    s: &linerate_proto::StreamResult,
    iv: &linerate_proto::IntervalSample,
    retrans_before: u32,
    schema: Iperf3Schema,
) -> Value {
    // As iperf3's: the clock restarts at 0 when the warm-up (`-O`) ends.
    let base = if iv.omitted { 0 } else { s.omitted_us };
    let at = |us: u64| us.saturating_sub(base) as f64 / 1e6;
    let (a, b) = (at(iv.start_us), at(iv.end_us));
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
        v["pmtu"] = json!(t.pmtu_bytes);
        if has(schema, added_in::MILLIS_REORDER) {
            // iperf3 reports the connection's count so far, not the interval's.
            v["reorder"] = json!(t.reord_seen);
        }
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
fn end_streams(record: &RunRecord, schema: Iperf3Schema) -> Vec<Value> {
    record
        .spec
        .stream_plan()
        .iter()
        .map(|&(id, flow)| {
            let ours = client_sends(flow);
            let part = |role| stream_part(record, id, role, ours, schema);
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
fn stream_part(
    record: &RunRecord,
    id: u32,
    role: StreamRole,
    ours: bool,
    schema: Iperf3Schema,
) -> Option<Value> {
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
        tcp_extremes(&mut v, s, schema);
    }
    Some(v)
}

/// A TCP sender's RTT and window extremes over its samples. iperf3 always has these keys;
/// where the sending end reported no TCP figures (an iperf3 server with `-R`: iperf3 itself
/// writes zeros there) they are null, not a made-up 0.
fn tcp_extremes(v: &mut Value, s: &linerate_proto::StreamResult, schema: Iperf3Schema) {
    let samples: Vec<_> = s.intervals.iter().filter_map(|i| i.tcp).chain(s.tcp).collect();
    let rtts = samples.iter().map(|t| u64::from(t.rtt_us));
    let cwnd = samples.iter().map(|t| u64::from(t.cwnd_segments) * u64::from(t.snd_mss_bytes));
    v["max_snd_cwnd"] = json!(cwnd.max());
    v["max_snd_wnd"] = json!(samples.iter().filter_map(|t| t.snd_wnd_bytes).max());
    v["max_rtt"] = json!(rtts.clone().max());
    v["min_rtt"] = json!(rtts.clone().min());
    v["mean_rtt"] = json!((!samples.is_empty()).then(|| rtts.sum::<u64>() / samples.len() as u64));
    if has(schema, added_in::MILLIS_REORDER) {
        // The count at the sender's last sample (the connection's whole life), as iperf3's.
        let last = s.tcp.or_else(|| s.intervals.iter().rev().find_map(|i| i.tcp));
        v["reorder"] = json!(last.and_then(|t| t.reord_seen));
    }
}

/// `Sun, 22 Nov 2026 05:56:01 GMT` from Unix seconds (iperf3's timestamp format).
fn http_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = crate::units::civil_date(secs / 86_400);
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
    use super::{document, http_date};
    use crate::plan::Iperf3Schema;
    use crate::record::RunRecord;
    use linerate_proto::{
        IntervalSample, SideResults, StreamResult, StreamRole, TcpInternals, TestSpec,
    };

    /// A one-stream TCP upload whose sender saw 2 reorderings on a 1500-byte path, with
    /// `intervals` samples (each 0.5 s) after a warm-up of `omit_us`.
    fn upload(intervals: usize, omit_us: u64) -> RunRecord {
        let tcp = TcpInternals {
            rtt_us: 50,
            cwnd_segments: 10,
            snd_mss_bytes: 1448,
            reord_seen: Some(2),
            pmtu_bytes: Some(1500),
            ..TcpInternals::default()
        };
        let stream = |role, samples: usize| StreamResult {
            omitted_bytes: if omit_us > 0 { 1_000_000 } else { 0 },
            duration_us: omit_us + 1_000_000,
            omitted_us: omit_us,
            intervals: (0..samples as u64)
                .map(|k| IntervalSample {
                    start_us: k * 500_000,
                    end_us: (k + 1) * 500_000,
                    bytes: 500_000,
                    omitted: (k + 1) * 500_000 <= omit_us,
                    tcp: Some(tcp),
                    udp: None,
                    rr: None,
                })
                .collect(),
            retransmits: Some(0),
            tcp: Some(tcp),
            ..RunRecord::test_stream(role, 2_000_000)
        };
        let side = |role, samples| SideResults {
            software: "t".into(),
            streams: vec![stream(role, samples)],
            intervals_dropped: false,
            intervals_per_sample: 1,
            cost: None,
            environment: None,
        };
        let spec = TestSpec { omit_ms: omit_us / 1000, ..TestSpec::default_tcp() };
        let client = side(StreamRole::Sender, intervals);
        RunRecord::for_tests(spec, client, side(StreamRole::Receiver, 0))
    }

    /// Each version's keys, and only those: 3.12 has none of the keys added since.
    #[test]
    fn each_schema_has_its_versions_keys() {
        let r = upload(2, 0);
        let old = document(&r, Iperf3Schema::V3_12);
        let new = document(&r, Iperf3Schema::V3_21);
        for (path, added) in [
            ("/start/timestamp/timemillisecs", true),
            ("/start/fq_rate", true),
            ("/start/test_start/bidir", true),
            ("/start/test_start/interval", true),
            ("/start/test_start/gso", true),
            ("/intervals/0/streams/0/reorder", true),
            ("/end/streams/0/sender/reorder", true),
            ("/intervals/0/streams/0/pmtu", false),
            ("/start/tcp_mss_default", false),
        ] {
            assert_eq!(old.pointer(path).is_none(), added, "3.12: {path}");
            assert!(new.pointer(path).is_some(), "3.21: {path}");
        }
        // The figures are the sender's own: reorderings so far, the path MTU.
        assert_eq!(new["end"]["streams"][0]["sender"]["reorder"], 2);
        assert_eq!(new["intervals"][1]["streams"][0]["reorder"], 2);
        assert_eq!(old["intervals"][0]["streams"][0]["pmtu"], 1500);
    }

    /// With `-i 0` iperf3 writes one interval, the whole test; after a warm-up (`-O`) its
    /// interval clock restarts at 0.
    #[test]
    fn intervals_as_iperf3_counts_them() {
        let whole = document(&upload(0, 0), Iperf3Schema::V3_21);
        let iv = whole["intervals"].as_array().expect("intervals");
        assert_eq!(iv.len(), 1, "{iv:?}");
        assert_eq!(iv[0]["sum"]["end"], 1.0);
        assert_eq!(iv[0]["sum"]["bytes"], 2_000_000);
        let omitted = document(&upload(4, 1_000_000), Iperf3Schema::V3_21);
        let at = |k: usize, key: &str| omitted["intervals"][k]["sum"][key].clone();
        assert_eq!((at(1, "end"), at(1, "omitted")), (1.0.into(), true.into()));
        assert_eq!((at(2, "start"), at(2, "end")), (0.0.into(), 0.5.into()));
        assert_eq!((at(3, "start"), at(3, "end")), (0.5.into(), 1.0.into()));
    }

    #[test]
    fn dates_like_iperf3() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_795_326_961), "Sun, 22 Nov 2026 05:56:01 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }
}
