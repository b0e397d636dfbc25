//! The server side of one control connection (one test), as a sans-IO state machine.
//!
//! Call order for a driver:
//! 1. [`ServerConn::new`] queues the preamble and hello.
//! 2. Loop as for the client (`handle_input`, `poll_transmit`, `poll_event`, timeouts).
//! 3. On [`ServerEvent::TestRequested`] (the spec is already validated and
//!    capability-checked) call [`ServerConn::accept`] with a fresh random cookie, or
//!    [`ServerConn::refuse`].
//! 4. For each data connection presenting the cookie call [`ServerConn::attach_stream`];
//!    when all are attached the machine sends `start` and emits [`ServerEvent::Start`]. For a
//!    held start (`spec.held_start`, a fleet) it sends `ready` instead and starts when the
//!    client's `go` arrives, within [`HELD_TIMEOUT`].
//! 5. On [`ServerEvent::PeerStop`] stop the local senders. When every local stream is done,
//!    call [`ServerConn::send_results`]. [`ServerEvent::Finished`] ends the test.
//!
//! A doctor session (`linerate doctor HOST`) sends `environment_request` instead of a test
//! request: the machine emits [`ServerEvent::EnvironmentRequested`] (answer with
//! [`ServerConn::send_environment`]), then at most one [`ServerEvent::EchoRequested`] (answer
//! with [`ServerConn::echo_ready`] or [`ServerConn::refuse`]), and finishes when the client
//! closes or [`DOCTOR_TIMEOUT`] passes.
//!
//! An agent (`linerate server --agent`, built with [`ServerConn::agent`]: always with a key)
//! advertises the `agent` capability and also takes a `pair_test_request` from an
//! authenticated client: the machine emits [`ServerEvent::PairTestRequested`]; the driver runs
//! the test against the target as a client, calls [`ServerConn::pair_running`] at least every
//! [`QUEUE_HEARTBEAT`] meanwhile, then [`ServerConn::send_pair_result`] (or `refuse`). A server
//! that is not an agent refuses the request, naming the flag.
//!
//! Errors leave the machine failed; the driver flushes `poll_transmit` (which may hold a
//! `refused` frame explaining the error to the client) and closes.

use std::time::Duration;

use crate::auth::{NONCE_LEN, Psk, from_hex, to_hex};
use crate::conn::{
    Core, Deadline, HANDSHAKE_TIMEOUT, HELD_TIMEOUT, Input, check_version, missing_cap, negotiate,
    run_deadline, streams_deadline, unexpected,
};
use crate::error::ProtoError;
use crate::machine::{Io, LargeFrame, Machine};
use crate::results::SideResults;
use crate::spec::TestSpec;
use crate::wire::{
    AbortReason, Capability, Cookie, GRANT_ABOVE, MAX_FRAME_RESULTS, Message, StopReason,
};

/// What the server driver must act on. One event per request or message, taken at once, so
/// the test spec it carries is not worth a box.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum ServerEvent {
    /// A valid test request; answer with `accept` or `refuse`.
    TestRequested {
        /// The requested test (validated).
        spec: TestSpec,
        /// The client's software string.
        client_software: String,
    },
    /// Every data stream is attached and `start` was sent: start the streams and the clock.
    Start,
    /// The client asks the server's senders to stop.
    PeerStop(StopReason),
    /// The client's final figures.
    PeerResults(Box<SideResults>),
    /// Both results are exchanged (or a doctor session ended).
    Finished,
    /// A doctor asks for this host's environment: call `send_environment`.
    EnvironmentRequested {
        /// The client's software string.
        client_software: String,
    },
    /// An authenticated client asks this agent to run `spec` against the agent at `target`
    /// (`host:port`, not resolved or checked yet): run it as a client, requiring the target
    /// to be an agent with the same key.
    PairTestRequested {
        /// Where to send the test.
        target: String,
        /// The test (validated).
        spec: TestSpec,
        /// The requester's software string.
        client_software: String,
    },
    /// A doctor asks for path-MTU probes from `client_port` (on the control connection's
    /// client address) to be echoed: bind a UDP socket, then call `echo_ready`.
    EchoRequested {
        /// The client's UDP source port.
        client_port: u16,
    },
}

