//! The server session for one iperf3 client: iperf3's control protocol (from
//! `linerate_proto::iperf3::Iperf3Server`) driving linerate's own streams, so an `iperf3 -c`
//! gets the answers it expects and the server's log has linerate's full figures.
//!
//! What differs from a linerate client: data connections carry only the cookie, so they are
//! numbered by the server's accept order (the order the client opened them); the client never
//! closes its sending side, so at TEST_END receivers stop once their socket is quiet (bytes
//! still in flight at that moment are counted, so both ends agree); and the client's report
//! holds only what iperf3's results format carries (bytes, duration, retransmits, CPU).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use linerate_proto::Machine;
use linerate_proto::iperf3::{
    COOKIE_LEN, Iperf3Request, Iperf3Server, Iperf3ServerEvent, ServerError, State, UDP_REPLY,
    errno, for_limit, results_from_side,
};
use linerate_proto::udp::{DatagramFormat, SeqWidth};
use linerate_proto::{LimitKind, ProtoError, Protocol, Refusal, SideResults, TestSpec};

use super::{end_of_test_close, peer_side, receivers_end_at};
use crate::record::End;
use crate::record::canonical;
use crate::session::frame_budget::server_side;
use crate::session::pump;
use crate::session::served::{Greeted, ServedTest};
use crate::session::server_note::ServerNote;
use crate::session::shared::{Iperf3Conn, Registration, Shared};
use crate::session::test_log::TestLogLine;
use crate::session::udp::accept_stream;
use crate::session::{Clock, ControlChannel, StreamSet};
use crate::sys;

/// How long receivers may take to notice the end (their socket poll is 250 ms).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

struct Session<'a> {
    t: ServedTest,
    request: Option<Iperf3Request>,
    client: String,
    arrivals: Option<Receiver<Iperf3Conn>>,
    pending: Vec<Iperf3Conn>,
    registration: Registration<'a, [u8; COOKIE_LEN], Sender<Iperf3Conn>>,
    /// UDP tests: the client addresses of stream connects, in arrival order.
    udp_arrivals: Option<Receiver<SocketAddr>>,
    udp_registration: Registration<'a, IpAddr, Sender<SocketAddr>>,
    udp_attached: usize,
    /// The server address the client reached (UDP stream sockets bind to it).
    local_ip: IpAddr,
    /// Round trip of the control connection when it opened.
    rtt: Option<Duration>,
}

/// Serves an iperf3 control connection the front door greeted and admitted: acts on its
/// parameters, then runs the test.
pub(crate) fn run_admitted(g: Greeted<Iperf3Server>, shared: &Arc<Shared>) {
    let Greeted { sock: stream, machine: mut m, clock, test, event, unsent } = g;
    let mut s = Session {
        t: test,
        request: None,
        client: "iperf3".into(),
        arrivals: None,
        pending: Vec::new(),
        registration: Registration::new(&shared.iperf3),
        udp_arrivals: None,
        udp_registration: Registration::new(&shared.iperf3_udp),
        udp_attached: 0,
        local_ip: stream
            .local_addr()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| canonical(a).ip()),
        rtt: sys::tcp_internals(&stream).map(|t| Duration::from_micros(t.rtt_us.into())),
    };
    let result = ControlChannel::new(stream).map(server_side).and_then(|mut ctrl| {
        let r = if unsent.is_empty() { Ok(()) } else { ctrl.send(&unsent) };
        let r = r.and_then(|()| s.on_event(event, &mut m, &clock));
        let r = r.and_then(|()| s.pump(&mut ctrl, &mut m, &clock));
        if let Err(e) = &r {
            if e.downcast_ref::<ProtoError>().is_none() {
                let started = s.t.streams.as_ref().is_some_and(|st| st.started().is_some());
                let version = s.request.as_ref().and_then(|r| r.client_version.as_deref());
                // A limit that cut the running test reads as that limit, not as the idle
                // timeout iperf3's NO_MSG names.
                let limit = e.downcast_ref::<Refusal>().and_then(|r| for_limit(r.kind, version));
                if shared.shutdown_reason().is_some() {
                    m.terminate();
                } else if let Some(limit) = limit {
                    m.fail_with(limit);
                } else {
                    m.fail_with(if started { errno::NO_MSG } else { errno::NEW_TEST });
                }
            }
            pump::flush(&mut ctrl, &mut m);
        }
        r
    });
    s.t.finish(result);
}

/// Admits an iperf3 client's request (an endless `-t 0` test is bounded by `--max-duration`
/// first), or queues the iperf3 refusal its clients understand and says why. iperf3 has no
/// way to wait in a queue: an exclusive server that is busy refuses. Called by the front door
/// before any thread is spent; again (a no-op) by the session.
pub(crate) fn admit(
    t: &mut ServedTest,
    req: &mut Iperf3Request,
    m: &mut Iperf3Server,
) -> Result<()> {
    if req.endless {
        bound_endless(&mut req.spec, t.shared.admission.limits.max_duration);
    }
    if let Err(r) = t.admit(&req.spec, false) {
        if req.spec.congestion.is_some() && r.kind == LimitKind::NotAllowed {
            m.refuse(errno::SET_CONGESTION);
        } else {
            m.refuse_limit(r.kind, req.client_version.as_deref());
        }
        bail!("refused an iperf3 client: {r}");
    }
    Ok(())
}

