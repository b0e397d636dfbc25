//! Plumbing shared by the client and server state machines: the frame decoder, the outbox,
//! deadlines, failure, the one-time farewell, the results exchange, the hello and capability
//! negotiation. Each machine keeps only its own states and transitions.

use std::time::Duration;

use crate::error::ProtoError;
use crate::machine::{Io, LargeFrame};
use crate::results::SideResults;
use crate::spec::{Direction, Protocol, TestSpec};
use crate::wire::{
    Capability, FrameDecoder, MAX_FRAME_RESULTS, Message, PROTOCOL_VERSION, encode_frame, preamble,
};

/// How long a peer has for the whole greeting (preamble, hello, request/accept).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the data streams may take to connect, plus `PER_STREAM_CONNECT` each.
pub const STREAMS_TIMEOUT: Duration = Duration::from_secs(10);
/// Extra connect allowance per data connection.
pub const PER_STREAM_CONNECT: Duration = Duration::from_millis(10);
/// How long a held start (a fleet) waits for the coordinator's `go` once every stream is
/// attached: the coordinator waits for its slowest host, and an idle held test holds a slot
/// for nothing (a server that is full may also preempt it after 1 s). Ten seconds is many
/// times what a fleet's hosts take to become ready on any network worth testing (their setup
/// runs in parallel), and a fifth of what the server used to give.
pub const HELD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long after the requested duration (plus warm-up) a test may run before it is cut.
pub const RUN_GRACE: Duration = Duration::from_secs(30);
/// How long a side waits for the peer's results after sending its own.
pub const RESULTS_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client waits in an exclusive server's queue, in all, unless its driver says
/// otherwise ([`crate::client::ClientConn::with_queue_limit`]; `--queue-timeout`). Each
/// `queued` heartbeat restarts only the 5 s silence deadline, never this one, so a server
/// that says `queued` for ever cannot hold a client for ever. Five minutes: a default
/// `--queue` of 8 tests of the default 10 s (with their set-up) clears in well under two,
/// and an interactive user rarely waits longer than this for a test to start.
pub const QUEUE_LIMIT: Duration = Duration::from_secs(300);

/// One decoded input. Short-lived (one per frame), so a large `Message` (a test spec) is not
/// worth a box.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Input {
    Preamble(u32),
    Message(Message),
}

/// A deadline and what we are waiting for when it passes.
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    pub at: Duration,
    pub since: Duration,
    pub what: &'static str,
    /// The queue's overall limit (the test's place, the limit): its expiry is a
    /// [`ProtoError::QueueLimit`], which the driver explains with the flag to raise.
    pub queue: Option<(u32, Duration)>,
}

impl Deadline {
    pub fn after(now: Duration, wait: Duration, what: &'static str) -> Self {
        Self { at: now.saturating_add(wait), since: now, what, queue: None }
    }

    /// The end of a queue's wait that began at `since`, with the test at `position`.
    pub fn queue(since: Duration, limit: Duration, position: u32) -> Self {
        let what = "waiting in the server's queue";
        Self { at: since.saturating_add(limit), since, what, queue: Some((position, limit)) }
    }

    pub fn check(&self, now: Duration) -> Result<(), ProtoError> {
        if now < self.at {
            return Ok(());
        }
        let waited = now.saturating_sub(self.since);
        Err(match self.queue {
            Some((position, limit)) => {
                ProtoError::QueueLimit { position, waited, estimate: None, limit }
            }
            None => ProtoError::TimedOut { what: self.what.to_string(), waited },
        })
    }
}

/// The frame decoder and the once-only preamble bookkeeping.
#[derive(Debug)]
pub(crate) struct Wire {
    decoder: FrameDecoder,
    got_preamble: bool,
}