/// How long a doctor session may last from its request: time for a path-MTU search, and a
/// bound on how long an echo socket stays open.
pub const DOCTOR_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a data connection could not be attached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The test is not waiting for streams.
    #[error("the test is not accepting data connections now")]
    NotAccepting,
    /// The id is not part of the test.
    #[error("stream id {0} is not part of this test")]
    UnknownStream(u32),
    /// The id was already attached.
    #[error("stream id {0} is already connected")]
    Duplicate(u32),
}

/// How often a queued client hears `queued` again (it times out after
/// [`crate::HANDSHAKE_TIMEOUT`] without one).
pub const QUEUE_HEARTBEAT: Duration = Duration::from_secs(1);

#[derive(Debug)]
enum State {
    Greeting,
    AwaitingAuth {
        software: String,
        caps: Vec<Capability>,
    },
    AwaitingRequest {
        software: String,
        caps: Vec<Capability>,
    },
    Deciding,
    AwaitingStreams {
        attached: Vec<bool>,
        missing: u32,
    },
    /// A held start: every stream is attached and `ready` was sent; waiting for `go`.
    Held,
    Running,
    /// A doctor session; `echo` once an echo was requested (only one per session).
    Doctor {
        echo: bool,
    },
    /// An agent running a pair test for the client.
    Pairing,
    Done,
}

/// The server's state machine for one control connection.
#[derive(Debug)]
pub struct ServerConn {
    core: Core<ServerEvent>,
    state: State,
    spec: Option<TestSpec>,
    /// The client understands `queued`.
    can_queue: bool,
    /// The key and the nonce sent in our hello, when clients must authenticate.
    auth: Option<(Psk, [u8; NONCE_LEN])>,
    /// Started as an agent: takes pair test requests.
    agent: bool,
}

impl ServerConn {
    /// A new connection; the whole greeting must complete within the handshake timeout.
    pub fn new(software: &str, now: Duration) -> Self {
        Self::build(software, now, None)
    }

    /// A new connection whose client must prove it knows `key`, answering the fresh random
    /// `nonce` (from the driver) that goes out in our hello. Until it does, the only thing
    /// the client can get is a `refused`.
    pub fn with_psk(software: &str, now: Duration, key: Psk, nonce: [u8; NONCE_LEN]) -> Self {
        Self::build(software, now, Some((key, nonce)))
    }

    /// An agent's connection: as [`ServerConn::with_psk`] (an agent always has a key), and
    /// it advertises `agent` and takes pair test requests from a client that proved the key.
    pub fn agent(software: &str, now: Duration, key: Psk, nonce: [u8; NONCE_LEN]) -> Self {
        Self::build_as(software, now, Some((key, nonce)), true)
    }

    fn build(software: &str, now: Duration, auth: Option<(Psk, [u8; NONCE_LEN])>) -> Self {
        Self::build_as(software, now, auth, false)
    }

    fn build_as(
        software: &str,
        now: Duration,
        auth: Option<(Psk, [u8; NONCE_LEN])>,
        agent: bool,
    ) -> Self {
        let greeting = Deadline::after(
            now,
            HANDSHAKE_TIMEOUT,
            "waiting for the client's hello and test request",
        );
        let auth_nonce = auth.as_ref().map(|(_, n)| to_hex(n));
        let mut caps = crate::conn::own_caps();
        if agent {
            caps.push(Capability::Agent.as_str().to_string());
        }
        let mut core = Core::with_caps(software, auth_nonce, greeting, caps);
        // A results frame larger than the handshake cap waits for the driver's grant (its
        // memory, from the server's shared frame budget) before it is buffered.
        core.wire.decoder().grant_above(GRANT_ABOVE);
        Self { auth, core, state: State::Greeting, spec: None, can_queue: false, agent }
    }

