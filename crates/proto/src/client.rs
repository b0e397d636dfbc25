//! The client side of a control connection, as a sans-IO state machine.
//!
//! Call order for a driver:
//! 1. [`ClientConn::new`] queues the preamble, hello and (once the server's hello arrives)
//!    the test request.
//! 2. Loop: write [`ClientConn::poll_transmit`] bytes; read bytes into
//!    [`ClientConn::handle_input`]; handle [`ClientConn::poll_event`]s; call
//!    [`ClientConn::handle_timeout`] at [`ClientConn::poll_timeout`].
//! 3. On [`ClientEvent::Accepted`], open the data connections; on [`ClientEvent::Start`],
//!    start the streams and the clock. When the duration elapses call [`ClientConn::stop`];
//!    when every local stream is done call [`ClientConn::send_results`].
//! 4. [`ClientEvent::Finished`] means both results are exchanged; close the connection.
//!
//! Any error leaves the machine failed; the driver flushes `poll_transmit` and closes.
//! The machine never reads a clock: `now` is any monotonic time the driver chooses.

use std::time::Duration;

use crate::auth::{ClientKey, NONCE_LEN, Psk};
use crate::conn::{
    Core, Deadline, HANDSHAKE_TIMEOUT, HELD_TIMEOUT, Input, QUEUE_LIMIT, check_version,
    missing_cap, negotiate, run_deadline, streams_deadline, unexpected,
};
use crate::error::ProtoError;
use crate::machine::{Io, Machine};
use crate::results::SideResults;
use crate::spec::TestSpec;
use crate::wire::{AbortReason, Capability, Cookie, MAX_FRAME_RESULTS, Message, StopReason};

/// What the client driver must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The server accepted the test: connect the data streams with this cookie.
    Accepted {
        /// Present on every data connection.
        cookie: Cookie,
        /// The server's software string.
        server_software: String,
        /// Capabilities both sides have.
        capabilities: Vec<Capability>,
    },
    /// The server runs one test at a time and this one waits in its queue.
    Queued {
        /// 1 = next to run.
        position: u32,
        /// The server's estimate, if it has one.
        wait: Option<Duration>,
    },
    /// A held start only: every data stream is associated and the server waits; call
    /// [`ClientConn::go`] when every host of the fleet is ready.
    Ready,
    /// All data streams are associated: start sending and the clock.
    Start,
    /// The server's final figures.
    PeerResults(Box<SideResults>),
    /// Both sides' results are exchanged; the test is complete.
    Finished,
}

#[derive(Debug)]
enum State {
    Greeting,
    AwaitingAccept {
        software: String,
        caps: Vec<Capability>,
    },
    Connecting,
    /// A held start: the server said `ready`; `go` not sent yet (or sent, awaiting `start`).
    /// After `go` the server runs, so a `stop` may already be sent (`stop_sent`).
    Held {
        go_sent: bool,
        stop_sent: bool,
    },
    Running {
        stop_sent: bool,
    },
    Done,
}

/// The client's control-connection state machine.
#[derive(Debug)]
pub struct ClientConn {
    spec: TestSpec,
    core: Core<ClientEvent>,
    state: State,
    /// The key and our nonce, for a server that requires authentication.
    psk: Option<ClientKey>,
    /// The longest this client waits in a server's queue, in all.
    queue_limit: Duration,
    /// When the server first said `queued` (None: it has not).
    queued_since: Option<Duration>,
    /// Run only against an agent holding a key (an agent's pair test, `linerate mesh`).
    agent_only: bool,
}

impl ClientConn {
    /// Starts a connection that will request `spec`. Fails if the spec is invalid.
    pub fn new(spec: TestSpec, software: &str, now: Duration) -> Result<Self, ProtoError> {
        spec.validate()?;
        let greeting = Deadline::after(now, HANDSHAKE_TIMEOUT, "waiting for the server's hello");
        Ok(Self {
            spec,
            core: Core::new(software, None, greeting),
            psk: None,
            state: State::Greeting,
            queue_limit: QUEUE_LIMIT,
            queued_since: None,
            agent_only: false,
        })
    }

    /// Runs the test only if the server is an agent that requires a key (its hello carries
    /// the `agent` capability and a nonce): an agent's pair test, so that an agent can be
    /// made to send traffic only to another agent holding the same key (a different key is
    /// refused by the target). Anything else ends the test before a byte of data.
    pub fn agents_only(mut self) -> Self {
        self.agent_only = true;
        self
    }

    /// Waits at most `limit` in all in an exclusive server's queue (default [`QUEUE_LIMIT`]),
    /// counted from its first `queued`; and gives up at once when the server's own estimate
    /// of the wait runs past it.
    pub fn with_queue_limit(mut self, limit: Duration) -> Self {
        self.queue_limit = limit;
        self
    }

    /// Answers a server that requires a pre-shared key, with `key` and a fresh random
    /// `nonce` from the driver.
    pub fn with_psk(mut self, key: Psk, nonce: [u8; NONCE_LEN]) -> Self {
        self.psk = Some((key, nonce));
        self
    }

