//! The requester's side of a pair test (`linerate mesh`), as a sans-IO state machine: ask an
//! agent to run a test, as a client, against another agent, and take the record it sends back.
//!
//! After the hellos the requester checks that the server is an agent (capability `agent`)
//! that requires a key (its hello carries a nonce), answers the challenge with its key, and
//! sends `pair_test_request`. Then it waits: the agent says `queued` (position 0) at least
//! every [`crate::server::QUEUE_HEARTBEAT`] while its test runs, and finally `pair_result`
//! ([`PairEvent::Result`]) or `refused`. Each heartbeat restarts a
//! [`HANDSHAKE_TIMEOUT`] silence deadline; the whole wait is bounded by the test's own
//! deadline (duration, omit and the run grace) plus [`PAIR_SLACK`] for the agent's connection
//! and handshake, so an agent that heartbeats for ever holds the requester only until then.
//!
//! Why both ends need the key, and the target too, is the amplifier problem: a server that any
//! client could send traffic elsewhere would be a traffic cannon (`docs/SECURITY.md`).

use std::time::Duration;

use crate::auth::{ClientKey, NONCE_LEN, Psk};
use crate::conn::{Core, Deadline, HANDSHAKE_TIMEOUT, Input, check_version, negotiate, unexpected};
use crate::error::ProtoError;
use crate::machine::{Io, Machine};
use crate::spec::TestSpec;
use crate::wire::{Capability, MAX_FRAME_RESULTS, MAX_PAIR_TARGET, Message};

/// What the whole pair test may take beyond its own run deadline: the agent's connection to
/// the target, both handshakes and the streams connecting.
pub const PAIR_SLACK: Duration = Duration::from_secs(30);

/// What the requester's driver acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum PairEvent {
    /// The agent is running the test (a heartbeat).
    Running,
    /// The agent's record of the test, as JSON; the session is over.
    Result(serde_json::Value),
}

#[derive(Debug)]
enum State {
    Greeting,
    Waiting { limit: Deadline },
    Done,
}

/// The requester's control-connection state machine.
#[derive(Debug)]
pub struct PairConn {
    core: Core<PairEvent>,
    state: State,
    target: String,
    spec: TestSpec,
    key: ClientKey,
}

impl PairConn {
    /// A request that agent runs `spec` against `target` (`host:port`), proving `key` with the
    /// driver's fresh random `nonce`. Fails on an invalid spec or target.
    pub fn new(
        target: &str,
        spec: TestSpec,
        software: &str,
        key: Psk,
        nonce: [u8; NONCE_LEN],
        now: Duration,
    ) -> Result<Self, ProtoError> {
        spec.validate()?;
        if target.is_empty() || target.len() > MAX_PAIR_TARGET {
            return Err(ProtoError::Violation(format!(
                "a pair test's target must be HOST:PORT of at most {MAX_PAIR_TARGET} bytes"
            )));
        }
        let greeting = Deadline::after(now, HANDSHAKE_TIMEOUT, "waiting for the agent's hello");
        Ok(Self {
            core: Core::new(software, None, greeting),
            state: State::Greeting,
            target: target.to_string(),
            spec,
            key: (key, nonce),
        })
    }

    fn drain(&mut self, now: Duration) -> Result<(), ProtoError> {
        while let Some(input) = self.core.wire.next_input()? {
            let msg = match input {
                Input::Preamble(v) => {
                    check_version(v)?;
                    continue;
                }
                Input::Message(m) => m,
            };
            self.on_message(msg, now)?;
        }
        Ok(())
    }