    /// Tells the client its pair test is still running (`queued`, position 0): at least every
    /// [`QUEUE_HEARTBEAT`], or it gives up.
    pub fn pair_running(&mut self) -> Result<(), ProtoError> {
        if !matches!(self.state, State::Pairing) || self.core.failed() {
            return Err(ProtoError::Violation("pair_running outside a pair test".into()));
        }
        self.core.send(&Message::Queued { position: 0, wait_ms: None });
        Ok(())
    }

    /// Sends the pair test's record; the session is over.
    pub fn send_pair_result(&mut self, record: serde_json::Value) -> Result<(), ProtoError> {
        if !matches!(self.state, State::Pairing) || self.core.failed() {
            return Err(ProtoError::Violation("pair_result outside a pair test".into()));
        }
        self.core.send(&Message::PairResult { record });
        self.finish();
        Ok(())
    }

    /// The accepted spec, once there is one.
    pub fn spec(&self) -> Option<&TestSpec> {
        self.spec.as_ref()
    }

    fn drain_input(&mut self, now: Duration) -> Result<(), ProtoError> {
        while let Some(input) = self.core.wire.next_input()? {
            self.on_input(input, now)?;
        }
        Ok(())
    }

    /// Accepts the requested test; data connections must present `cookie`.
    pub fn accept(&mut self, cookie: Cookie, now: Duration) -> Result<(), ProtoError> {
        let pending = matches!(self.state, State::Deciding) && !self.core.failed();
        let Some(spec) = self.spec.as_ref().filter(|_| pending) else {
            return Err(ProtoError::Violation("accept called without a pending request".into()));
        };
        let n = spec.connection_count();
        self.core.io.deadline =
            Some(streams_deadline(now, spec, "waiting for the data streams to connect"));
        self.state = State::AwaitingStreams { attached: vec![false; n as usize], missing: n };
        self.core.wire.set_max_frame(MAX_FRAME_RESULTS);
        self.core.send(&Message::TestAccepted { cookie: cookie.to_hex() });
        Ok(())
    }

    /// True when the client can wait in a queue (it said so in its hello).
    pub fn can_queue(&self) -> bool {
        self.can_queue
    }