    /// The spec being run.
    pub fn spec(&self) -> &TestSpec {
        &self.spec
    }

    /// True once the server said `start` (and until the results are exchanged). A held start's
    /// client runs from its `go`, before this.
    pub fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    fn drain_input(&mut self, now: Duration) -> Result<(), ProtoError> {
        while let Some(input) = self.core.wire.next_input()? {
            self.on_input(input, now)?;
        }
        Ok(())
    }

    /// Releases a held start (after [`ClientEvent::Ready`]): the server starts and answers
    /// `start`. Ignored in any other state.
    pub fn go(&mut self, now: Duration) {
        if matches!(self.state, State::Held { go_sent: false, .. }) && !self.core.failed() {
            self.state = State::Held { go_sent: true, stop_sent: false };
            self.core.io.deadline =
                Some(Deadline::after(now, HANDSHAKE_TIMEOUT, "waiting for the server's start"));
            self.core.send(&Message::Go);
        }
    }

    /// The `go` from [`ClientConn::go`] went out at `now`: a driver that hands the bytes to
    /// someone else to write later (a fleet's coordinator writes every host's `go` at one
    /// instant) counts the wait for the server's `start` from here.
    pub fn go_sent(&mut self, now: Duration) {
        if matches!(self.state, State::Held { go_sent: true, .. }) && !self.core.failed() {
            self.core.io.deadline =
                Some(Deadline::after(now, HANDSHAKE_TIMEOUT, "waiting for the server's start"));
        }
    }

    /// Tells the server's senders to stop (time elapsed or interrupted). Sent at most once;
    /// ignored outside the running state and a held start's `go` (the server runs from its
    /// `go` on, and reads the `stop` after it).
    pub fn stop(&mut self, reason: StopReason) {
        if let State::Running { stop_sent } | State::Held { go_sent: true, stop_sent } =
            &mut self.state
            && !*stop_sent
            && !self.core.failed()
        {
            *stop_sent = true;
            self.core.send(&Message::Stop { reason });
        }
    }

    /// Sends this side's results (once every local stream is done).
    pub fn send_results(&mut self, results: SideResults, now: Duration) -> Result<(), ProtoError> {
        if !matches!(self.state, State::Running { .. }) || self.core.failed() {
            return Err(ProtoError::Violation("results can only be sent while running".into()));
        }
        if self.core.send_results(results, now, "waiting for the server's results")? {
            self.finish();
        }
        Ok(())
    }

    /// Aborts the test, telling the server why.
    ///
    /// Also valid after an error (the machine is then failed): the server learns why the
    /// connection is closing. Sent at most once.
    pub fn abort(&mut self, reason: AbortReason, message: &str) {
        if !matches!(self.state, State::Done) {
            self.core.farewell(&Message::Abort { reason, message: message.to_string() });
        }
        self.core.io.fail();
    }

    fn on_input(&mut self, input: Input, now: Duration) -> Result<(), ProtoError> {
        let msg = match input {
            Input::Preamble(v) => return check_version(v),
            Input::Message(m) => m,
        };
        match msg {
            Message::Abort { reason, message } => Err(ProtoError::Aborted { reason, message }),
            Message::Refused { reason } => Err(ProtoError::Refused(reason)),
            msg => match self.state {
                State::Greeting => self.on_hello(msg),
                State::AwaitingAccept { .. } => self.on_accept(msg, now),
                State::Connecting if msg == Message::Ready && self.spec.held_start => {
                    self.state = State::Held { go_sent: false, stop_sent: false };
                    self.core.io.deadline =
                        Some(Deadline::after(now, HELD_TIMEOUT, "holding the start for the fleet"));
                    self.core.io.emit(ClientEvent::Ready);
                    Ok(())
                }
                State::Connecting | State::Held { go_sent: true, .. } => self.on_start(msg, now),
                State::Held { go_sent: false, .. } => {
                    Err(unexpected(&msg, "holding the start for the fleet"))
                }
                State::Running { .. } => self.on_running(msg),
                State::Done => Err(unexpected(&msg, "finished")),
            },
        }
    }

    fn on_hello(&mut self, msg: Message) -> Result<(), ProtoError> {
        let Message::Hello { software, capabilities, auth_nonce } = msg else {
            return Err(unexpected(&msg, "waiting for the server's hello"));
        };
        let caps = negotiate(&capabilities);
        if self.agent_only && (!caps.contains(&Capability::Agent) || auth_nonce.is_none()) {
            return Err(ProtoError::Refused(format!(
                "the target ({software}) is not a linerate agent with a key: an agent runs \
                 tests only against other agents (`linerate server --agent --psk-file FILE`, \
                 the same key)"
            )));
        }
        if !caps.contains(&Capability::PairCpus) {
            // A placement hint, not a requirement: an older server runs unpaired.
            self.spec.pair_cpus.clear();
            self.spec.pair_split = false;
        }
        if let Some(why) = missing_cap(&self.spec, &caps, &format!("the server ({software})")) {
            return Err(ProtoError::Incompatible(why));
        }
        if let Some(nonce) = auth_nonce {
            self.answer_challenge(&nonce)?;
        }
        self.core.send(&Message::TestRequest { spec: self.spec.clone() });
        self.state = State::AwaitingAccept { software, caps };
        Ok(())
    }