    fn on_message(&mut self, msg: Message, now: Duration) -> Result<(), ProtoError> {
        match msg {
            Message::Refused { reason } => return Err(ProtoError::Refused(reason)),
            Message::Abort { reason, message } => {
                return Err(ProtoError::Aborted { reason, message });
            }
            _ => {}
        }
        match std::mem::replace(&mut self.state, State::Done) {
            State::Greeting => self.on_hello(msg, now),
            State::Waiting { limit } => match msg {
                Message::Queued { .. } => {
                    limit.check(now)?;
                    let silence = Deadline::after(
                        now,
                        HANDSHAKE_TIMEOUT,
                        "waiting for the agent's pair test",
                    );
                    self.core.io.deadline =
                        Some(if silence.at <= limit.at { silence } else { limit.clone() });
                    self.state = State::Waiting { limit };
                    self.core.io.emit(PairEvent::Running);
                    Ok(())
                }
                Message::PairResult { record } => {
                    self.core.io.deadline = None;
                    self.core.io.emit(PairEvent::Result(record));
                    Ok(())
                }
                other => Err(unexpected(&other, "waiting for the agent's pair test")),
            },
            State::Done => Err(unexpected(&msg, "finished")),
        }
    }

    fn on_hello(&mut self, msg: Message, now: Duration) -> Result<(), ProtoError> {
        let Message::Hello { software, capabilities, auth_nonce } = msg else {
            return Err(unexpected(&msg, "waiting for the agent's hello"));
        };
        let caps = negotiate(&capabilities);
        let Some(nonce) = auth_nonce.filter(|_| caps.contains(&Capability::Agent)) else {
            return Err(ProtoError::Refused(format!(
                "{software} is not a linerate agent with a key: start it with `linerate server \
                 --agent --psk-file FILE` (a mesh asks agents to test each other)"
            )));
        };
        let auth = crate::auth::answer_challenge(Some(&self.key), &nonce)?;
        self.core.send(&auth);
        self.core.send(&Message::PairTestRequest {
            target: self.target.clone(),
            spec: self.spec.clone(),
        });
        self.core.wire.set_max_frame(MAX_FRAME_RESULTS);
        let run = self.spec.duration_ms().unwrap_or(0).saturating_add(self.spec.omit_ms);
        let total = Duration::from_millis(run).saturating_add(crate::RUN_GRACE + PAIR_SLACK);
        let limit = Deadline::after(now, total, "waiting for the agent's pair test to end");
        self.core.io.deadline = Some(Deadline::after(
            now,
            HANDSHAKE_TIMEOUT,
            "waiting for the agent to start the test",
        ));
        self.state = State::Waiting { limit };
        Ok(())
    }
}

impl Machine for PairConn {
    type Event = PairEvent;

    fn io(&self) -> &Io<PairEvent> {
        &self.core.io
    }

    fn io_mut(&mut self) -> &mut Io<PairEvent> {
        &mut self.core.io
    }

    fn absorb(&mut self, bytes: &[u8], now: Duration) -> Result<(), ProtoError> {
        self.core.wire.push(bytes);
        self.drain(now)
    }

    fn on_close(&mut self) -> Result<(), ProtoError> {
        match self.state {
            State::Done => Ok(()),
            State::Greeting => {
                Err(ProtoError::Closed("before its hello (is this linerate?)".into()))
            }
            State::Waiting { .. } => {
                Err(ProtoError::Closed("before sending the pair test's record".into()))
            }
        }
    }

