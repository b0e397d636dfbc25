//! The session for one linerate (native protocol) client: the sans-IO
//! [`linerate_proto::server::ServerConn`] driving linerate's streams, with admission (limits,
//! the exclusive queue) asked of [`Shared`] before anything is allocated for the test. What
//! every served test shares (numbering, watchdog, notes) is in `served.rs`; how a connection
//! gets here is in `server.rs`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use linerate_proto::Machine;
use linerate_proto::server::{QUEUE_HEARTBEAT, ServerConn, ServerEvent};
use linerate_proto::udp::DatagramFormat;
use linerate_proto::wire::{AbortReason, Cookie, DataHello, TRANSACTION_FLAG};
use linerate_proto::{ProtoError, TestSpec};

use crate::record::End;
use crate::record::canonical;
use crate::session::frame_budget::server_side;
use crate::session::pump;
use crate::session::served::{Greeted, ServedTest};
use crate::session::shared::{DataConn, DataSock, Registration, Shared};
use crate::session::{Clock, ControlChannel, StreamSet};
use crate::sys;

struct Session<'a> {
    t: ServedTest,
    /// The server address the client reached (UDP stream sockets bind to it).
    local_ip: IpAddr,
    /// Round trip of the control connection when it opened.
    rtt: Option<Duration>,
    cookie: [u8; 16],
    data_rx: Option<Receiver<DataConn>>,
    registration: Registration<'a, [u8; 16], Sender<DataConn>>,
    /// A request being admitted, or waiting in the exclusive queue.
    waiting: Option<Waiting>,
    /// A doctor's probe echo, stopped when the session ends.
    echo: Option<crate::session::doctor_echo::Echo>,
    /// An agent's pair test, running on a thread of its own.
    pair: Option<PairJob>,
    /// Why the pair test failed, once its record was sent.
    pair_failed: Option<String>,
}

/// An agent's pair test (`linerate mesh`): an ordinary client test to the target, run on a
/// thread of its own while the session tells the requester it is still running. Dropped
/// (the requester left, the server stops), it interrupts the test.
struct PairJob {
    done: Receiver<crate::record::RunRecord>,
    interrupt: crate::session::Interrupt,
    told: Instant,
}

impl Drop for PairJob {
    fn drop(&mut self) {
        self.interrupt.trigger();
    }
}

/// How long a pair test may wait for its target to accept a connection.
const PAIR_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A request being admitted (or waiting in the exclusive queue) and what the client was
/// last told.
struct Waiting {
    spec: TestSpec,
    client: String,
    /// When the client last heard `queued` (None: not yet).
    told: Option<Instant>,
    position: u32,
}

/// Serves a control connection the front door greeted and admitted (or queued): acts on its
/// request, then runs the test.
pub(crate) fn run_admitted(g: Greeted<ServerConn>, shared: &Arc<Shared>) {
    let Greeted { sock: stream, machine: mut conn, clock, test, event, unsent } = g;
    let local_ip = stream
        .local_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| crate::record::canonical(a).ip());
    let mut s = Session {
        t: test,
        local_ip,
        rtt: sys::tcp_internals(&stream).map(|t| Duration::from_micros(t.rtt_us.into())),
        cookie: [0; 16],
        data_rx: None,
        registration: Registration::new(&shared.registry),
        waiting: None,
        echo: None,
        pair: None,
        pair_failed: None,
    };
    let result = ControlChannel::new(stream).map(server_side).and_then(|mut ctrl| {
        let r = if unsent.is_empty() { Ok(()) } else { ctrl.send(&unsent) };
        let r = r.and_then(|()| s.on_event(event, &mut conn, &clock));
        let r = r.and_then(|()| s.pump(&mut ctrl, &mut conn, &clock));
        let r = r.and_then(|()| s.pair_failed.take().map_or(Ok(()), |e| Err(anyhow::anyhow!(e))));
        if let Err(e) = &r {
            if !matches!(
                e.downcast_ref::<ProtoError>(),
                Some(ProtoError::Closed(_) | ProtoError::Aborted { .. })
            ) {
                let reason = if shared.shutdown_reason().is_some() {
                    AbortReason::ServerShutdown
                } else {
                    AbortReason::Other
                };
                conn.abort(reason, &format!("{e:#}"));
            }
            pump::flush(&mut ctrl, &mut conn);
        }
        r
    });
    s.t.finish(result);
}