    /// Tells the client its pending request waits at `position` (1 = next), about `wait`.
    /// Call again at least every [`QUEUE_HEARTBEAT`] until `accept` or `refuse`.
    pub fn queue(&mut self, position: u32, wait: Option<Duration>) -> Result<(), ProtoError> {
        if !matches!(self.state, State::Deciding) || self.core.failed() || !self.can_queue {
            return Err(ProtoError::Violation(
                "queue needs a pending request from a client that can queue".into(),
            ));
        }
        let wait_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX));
        self.core.send(&Message::Queued { position, wait_ms });
        Ok(())
    }

    /// Refuses the requested test with a sentence the client prints; the connection is over.
    pub fn refuse(&mut self, reason: &str) {
        self.core.farewell(&Message::Refused { reason: reason.to_string() });
        self.core.io.fail();
    }

    /// Would a data connection for stream `id` be attached now?
    pub fn expects_stream(&self, id: u32) -> Result<(), AttachError> {
        let State::AwaitingStreams { attached, .. } = &self.state else {
            return Err(AttachError::NotAccepting);
        };
        let idx = (id as usize).checked_sub(1).ok_or(AttachError::UnknownStream(id))?;
        match attached.get(idx) {
            None => Err(AttachError::UnknownStream(id)),
            Some(true) => Err(AttachError::Duplicate(id)),
            Some(false) => Ok(()),
        }
    }

    /// Records that the data connection for stream `id` arrived. When the last one arrives,
    /// sends `start` and emits [`ServerEvent::Start`].
    pub fn attach_stream(&mut self, id: u32, now: Duration) -> Result<(), AttachError> {
        self.expects_stream(id)?;
        let State::AwaitingStreams { attached, missing } = &mut self.state else {
            return Err(AttachError::NotAccepting);
        };
        attached[id as usize - 1] = true;
        *missing -= 1;
        if *missing == 0 {
            if self.spec.as_ref().is_some_and(|s| s.held_start) {
                self.state = State::Held;
                self.core.io.deadline = Some(Deadline::after(
                    now,
                    HELD_TIMEOUT,
                    "waiting for the client's go (a fleet start)",
                ));
                self.core.send(&Message::Ready);
            } else {
                self.start(now);
            }
        }
        Ok(())
    }

    fn start(&mut self, now: Duration) {
        self.state = State::Running;
        self.core.io.deadline = self.spec.as_ref().and_then(|s| run_deadline(now, s));
        self.core.send(&Message::Start);
        self.core.io.emit(ServerEvent::Start);
    }

    /// Sends this side's results (once every local stream is done).
    pub fn send_results(&mut self, results: SideResults, now: Duration) -> Result<(), ProtoError> {
        if !matches!(self.state, State::Running) || self.core.failed() {
            return Err(ProtoError::Violation("results can only be sent while running".into()));
        }
        if self.core.send_results(results, now, "waiting for the client's results")? {
            self.finish();
        }
        Ok(())
    }

    /// Aborts the test, telling the client why (e.g. the server is shutting down).
    ///
    /// Also valid after an error (the machine is then failed): the client learns why the
    /// connection is closing. Sent at most once, and never after a refusal.
    pub fn abort(&mut self, reason: AbortReason, message: &str) {
        if !matches!(self.state, State::Done) {
            self.core.farewell(&Message::Abort { reason, message: message.to_string() });
        }
        self.core.io.fail();
    }

    /// Sends this host's environment to a doctor.
    pub fn send_environment(&mut self, environment: crate::Environment) -> Result<(), ProtoError> {
        if !matches!(self.state, State::Doctor { .. }) || self.core.failed() {
            return Err(ProtoError::Violation("environment sent outside a doctor session".into()));
        }
        self.core.send(&Message::Environment { environment: Box::new(environment) });
        Ok(())
    }

    /// Tells a doctor where to send its probes.
    pub fn echo_ready(&mut self, port: u16, cookie: Cookie) -> Result<(), ProtoError> {
        if !matches!(self.state, State::Doctor { echo: true }) || self.core.failed() {
            return Err(ProtoError::Violation("echo_ready without an echo request".into()));
        }
        self.core.send(&Message::EchoReady { port, cookie: cookie.to_hex() });
        Ok(())
    }

    fn on_input(&mut self, input: Input, now: Duration) -> Result<(), ProtoError> {
        let msg = match input {
            Input::Preamble(v) => return check_version(v),
            Input::Message(m) => m,
        };
        if let Message::Abort { reason, message } = msg {
            return Err(ProtoError::Aborted { reason, message });
        }
        match &self.state {
            State::Greeting => self.on_hello(msg),
            State::AwaitingRequest { .. } if msg == Message::EnvironmentRequest => {
                self.on_doctor(now)
            }
            State::AwaitingAuth { .. } => self.on_auth(msg),
            State::AwaitingRequest { .. } if matches!(msg, Message::PairTestRequest { .. }) => {
                self.on_pair(msg)
            }
            State::AwaitingRequest { .. } => self.on_request(msg),
            State::Pairing => Err(unexpected(&msg, "running a pair test")),
            State::Deciding => Err(unexpected(&msg, "deciding on the test request")),
            State::AwaitingStreams { .. } => self.on_early(msg),
            State::Held if msg == Message::Go => {
                self.start(now);
                Ok(())
            }
            State::Held => Err(unexpected(&msg, "waiting for the client's go")),
            State::Running => self.on_running(msg),
            State::Doctor { echo } => {
                let Message::EchoRequest { client_port } = msg else {
                    return Err(unexpected(&msg, "answering a doctor"));
                };
                if *echo {
                    return Err(ProtoError::Violation("a second echo_request".into()));
                }
                self.state = State::Doctor { echo: true };
                self.core.io.emit(ServerEvent::EchoRequested { client_port });
                Ok(())
            }
            State::Done => Err(unexpected(&msg, "finished")),
        }
    }

    fn on_hello(&mut self, msg: Message) -> Result<(), ProtoError> {
        let Message::Hello { software, capabilities, .. } = msg else {
            return Err(unexpected(&msg, "waiting for the client's hello"));
        };
        let caps = negotiate(&capabilities);
        self.can_queue = caps.contains(&Capability::Queue);
        self.state = if self.auth.is_some() {
            State::AwaitingAuth { software, caps }
        } else {
            State::AwaitingRequest { software, caps }
        };
        Ok(())
    }

    /// Only a correct `auth` moves on; anything else gets one refusal that says what the
    /// client lacks, never why a tag was wrong.
    fn on_auth(&mut self, msg: Message) -> Result<(), ProtoError> {
        let verified = match (&msg, &self.auth) {
            (Message::Auth { client_nonce, tag }, Some((key, nonce))) => {
                let client_nonce = from_hex::<NONCE_LEN>(client_nonce);
                let tag = from_hex::<32>(tag);
                matches!((client_nonce, tag), (Some(c), Some(t)) if key.verify(nonce, &c, &t))
            }
            _ => false,
        };
        if !verified {
            let why = if matches!(msg, Message::Auth { .. }) {
                "authentication failed: the client's key is not this server's (--psk-file)"
            } else {
                "this server requires a pre-shared key: run the client with --psk-file"
            };
            self.refuse(why);
            return Err(ProtoError::Refused(why.into()));
        }
        let State::AwaitingAuth { software, caps } =
            std::mem::replace(&mut self.state, State::Deciding)
        else {
            return Err(ProtoError::Violation("internal: auth outside its state".into()));
        };
        self.state = State::AwaitingRequest { software, caps };
        Ok(())
    }

    fn on_doctor(&mut self, now: Duration) -> Result<(), ProtoError> {
        let State::AwaitingRequest { software, .. } =
            std::mem::replace(&mut self.state, State::Doctor { echo: false })
        else {
            return Err(ProtoError::Violation("internal: doctor outside awaiting state".into()));
        };
        self.core.io.deadline = Some(Deadline::after(
            now,
            DOCTOR_TIMEOUT,
            "the doctor session to end (it may last 30 s)",
        ));
        self.core.io.emit(ServerEvent::EnvironmentRequested { client_software: software });
        Ok(())
    }

    fn on_request(&mut self, msg: Message) -> Result<(), ProtoError> {
        let Message::TestRequest { spec } = msg else {
            return Err(unexpected(&msg, "waiting for the test request"));
        };
        let State::AwaitingRequest { software, caps } =
            std::mem::replace(&mut self.state, State::Deciding)
        else {
            return Err(ProtoError::Violation("internal: request outside awaiting state".into()));
        };
        self.check_spec(&spec, &caps)?;
        self.core.io.deadline = None;
        self.spec = Some(spec.clone());
        self.core.io.emit(ServerEvent::TestRequested { spec, client_software: software });
        Ok(())
    }

    /// Refuses a test (a request's, a pair test's) that is invalid or needs a capability the
    /// client lacks.
    fn check_spec(&mut self, spec: &TestSpec, caps: &[Capability]) -> Result<(), ProtoError> {
        if let Err(e) = spec.validate() {
            self.refuse(&format!("invalid test: {e}"));
            return Err(ProtoError::Spec(e));
        }
        if let Some(why) = missing_cap(spec, caps, "the client") {
            self.refuse(&why);
            return Err(ProtoError::Incompatible(why));
        }
        Ok(())
    }

    /// A pair test request: only an agent takes one, only from a client that proved the key
    /// (an agent always has one), only for a valid test and a target of sane length.
    fn on_pair(&mut self, msg: Message) -> Result<(), ProtoError> {
        let Message::PairTestRequest { target, spec } = msg else {
            return Err(unexpected(&msg, "waiting for the test request"));
        };
        let State::AwaitingRequest { software, caps } =
            std::mem::replace(&mut self.state, State::Pairing)
        else {
            return Err(ProtoError::Violation(
                "internal: pair request outside awaiting state".into(),
            ));
        };
        let why = if !self.agent || self.auth.is_none() {
            Some(
                "this server is not an agent: it runs tests against other hosts only when \
                 started with `linerate server --agent --psk-file FILE`"
                    .to_string(),
            )
        } else if target.is_empty() || target.len() > crate::wire::MAX_PAIR_TARGET {
            Some(format!(
                "the pair test's target must be HOST:PORT of at most {} bytes",
                crate::wire::MAX_PAIR_TARGET
            ))
        } else {
            None
        };
        if let Some(why) = why {
            // Not `Refused`, which the server counts as a refusal of the key.
            self.refuse(&why);
            return Err(ProtoError::Incompatible(why));
        }
        self.check_spec(&spec, &caps)?;
        self.core.io.deadline = None;
        self.spec = Some(spec.clone());
        self.core.io.emit(ServerEvent::PairTestRequested {
            target,
            spec,
            client_software: software,
        });
        Ok(())
    }

    /// The client sends nothing between the request and `start` (it only stops or reports
    /// after `start`), so any message here is a violation.
    fn on_early(&mut self, msg: Message) -> Result<(), ProtoError> {
        Err(unexpected(&msg, "waiting for the data streams"))
    }

    fn on_running(&mut self, msg: Message) -> Result<(), ProtoError> {
        match msg {
            Message::Stop { reason } => {
                self.core.io.emit(ServerEvent::PeerStop(reason));
                Ok(())
            }
            Message::Results { results } => {
                let done = self.core.peer_results("client")?;
                self.core.io.emit(ServerEvent::PeerResults(Box::new(results)));
                if done {
                    self.finish();
                }
                Ok(())
            }
            other => Err(unexpected(&other, "running the test")),
        }
    }

    fn finish(&mut self) {
        self.state = State::Done;
        self.core.io.deadline = None;
        self.core.io.emit(ServerEvent::Finished);
    }
}

