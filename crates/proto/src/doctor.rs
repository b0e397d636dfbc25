//! The client side of a doctor session (`linerate doctor HOST`), as a sans-IO state machine.
//!
//! After the hellos the client checks the server's capabilities: a server without
//! `environment` is an older linerate and is never sent a message it does not know (the
//! driver reports that instead). Otherwise it sends `environment_request` and emits
//! [`DoctorEvent::Environment`]; the driver may then call [`DoctorConn::request_echo`] once
//! (only if [`DoctorConn::server_echoes`]), receives [`DoctorEvent::EchoReady`], probes, and
//! closes the connection to end the session.

use std::time::Duration;

use crate::conn::{Core, Deadline, HANDSHAKE_TIMEOUT, Input, check_version, negotiate, unexpected};
use crate::environment::Environment;
use crate::error::ProtoError;
use crate::machine::{Io, Machine};
use crate::wire::{Capability, Cookie, MAX_FRAME_RESULTS, Message};

/// How long the server has to answer a doctor's request.
pub const DOCTOR_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the doctor driver acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum DoctorEvent {
    /// The server's environment.
    Environment {
        /// The server's software string.
        server_software: String,
        /// What it reported.
        environment: Box<Environment>,
    },
    /// Probes go to this UDP port with this cookie.
    EchoReady {
        /// The server's probe port.
        port: u16,
        /// Carried by probes and echoes.
        cookie: Cookie,
    },
}

#[derive(Debug)]
enum State {
    Greeting,
    AwaitingEnvironment { software: String, caps: Vec<Capability> },
    Ready { caps: Vec<Capability> },
    AwaitingEcho,
    Done,
}

/// The doctor's control-connection state machine.
#[derive(Debug)]
pub struct DoctorConn {
    core: Core<DoctorEvent>,
    state: State,
    /// The key and our nonce, for a server that requires authentication.
    psk: Option<crate::auth::ClientKey>,
}

impl DoctorConn {
    /// A new session; the server's hello and answer must come within the handshake timeout.
    pub fn new(software: &str, now: Duration) -> Self {
        let greeting = Deadline::after(now, HANDSHAKE_TIMEOUT, "waiting for the server's hello");
        Self { core: Core::new(software, None, greeting), state: State::Greeting, psk: None }
    }

    /// Answers a server that requires a pre-shared key, with `key` and a fresh random
    /// `nonce` from the driver.
    pub fn with_psk(mut self, key: crate::auth::Psk, nonce: [u8; crate::auth::NONCE_LEN]) -> Self {
        self.psk = Some((key, nonce));
        self
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

    /// True once the environment arrived and no echo request is pending.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Ready { .. } | State::Done)
    }

    /// Whether the server echoes path-MTU probes (known once its environment arrived).
    pub fn server_echoes(&self) -> bool {
        matches!(&self.state, State::Ready { caps } if caps.contains(&Capability::Echo))
    }

    /// Asks the server to echo probes sent from `client_port`.
    pub fn request_echo(&mut self, client_port: u16, now: Duration) -> Result<(), ProtoError> {
        if !self.server_echoes() || self.core.failed() {
            return Err(ProtoError::Violation(
                "echo requested before the environment or from a server without echo".into(),
            ));
        }
        self.state = State::AwaitingEcho;
        self.core.io.deadline =
            Some(Deadline::after(now, DOCTOR_ANSWER_TIMEOUT, "waiting for echo_ready"));
        self.core.send(&Message::EchoRequest { client_port });
        Ok(())
    }

    fn on_message(&mut self, msg: Message, now: Duration) -> Result<(), ProtoError> {
        if let Message::Refused { reason } = &msg {
            return Err(ProtoError::Refused(reason.clone()));
        }
        if let Message::Abort { reason, message } = msg {
            return Err(ProtoError::Aborted { reason, message });
        }
        match std::mem::replace(&mut self.state, State::Done) {
            State::Greeting => {
                let Message::Hello { software, capabilities, auth_nonce } = msg else {
                    return Err(unexpected(&msg, "waiting for the server's hello"));
                };
                let caps = negotiate(&capabilities);
                if !caps.contains(&Capability::Environment) {
                    return Err(ProtoError::Incompatible(format!(
                        "{software} does not answer doctor requests (capability \"environment\"); upgrade linerate there"
                    )));
                }
                if let Some(nonce) = auth_nonce {
                    let auth = crate::auth::answer_challenge(self.psk.as_ref(), &nonce)?;
                    self.core.send(&auth);
                }
                self.core.wire.set_max_frame(MAX_FRAME_RESULTS);
                self.core.send(&Message::EnvironmentRequest);
                self.core.io.deadline = Some(Deadline::after(
                    now,
                    DOCTOR_ANSWER_TIMEOUT,
                    "waiting for the server's environment",
                ));
                self.state = State::AwaitingEnvironment { software, caps };
                Ok(())
            }
            State::AwaitingEnvironment { software, caps } => {
                let Message::Environment { environment } = msg else {
                    return Err(unexpected(&msg, "waiting for the server's environment"));
                };
                self.core.io.deadline = None;
                self.state = State::Ready { caps };
                self.core
                    .io
                    .emit(DoctorEvent::Environment { server_software: software, environment });
                Ok(())
            }
            State::AwaitingEcho => {
                let Message::EchoReady { port, cookie } = msg else {
                    return Err(unexpected(&msg, "waiting for echo_ready"));
                };
                let cookie = Cookie::from_hex(&cookie).ok_or_else(|| {
                    ProtoError::Violation(format!(
                        "echo_ready cookie {cookie:?} is not 32 hex digits"
                    ))
                })?;
                self.core.io.deadline = None;
                self.core.io.emit(DoctorEvent::EchoReady { port, cookie });
                Ok(())
            }
            State::Ready { .. } | State::Done => {
                Err(unexpected(&msg, "idle after the doctor's answers"))
            }
        }
    }
}

impl Machine for DoctorConn {
    type Event = DoctorEvent;

    fn io(&self) -> &Io<DoctorEvent> {
        &self.core.io
    }

    fn io_mut(&mut self) -> &mut Io<DoctorEvent> {
        &mut self.core.io
    }

    fn absorb(&mut self, bytes: &[u8], now: Duration) -> Result<(), ProtoError> {
        self.core.wire.push(bytes);
        self.drain(now)
    }

    fn on_close(&mut self) -> Result<(), ProtoError> {
        if matches!(self.state, State::Done | State::Ready { .. }) {
            return Ok(());
        }
        Err(ProtoError::Closed("before answering the doctor".into()))
    }

    /// True once the session is over.
    fn is_finished(&self) -> bool {
        matches!(self.state, State::Done)
    }
}