impl Wire {
    fn new() -> Self {
        Self { decoder: FrameDecoder::new(), got_preamble: false }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    pub fn set_max_frame(&mut self, max: u32) {
        self.decoder.set_max_frame(max);
    }

    /// The frame decoder, for its large-frame grants.
    pub fn decoder(&mut self) -> &mut FrameDecoder {
        &mut self.decoder
    }

    pub fn large_frame(&self) -> Option<LargeFrame> {
        self.decoder.large_frame()
    }

    pub fn next_input(&mut self) -> Result<Option<Input>, ProtoError> {
        if !self.got_preamble {
            let Some(v) = self.decoder.poll_preamble()? else { return Ok(None) };
            self.got_preamble = true;
            return Ok(Some(Input::Preamble(v)));
        }
        Ok(self.decoder.poll_frame()?.map(Input::Message))
    }
}

/// What the native machines track besides their own state: the wire, the plumbing every
/// machine has ([`Io`]), the one-time farewell and the results exchange.
#[derive(Debug)]
pub(crate) struct Core<E> {
    pub wire: Wire,
    pub io: Io<E>,
    /// A `refused` or `abort` frame was queued; nothing more is sent after it.
    farewell_sent: bool,
    results_sent: bool,
    peer_results: bool,
}

impl<E> Core<E> {
    /// A core whose preamble and hello are queued (a server requiring a key puts its nonce in
    /// the hello), with the greeting deadline.
    pub fn new(software: &str, auth_nonce: Option<String>, greeting: Deadline) -> Self {
        Self::with_caps(software, auth_nonce, greeting, own_caps())
    }

    /// The same, advertising `capabilities` (an agent's: ours and `agent`).
    pub fn with_caps(
        software: &str,
        auth_nonce: Option<String>,
        greeting: Deadline,
        capabilities: Vec<String>,
    ) -> Self {
        let mut out = preamble(PROTOCOL_VERSION).to_vec();
        let software = software.to_string();
        out.extend_from_slice(&encode_frame(&Message::Hello {
            software,
            capabilities,
            auth_nonce,
        }));
        Self {
            wire: Wire::new(),
            io: Io::new(out, Some(greeting)),
            farewell_sent: false,
            results_sent: false,
            peer_results: false,
        }
    }

    /// Queues one message.
    pub fn send(&mut self, msg: &Message) {
        self.io.out.extend_from_slice(&encode_frame(msg));
    }

    pub fn failed(&self) -> bool {
        self.io.failed
    }

    /// Queues `refused` or `abort` unless one was already queued.
    pub fn farewell(&mut self, msg: &Message) {
        if !self.farewell_sent {
            self.farewell_sent = true;
            self.send(msg);
        }
    }

    pub fn results_sent(&self) -> bool {
        self.results_sent
    }

    /// Queues our results once. Returns true if the peer's are already in (exchange done);
    /// otherwise waits for them with [`RESULTS_TIMEOUT`].
    pub fn send_results(
        &mut self,
        mut results: SideResults,
        now: Duration,
        waiting_for: &'static str,
    ) -> Result<bool, ProtoError> {
        if self.results_sent {
            return Err(ProtoError::Violation("results were already sent".into()));
        }
        self.results_sent = true;
        results.fit_to(MAX_FRAME_RESULTS as usize - 1024);
        self.send(&Message::Results { results });
        if !self.peer_results {
            self.io.deadline = Some(Deadline::after(now, RESULTS_TIMEOUT, waiting_for));
        }
        Ok(self.peer_results)
    }

