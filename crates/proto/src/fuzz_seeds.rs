//! Seed inputs for the fuzz targets: one valid transcript (or record stream) per target,
//! built with this crate's own encoders so they stay valid as the protocol grows. The stable
//! test writes them to `fuzz/corpus/<target>/` when that is missing and replays every file
//! there, and `cargo fuzz` starts from them.

use std::time::Duration;

use crate::auth::{NONCE_LEN, Psk, to_hex};
use crate::fuzzing::{FUZZ_KEY, FUZZ_NONCE};
use crate::results::SideResults;
use crate::spec::{Direction, TestSpec};
use crate::udp::{DatagramHeader, SeqWidth, header_len};
use crate::wire::{
    Cookie, DataHello, Message, PROTOCOL_VERSION, StopReason, encode_frame, preamble,
};

fn frames(msgs: &[Message]) -> Vec<u8> {
    msgs.iter().flat_map(encode_frame).collect()
}

fn hello(auth_nonce: Option<String>) -> Message {
    let caps = ["tcp", "reverse", "bidir", "pacing", "zerocopy", "udp", "queue"];
    Message::Hello {
        software: "seed".into(),
        capabilities: caps.iter().map(|c| c.to_string()).collect(),
        auth_nonce,
    }
}

/// A client's transcript after the preamble: request, stop, results.
fn client_tail() -> Vec<Message> {
    let mut spec = TestSpec::default_tcp();
    spec.streams = 2;
    spec.direction = Direction::Bidirectional;
    vec![
        Message::TestRequest { spec },
        Message::Stop { reason: StopReason::TimeElapsed },
        Message::Results { results: SideResults::default() },
    ]
}

/// `(target, input)` pairs: every cargo-fuzz target gets at least one.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let mut msgs = vec![hello(None)];
    msgs.extend(client_tail());
    out.push(("frame_decoder", frames(&msgs)));
    let mut native = preamble(PROTOCOL_VERSION).to_vec();
    native.extend(frames(&msgs));
    out.push(("server_machine", native));
    // server_auth: mode 3 (preamble, hello and auth supplied), then the rest of a test;
    // mode 1 with the client's own hello and auth (the fuzzer mutates the tag).
    out.push(("server_auth", [vec![3], frames(&client_tail())].concat()));
    let key = Psk::new(FUZZ_KEY.to_vec()).unwrap_or_else(|_| unreachable!("16 bytes"));
    let client_nonce = [6u8; NONCE_LEN];
    let tag = to_hex(&key.tag(&FUZZ_NONCE, &client_nonce));
    let mut keyed = vec![hello(None), Message::Auth { client_nonce: to_hex(&client_nonce), tag }];
    keyed.extend(client_tail());
    out.push(("server_auth", [vec![1], frames(&keyed)].concat()));
    let accepted = vec![
        hello(Some(to_hex(&[8; NONCE_LEN]))),
        Message::Queued { position: 1, wait_ms: Some(1500) },
        Message::TestAccepted { cookie: Cookie([7; 16]).to_hex() },
        Message::Start,
        Message::Results { results: SideResults::default() },
    ];
    out.push(("client_machine", frames(&accepted)));
    out.push(("data_hello", DataHello { cookie: Cookie([7; 16]), stream_id: 1 }.encode().to_vec()));
    out.push(("udp_receiver", udp_records()));
    out.push(("iperf3_server", iperf3_tail()));
    out.push(("doctor_machine", doctor_answers()));
    // typed_frames: a mode byte (even: a native frame body; odd: iperf3 results), the body.
    let body = |m: &Message| encode_frame(m)[4..].to_vec();
    let results = Message::Results { results: rich_results() };
    out.push(("typed_frames", [vec![0xfe], body(&results)].concat()));
    out.push(("typed_frames", [vec![0x40], body(&msgs[1])].concat()));
    out.push(("typed_frames", [vec![0x00], body(&hello(Some(to_hex(&[8; NONCE_LEN]))))].concat()));
    let iperf3 = br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":-1,"congestion_used":"cubic","streams":[{"id":1,"bytes":1000,"retransmits":18446744073709551615,"jitter":0.001,"errors":0,"packets":9,"start_time":0,"end_time":1.5}],"server_output_json":{"start":{"version":"iperf 3.12"},"intervals":[{"sum":{"bytes":1}}]}}"#;
    out.push(("typed_frames", [vec![0xff], iperf3.to_vec()].concat()));
    out
}