impl Machine for ServerConn {
    type Event = ServerEvent;

    fn io(&self) -> &Io<ServerEvent> {
        &self.core.io
    }

    fn io_mut(&mut self) -> &mut Io<ServerEvent> {
        &mut self.core.io
    }

    fn absorb(&mut self, bytes: &[u8], now: Duration) -> Result<(), ProtoError> {
        self.core.wire.push(bytes);
        self.drain_input(now)
    }

    /// A results frame over [`GRANT_ABOVE`] bytes once the test is accepted.
    fn large_frame(&self) -> Option<LargeFrame> {
        self.core.wire.large_frame().filter(|_| !self.core.failed())
    }

    fn grant_frame(&mut self, now: Duration) -> Result<(), ProtoError> {
        self.core.wire.decoder().grant();
        self.handle_input(&[], now)
    }

    fn on_close(&mut self) -> Result<(), ProtoError> {
        let what = match &self.state {
            State::Done => return Ok(()),
            State::Doctor { .. } => {
                self.finish();
                return Ok(());
            }
            State::Greeting
            | State::AwaitingAuth { .. }
            | State::AwaitingRequest { .. }
            | State::Deciding => "before requesting a test",
            State::AwaitingStreams { .. } => "while the data streams were connecting",
            State::Pairing => "while its pair test ran",
            State::Held => "before the fleet's go",
            State::Running => "during the test",
        };
        Err(ProtoError::Closed(what.to_string()))
    }

    /// True once both results are exchanged (or a doctor session ended).
    fn is_finished(&self) -> bool {
        matches!(self.state, State::Done)
    }
}