    /// True once the record arrived.
    fn is_finished(&self) -> bool {
        matches!(self.state, State::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{ServerConn, ServerEvent};

    const T0: Duration = Duration::ZERO;

    fn key(byte: u8) -> Psk {
        Psk::new(vec![byte; 32]).expect("a key")
    }

    /// Moves every byte each way until neither side has more to say.
    fn exchange(
        c: &mut PairConn,
        s: &mut ServerConn,
    ) -> (Result<(), ProtoError>, Result<(), ProtoError>) {
        let (mut rc, mut rs) = (Ok(()), Ok(()));
        for _ in 0..8 {
            if let Some(b) = c.poll_transmit() {
                rs = rs.and(s.handle_input(&b, T0));
            }
            if let Some(b) = s.poll_transmit() {
                rc = rc.and(c.handle_input(&b, T0));
            }
        }
        (rc, rs)
    }

    fn request(k: Psk) -> PairConn {
        PairConn::new("10.0.0.2:5201", TestSpec::default_tcp(), "req", k, [1; NONCE_LEN], T0)
            .expect("a request")
    }

    #[test]
    fn an_agent_takes_a_pair_request_from_a_client_with_its_key_and_sends_the_record() {
        let mut s = ServerConn::agent("agent", T0, key(7), [2; NONCE_LEN]);
        let mut c = request(key(7));
        let (rc, rs) = exchange(&mut c, &mut s);
        assert_eq!((rc, rs), (Ok(()), Ok(())));
        let Some(ServerEvent::PairTestRequested { target, .. }) = s.poll_event() else {
            panic!("no pair request");
        };
        assert_eq!(target, "10.0.0.2:5201");
        s.pair_running().expect("heartbeat");
        s.send_pair_result(serde_json::json!({"version": 1})).expect("result");
        let _ = exchange(&mut c, &mut s);
        assert_eq!(c.poll_event(), Some(PairEvent::Running));
        assert_eq!(c.poll_event(), Some(PairEvent::Result(serde_json::json!({"version": 1}))));
        assert!(c.is_finished() && s.is_finished());
    }

    #[test]
    fn a_requester_without_the_agents_key_is_refused_before_its_request_is_read() {
        let mut s = ServerConn::agent("agent", T0, key(7), [2; NONCE_LEN]);
        let mut c = request(key(8));
        let (rc, rs) = exchange(&mut c, &mut s);
        assert!(matches!(rs, Err(ProtoError::Refused(_))), "{rs:?}");
        let Err(ProtoError::Refused(why)) = rc else { panic!("{rc:?}") };
        assert!(why.contains("authentication failed"), "{why}");
        assert_eq!(s.poll_event(), None);
    }

    #[test]
    fn a_server_that_is_not_an_agent_is_never_sent_a_pair_request() {
        // A keyed plain server: the requester stops at its hello.
        let mut s = ServerConn::with_psk("plain", T0, key(7), [2; NONCE_LEN]);
        let mut c = request(key(7));
        let (rc, _) = exchange(&mut c, &mut s);
        let Err(ProtoError::Refused(why)) = rc else { panic!("{rc:?}") };
        assert!(why.contains("not a linerate agent") && why.contains("--agent"), "{why}");
        assert_eq!(s.poll_event(), None);
    }

    #[test]
    fn a_plain_server_refuses_a_pair_request_naming_the_flag() {
        // A client that sends the request anyway (an older or hostile one).
        let mut s = ServerConn::new("plain", T0);
        let mut bytes = crate::wire::preamble(crate::wire::PROTOCOL_VERSION).to_vec();
        let hello = Message::Hello { software: "x".into(), capabilities: vec![], auth_nonce: None };
        bytes.extend(crate::wire::encode_frame(&hello));
        let req = Message::PairTestRequest { target: "h:1".into(), spec: TestSpec::default_tcp() };
        bytes.extend(crate::wire::encode_frame(&req));
        let r = s.handle_input(&bytes, T0);
        assert!(
            matches!(r, Err(ProtoError::Incompatible(ref why)) if why.contains("--agent")),
            "{r:?}"
        );
        assert_eq!(s.poll_event(), None);
    }

    #[test]
    fn a_silent_agent_and_an_endless_one_both_time_out() {
        let mut s = ServerConn::agent("agent", T0, key(7), [2; NONCE_LEN]);
        let mut c = request(key(7));
        let _ = exchange(&mut c, &mut s);
        let silence = c.poll_timeout().expect("a deadline");
        assert!(c.handle_timeout(silence).is_err());
        // Heartbeats every second keep it going, but not past the test's bound.
        let mut s = ServerConn::agent("agent", T0, key(7), [2; NONCE_LEN]);
        let mut c = request(key(7));
        let _ = exchange(&mut c, &mut s);
        let mut now = T0;
        let end = loop {
            now += Duration::from_secs(1);
            s.pair_running().expect("heartbeat");
            let b = s.poll_transmit().expect("bytes");
            if c.handle_input(&b, now).is_err() {
                break now;
            }
            assert!(now < Duration::from_secs(600), "never timed out");
        };
        assert!(end > Duration::from_secs(60) && end < Duration::from_secs(90), "{end:?}");
    }
}