impl Session<'_> {
    fn pump(
        &mut self,
        ctrl: &mut ControlChannel,
        conn: &mut ServerConn,
        clock: &Clock,
    ) -> Result<()> {
        while self.t.turn(ctrl, conn, clock, self.awaiting_streams())? {
            self.attach_arrivals(conn, clock)?;
            self.route_transactions(conn);
            while let Some(ev) = conn.poll_event() {
                self.on_event(ev, conn, clock)?;
            }
            self.poll_queue(conn, clock)?;
            self.poll_pair(conn)?;
            self.t.watch()?;
            if self.t.running() && self.t.streams.as_ref().is_some_and(StreamSet::all_done) {
                let results = self.t.take_results().context("results without streams")?;
                conn.send_results(crate::session::served::for_peer(results), clock.now())?;
            }
        }
        Ok(())
    }

    /// `--crr`: once every stream is attached, a thread of its own takes the data
    /// connections that still arrive (each a transaction) and hands them straight to their
    /// streams; it ends when the session's registration drops. Anything else is closed.
    fn route_transactions(&mut self, conn: &ServerConn) {
        let crr = conn.spec().and_then(|s| s.rr).is_some_and(|rr| rr.connect_each);
        let all =
            |s: &StreamSet| conn.spec().is_some_and(|sp| sp.connection_count() as usize == s.len());
        let Some(streams) = self.t.streams.as_ref().filter(|s| crr && all(s)) else { return };
        let (Some(routes), Some(rx)) = (streams.transaction_routes(), self.data_rx.take()) else {
            return;
        };
        let spawned = std::thread::Builder::new().name("lr-crr-route".into()).spawn(move || {
            while let Ok((id, sock)) = rx.recv() {
                if let (true, DataSock::Tcp(sock)) = (id & TRANSACTION_FLAG != 0, sock) {
                    let _ = routes.deliver(id & !TRANSACTION_FLAG, sock);
                }
            }
        });
        if spawned.is_err() {
            let why = format!("test {}: cannot start the --crr router thread", self.t.test);
            self.t.shared.reject(self.t.peer, why);
        }
    }

    fn awaiting_streams(&self) -> bool {
        self.data_rx.is_some() && self.t.streams.as_ref().is_some_and(|s| s.started().is_none())
    }

    fn attach_arrivals(&mut self, conn: &mut ServerConn, clock: &Clock) -> Result<()> {
        let Some(rx) = &self.data_rx else { return Ok(()) };
        loop {
            let (id, sock) = match rx.try_recv() {
                Ok(c) => c,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return Ok(()),
            };
            if let Err(e) = conn.expects_stream(id) {
                self.t.shared.reject(self.t.peer, format!("test {}: {e}", self.t.test));
                continue;
            }
            // Reflection safety: UDP test traffic goes only to the address that completed
            // the control handshake, whoever else learned the cookie.
            if let DataSock::Udp(from) = &sock
                && canonical(*from).ip() != self.t.peer.ip()
            {
                let why = format!(
                    "test {}: UDP stream {id} hello from {from}, not the client's address; ignored",
                    self.t.test
                );
                self.t.shared.reject(self.t.peer, why);
                continue;
            }
            let streams = self.t.streams.as_mut().context("streams arrived before the test")?;
            match sock {
                DataSock::Tcp(sock) => streams.add_accepted(id, sock)?,
                DataSock::Udp(from) => {
                    let local = SocketAddr::new(self.local_ip, self.t.shared.port);
                    let hello = DataHello { cookie: Cookie(self.cookie), stream_id: id }.encode();
                    let opts = streams.socket_options();
                    let data = crate::session::udp::accept_stream(local, from, &hello, opts)
                        .with_context(|| format!("UDP stream {id}"))?;
                    streams.add_udp(id, data)?;
                }
            }
            conn.attach_stream(id, clock.now())?;
            if conn.spec().is_some_and(|s| s.connection_count() as usize == streams.len()) {
                streams.prepare();
            }
        }
    }

    fn on_event(&mut self, ev: ServerEvent, conn: &mut ServerConn, clock: &Clock) -> Result<()> {
        match ev {
            ServerEvent::TestRequested { spec, client_software: client } => {
                self.waiting = Some(Waiting { spec, client, told: None, position: 0 });
                self.poll_queue(conn, clock)?;
            }
            ServerEvent::Start => self.t.start(),
            ServerEvent::PeerStop(_) => {
                if let Some(s) = &self.t.streams {
                    s.end_signalled();
                }
            }
            ServerEvent::PeerResults(r) => {
                // A byte-bound UDP upload has no stop: the client's results end it.
                if let Some(s) = &self.t.streams {
                    s.end_signalled();
                }
                self.t.client_results = Some(*r);
            }
            ServerEvent::Finished => {}
            ServerEvent::EnvironmentRequested { client_software } => {
                if let Err(r) = self.t.admit_doctor() {
                    conn.refuse(&r.message);
                    bail!("refused a doctor: {r}");
                }
                let scope = crate::measure::host::Scope::AllUp(Some(self.local_ip));
                let mut environment = crate::measure::host::snapshot(scope);
                self.t.shared.place.stamp(&mut environment);
                environment.serving_s = Some(self.t.shared.serving_since.elapsed().as_secs());
                conn.send_environment(environment)?;
                let note = crate::session::server_note::ServerNote::DoctorAnswered {
                    peer: self.t.peer,
                    client: client_software,
                };
                (self.t.shared.notes)(&note);
            }
            ServerEvent::EchoRequested { client_port } => self.start_echo(client_port, conn)?,
            ServerEvent::PairTestRequested { target, spec, client_software } => {
                self.start_pair(target, spec, client_software, conn)?;
            }
        }
        Ok(())
    }

    /// The address a pair test to `host:port` (`target` as asked) may use, or why none.
    fn pair_address(&self, target: &str, host: &str, port: u16) -> Result<IpAddr, String> {
        use std::net::ToSocketAddrs;
        let resolve = |name: &str| -> Vec<IpAddr> {
            (name, port).to_socket_addrs().map(|a| a.map(|s| s.ip()).collect()).unwrap_or_default()
        };
        let addrs = resolve(host);
        let allow = &self.t.shared.pair_allow;
        let names: Vec<(String, Vec<IpAddr>)> = allow
            .iter()
            .filter_map(|a| match a {
                crate::plan::server::PairTarget::Name(n) => Some((n.clone(), resolve(n))),
                crate::plan::server::PairTarget::Net(_) => None,
            })
            .collect();
        let refusal =
            crate::plan::server::pair_target_refusal(allow, &names, self.local_ip, target, &addrs);
        match (refusal, addrs.first()) {
            (None, Some(ip)) => Ok(*ip),
            (Some(why), _) => Err(why),
            (None, None) => Err(format!("the pair test's target {target} resolves to no address")),
        }
    }

    /// Starts an agent's pair test (admitted at the door like any test): the target must be
    /// an agent holding this server's key (`ClientPlan::agents_only`), so the requester can
    /// aim this agent at nothing else.
    fn start_pair(
        &mut self,
        target: String,
        spec: TestSpec,
        client: String,
        conn: &mut ServerConn,
    ) -> Result<()> {
        let (host, port) = match crate::plan::host::host_port(&target, None, "") {
            Ok(hp) => hp,
            Err(e) => {
                conn.refuse(&format!("the pair test's target: {e}"));
                bail!("refused a pair test: {e}");
            }
        };
        // Where it may go (`--pair-allow`, else its own kind of network), checked on the
        // addresses resolved now; the test then goes to the first of them, not to the name,
        // so a resolver cannot answer differently between the check and the connection.
        let host = match self.pair_address(&target, &host, port) {
            Ok(ip) => ip.to_string(),
            Err(why) => {
                conn.refuse(&why);
                bail!("refused a pair test: {why}");
            }
        };
        let plan = crate::plan::ClientPlan {
            psk: self.t.shared.access.psk.clone(),
            agents_only: true,
            placement: crate::plan::placement::Choice::Fixed(crate::record::Placement::System),
            connect_timeout: PAIR_CONNECT_TIMEOUT,
            ..crate::plan::ClientPlan::to(&host, port, spec.clone())
        };
        self.t.begin_pair(client, spec, target);
        let (tx, done) = channel();
        let interrupt = crate::session::Interrupt::manual();
        let stop = interrupt.clone();
        let place = self.t.shared.place.clone();
        std::thread::Builder::new()
            .name("lr-pair".into())
            .spawn(move || {
                let mut record =
                    crate::session::client::run(&plan, &mut crate::session::Quiet, &stop);
                if let Some(env) = record.client.as_mut().and_then(|c| c.environment.as_mut()) {
                    place.stamp(env);
                }
                let _ = tx.send(record);
            })
            .context("cannot start the pair test's thread")?;
        self.pair = Some(PairJob { done, interrupt, told: Instant::now() });
        conn.pair_running()?;
        Ok(())
    }

    /// While a pair test runs: tells the requester so every heartbeat; once it ended, sends
    /// its record.
    fn poll_pair(&mut self, conn: &mut ServerConn) -> Result<()> {
        let Some(job) = &mut self.pair else { return Ok(()) };
        match job.done.try_recv() {
            Ok(record) => {
                if let Some(why) = record.outcome.failure() {
                    self.pair_failed = Some(why.message.clone());
                }
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                self.t.shared.metrics.pairs.ended(&record, now.map_or(0.0, |d| d.as_secs_f64()));
                let json = serde_json::to_value(&record).context("cannot encode the record")?;
                self.pair = None;
                conn.send_pair_result(json)?;
            }
            Err(TryRecvError::Empty) if job.told.elapsed() >= QUEUE_HEARTBEAT / 2 => {
                job.told = Instant::now();
                conn.pair_running()?;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => {
                bail!("the pair test's thread ended without a record")
            }
        }
        Ok(())
    }

    /// Echoes a doctor's path-MTU probes, only to the control connection's address.
    fn start_echo(&mut self, client_port: u16, conn: &mut ServerConn) -> Result<()> {
        let mut cookie = [0u8; 16];
        getrandom::getrandom(&mut cookie)
            .map_err(|e| anyhow::anyhow!("no randomness for the echo cookie: {e}"))?;
        let peer = SocketAddr::new(self.t.peer.ip(), client_port);
        match crate::session::doctor_echo::Echo::start(self.local_ip, peer, Cookie(cookie)) {
            Ok((echo, port)) => {
                self.echo = Some(echo);
                conn.echo_ready(port, Cookie(cookie))?;
                Ok(())
            }
            Err(e) => {
                conn.refuse(&format!("this server cannot echo probes: {e:#}"));
                Err(e)
            }
        }
    }

    /// Admits the request, or (queued) tells the client where it stands: when its place
    /// changes and at least every heartbeat. Runs the test once its turn comes.
    fn poll_queue(&mut self, conn: &mut ServerConn, clock: &Clock) -> Result<()> {
        let Some(w) = &mut self.waiting else { return Ok(()) };
        match self.t.admit(&w.spec, conn.can_queue()) {
            Err(r) => {
                conn.refuse(&r.message);
                bail!("refused: {r}");
            }
            Ok(Some(place)) => {
                let due = w.told.is_none_or(|t| t.elapsed() >= QUEUE_HEARTBEAT);
                if place.position != w.position || due {
                    conn.queue(place.position, place.wait)?;
                    (w.told, w.position) = (Some(Instant::now()), place.position);
                }
                Ok(())
            }
            Ok(None) => {
                let Some(w) = self.waiting.take() else { return Ok(()) };
                self.start_test(w.spec, w.client, conn, clock)
            }
        }
    }

    /// The admitted test: its streams, cookie and the `test_accepted` answer.
    fn start_test(
        &mut self,
        spec: TestSpec,
        client: String,
        conn: &mut ServerConn,
        clock: &Clock,
    ) -> Result<()> {
        let mut streams = match StreamSet::new(&spec, End::Server) {
            Ok(s) => s,
            Err(e) => {
                conn.refuse(&format!("{e:#}"));
                return Err(e);
            }
        };
        streams.set_layout(self.t.shared.admission.limits.layout);
        if let Err(e) = streams.set_cpus(&spec.server_cpus) {
            conn.refuse(&e);
            bail!("refused: {e}");
        }
        streams.set_rtt(self.rtt);
        streams.record_environment(Some(self.local_ip), &self.t.shared.place);
        let mut cookie = [0u8; 16];
        getrandom::getrandom(&mut cookie)
            .map_err(|e| anyhow::anyhow!("no randomness for the test cookie: {e}"))?;
        let (tx, rx) = channel();
        self.registration.register(cookie, tx)?;
        self.cookie = cookie;
        self.data_rx = Some(rx);
        streams.set_datagram_format(DatagramFormat::native(&cookie));
        self.t.begin(streams, client, spec);
        conn.accept(Cookie(cookie), clock.now())?;
        Ok(())
    }
}