    fn answer_challenge(&mut self, server_nonce: &str) -> Result<(), ProtoError> {
        let auth = crate::auth::answer_challenge(self.psk.as_ref(), server_nonce)?;
        self.core.send(&auth);
        Ok(())
    }

    fn on_accept(&mut self, msg: Message, now: Duration) -> Result<(), ProtoError> {
        if let Message::Queued { position, wait_ms } = msg {
            return self.on_queued(position, wait_ms.map(Duration::from_millis), now);
        }
        let Message::TestAccepted { cookie } = msg else {
            return Err(unexpected(&msg, "waiting for the server to accept the test"));
        };
        let cookie = Cookie::from_hex(&cookie).ok_or_else(|| {
            ProtoError::Violation("test_accepted cookie is not 32 hex digits".into())
        })?;
        let State::AwaitingAccept { software, caps } =
            std::mem::replace(&mut self.state, State::Connecting)
        else {
            return Err(ProtoError::Violation("internal: accept outside awaiting state".into()));
        };
        self.core.wire.set_max_frame(MAX_FRAME_RESULTS);
        self.core.io.deadline =
            Some(streams_deadline(now, &self.spec, "waiting for the server to start the test"));
        self.core.io.emit(ClientEvent::Accepted {
            cookie,
            server_software: software,
            capabilities: caps,
        });
        Ok(())
    }

    /// The server says the test waits in its queue. Each `queued` restarts the silence
    /// deadline (the server repeats it while we wait), but never the queue's overall limit,
    /// which runs from the first: a server that says `queued` for ever holds the client only
    /// until then. An estimate that already runs past the limit ends the wait at once.
    fn on_queued(
        &mut self,
        position: u32,
        wait: Option<Duration>,
        now: Duration,
    ) -> Result<(), ProtoError> {
        let since = *self.queued_since.get_or_insert(now);
        let limit = Deadline::queue(since, self.queue_limit, position);
        limit.check(now)?;
        if let Some(estimate) = wait.filter(|w| now.saturating_add(*w) > limit.at) {
            let waited = now.saturating_sub(since);
            let estimate = Some(estimate);
            return Err(ProtoError::QueueLimit {
                position,
                waited,
                estimate,
                limit: self.queue_limit,
            });
        }
        let silence = Deadline::after(
            now,
            HANDSHAKE_TIMEOUT,
            "waiting in the server's queue (it stopped saying so)",
        );
        self.core.io.deadline = Some(if silence.at <= limit.at { silence } else { limit });
        self.core.io.emit(ClientEvent::Queued { position, wait });
        Ok(())
    }

    fn on_start(&mut self, msg: Message, now: Duration) -> Result<(), ProtoError> {
        if !matches!(msg, Message::Start) {
            return Err(unexpected(&msg, "waiting for the server to start the test"));
        }
        let stop_sent = matches!(self.state, State::Held { stop_sent: true, .. });
        self.state = State::Running { stop_sent };
        self.core.io.deadline = run_deadline(now, &self.spec);
        self.core.io.emit(ClientEvent::Start);
        Ok(())
    }

    fn on_running(&mut self, msg: Message) -> Result<(), ProtoError> {
        let Message::Results { results } = msg else {
            return Err(unexpected(&msg, "running the test"));
        };
        let done = self.core.peer_results("server")?;
        self.core.io.emit(ClientEvent::PeerResults(Box::new(results)));
        if done {
            self.finish();
        }
        Ok(())
    }

    fn finish(&mut self) {
        self.state = State::Done;
        self.core.io.deadline = None;
        self.core.io.emit(ClientEvent::Finished);
    }
}

impl Machine for ClientConn {
    type Event = ClientEvent;

    fn io(&self) -> &Io<ClientEvent> {
        &self.core.io
    }

    fn io_mut(&mut self) -> &mut Io<ClientEvent> {
        &mut self.core.io
    }

    fn absorb(&mut self, bytes: &[u8], now: Duration) -> Result<(), ProtoError> {
        self.core.wire.push(bytes);
        self.drain_input(now)
    }

    fn on_close(&mut self) -> Result<(), ProtoError> {
        let what = match &self.state {
            State::Done => return Ok(()),
            State::Greeting => "before its hello (is this a linerate server?)",
            State::AwaitingAccept { .. } => "before answering the test request",
            State::Connecting => "while the data streams were connecting",
            State::Held { .. } => "while the fleet's start was held",
            State::Running { .. } if self.core.results_sent() => "before sending its results",
            State::Running { .. } => "during the test",
        };
        Err(ProtoError::Closed(what.to_string()))
    }

    /// True once both results are exchanged.
    fn is_finished(&self) -> bool {
        matches!(self.state, State::Done)
    }
}
