//! The server side of iperf3's control protocol, so iperf3 clients can test against linerate.
//!
//! Call order: [`Iperf3Server::new`], then feed the control connection's bytes (starting with
//! the 37-byte cookie). The machine asks for parameters and reports
//! [`Iperf3ServerEvent::TestRequested`]; the driver answers [`Iperf3Server::accept`] (CREATE_STREAMS
//! goes out) or [`Iperf3Server::refuse`] (SERVER_ERROR with an iperf3 error number). The driver
//! attaches data connections as they arrive and calls [`Iperf3Server::stream_arrived`] for each;
//! after the last one TEST_START and TEST_RUNNING go out and [`Iperf3ServerEvent::Start`] fires.
//! The client owns the clock: its TEST_END becomes [`Iperf3ServerEvent::TestEnd`]. The driver
//! stops its streams and calls [`Iperf3Server::exchange_results`] with its own results; the
//! client's results arrive as [`Iperf3ServerEvent::PeerResults`], ours and DISPLAY_RESULTS go
//! out, and the client's IPERF_DONE (or its close) ends the session with
//! [`Iperf3ServerEvent::Finished`].
//!
//! Data connections carry no id in iperf3: the driver numbers them in accept order, which is
//! the order the client opened them (first its sending streams, then its receiving ones).

use std::time::Duration;

use crate::conn::{Deadline, HANDSHAKE_TIMEOUT, RESULTS_TIMEOUT, run_deadline, streams_deadline};
use crate::error::ProtoError;
use crate::iperf3::{
    COOKIE_LEN, Iperf3Request, Iperf3Results, MAX_PARAMS_JSON, MAX_RESULTS_JSON, ServerError,
    State, frame_len, request_from_params, take_frame,
};
use crate::machine::{Io, LargeFrame, Machine};
use crate::spec::TestSpec;
use crate::wire::{AbortReason, GRANT_ABOVE};

/// What the driver must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum Iperf3ServerEvent {
    /// The client's parameters, read: call `accept` or `refuse`. A refusal the parameters
    /// themselves call for arrives as `Err` (already queued as SERVER_ERROR; the driver logs it).
    TestRequested(Result<Box<Iperf3Request>, String>),
    /// Every data connection is attached: start the streams now.
    Start,
    /// The client reached its end condition: stop the streams, then `exchange_results`.
    TestEnd,
    /// The client's own results.
    PeerResults(Box<Iperf3Results>),
    /// The session is over.
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitCookie,
    AwaitParams,
    Deciding,
    AwaitStreams { expected: u32, arrived: u32 },
    Running,
    Ending,
    AwaitPeerResults,
    AwaitDone,
    Done,
    Failed,
}

/// The iperf3 server state machine for one control connection.
#[derive(Debug)]
pub struct Iperf3Server {
    phase: Phase,
    cookie: Option<[u8; COOKIE_LEN]>,
    spec: Option<TestSpec>,
    inbuf: Vec<u8>,
    /// The driver granted the client's large results frame its memory.
    granted: bool,
    ours: Option<String>,
    io: Io<Iperf3ServerEvent>,
}

impl Iperf3Server {
    /// A session whose control connection just opened.
    pub fn new(now: Duration) -> Self {
        Self {
            phase: Phase::AwaitCookie,
            cookie: None,
            spec: None,
            inbuf: Vec::new(),
            granted: false,
            ours: None,
            io: Io::new(
                Vec::new(),
                Some(Deadline::after(now, HANDSHAKE_TIMEOUT, "waiting for the iperf3 cookie")),
            ),
        }
    }

    /// The client's cookie, once read (data connections start with the same 37 bytes).
    pub fn cookie(&self) -> Option<[u8; COOKIE_LEN]> {
        self.cookie
    }

    /// True while data connections for this test are expected.
    pub fn awaiting_streams(&self) -> bool {
        matches!(self.phase, Phase::AwaitStreams { .. })
    }

