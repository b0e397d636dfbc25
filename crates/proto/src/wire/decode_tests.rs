//! Hostile and maximal frames through the typed decoder: every bound refuses with the field
//! and the limit named, and the results of the largest legitimate tests still decode.

use crate::error::ProtoError;
use crate::results::{
    CostSample, CpuTimes, HostCost, IntervalSample, SideResults, SocketReport, StreamResult,
    StreamRole, SystemCpu, TcpInternals,
};
use crate::samples::samples_per_stream;
use crate::spec::Flow;
use crate::wire::decode::decode;
use crate::wire::{
    FrameDecoder, MAX_FRAME_RESULTS, Message, PROTOCOL_VERSION, encode_frame, frame_bounds,
    preamble,
};

fn results_bounds() -> crate::bounded::Bounds {
    frame_bounds(MAX_FRAME_RESULTS)
}

/// A results frame body whose `cost` is `cost_json` and whose streams are `streams_json`.
fn results_body(streams_json: &str, cost_json: &str) -> Vec<u8> {
    format!(
        r#"{{"type":"results","results":{{"software":"x","streams":[{streams_json}],"cost":{cost_json}}}}}"#
    )
    .into_bytes()
}

fn violation(r: Result<Message, ProtoError>) -> String {
    match r {
        Err(ProtoError::Violation(m)) => m,
        other => panic!("expected a violation, got {other:?}"),
    }
}