impl Session<'_> {
    fn pump(
        &mut self,
        ctrl: &mut ControlChannel,
        m: &mut Iperf3Server,
        clock: &Clock,
    ) -> Result<()> {
        loop {
            let eager = m.awaiting_streams();
            if !self.t.turn(ctrl, m, clock, eager)? {
                return Ok(());
            }
            self.attach_arrivals(m, clock)?;
            while let Some(ev) = m.poll_event() {
                self.on_event(ev, m, clock)?;
            }
            self.t.watch()?;
        }
    }

    /// Collects data connections; when all are there, numbers them in accept order.
    /// UDP streams: each connect from the client gets a socket connected to it and the reply;
    /// they arrive one after another (the client waits for each reply), so order is known.
    fn attach_udp_arrivals(&mut self, m: &mut Iperf3Server, clock: &Clock) -> Result<()> {
        let Some(rx) = &self.udp_arrivals else { return Ok(()) };
        while let Ok(from) = rx.try_recv() {
            if !m.awaiting_streams() {
                continue;
            }
            let spec = &self.request.as_ref().context("streams before the request")?.spec;
            let (id, _) = *spec.stream_plan().get(self.udp_attached).context("too many streams")?;
            let local = SocketAddr::new(self.local_ip, self.t.shared.port);
            let streams = self.t.streams.as_mut().context("streams before the test")?;
            let data = accept_stream(local, from, &UDP_REPLY, streams.socket_options())
                .with_context(|| format!("iperf3 UDP stream {id}"))?;
            streams.add_udp(id, data)?;
            self.udp_attached += 1;
            if m.stream_arrived(clock.now())? {
                // Every stream is attached: the next test from this address may open its own.
                self.udp_registration.release();
            }
        }
        Ok(())
    }

    fn attach_arrivals(&mut self, m: &mut Iperf3Server, clock: &Clock) -> Result<()> {
        self.attach_udp_arrivals(m, clock)?;
        let Some(rx) = &self.arrivals else { return Ok(()) };
        while let Ok((seq, mut sock)) = rx.try_recv() {
            if !m.awaiting_streams() {
                // As iperf3 does with a connection it did not ask for.
                let _ = sock.write_all(&[State::AccessDenied.byte()]);
                let why =
                    format!("test {}: an extra iperf3 data connection was refused", self.t.test);
                self.t.shared.reject(self.t.peer, why);
                continue;
            }
            self.pending.push((seq, sock));
            if !m.stream_arrived(clock.now())? {
                continue;
            }
            self.pending.sort_by_key(|(seq, _)| *seq);
            let spec = &self.request.as_ref().context("streams before the request")?.spec;
            let streams = self.t.streams.as_mut().context("streams before the test")?;
            for ((id, _), (_, sock)) in spec.stream_plan().into_iter().zip(self.pending.drain(..)) {
                streams.add_accepted(id, sock)?;
            }
        }
        Ok(())
    }

    fn on_event(
        &mut self,
        ev: Iperf3ServerEvent,
        m: &mut Iperf3Server,
        clock: &Clock,
    ) -> Result<()> {
        match ev {
            Iperf3ServerEvent::TestRequested(Err(why)) => bail!("refused an iperf3 client: {why}"),
            Iperf3ServerEvent::TestRequested(Ok(req)) => self.on_request(*req, m, clock)?,
            Iperf3ServerEvent::Start => self.t.start(),
            Iperf3ServerEvent::TestEnd => {
                let json = self.end_streams()?;
                m.exchange_results(json, clock.now())?;
            }
            Iperf3ServerEvent::PeerResults(r) => {
                let spec = &self.request.as_ref().context("results before the request")?.spec;
                self.t.client_results = Some(peer_side(&r, spec, End::Client));
            }
            Iperf3ServerEvent::Finished => {}
        }
        Ok(())
    }

    fn on_request(
        &mut self,
        mut req: Iperf3Request,
        m: &mut Iperf3Server,
        clock: &Clock,
    ) -> Result<()> {
        admit(&mut self.t, &mut req, m)?;
        let mut streams = match StreamSet::new(&req.spec, End::Server) {
            Ok(s) => s,
            Err(e) => {
                m.refuse(errno::NEW_TEST);
                return Err(e);
            }
        };
        streams.set_peer_program("iperf3");
        streams.set_layout(self.t.shared.admission.limits.layout);
        if let Err(e) = streams.set_cpus(&req.spec.server_cpus) {
            // "unable to set CPU affinity: Invalid argument", as sched_setaffinity says.
            m.refuse(ServerError::with(errno::AFFINITY, errno::os::EINVAL));
            bail!("refused an iperf3 client: {e}");
        }
        streams.set_rtt(self.rtt);
        streams.record_environment(Some(self.local_ip), &self.t.shared.place);
        if req.spec.protocol == Protocol::Udp {
            // iperf3's own datagrams: no secret (iperf3 has none to carry).
            let width = if req.udp_counters_64bit { SeqWidth::Bits64 } else { SeqWidth::Bits32 };
            streams.set_datagram_format(DatagramFormat::iperf3(width));
            self.open_udp_registration(m)?;
        }
        let cookie = m.cookie().context("a request before the cookie")?;
        let (tx, rx) = channel();
        self.registration.register(cookie, tx)?;
        self.arrivals = Some(rx);
        if let Some(v) = &req.client_version {
            self.client = format!("iperf3 {v}");
        }
        self.t.begin(streams, self.client.clone(), req.spec.clone());
        self.request = Some(req);
        m.accept(clock.now())?;
        Ok(())
    }

    /// iperf3 UDP connects carry no cookie: they are routed by the client's address, so only
    /// one test per address may be opening UDP streams at a time.
    fn open_udp_registration(&mut self, m: &mut Iperf3Server) -> Result<()> {
        let ip = self.t.peer.ip();
        let busy = self.t.shared.iperf3_udp.lock().map_or(true, |r| r.contains_key(&ip));
        if busy {
            m.refuse(ServerError::with(errno::NEW_TEST, errno::os::EBUSY));
            bail!(
                "refused an iperf3 client: another iperf3 UDP test from {ip} is still opening its \
                 streams (iperf3's UDP streams carry no cookie to tell them apart); try again"
            );
        }
        let (tx, rx) = channel();
        self.udp_registration.register(ip, tx)?;
        self.udp_arrivals = Some(rx);
        Ok(())
    }

    /// TEST_END: stops the streams, keeps our figures and returns them as iperf3 results JSON.
    fn end_streams(&mut self) -> Result<String> {
        let streams = self.t.streams.as_mut().context("TEST_END before the streams")?;
        let test_end = streams.started().map(|t| t.elapsed());
        streams.forgive(end_of_test_close);
        streams.finish();
        streams.wait_done(DRAIN_LIMIT);
        let mut side = self.t.take_results().context("TEST_END before the streams")?;
        if let Some(at) = test_end {
            receivers_end_at(&mut side, at);
        }
        self.t.server_results = Some(side.clone());
        let side = crate::session::served::for_peer(side);
        let mut doc = results_from_side(&side);
        if self.request.as_ref().is_some_and(|r| r.get_server_output) {
            doc.server_output_text = Some(self.output_text(&side));
        }
        Ok(serde_json::to_string(&doc)?)
    }

    /// What this server prints for the test, for `--get-server-output`.
    fn output_text(&self, side: &SideResults) -> String {
        let spec =
            self.request.as_ref().map(|r| r.spec.clone()).unwrap_or_else(TestSpec::default_tcp);
        let notes = [
            ServerNote::TestAccepted {
                test: self.t.test,
                peer: self.t.peer,
                client: self.client.clone(),
                spec: spec.clone(),
            },
            ServerNote::TestEnded {
                test: self.t.test,
                peer: self.t.peer,
                server: Some(side.clone()),
                client: None,
                error: None,
                summary: TestLogLine::new(
                    self.client.clone(),
                    Some(spec),
                    self.t.held(),
                    Some(side),
                    false,
                ),
            },
        ];
        (self.t.shared.note_text)(&notes)
    }
}

/// An endless iperf3 test (`-t 0`) runs until its client ends it, as on an iperf3 server, but
/// never longer than this server's `--max-duration` (warm-up included): its duration is what
/// is left of that after the warm-up. A warm-up alone over the maximum is left at 1 ms, for
/// admission to refuse as any test too long.
fn bound_endless(spec: &mut TestSpec, max_duration: Duration) {
    let max_ms = u64::try_from(max_duration.as_millis()).unwrap_or(u64::MAX);
    let duration_ms =
        max_ms.saturating_sub(spec.omit_ms).clamp(1, linerate_proto::spec::MAX_DURATION_MS);
    spec.end = linerate_proto::EndCondition::Duration { duration_ms };
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::EndCondition;

    #[test]
    fn an_endless_test_is_bounded_by_the_servers_maximum() {
        let mut spec = TestSpec::default_tcp();
        spec.omit_ms = 2000;
        bound_endless(&mut spec, Duration::from_secs(3600));
        assert_eq!(spec.end, EndCondition::Duration { duration_ms: 3_598_000 });
        spec.omit_ms = 4_000_000;
        bound_endless(&mut spec, Duration::from_secs(3600));
        assert_eq!(spec.end, EndCondition::Duration { duration_ms: 1 });
    }
}