    /// Runs the requested test: CREATE_STREAMS goes out.
    pub fn accept(&mut self, now: Duration) -> Result<(), ProtoError> {
        let spec = match (self.phase, &self.spec) {
            (Phase::Deciding, Some(spec)) => spec,
            _ => return Err(ProtoError::Violation("no test request to accept".into())),
        };
        self.io.deadline = Some(streams_deadline(now, spec, "waiting for the iperf3 data streams"));
        self.phase = Phase::AwaitStreams { expected: spec.connection_count(), arrived: 0 };
        self.io.out.push(State::CreateStreams.byte());
        Ok(())
    }

    /// Declines the test with an iperf3 error (the client prints iperf3's text for it).
    pub fn refuse(&mut self, error: impl Into<ServerError>) {
        self.push_error(error.into());
        self.mark_failed();
    }

    /// Declines the test the way a busy iperf3 server does: one ACCESS_DENIED byte (the
    /// client prints "the server is busy running a test. try again later").
    pub fn deny(&mut self) {
        self.io.out.push(State::AccessDenied.byte());
        self.mark_failed();
    }

    /// Declines the test because of a server limit, with the iperf3 signal for it that this
    /// client's version prints truly (see [`crate::iperf3::for_limit`]).
    pub fn refuse_limit(&mut self, kind: crate::limits::LimitKind, client_version: Option<&str>) {
        match crate::iperf3::for_limit(kind, client_version) {
            Some(e) => self.refuse(e),
            None => self.deny(),
        }
    }

    /// One more data connection is attached. Returns true when it was the last: TEST_START and
    /// TEST_RUNNING are queued and [`Iperf3ServerEvent::Start`] fires.
    pub fn stream_arrived(&mut self, now: Duration) -> Result<bool, ProtoError> {
        let Phase::AwaitStreams { expected, arrived } = self.phase else {
            return Err(ProtoError::Violation(
                "a data connection arrived outside CREATE_STREAMS".into(),
            ));
        };
        let arrived = arrived + 1;
        if arrived < expected {
            self.phase = Phase::AwaitStreams { expected, arrived };
            return Ok(false);
        }
        self.io.out.extend_from_slice(&[State::TestStart.byte(), State::TestRunning.byte()]);
        self.phase = Phase::Running;
        self.io.deadline = self.spec.as_ref().and_then(|s| run_deadline(now, s));
        self.io.emit(Iperf3ServerEvent::Start);
        Ok(true)
    }

    /// After TEST_END, with the streams stopped: asks for the client's results; `ours` (the
    /// results JSON from [`crate::iperf3::results_from_side`]) follows once they arrive.
    pub fn exchange_results(&mut self, ours: String, now: Duration) -> Result<(), ProtoError> {
        if self.phase != Phase::Ending {
            return Err(ProtoError::Violation("results are exchanged only after TEST_END".into()));
        }
        self.ours = Some(ours);
        self.io.out.push(State::ExchangeResults.byte());
        self.phase = Phase::AwaitPeerResults;
        self.io.deadline =
            Some(Deadline::after(now, RESULTS_TIMEOUT, "waiting for the iperf3 client's results"));
        self.drain(now)
    }

    /// The server is shutting down: SERVER_TERMINATE goes out.
    pub fn terminate(&mut self) {
        if !matches!(self.phase, Phase::Done | Phase::Failed) {
            self.io.out.push(State::ServerTerminate.byte());
        }
        self.mark_failed();
    }

    /// A local failure during the test (e.g. a data socket could not be configured).
    pub fn fail_with(&mut self, error: impl Into<ServerError>) {
        if !matches!(self.phase, Phase::Done | Phase::Failed) {
            self.push_error(error.into());
        }
        self.mark_failed();
    }

    fn push_error(&mut self, error: ServerError) {
        self.io.out.push(State::ServerError.byte());
        self.io.out.extend_from_slice(&error.wire());
    }

    fn mark_failed(&mut self) {
        self.phase = Phase::Failed;
        self.io.fail();
    }

    fn finish(&mut self) {
        self.phase = Phase::Done;
        self.io.deadline = None;
        self.io.emit(Iperf3ServerEvent::Finished);
    }

    fn drain(&mut self, now: Duration) -> Result<(), ProtoError> {
        loop {
            let progressed = match self.phase {
                Phase::AwaitCookie => self.take_cookie(now),
                Phase::AwaitParams => self.take_params()?,
                Phase::AwaitPeerResults => self.take_results()?,
                Phase::Deciding | Phase::Done | Phase::Failed => false,
                _ => self.take_state()?,
            };
            if !progressed {
                return Ok(());
            }
        }
    }

