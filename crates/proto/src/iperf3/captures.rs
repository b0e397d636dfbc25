//! Golden-byte tests against control-connection bytes recorded from real iperf3 3.12 sessions
//! on loopback (`scripts/capture-iperf3.py` writes `crates/proto/testdata/iperf3-3.12/`).
//!
//! Each capture is replayed into our machines: the client's recorded bytes into
//! [`Iperf3Server`], the server's into [`Iperf3Client`]. What we send back must have the same
//! shape as what the real peer sent (the same state bytes in the same order, JSON where it sent
//! JSON), and our parameter JSON for the same test must equal the captured one byte for byte.

use crate::machine::Machine;
use std::time::Duration;

use serde_json::Value;

use crate::iperf3::{
    COOKIE_LEN, ClientExtras, Iperf3Client, Iperf3Event, Iperf3Server, Iperf3ServerEvent, State,
    make_cookie, params, request_from_params,
};

const T0: Duration = Duration::ZERO;

const CAPTURES: [(&str, &str); 6] = [
    ("upload", include_str!("../../testdata/iperf3-3.12/upload.json")),
    ("reverse-p2", include_str!("../../testdata/iperf3-3.12/reverse-p2.json")),
    ("bidir", include_str!("../../testdata/iperf3-3.12/bidir.json")),
    ("bytes", include_str!("../../testdata/iperf3-3.12/bytes.json")),
    ("udp", include_str!("../../testdata/iperf3-3.12/udp.json")),
    ("udp-64bit", include_str!("../../testdata/iperf3-3.12/udp-64bit.json")),
];

/// One unit of a control conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Cookie,
    State(u8),
    Json(Vec<u8>),
}

impl Token {
    fn bytes(&self, cookie: &[u8]) -> Vec<u8> {
        match self {
            Token::Cookie => cookie.to_vec(),
            Token::State(b) => vec![*b],
            Token::Json(j) => {
                let mut f = (j.len() as u32).to_be_bytes().to_vec();
                f.extend_from_slice(j);
                f
            }
        }
    }

    /// The shape: which state, or "some JSON".
    fn shape(&self) -> String {
        match self {
            Token::Cookie => "cookie".into(),
            Token::State(b) => format!("{:?}", State::from_byte(*b).expect("state")),
            Token::Json(_) => "json".into(),
        }
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// Splits a conversation: JSON frames follow the client's cookie (parameters) and TEST_END
/// (its results), and the server's EXCHANGE_RESULTS (its results).
fn tokens(mut b: &[u8], from_client: bool) -> Vec<Token> {
    let mut out = Vec::new();
    if from_client {
        out.push(Token::Cookie);
        b = &b[COOKIE_LEN..];
    }
    let mut json_next = from_client;
    while !b.is_empty() {
        if json_next {
            let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            out.push(Token::Json(b[4..4 + len].to_vec()));
            b = &b[4 + len..];
            json_next = false;
            continue;
        }
        let s = b[0];
        out.push(Token::State(s));
        b = &b[1..];
        json_next = s == State::TestEnd.byte() || s == State::ExchangeResults.byte();
    }
    out
}

struct Capture {
    name: &'static str,
    client: Vec<Token>,
    server: Vec<Token>,
    cookie: Vec<u8>,
}

fn captures() -> Vec<Capture> {
    CAPTURES
        .iter()
        .map(|(name, text)| {
            let v: Value = serde_json::from_str(text).expect("capture JSON");
            let c2s = hex(v["c2s_hex"].as_str().expect("c2s"));
            let s2c = hex(v["s2c_hex"].as_str().expect("s2c"));
            Capture {
                name,
                cookie: c2s[..COOKIE_LEN].to_vec(),
                client: tokens(&c2s, true),
                server: tokens(&s2c, false),
            }
        })
        .collect()
}

fn shapes(t: &[Token]) -> Vec<String> {
    t.iter().map(Token::shape).collect()
}

/// Our JSON results, for either machine to send.
const OURS: &str = r#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":-1,"streams":[]}"#;

#[test]
fn our_server_answers_a_real_client_as_a_real_server_did() {
    for cap in captures() {
        let mut s = Iperf3Server::new(T0);
        let mut sent = Vec::new();
        for tok in &cap.client {
            s.handle_input(&tok.bytes(&cap.cookie), T0)
                .unwrap_or_else(|e| panic!("{}: {e}", cap.name));
            while let Some(ev) = s.poll_event() {
                match ev {
                    Iperf3ServerEvent::TestRequested(r) => {
                        let n = r.expect("valid request").spec.connection_count();
                        s.accept(T0).expect("accept");
                        for _ in 0..n {
                            s.stream_arrived(T0).expect("stream");
                        }
                    }
                    Iperf3ServerEvent::TestEnd => s.exchange_results(OURS.into(), T0).expect("x"),
                    _ => {}
                }
            }
            sent.extend(s.poll_transmit().unwrap_or_default());
        }
        assert!(s.is_finished(), "{}", cap.name);
        assert_eq!(shapes(&tokens(&sent, false)), shapes(&cap.server), "{}", cap.name);
    }
}

#[test]
fn our_client_talks_to_a_real_server_as_a_real_client_did() {
    for cap in captures() {
        let Token::Json(captured_params) = &cap.client[1] else { panic!("params") };
        let req = request_from_params(captured_params).expect("captured params are valid");
        let ours = params(&req.spec, "3.12", ClientExtras::default()).expect("params");
        // linerate always asks for 64-bit UDP counters; a plain 3.12 -u does not.
        let mut comparable: Value = serde_json::from_str(&ours).expect("json");
        if !req.udp_counters_64bit
            && let Some(m) = comparable.as_object_mut()
        {
            m.remove("udp_counters_64bit");
        }
        assert_eq!(
            comparable.to_string().as_bytes(),
            &captured_params[..],
            "{}: parameter JSON",
            cap.name
        );
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(&cap.cookie);
        let mut c = Iperf3Client::new(req.spec, make_cookie(&[1; 36]), ours, T0);
        let mut sent = c.poll_transmit().expect("cookie");
        for tok in &cap.server {
            c.handle_input(&tok.bytes(&cookie), T0).unwrap_or_else(|e| panic!("{}: {e}", cap.name));
            while let Some(ev) = c.poll_event() {
                match ev {
                    Iperf3Event::Start => c.test_end(T0),
                    Iperf3Event::ResultsRequested => c.send_results(OURS, T0).expect("send"),
                    _ => {}
                }
            }
            sent.extend(c.poll_transmit().unwrap_or_default());
        }
        assert!(c.is_finished(), "{}", cap.name);
        assert_eq!(shapes(&tokens(&sent, true)), shapes(&cap.client), "{}", cap.name);
    }
}

#[test]
fn captured_results_parse() {
    for cap in captures() {
        for t in cap.client.iter().chain(&cap.server).skip(2) {
            if let Token::Json(j) = t {
                let r = crate::iperf3::Iperf3Results::parse(j).expect("results");
                assert!(!r.streams.is_empty(), "{}", cap.name);
            }
        }
    }
}