/// One side's results with every kind of field filled: intervals with TCP and UDP figures,
/// cost samples, foreign processes and an environment with interfaces and sysctls.
fn rich_results() -> SideResults {
    use crate::environment::{Environment, Fact, InterfaceEnvironment};
    use crate::results::{
        CostSample, CpuTimes, HostCost, IntervalSample, ProcessCpu, SocketReport, StreamResult,
        StreamRole, SystemCpu, TcpInternals,
    };
    let tcp = TcpInternals { rtt_us: 40, cwnd_segments: 10, ..TcpInternals::default() };
    let udp =
        crate::udp::UdpIntervalSample { datagrams: 5, lost: 1, out_of_order: 0, jitter_ns: 7 };
    let intervals = (0..3)
        .map(|i| IntervalSample {
            start_us: i * 1000,
            end_us: (i + 1) * 1000,
            bytes: 100 + i,
            omitted: i == 0,
            tcp: Some(tcp),
            udp: Some(udp),
            rr: None,
        })
        .collect();
    let cpu = CpuTimes { user_us: 5, system_us: 3, idle_us: 90, ..CpuTimes::default() };
    let system = SystemCpu { cpus: 2, all: cpu, busiest_cpu: 1, busiest: cpu };
    let cost = HostCost {
        window_us: 3000,
        process: Some(ProcessCpu { user_us: 1, system_us: 2 }),
        foreign_top: vec!["sshd (12): 40".into()],
        intervals: vec![CostSample {
            start_us: 0,
            end_us: 1000,
            process: Some(ProcessCpu { user_us: 1, system_us: 1 }),
            system: Some(system),
        }],
        unavailable: vec!["hardware cycle counters: not supported".into()],
        ..HostCost::default()
    };
    let mut env = Environment::unavailable("seed");
    env.sysctls.insert("net.core.rmem_max".into(), Fact::Value("212992".into()));
    env.interfaces.push(InterfaceEnvironment {
        name: "lo".into(),
        role: "test".into(),
        mtu_bytes: Fact::Value(65536),
        offloads: [("tso".to_string(), Fact::Value(true))].into_iter().collect(),
        ..InterfaceEnvironment::default()
    });
    SideResults {
        software: "seed".into(),
        streams: vec![StreamResult {
            id: 1,
            flow: crate::spec::Flow::ClientToServer,
            role: StreamRole::Sender,
            bytes: 303,
            omitted_bytes: 100,
            duration_us: 3000,
            omitted_us: 1000,
            intervals,
            socket: SocketReport { congestion: Some("cubic".into()), ..SocketReport::default() },
            retransmits: Some(0),
            tcp: Some(tcp),
            thread_cpu: None,
            thread_wait_us: None,
            udp_sender: None,
            udp_receiver: None,
            error: Some("did not finish".into()),
            latency: None,
        }],
        intervals_per_sample: 2,
        cost: Some(Box::new(cost)),
        environment: Some(Box::new(env)),
        ..SideResults::default()
    }
}

/// A server's answers to `linerate doctor`: hello with "environment" and "echo", its
/// environment, then where to send probes.
fn doctor_answers() -> Vec<u8> {
    let caps = ["tcp", "udp", "environment", "echo"];
    frames(&[
        Message::Hello {
            software: "seed".into(),
            capabilities: caps.iter().map(|c| c.to_string()).collect(),
            auth_nonce: None,
        },
        Message::Environment { environment: Box::default() },
        Message::EchoReady { port: 9, cookie: Cookie([7; 16]).to_hex() },
    ])
}

/// Mode byte (64-bit sequence numbers), then (advance, header) records with a reordering.
fn udp_records() -> Vec<u8> {
    let mut v = vec![1u8];
    for seq in [1u64, 2, 4, 3, 5, 5, 9] {
        v.push(10);
        let mut buf = vec![0u8; header_len(SeqWidth::Bits64)];
        let h = DatagramHeader { send_time: Duration::from_micros(seq * 100), seq };
        if h.encode(SeqWidth::Bits64, &mut buf).is_ok() {
            v.extend(buf);
        }
    }
    v
}

/// After the body's own cookie and parameters: TEST_END, the client's results, IPERF_DONE.
fn iperf3_tail() -> Vec<u8> {
    let results = br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":1,"streams":[{"id":1,"bytes":1000,"retransmits":0,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1}]}"#;
    let mut v = vec![4u8];
    v.extend((results.len() as u32).to_be_bytes());
    v.extend_from_slice(results);
    v.push(16);
    v
}