    fn take_cookie(&mut self, now: Duration) -> bool {
        let Some(c) = self.inbuf.get(..COOKIE_LEN) else { return false };
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(c);
        self.inbuf.drain(..COOKIE_LEN);
        self.cookie = Some(cookie);
        self.io.out.push(State::ParamExchange.byte());
        self.phase = Phase::AwaitParams;
        self.io.deadline =
            Some(Deadline::after(now, HANDSHAKE_TIMEOUT, "waiting for the iperf3 parameters"));
        true
    }

    fn take_params(&mut self) -> Result<bool, ProtoError> {
        let Some(request) =
            take_frame(&mut self.inbuf, MAX_PARAMS_JSON, "parameters", request_from_params)?
        else {
            return Ok(false);
        };
        self.io.deadline = None;
        match request {
            Ok(req) => {
                self.spec = Some(req.spec.clone());
                self.phase = Phase::Deciding;
                self.io.emit(Iperf3ServerEvent::TestRequested(Ok(Box::new(req))));
            }
            Err(refusal) => {
                self.refuse(refusal.error);
                self.io.emit(Iperf3ServerEvent::TestRequested(Err(refusal.message)));
            }
        }
        Ok(true)
    }

    fn take_results(&mut self) -> Result<bool, ProtoError> {
        if self.large_frame().is_some_and(|f| !f.granted) {
            return Ok(false);
        }
        let Some(theirs) =
            take_frame(&mut self.inbuf, MAX_RESULTS_JSON, "results", Iperf3Results::parse)?
        else {
            return Ok(false);
        };
        self.granted = false;
        let theirs = theirs.map_err(ProtoError::Violation)?;
        self.io.emit(Iperf3ServerEvent::PeerResults(Box::new(theirs)));
        let ours = self.ours.take().unwrap_or_default();
        let len = u32::try_from(ours.len()).unwrap_or(u32::MAX);
        self.io.out.extend_from_slice(&len.to_be_bytes());
        self.io.out.extend_from_slice(ours.as_bytes());
        self.io.out.push(State::DisplayResults.byte());
        self.phase = Phase::AwaitDone;
        Ok(true)
    }

    fn take_state(&mut self) -> Result<bool, ProtoError> {
        let Some(&b) = self.inbuf.first() else { return Ok(false) };
        self.inbuf.remove(0);
        match (self.phase, State::from_byte(b)) {
            // A client may echo TEST_START; iperf3 servers ignore it.
            (_, Some(State::TestStart)) => {}
            (_, Some(State::ClientTerminate)) => {
                return Err(ProtoError::Aborted {
                    reason: AbortReason::Interrupted,
                    message: "the iperf3 client terminated (CLIENT_TERMINATE)".into(),
                });
            }
            (Phase::Running, Some(State::TestEnd)) => {
                self.phase = Phase::Ending;
                self.io.deadline = None;
                self.io.emit(Iperf3ServerEvent::TestEnd);
            }
            (Phase::AwaitDone, Some(State::IperfDone)) => self.finish(),
            (phase, Some(s)) => {
                return Err(ProtoError::Violation(format!(
                    "unexpected iperf3 state {s:?} from the client while {phase:?}"
                )));
            }
            (_, None) => {
                return Err(ProtoError::Garbage(format!("byte {b:#04x} is not an iperf3 state")));
            }
        }
        Ok(true)
    }
}

impl Machine for Iperf3Server {
    type Event = Iperf3ServerEvent;

    fn io(&self) -> &Io<Iperf3ServerEvent> {
        &self.io
    }

    fn io_mut(&mut self) -> &mut Io<Iperf3ServerEvent> {
        &mut self.io
    }

    fn absorb(&mut self, bytes: &[u8], now: Duration) -> Result<(), ProtoError> {
        self.inbuf.extend_from_slice(bytes);
        self.drain(now)
    }