    /// Records that the peer's results arrived. Returns true if ours were already sent.
    pub fn peer_results(&mut self, peer: &str) -> Result<bool, ProtoError> {
        if self.peer_results {
            return Err(ProtoError::Violation(format!("the {peer} sent its results twice")));
        }
        self.peer_results = true;
        Ok(self.results_sent)
    }
}

/// Our capability names: every one but `agent`, which only an agent's hello carries.
pub(crate) fn own_caps() -> Vec<String> {
    Capability::ALL
        .iter()
        .filter(|c| **c != Capability::Agent)
        .map(|c| c.as_str().to_string())
        .collect()
}

/// Checks the peer's protocol version. We speak version 1; a newer peer must speak 1 to us.
pub(crate) fn check_version(v: u32) -> Result<(), ProtoError> {
    if v == 0 {
        return Err(ProtoError::Incompatible(format!(
            "peer speaks protocol version {v}; this linerate speaks {PROTOCOL_VERSION}"
        )));
    }
    Ok(())
}

/// The capabilities both sides have.
pub(crate) fn negotiate(peer: &[String]) -> Vec<Capability> {
    Capability::ALL.into_iter().filter(|c| peer.iter().any(|p| p == c.as_str())).collect()
}

/// The capabilities a spec needs, with the flag that asked for each.
pub(crate) fn required_caps(spec: &TestSpec) -> Vec<(Capability, &'static str)> {
    let mut need = match spec.protocol {
        Protocol::Tcp => vec![(Capability::Tcp, "TCP")],
        // A peer from before the secret sends 16-byte headers: refused by name, not miscounted.
        Protocol::Udp => vec![
            (Capability::Udp, "UDP (-u)"),
            (Capability::UdpSecret, "UDP (-u) datagrams with a per-test secret (upgrade it)"),
        ],
    };
    match spec.direction {
        Direction::Upload => {}
        Direction::Download => need.push((Capability::Reverse, "-R")),
        Direction::Bidirectional => need.push((Capability::Bidir, "--bidir")),
    }
    if spec.bits_per_second > 0 {
        need.push((Capability::Pacing, "-b"));
    }
    if spec.zerocopy {
        need.push((Capability::Zerocopy, "-Z"));
    }
    if spec.held_start {
        need.push((Capability::HeldStart, "a fleet start (linerate fleet)"));
    }
    if let Some(rr) = &spec.rr {
        need.push((Capability::Latency, "request/response tests (--rr)"));
        if rr.connect_each {
            need.push((Capability::Crr, "connect/request/response/close tests (--crr)"));
        }
    }
    if spec.tos.is_some() {
        need.push((Capability::Tos, "-S/--tos or --dscp"));
    }
    if spec.fq_rate_bps.is_some() {
        need.push((Capability::FqRate, "--fq-rate"));
    }
    if spec.dont_fragment {
        need.push((Capability::DontFragment, "--dont-fragment"));
    }
    if spec.burst.is_some() {
        need.push((Capability::Burst, "-b RATE/BURST"));
    }
    // 0 (the system's setting) is what a server without the capability does anyway.
    if spec.notsent_lowat.is_some_and(|n| n > 0) {
        need.push((Capability::NotsentLowat, "--notsent-lowat"));
    }
    need
}

/// The first capability the spec needs that `have` lacks, as a sentence.
pub(crate) fn missing_cap(spec: &TestSpec, have: &[Capability], who: &str) -> Option<String> {
    required_caps(spec)
        .into_iter()
        .find(|(c, _)| !have.contains(c))
        .map(|(c, flag)| format!("{who} does not support {flag} (capability \"{}\")", c.as_str()))
}

/// The deadline for the data streams to connect.
pub(crate) fn streams_deadline(now: Duration, spec: &TestSpec, what: &'static str) -> Deadline {
    let wait = STREAMS_TIMEOUT.saturating_add(PER_STREAM_CONNECT * spec.connection_count());
    Deadline::after(now, wait, what)
}

/// The deadline for a running test to end; None for byte-bound tests (the driver watches
/// progress instead).
pub(crate) fn run_deadline(now: Duration, spec: &TestSpec) -> Option<Deadline> {
    let ms = spec.duration_ms()?.saturating_add(spec.omit_ms);
    let wait = Duration::from_millis(ms).saturating_add(RUN_GRACE);
    Some(Deadline::after(now, wait, "waiting for the test to end (duration + omit + 30 s)"))
}

/// The message for an unexpected message in some state.
pub(crate) fn unexpected(msg: &Message, state: &str) -> ProtoError {
    ProtoError::Violation(format!("unexpected \"{}\" message while {state}", msg.kind()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer from before `-S`/`--dscp` or `--fq-rate` is refused the test by name, never
    /// silently run without the option.
    #[test]
    fn tos_and_fq_rate_need_their_capabilities() {
        let all: Vec<Capability> = Capability::ALL.to_vec();
        let mut spec = TestSpec::default_tcp();
        assert_eq!(missing_cap(&spec, &all, "the server"), None);
        spec.tos = std::num::NonZeroU8::new(0xb8);
        spec.fq_rate_bps = std::num::NonZeroU64::new(1_000_000);
        assert_eq!(missing_cap(&spec, &all, "the server"), None);
        let older: Vec<Capability> =
            all.iter().copied().filter(|c| *c != Capability::Tos).collect();
        let why = missing_cap(&spec, &older, "the server").expect("refused");
        assert!(why.contains("-S/--tos or --dscp") && why.contains("\"tos\""), "{why}");
        let older: Vec<Capability> =
            all.iter().copied().filter(|c| *c != Capability::FqRate).collect();
        let why = missing_cap(&spec, &older, "the server").expect("refused");
        assert!(why.contains("--fq-rate") && why.contains("\"fq_rate\""), "{why}");
    }
}
