//! A doctor session between the in-memory [`DoctorConn`] and [`ServerConn`], with simulated
//! time: environment exchange, the echo handshake, old servers, limits and deadlines.

use crate::machine::Machine;
use std::time::Duration;

use crate::ProtoError;
use crate::doctor::{DoctorConn, DoctorEvent};
use crate::environment::{Environment, Fact};
use crate::server::{DOCTOR_TIMEOUT, ServerConn, ServerEvent};
use crate::wire::{Cookie, Message, PROTOCOL_VERSION, encode_frame, preamble};

fn shuttle(c: &mut DoctorConn, s: &mut ServerConn, now: Duration) -> Vec<ServerEvent> {
    let mut events = Vec::new();
    for _ in 0..20 {
        let mut moved = false;
        if let Some(b) = c.poll_transmit() {
            moved = true;
            s.handle_input(&b, now).expect("server input");
        }
        while let Some(ev) = s.poll_event() {
            events.push(ev);
        }
        if let Some(b) = s.poll_transmit() {
            moved = true;
            c.handle_input(&b, now).expect("client input");
        }
        if !moved {
            break;
        }
    }
    events
}

fn server_env() -> Environment {
    Environment { kernel: Fact::Value("6.18".into()), ..Environment::default() }
}

#[test]
fn environment_then_echo_then_close() {
    let now = Duration::from_secs(10);
    let (mut c, mut s) = (DoctorConn::new("doc", now), ServerConn::new("srv", now));
    let ev = shuttle(&mut c, &mut s, now);
    assert_eq!(ev, [ServerEvent::EnvironmentRequested { client_software: "doc".into() }]);
    s.send_environment(server_env()).expect("in a doctor session");
    shuttle(&mut c, &mut s, now);
    let Some(DoctorEvent::Environment { environment, server_software }) = c.poll_event() else {
        panic!("no environment event")
    };
    assert_eq!(
        (environment.kernel.value().map(String::as_str), server_software.as_str()),
        (Some("6.18"), "srv")
    );
    assert!(c.is_idle() && c.server_echoes());
    c.request_echo(40000, now).expect("echo");
    assert_eq!(shuttle(&mut c, &mut s, now), [ServerEvent::EchoRequested { client_port: 40000 }]);
    s.echo_ready(41000, Cookie([3; 16])).expect("ready");
    shuttle(&mut c, &mut s, now);
    assert_eq!(
        c.poll_event(),
        Some(DoctorEvent::EchoReady { port: 41000, cookie: Cookie([3; 16]) })
    );
    assert!(c.request_echo(40001, now).is_err(), "one echo per session");
    s.handle_eof().expect("closing ends a doctor session");
    assert!(s.is_finished());
}

#[test]
fn an_old_server_is_told_apart_before_anything_is_sent() {
    let mut c = DoctorConn::new("doc", Duration::ZERO);
    let _ = c.poll_transmit();
    let mut old = preamble(PROTOCOL_VERSION).to_vec();
    let caps = ["tcp", "reverse", "bidir", "pacing", "zerocopy", "udp"];
    old.extend(encode_frame(&Message::Hello {
        software: "linerate 0.1.0".into(),
        capabilities: caps.iter().map(|c| c.to_string()).collect(),
        auth_nonce: None,
    }));
    let err = c.handle_input(&old, Duration::ZERO).unwrap_err();
    assert!(
        matches!(&err, ProtoError::Incompatible(m) if m.contains("capability \"environment\"")),
        "{err}"
    );
    assert_eq!(c.poll_transmit(), None, "no environment_request to a server that does not know it");
}

#[test]
fn doctor_sessions_are_bounded_and_strict() {
    let now = Duration::from_secs(1);
    let (mut c, mut s) = (DoctorConn::new("doc", now), ServerConn::new("srv", now));
    shuttle(&mut c, &mut s, now);
    assert!(s.echo_ready(1, Cookie([0; 16])).is_err(), "no echo before a request");
    let late = now + DOCTOR_TIMEOUT;
    assert!(s.poll_timeout().is_some_and(|t| t <= late));
    let err = s.handle_timeout(late).unwrap_err();
    assert!(matches!(err, ProtoError::TimedOut { .. }), "{err}");
    let mut s2 = ServerConn::new("srv", now);
    let mut bytes = preamble(PROTOCOL_VERSION).to_vec();
    bytes.extend(encode_frame(&Message::Hello {
        software: "x".into(),
        capabilities: vec![],
        auth_nonce: None,
    }));
    bytes.extend(encode_frame(&Message::EnvironmentRequest));
    bytes.extend(encode_frame(&Message::Start));
    assert!(s2.handle_input(&bytes, now).is_err(), "only echo_request follows a doctor request");
    assert!(s2.send_environment(server_env()).is_err(), "a failed session sends nothing");
}