    /// The client's results once they are asked for, when over [`GRANT_ABOVE`] bytes: like
    /// the native server's, they wait for the driver's grant of their memory.
    fn large_frame(&self) -> Option<LargeFrame> {
        if self.phase != Phase::AwaitPeerResults {
            return None;
        }
        let len = frame_len(&self.inbuf, MAX_RESULTS_JSON, "results").ok().flatten()?;
        (len > GRANT_ABOVE).then_some(LargeFrame { len, granted: self.granted })
    }

    fn grant_frame(&mut self, now: Duration) -> Result<(), ProtoError> {
        self.granted = self.large_frame().is_some();
        self.handle_input(&[], now)
    }

    fn on_close(&mut self) -> Result<(), ProtoError> {
        match self.phase {
            Phase::Done | Phase::Failed => Ok(()),
            // Some clients close right after DISPLAY_RESULTS without IPERF_DONE.
            Phase::AwaitDone => {
                self.finish();
                Ok(())
            }
            Phase::Running => Err(ProtoError::Closed("during the test".into())),
            _ => Err(ProtoError::Closed("before the test ended cleanly".into())),
        }
    }

    /// True once the session ended cleanly.
    fn is_finished(&self) -> bool {
        self.phase == Phase::Done
    }

    fn fail(&mut self) {
        self.mark_failed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iperf3::{
        ClientExtras, Iperf3Client, Iperf3Event, make_cookie, params, results_from_side,
    };
    use crate::results::SideResults;
    use crate::spec::{Direction, EndCondition};

    const T0: Duration = Duration::ZERO;

    fn frame(json: &[u8]) -> Vec<u8> {
        let mut f = (json.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(json);
        f
    }

    fn events(s: &mut Iperf3Server) -> Vec<Iperf3ServerEvent> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    /// The bytes a 3.12 client sends for `-c -t 2`, fed one at a time.
    #[test]
    fn a_refusal_is_sent_and_then_no_timeout_check_fails() {
        let mut s = Iperf3Server::new(Duration::ZERO);
        s.refuse(crate::iperf3::errno::NEW_TEST);
        let out = s.poll_transmit().expect("the refusal goes out");
        assert_eq!(out[0], State::ServerError.byte());
        // The driver turns once more to flush and wait for the close: a failed machine has no
        // deadline, so checking it is not a second error that would hide the refusal's reason.
        assert_eq!(s.poll_timeout(), None);
        assert!(s.handle_timeout(HANDSHAKE_TIMEOUT * 10).is_ok());
        assert!(s.handle_eof().is_ok());
        assert!(s.handle_input(b"x", Duration::ZERO).is_err(), "input after failure is refused");
    }

    /// A server that sent TEST_END's answer and asked for the client's results.
    fn awaiting_results() -> Iperf3Server {
        let mut s = Iperf3Server::new(T0);
        let mut input = b"inbretlqnvzocagns4n3hlbnjlx45hdgaoe7\0".to_vec();
        input.extend(frame(br#"{"tcp":true,"time":2,"parallel":1,"len":131072}"#));
        s.handle_input(&input, T0).expect("request");
        s.accept(T0).expect("accept");
        assert_eq!(s.stream_arrived(T0), Ok(true));
        s.handle_input(&[4], T0).expect("TEST_END");
        s.exchange_results("{}".into(), T0).expect("exchange");
        let _ = (events(&mut s), s.poll_transmit());
        s
    }

    #[test]
    fn large_results_wait_for_the_drivers_grant_and_small_ones_do_not() {
        let theirs = |pad: usize| {
            let json = format!(
                r#"{{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[]{}}}"#,
                " ".repeat(pad)
            );
            frame(json.as_bytes())
        };
        let mut s = awaiting_results();
        assert_eq!(s.large_frame(), None);
        s.handle_input(&theirs(1000), T0).expect("small results");
        assert!(matches!(&events(&mut s)[..], [Iperf3ServerEvent::PeerResults(_)]));
        let mut s = awaiting_results();
        let big = theirs(1 << 20);
        s.handle_input(&big, T0).expect("buffered");
        let len = big.len() as u32 - 4;
        assert_eq!(s.large_frame(), Some(LargeFrame { len, granted: false }));
        assert!(events(&mut s).is_empty(), "not decoded before the grant");
        s.grant_frame(T0).expect("granted: decoded at once, all of it being there");
        assert!(matches!(&events(&mut s)[..], [Iperf3ServerEvent::PeerResults(_)]));
        assert_eq!(s.large_frame(), None);
    }

    #[test]
    fn full_session_as_a_3_12_client_sends_it() {
        let mut s = Iperf3Server::new(T0);
        let mut input = b"inbretlqnvzocagns4n3hlbnjlx45hdgaoe7\0".to_vec();
        input.extend(frame(br#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#));
        for b in &input {
            s.handle_input(&[*b], T0).expect("trickled");
        }
        assert_eq!(s.cookie().map(|c| c[..4].to_vec()), Some(b"inbr".to_vec()));
        assert_eq!(s.poll_transmit(), Some(vec![9]), "PARAM_EXCHANGE");
        let ev = events(&mut s);
        assert!(matches!(&ev[..], [Iperf3ServerEvent::TestRequested(Ok(r))]
            if r.spec.end == EndCondition::Duration { duration_ms: 2000 }));
        s.accept(T0).expect("accept");
        assert_eq!(s.poll_transmit(), Some(vec![10]), "CREATE_STREAMS");
        assert!(s.awaiting_streams());
        assert_eq!(s.stream_arrived(T0), Ok(true));
        assert_eq!(s.poll_transmit(), Some(vec![1, 2]), "TEST_START, TEST_RUNNING");
        assert_eq!(events(&mut s), vec![Iperf3ServerEvent::Start]);
        s.handle_input(&[4], T0).expect("TEST_END");
        assert_eq!(events(&mut s), vec![Iperf3ServerEvent::TestEnd]);
        s.exchange_results("{\"ours\":1}".into(), T0).expect("exchange");
        assert_eq!(s.poll_transmit(), Some(vec![13]));
        let theirs = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":1,"streams":[{"id":1,"bytes":100,"retransmits":0,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.0}]}"#;
        s.handle_input(&frame(theirs), T0).expect("results");
        let mut want = frame(b"{\"ours\":1}");
        want.push(14);
        assert_eq!(s.poll_transmit(), Some(want), "our results, then DISPLAY_RESULTS");
        assert!(
            matches!(&events(&mut s)[..], [Iperf3ServerEvent::PeerResults(r)] if r.streams[0].bytes == 100)
        );
        s.handle_input(&[16], T0).expect("IPERF_DONE");
        assert_eq!(events(&mut s), vec![Iperf3ServerEvent::Finished]);
        assert!(s.is_finished());
        assert_eq!(s.handle_eof(), Ok(()));
    }

    #[test]
    fn bad_params_become_server_error_with_the_iperf3_number() {
        let mut s = Iperf3Server::new(T0);
        s.handle_input(&[b'a'; 37], T0).expect("cookie");
        s.handle_input(&frame(br#"{"tcp":true,"time":1,"flowlabel":8}"#), T0).expect("read");
        let ev = events(&mut s);
        assert!(
            matches!(&ev[..], [Iperf3ServerEvent::TestRequested(Err(m))] if m.contains("--flowlabel"))
        );
        // "unable to set IPv6 flow label: Operation not permitted": iperf3's own words name
        // the option.
        assert_eq!(s.poll_transmit(), Some(vec![9, 0xfe, 0, 0, 0, 127, 0, 0, 0, 1]));
    }

    #[test]
    fn limit_refusals_use_iperf3_signals() {
        use crate::limits::LimitKind;
        let mut s = Iperf3Server::new(T0);
        s.handle_input(&[b'a'; 37], T0).expect("cookie");
        let _ = s.poll_transmit();
        s.refuse_limit(LimitKind::Streams, Some("3.12"));
        // "unable to create a new test: Operation not permitted", not iperf3's "maximum = 128".
        assert_eq!(s.poll_transmit(), Some(vec![0xfe, 0, 0, 0, 100, 0, 0, 0, 1]));
        let mut s = Iperf3Server::new(T0);
        s.refuse_limit(LimitKind::Busy, Some("3.12"));
        assert_eq!(s.poll_transmit(), Some(vec![0xff]), "ACCESS_DENIED");
        assert!(s.handle_input(b"x", T0).is_err(), "the session is over");
    }

    #[test]
    fn oversized_or_empty_frames_are_refused_before_buffering() {
        for len in [0u32, MAX_PARAMS_JSON + 1, u32::MAX] {
            let mut s = Iperf3Server::new(T0);
            s.handle_input(&[b'a'; 37], T0).expect("cookie");
            let err = s.handle_input(&len.to_be_bytes(), T0).unwrap_err();
            assert!(matches!(err, ProtoError::Garbage(_)), "{len}: {err}");
        }
    }

    #[test]
    fn client_terminate_eof_and_silence_fail_clearly() {
        let mut s = running(Direction::Upload, 1);
        let err = s.handle_input(&[12], T0).unwrap_err();
        assert!(err.to_string().contains("CLIENT_TERMINATE"), "{err}");
        let mut s = running(Direction::Upload, 1);
        assert!(matches!(s.handle_eof(), Err(ProtoError::Closed(_))));
        let mut s = Iperf3Server::new(T0);
        assert!(matches!(s.handle_timeout(HANDSHAKE_TIMEOUT), Err(ProtoError::TimedOut { .. })));
        let mut s = running(Direction::Upload, 1);
        assert!(matches!(s.handle_input(&[99], T0), Err(ProtoError::Garbage(_))));
    }

    #[test]
    fn streams_outside_create_streams_are_violations() {
        let mut s = Iperf3Server::new(T0);
        assert!(s.stream_arrived(T0).is_err());
        let mut s = running(Direction::Upload, 1);
        assert!(s.stream_arrived(T0).is_err());
    }

    #[test]
    fn terminate_sends_server_terminate_once() {
        let mut s = running(Direction::Upload, 1);
        s.terminate();
        s.terminate();
        assert_eq!(s.poll_transmit(), Some(vec![11]));
    }

    fn running(direction: Direction, streams: u32) -> Iperf3Server {
        let mut spec = TestSpec::default_tcp();
        spec.direction = direction;
        spec.streams = streams;
        let mut s = Iperf3Server::new(T0);
        s.handle_input(&[b'a'; 37], T0).expect("cookie");
        s.handle_input(
            &frame(params(&spec, "t", ClientExtras::default()).expect("p").as_bytes()),
            T0,
        )
        .expect("params");
        s.accept(T0).expect("accept");
        for _ in 0..spec.connection_count() {
            s.stream_arrived(T0).expect("stream");
        }
        let _ = s.poll_transmit();
        let _ = events(&mut s);
        s
    }

    /// Our iperf3 client and server machines talk to each other through memory.
    #[test]
    fn our_client_and_server_complete_a_bidirectional_test() {
        let mut spec = TestSpec::default_tcp();
        spec.direction = Direction::Bidirectional;
        spec.streams = 2;
        let p = params(&spec, "linerate", ClientExtras::default()).expect("params");
        let mut c = Iperf3Client::new(spec, make_cookie(&[7; 36]), p, T0);
        let mut s = Iperf3Server::new(T0);
        let ours = serde_json::to_string(&results_from_side(&SideResults::default())).expect("j");
        let mut finished = false;
        for _ in 0..50 {
            if let Some(b) = c.poll_transmit() {
                s.handle_input(&b, T0).expect("server input");
            }
            if let Some(b) = s.poll_transmit() {
                c.handle_input(&b, T0).expect("client input");
            }
            while let Some(ev) = s.poll_event() {
                match ev {
                    Iperf3ServerEvent::TestRequested(r) => {
                        assert_eq!(r.expect("ok").spec.connection_count(), 4);
                        s.accept(T0).expect("accept");
                    }
                    Iperf3ServerEvent::TestEnd => s.exchange_results(ours.clone(), T0).expect("x"),
                    Iperf3ServerEvent::Finished => finished = true,
                    _ => {}
                }
            }
            while let Some(ev) = c.poll_event() {
                match ev {
                    Iperf3Event::CreateStreams => {
                        for _ in 0..4 {
                            s.stream_arrived(T0).expect("arrive");
                        }
                    }
                    Iperf3Event::Start => c.test_end(T0),
                    Iperf3Event::ResultsRequested => c.send_results(&ours, T0).expect("send"),
                    _ => {}
                }
            }
        }
        assert!(finished && c.is_finished() && s.is_finished());
    }
}