#[test]
fn a_16_mib_list_of_empty_strings_is_refused_at_the_item_cap() {
    let n = (MAX_FRAME_RESULTS as usize - 200) / 3;
    let list = format!("{}\"\"", "\"\",".repeat(n - 1));
    let body = results_body("", &format!(r#"{{"window_us":0,"foreign_top":[{list}]}}"#));
    assert!(body.len() <= MAX_FRAME_RESULTS as usize);
    let m = violation(decode(&body, results_bounds()));
    assert!(m.contains("results.cost.foreign_top"), "names the field: {m}");
    assert!(m.contains("more than 65536 items"), "names the limit: {m}");
}

#[test]
fn a_long_string_is_refused_before_it_is_kept() {
    let body = format!(r#"{{"type":"abort","reason":"other","message":"{}"}}"#, "a".repeat(5000));
    let m = violation(decode(body.as_bytes(), results_bounds()));
    assert!(m.contains("message") && m.contains("5000 bytes; at most 4096"), "{m}");
    let body = r#"{"type":"abort","reason":"other","message":"fine"}"#;
    assert!(decode(body.as_bytes(), results_bounds()).is_ok());
}

#[test]
fn memory_beyond_the_budget_is_refused_with_the_path() {
    let sample = r#"{"start_us":0,"end_us":0,"bytes":0,"omitted":false}"#;
    let stream = format!(
        r#"{{"id":1,"flow":"client_to_server","role":"sender","bytes":0,"omitted_bytes":0,"duration_us":0,"omitted_us":0,"socket":{{}},"retransmits":null,"error":null,"intervals":[{}]}}"#,
        format!("{sample},").repeat(60_000).trim_end_matches(',')
    );
    let body = results_body(&[stream.as_str(); 4].join(","), "null");
    assert!(body.len() < MAX_FRAME_RESULTS as usize, "a frame the cap lets through");
    let m = violation(decode(&body, results_bounds()));
    assert!(m.contains("more than 33554432 bytes of memory"), "{m}");
    assert!(m.contains("results.streams["), "{m}");
}

#[test]
fn shape_errors_name_the_path() {
    let stream = r#"{"id":1,"flow":"client_to_server","role":"sender","bytes":"many"}"#;
    let m = violation(decode(&results_body(stream, "null"), results_bounds()));
    assert!(m.starts_with("malformed \"results\" message: results.streams[0].bytes:"), "{m}");
}

#[test]
fn deep_nesting_is_an_error_or_skipped_never_a_crash() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let unknown = format!(r#"{{"type":"start","junk":{deep}}}"#);
    assert_eq!(decode(unknown.as_bytes(), results_bounds()), Ok(Message::Start));
    let kept = format!(r#"{{"type":"refused","reason":{deep}}}"#);
    assert!(decode(kept.as_bytes(), results_bounds()).is_err());
    let iperf3 = format!(
        r#"{{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[],"server_output_json":{deep}}}"#
    );
    let e = crate::iperf3::Iperf3Results::parse(iperf3.as_bytes()).unwrap_err();
    assert!(e.contains("recursion limit"), "{e}");
}

#[test]
fn frames_that_are_not_objects_or_have_no_type_are_told_apart() {
    let b = results_bounds();
    assert!(
        matches!(decode(b"[1]", b), Err(ProtoError::Garbage(m)) if m.contains("not an object"))
    );
    assert!(
        matches!(decode(b"{\"type\":", b), Err(ProtoError::Garbage(m)) if m.contains("not JSON"))
    );
    let m = violation(decode(br#"{"kind":"start"}"#, b));
    assert!(m.contains("without a message type"), "{m}");
    let m = violation(decode(br#"{"type":"results"}"#, b));
    assert!(m.contains("missing field `results`"), "{m}");
}

#[test]
fn end_conditions_decode_without_buffering_and_say_what_is_missing() {
    let spec = |end: &str| {
        let mut s = serde_json::to_value(crate::spec::TestSpec::default_tcp()).expect("spec");
        s["end"] = serde_json::from_str(end).expect("end");
        format!(r#"{{"type":"test_request","spec":{s}}}"#)
    };
    let ok = decode(spec(r#"{"kind":"bytes","bytes":5,"x":[1]}"#).as_bytes(), results_bounds());
    assert!(
        matches!(ok, Ok(Message::TestRequest { spec }) if spec.end == crate::EndCondition::Bytes { bytes: 5 })
    );
    let m = violation(decode(spec(r#"{"kind":"bytes"}"#).as_bytes(), results_bounds()));
    assert!(m.contains("spec.end") && m.contains("missing field `bytes`"), "{m}");
}

/// One side's results as the largest test of `connections` streams leaves them: every
/// stream's log full, TCP's view in every sample, the cost log full too.
fn largest_results(connections: u32) -> SideResults {
    let per = samples_per_stream(connections) as u64;
    let tcp = TcpInternals {
        rtt_us: 123_456,
        min_rtt_us: Some(1_234),
        pacing_rate_bits_per_second: Some(u64::MAX / 3),
        delivery_rate_bits_per_second: Some(u64::MAX / 3),
        delivery_rate_app_limited: Some(false),
        busy_us: Some(u64::MAX / 3),
        bytes_sent: Some(u64::MAX / 3),
        snd_wnd_bytes: Some(u32::MAX),
        reord_seen: Some(u32::MAX),
        pmtu_bytes: Some(u32::MAX),
        ..TcpInternals::default()
    };
    let sample = |i: u64| IntervalSample {
        start_us: i * 1_000_000,
        end_us: (i + 1) * 1_000_000,
        bytes: u64::MAX / 3,
        omitted: false,
        tcp: Some(tcp),
        udp: None,
        rr: None,
    };
    let stream = |id: u32| StreamResult {
        id,
        flow: Flow::ClientToServer,
        role: StreamRole::Sender,
        bytes: u64::MAX / 3,
        omitted_bytes: 0,
        duration_us: per * 1_000_000,
        omitted_us: 0,
        intervals: (0..per).map(sample).collect(),
        socket: SocketReport {
            congestion: Some("cubic".into()),
            local_address: Some("[2001:db8::1]:40000".into()),
            peer_address: Some("[2001:db8::2]:5201".into()),
            ..SocketReport::default()
        },
        retransmits: Some(1),
        tcp: Some(tcp),
        thread_cpu: None,
        thread_wait_us: None,
        udp_sender: None,
        udp_receiver: None,
        latency: None,
        error: None,
    };
    let cpu = CpuTimes { user_us: u64::MAX / 9, idle_us: u64::MAX / 9, ..CpuTimes::default() };
    let cost_sample = |i: u64| CostSample {
        start_us: i * 1_000_000,
        end_us: (i + 1) * 1_000_000,
        process: None,
        system: Some(SystemCpu { cpus: 64, all: cpu, busiest_cpu: 63, busiest: cpu }),
    };
    SideResults {
        software: "linerate".into(),
        streams: (1..=connections).map(stream).collect(),
        cost: Some(Box::new(HostCost {
            intervals: (0..per).map(cost_sample).collect(),
            ..HostCost::default()
        })),
        ..SideResults::default()
    }
}

#[test]
fn results_of_the_largest_legitimate_tests_decode_within_the_bounds() {
    for connections in [1, 256, 8192] {
        let mut r = largest_results(connections);
        r.fit_to(MAX_FRAME_RESULTS as usize - 1024);
        assert!(!r.intervals_dropped, "{connections}: merged, never dropped");
        let frame = encode_frame(&Message::Results { results: r.clone() });
        let mut d = FrameDecoder::new();
        d.push(&preamble(PROTOCOL_VERSION));
        assert_eq!(d.poll_preamble(), Ok(Some(PROTOCOL_VERSION)));
        d.set_max_frame(MAX_FRAME_RESULTS);
        d.push(&frame);
        let got = d.poll_frame();
        assert_eq!(got, Ok(Some(Message::Results { results: r.clone() })), "{connections}");
        eprintln!(
            "{connections} streams: {} bytes of JSON, {} samples per stream, {} intervals each",
            frame.len(),
            r.streams[0].intervals.len(),
            r.intervals_per_sample
        );
    }
}
