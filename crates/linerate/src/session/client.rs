//! The client driver: connect, request the test, open the data streams, run the clock, and
//! exchange results. Produces a [`RunRecord`] whatever happens: a failed test keeps its
//! partial figures and a one-line error that says what happened and what to try, with its
//! [`FailureKind`] (whose fault it was).

use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use linerate_proto::client::{ClientConn, ClientEvent};
use linerate_proto::iperf3::COOKIE_LEN;
use linerate_proto::udp::DatagramFormat;
use linerate_proto::wire::{DataHello, StopReason};
use linerate_proto::{Machine, ProtoError, Protocol, TestSpec};

use crate::plan::ClientPlan;
use crate::plan::host::format_host_port;
use crate::record::{
    Decision, End, Failure, FailureKind, Outcome, Placement, RunRecord, SCHEMA_VERSION, unix_ms_now,
};
use crate::session::Recv;
use crate::session::iperf3_peer::{PeerIsIperf3, looks_like_iperf3};
use crate::session::pump::{self, Turn, Wait};
use crate::session::udp::{Handshake, connect_stream};
use crate::session::{
    Clock, ControlChannel, Interrupt, LiveEvent, NO_PROGRESS_TIMEOUT, Observer, SOFTWARE,
    StreamSet, random_nonce,
};
use crate::stats::integrity;
use crate::sys;
use crate::traffic::socket::{self, Bind, SetupError, SocketOptions, Step};

/// Runs one test as described by `plan`. Never panics on peer behaviour; errors end up in
/// the record's outcome.
///
/// If the server turns out to be an iperf3 server, the test goes on on the same connection
/// with iperf3's protocol and the record says so (`ClientRun::open`).
pub fn run(plan: &ClientPlan, observer: &mut dyn Observer, interrupt: &Interrupt) -> RunRecord {
    run_gated(plan, observer, interrupt, None)
}

/// Holds a fleet's start: each host's session arrives here once all its data streams are
/// attached (the server said `ready`), and waits until the coordinator lets every host go at
/// one instant.
pub trait StartGate: Sync {
    /// Blocks until the fleet starts (true) or this host is left out of it (false: it was
    /// ready too late, or the fleet was abandoned). On true, the coordinator has written this
    /// host's `go` and opened its streams' gate, at the instant it did every host's: no
    /// host's thread has to be scheduled for the fleet to start.
    fn arrive(&self, held: HeldStart) -> bool;

    /// At the end of the session: when its first data byte moved on this end (None: none
    /// did). The fleet's start skew is the spread of these.
    fn first_byte(&self, at: Option<Instant>);
}

/// What the coordinator needs to start one held host.
#[derive(Debug)]
pub struct HeldStart {
    /// The `go` frame, to write on `control`.
    pub go: Vec<u8>,
    /// The host's control connection (a second handle to the session's socket; the session
    /// does not touch it while it waits at the gate).
    pub control: TcpStream,
    /// The gate this host's streams wait at.
    pub streams: Arc<crate::traffic::StartGate>,
}

/// [`run`], with the start held at `gate` when one is given (`linerate fleet`): the spec asks
/// the server for a held start, and an iperf3 server is refused rather than retried, since
/// iperf3 cannot hold a start.
pub fn run_gated(
    plan: &ClientPlan,
    observer: &mut dyn Observer,
    interrupt: &Interrupt,
    gate: Option<&dyn StartGate>,
) -> RunRecord {
    let mut run = ClientRun::new(plan, gate);
    let result = run.drive(observer, interrupt);
    if let Some(g) = gate {
        g.first_byte(run.streams.as_ref().and_then(StreamSet::first_byte));
    }
    // Set only when the opening found an iperf3 server, which holds the connection for a test.
    let Some(opened) = run.opened.take() else { return run.into_record(result) };
    if gate.is_some() {
        let why = "the server speaks iperf3's protocol, which cannot hold a start for a fleet: \
                   run `linerate server` on every fleet host";
        return run.into_record(Err(Failure::new(FailureKind::Incompatible, why).into()));
    }
    observer.on_event(LiveEvent::Notice(
        "the server answered like an iperf3 server: running the test with iperf3's protocol",
    ));
    let mut record = super::iperf3::client::run_on(plan, observer, interrupt, Some(opened));
    record.warnings.push(format!(
        "{} answered like an iperf3 server (it asked for iperf3 parameters), so the test ran \
         with iperf3's protocol on the same connection",
        record.server
    ));
    record
}

/// A control connection an iperf3 server took as its own: it read the first [`COOKIE_LEN`]
/// bytes of our greeting as its cookie and answered `first` (PARAM_EXCHANGE). The test goes
/// on there with iperf3's protocol, so a one-shot server (`iperf3 -s -1`) serves it: a
/// second connection would find it gone.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) stream: TcpStream,
    pub(crate) server: SocketAddr,
    /// What the server holds as the test's cookie: every data connection sends it.
    pub(crate) cookie: [u8; COOKIE_LEN],
    /// The server's first bytes.
    pub(crate) first: Vec<u8>,
}

struct ClientRun<'p> {
    plan: &'p ClientPlan,
    gate: Option<&'p dyn StartGate>,
    record: RunRecord,
    streams: Option<StreamSet>,
    interrupted: bool,
    /// When the server's results arrived, from this end's start: how long the test took
    /// here, which bounds the durations the server may report.
    peer_results_at: Option<Duration>,
    /// The control connection, when an iperf3 server took it (see [`Opened`]).
    opened: Option<Opened>,
}

impl<'p> ClientRun<'p> {
    fn new(plan: &'p ClientPlan, gate: Option<&'p dyn StartGate>) -> Self {
        let mut record = new_record(plan);
        record.spec.held_start = gate.is_some();
        Self {
            plan,
            gate,
            record,
            streams: None,
            interrupted: false,
            peer_results_at: None,
            opened: None,
        }
    }

    /// The loopback placement to run (`plan/placement.rs`) and the CPUs to propose: for a
    /// TCP bulk test or a request/response test (`--rr`, TCP or UDP; not `--crr`) to a
    /// loopback address, no CPUs listed with `-A`, not part of a fleet or a test under load,
    /// on a client with two CPUs or more. None where the question does not arise.
    fn placement(&self, spec: &TestSpec, server: SocketAddr) -> Option<(Decision, Vec<u32>)> {
        let plan = self.plan;
        let applies = plan.cpus.is_empty()
            && spec.server_cpus.is_empty()
            && crate::record::is_loopback(server.ip())
            && crate::plan::affinity::pairs(spec)
            && self.gate.is_none()
            && plan.under_load.is_none();
        if !applies {
            return None;
        }
        let decision = crate::plan::placement::decide(
            plan.placement,
            &plan.calibrated,
            spec.streams,
            spec.rr.is_some(),
        );
        if decision.placement == Placement::System {
            return Some((decision, Vec::new()));
        }
        match crate::plan::affinity::pair_cpus(&sys::allowed_cpus()?, sys::current_cpu()) {
            Some(cpus) => Some((decision, cpus)),
            None => Some((
                Decision {
                    placement: Placement::System,
                    why: "this process may run on one CPU only: nothing to place".into(),
                },
                Vec::new(),
            )),
        }
    }

    fn drive(&mut self, observer: &mut dyn Observer, interrupt: &Interrupt) -> Result<()> {
        let addr_list = resolve(&self.plan.host, self.plan.port, self.plan)?;
        let (stream, server) = connect_any(&addr_list, self.plan)?;
        self.record.local_address = stream.local_addr().ok().map(|a| a.to_string());
        self.record.remote_address = Some(server.to_string());
        let mut spec = effective_spec(self.plan, &stream, server);
        spec.held_start = self.gate.is_some();
        if let Some((decision, cpus)) = self.placement(&spec, server) {
            spec.pair_split = decision.placement == Placement::Split;
            spec.pair_cpus = cpus;
            self.record.placement = Some(decision);
        }
        self.record.spec = spec.clone();
        let mut ctrl = ControlChannel::new(stream)?;
        let clock = Clock::new();
        let mut conn =
            ClientConn::new(spec, SOFTWARE, clock.now())?.with_queue_limit(self.plan.queue_timeout);
        if let Some(key) = &self.plan.psk {
            conn = conn.with_psk(key.clone(), random_nonce()?);
        }
        if self.plan.agents_only {
            conn = conn.agents_only();
        }
        let mut loop_state = LoopState::default();
        let result = self.open(&mut ctrl, &mut conn, &clock, server).and_then(|()| {
            self.pump(&mut ctrl, &mut conn, &clock, &mut loop_state, server, observer, interrupt)
        });
        if let Err(e) = &result
            && e.downcast_ref::<PeerIsIperf3>().is_none()
        {
            conn.abort(FailureKind::of(e).abort_reason(), &format!("client error: {e:#}"));
            pump::flush(&mut ctrl, &mut conn);
        }
        result
    }

    /// Sends the greeting's first [`COOKIE_LEN`] bytes alone and waits (at most the
    /// handshake's timeout) for the server's first bytes before the rest. A linerate server
    /// answers after eight (its magic and hello come at once); an iperf3 server after
    /// [`COOKIE_LEN`], which it takes for its cookie before it asks for parameters. So
    /// the protocol is known without spending a test: an iperf3 server's connection is kept
    /// for the test ([`Opened`]), and a one-shot `iperf3 -s -1` serves it.
    fn open(
        &mut self,
        ctrl: &mut ControlChannel,
        conn: &mut ClientConn,
        clock: &Clock,
        server: SocketAddr,
    ) -> Result<()> {
        let greeting = conn.poll_transmit().unwrap_or_default();
        let cut = COOKIE_LEN.min(greeting.len());
        ctrl.send(&greeting[..cut])?;
        let until = Instant::now() + linerate_proto::HANDSHAKE_TIMEOUT;
        let first = loop {
            let left = until.saturating_duration_since(Instant::now());
            match ctrl.recv(left.max(Duration::from_millis(1)))? {
                Recv::Data(bytes) => break Some(bytes.to_vec()),
                Recv::Eof => {
                    conn.handle_eof()?;
                    break None;
                }
                Recv::Idle if left.is_zero() => break None,
                Recv::Idle => {}
            }
        };
        if let Some(first) = first.as_ref()
            && looks_like_iperf3(first)
        {
            // An iperf3 server answers only once it has read a whole cookie, so all of it went.
            let cookie =
                greeting[..cut].try_into().context("an iperf3 answer to a short greeting")?;
            let stream = ctrl.stream().try_clone().context("control connection")?;
            self.opened = Some(Opened { stream, server, cookie, first: first.clone() });
            return Err(PeerIsIperf3.into());
        }
        ctrl.send(&greeting[cut..])?;
        if let Some(first) = first {
            conn.handle_input(&first, clock.now())?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn pump(
        &mut self,
        ctrl: &mut ControlChannel,
        conn: &mut ClientConn,
        clock: &Clock,
        st: &mut LoopState,
        server: SocketAddr,
        observer: &mut dyn Observer,
        interrupt: &Interrupt,
    ) -> Result<()> {
        loop {
            let tick = self.streams.as_ref().and_then(StreamSet::next_tick);
            let wait = Wait { tick, deadlines: &[st.stop_at], cap: Duration::from_millis(50) };
            if pump::turn(ctrl, clock, conn, wait, None)? == Turn::Finished {
                return Ok(());
            }
            while let Some(ev) = conn.poll_event() {
                self.on_event(ev, (conn, clock), ctrl, st, server, observer)?;
            }
            self.on_clock(conn, clock, st, observer, interrupt)?;
        }
    }

    fn on_event(
        &mut self,
        ev: ClientEvent,
        (conn, clock): (&mut ClientConn, &Clock),
        ctrl: &ControlChannel,
        st: &mut LoopState,
        server: SocketAddr,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        match ev {
            ClientEvent::Accepted { cookie, server_software, .. } => {
                observer.on_event(LiveEvent::Accepted {
                    local: self.record.local_address.clone().unwrap_or_default(),
                    remote: server.to_string(),
                    server_software: &server_software,
                });
                self.record.server_software = Some(server_software);
                // Dropped in the handshake for a server that does not pair.
                if self.record.spec.pair_cpus.len() > conn.spec().pair_cpus.len() {
                    self.record.placement = Some(Decision {
                        placement: Placement::System,
                        why: "the server cannot place its end of a stream (it does not offer \
                              pair_cpus): both ends run where the system puts them"
                            .into(),
                    });
                }
                self.record.spec.pair_cpus = conn.spec().pair_cpus.clone();
                self.record.spec.pair_split = conn.spec().pair_split;
                let hello = |id| DataHello { cookie, stream_id: id }.encode().to_vec();
                let spec = conn.spec();
                self.streams =
                    Some(open_streams(self.plan, spec, hello, server, ctrl, Some(cookie))?);
            }
            ClientEvent::Ready => {
                // Only a held start says `ready`; the machine refuses it otherwise.
                let streams = self.streams.as_mut().context("ready before streams")?;
                streams.prepare();
                let gate = self.gate.context("ready without a fleet")?;
                conn.go(clock.now());
                let held = HeldStart {
                    go: conn.poll_transmit().unwrap_or_default(),
                    control: ctrl.stream().try_clone().context("control connection")?,
                    streams: streams.hold(),
                };
                if !gate.arrive(held) {
                    let why = "the fleet started without this host: its data streams were \
                               ready too late, or the fleet was stopped";
                    return Err(Failure::new(FailureKind::TimedOut, why).into());
                }
                // The streams run from the `go`, not from the server's `start`: that answer
                // can wait behind other hosts' data in a shared link's queue (tens of ms
                // through a shaped one), and the server reads data from its `go` on.
                conn.go_sent(clock.now());
                streams.held_started();
                let now = streams.started().unwrap_or_else(Instant::now);
                self.clock_started(now, conn, st, observer);
            }
            ClientEvent::Start => {
                let streams = self.streams.as_mut().context("start before streams")?;
                if streams.started().is_none() {
                    let now = streams.start();
                    self.clock_started(now, conn, st, observer);
                }
            }
            ClientEvent::PeerResults(r) => {
                // A byte-bound UDP test has no stop: the server's results are the end signal.
                if let Some(s) = &self.streams {
                    s.end_signalled();
                    self.peer_results_at = s.started().map(|t| t.elapsed());
                }
                self.record.server_results = Some(*r);
            }
            ClientEvent::Queued { position, wait } => {
                observer.on_event(LiveEvent::Queued { position, wait });
            }
            ClientEvent::Finished => {}
        }
        Ok(())
    }

    /// The test's clock from `now`, its streams' start.
    fn clock_started(
        &self,
        now: Instant,
        conn: &ClientConn,
        st: &mut LoopState,
        observer: &mut dyn Observer,
    ) {
        let streams = self.streams.as_ref().map_or(0, StreamSet::len);
        observer.on_event(LiveEvent::Started { streams });
        let spec = conn.spec();
        st.stop_at = spec.duration_ms().map(|d| now + Duration::from_millis(d + spec.omit_ms));
        st.progress = (now, 0);
    }

    fn on_clock(
        &mut self,
        conn: &mut ClientConn,
        clock: &Clock,
        st: &mut LoopState,
        observer: &mut dyn Observer,
        interrupt: &Interrupt,
    ) -> Result<()> {
        let Some(streams) = self.streams.as_mut() else {
            if interrupt.count() > 0 {
                let why =
                    format!("interrupted by {} before the test started", interrupt.last_name());
                return Err(Failure::new(FailureKind::Interrupted, why).into());
            }
            return Ok(());
        };
        let now = Instant::now();
        if interrupt.count() >= 2 {
            let why = "interrupted twice: aborting without waiting for results";
            return Err(Failure::new(FailureKind::Interrupted, why).into());
        }
        if interrupt.count() == 1 && !st.stopped && streams.started().is_some() {
            self.interrupted = true;
            observer.on_event(LiveEvent::Notice(
                "interrupted: stopping early and collecting results (press Ctrl-C again to abort)",
            ));
            st.stopped = true;
            streams.end_signalled();
            conn.stop(StopReason::Interrupted);
        }
        if !st.stopped && st.stop_at.is_some_and(|t| now >= t) {
            st.stopped = true;
            streams.end_signalled();
            conn.stop(StopReason::TimeElapsed);
        }
        let rows = streams.sample(now, false);
        if !rows.is_empty() {
            observer.on_event(LiveEvent::Interval(&rows));
        }
        if streams.started().is_some() && !st.results_sent {
            check_progress(streams, st, now)?;
            // A held start's streams run from the `go`; results wait for the server's `start`.
            if streams.all_done() && conn.running() {
                let rows = streams.sample(now, true);
                if !rows.is_empty() {
                    observer.on_event(LiveEvent::Interval(&rows));
                }
                let local = streams.results(SOFTWARE, 0);
                self.record.client = Some(local.clone());
                st.results_sent = true;
                conn.send_results(local, clock.now())?;
            }
        }
        Ok(())
    }

    fn into_record(mut self, result: Result<()>) -> RunRecord {
        if let Some(streams) = self.streams.as_mut() {
            if self.record.client.is_none() && streams.started().is_some() {
                streams.abort();
                self.record.client = Some(streams.results(SOFTWARE, 0));
            }
        }
        self.record.outcome = match result {
            Ok(()) => match self.implausible() {
                Some(f) => Outcome::failed(f),
                None if self.interrupted => Outcome::Interrupted,
                None => judged(&self.record),
            },
            Err(e) => Outcome::failed(explain(&e, self.plan, self.gate.is_some())),
        };
        self.record
    }

    /// The refusal of the server's figures when they cannot be true
    /// (`stats::integrity::check_peer`); they are then dropped from the record, which keeps
    /// this end's own and the refusal, so no report, history or fleet total counts them.
    fn implausible(&mut self) -> Option<Failure> {
        let (local, peer) = (self.record.client.as_ref()?, self.record.server_results.as_ref()?);
        let span = u64::try_from(self.peer_results_at?.as_micros()).unwrap_or(u64::MAX);
        let ends = integrity::Ends { peer: "the server", local: "this client" };
        let why = integrity::check_peer(&self.record.spec, local, peer, span, ends).err()?;
        self.record.server_results = None;
        Some(Failure::new(FailureKind::Violation, why))
    }
}

/// The outcome of a test whose exchange completed: failed when any stream of either end
/// failed (a reset stream's figures are missing from the totals, so they are partial), with
/// how many and why; completed otherwise.
pub(super) fn judged(record: &RunRecord) -> Outcome {
    match integrity::failed_streams(record) {
        Some(why) => Outcome::failed(Failure::new(FailureKind::Network, why)),
        None => Outcome::Completed,
    }
}

/// A record for `plan` before anything happened.
pub(crate) fn new_record(plan: &ClientPlan) -> RunRecord {
    RunRecord {
        schema_version: SCHEMA_VERSION,
        software: SOFTWARE.to_string(),
        started_unix_ms: unix_ms_now(),
        server: format_host_port(&plan.host, plan.port),
        local_address: None,
        remote_address: None,
        server_software: None,
        spec: plan.spec.clone(),
        client: None,
        server_results: None,
        outcome: Outcome::Completed,
        warnings: Vec::new(),
        link: plan.link,
        server_output: None,
        fleet: None,
        probes: None,
        placement: None,
    }
}

#[derive(Debug)]
pub(super) struct LoopState {
    pub(super) stop_at: Option<Instant>,
    pub(super) stopped: bool,
    pub(super) results_sent: bool,
    pub(super) progress: (Instant, u64),
}

impl Default for LoopState {
    fn default() -> Self {
        Self { stop_at: None, stopped: false, results_sent: false, progress: (Instant::now(), 0) }
    }
}

/// Fails if no local stream moved a byte for [`NO_PROGRESS_TIMEOUT`] (a silent peer or path).
pub(super) fn check_progress(streams: &StreamSet, st: &mut LoopState, now: Instant) -> Result<()> {
    let total = streams.total_bytes();
    if total != st.progress.1 {
        st.progress = (now, total);
    } else if !streams.all_done() && now.duration_since(st.progress.0) >= NO_PROGRESS_TIMEOUT {
        let why = format!(
            "no data moved on any stream for {} s: the server or the path stopped responding",
            NO_PROGRESS_TIMEOUT.as_secs()
        );
        return Err(Failure::new(FailureKind::TimedOut, why).into());
    }
    Ok(())
}

pub(crate) fn resolve(host: &str, port: u16, plan: &ClientPlan) -> Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            // getaddrinfo's errors carry no I/O kind: the name or the resolver failed.
            let why = format!("cannot resolve host {host:?}; check the name or use an IP address");
            anyhow::Error::new(e).context(Failure::new(FailureKind::Network, why))
        })?
        .filter(|a| plan.family.allows(&a.ip()))
        .collect();
    if addrs.is_empty() {
        return Err(Failure::usage(format!(
            "host {host:?} has no address of the requested family (-4/-6); drop -4/-6 or use another address"
        ))
        .into());
    }
    Ok(addrs)
}

pub(crate) fn connect_any(
    addrs: &[SocketAddr],
    plan: &ClientPlan,
) -> Result<(TcpStream, SocketAddr)> {
    connect_first(addrs, plan).map_err(|(_, e)| e)
}

/// [`connect_any`], the failure with the system's answer to the last `connect` (None when no
/// connect was tried or another step failed), which the error's words do not keep.
pub(super) fn connect_first(
    addrs: &[SocketAddr],
    plan: &ClientPlan,
) -> Result<(TcpStream, SocketAddr), (Option<std::io::ErrorKind>, anyhow::Error)> {
    let mut last = None;
    // The control connection: the plan's local address, none of the test's socket options.
    let bind = Bind { ip: plan.bind, port: None };
    for addr in addrs {
        match socket::connect(*addr, bind, &SocketOptions::default(), plan.connect_timeout) {
            Ok(s) => return Ok((s, *addr)),
            Err(e) => {
                let kind = (e.step == Step::Connect).then(|| e.io().kind());
                last = Some((kind, setup_error(e, *addr, plan)));
            }
        }
    }
    Err(last.unwrap_or_else(|| (None, anyhow!("no address to connect to"))))
}

/// The end of a refused connection's hint: the client's flag to check.
pub(crate) const CHECK_PORT: &str = " or check -p";
/// The end of a silent host's hint: the client's flag to raise.
pub(crate) const RAISE_CONNECT_TIMEOUT: &str = "; check the address or raise --connect-timeout";

/// A failed socket set-up as the user reads it: a failed connect says what to check.
fn setup_error(e: SetupError, addr: SocketAddr, plan: &ClientPlan) -> anyhow::Error {
    if e.step != Step::Connect {
        return e.into();
    }
    let e = e.io();
    use std::io::ErrorKind as K;
    let hint = match e.kind() {
        K::ConnectionRefused => format!(
            "connection refused: nothing listens on port {}; start `linerate server -p {}` there{CHECK_PORT}",
            addr.port(),
            addr.port()
        ),
        K::TimedOut | K::WouldBlock => format!(
            "no answer within {:?} (host down, wrong address, or a firewall dropping packets){RAISE_CONNECT_TIMEOUT}",
            plan.connect_timeout
        ),
        K::HostUnreachable | K::NetworkUnreachable => {
            format!("{e}: no route to the host; check the address and the routing table")
        }
        _ => format!("{e}"),
    };
    Failure::new(FailureKind::from(e.kind()), format!("cannot connect to {addr}: {hint}")).into()
}

/// Connects every data stream of the plan, writing `hello(id)` first on each. The test's socket
/// options are set on each socket before it connects (`traffic::socket`). `native` is the
/// native datagram format with the test's secret; None for an iperf3 server.
pub(super) fn open_streams(
    plan: &ClientPlan,
    spec: &TestSpec,
    hello: impl Fn(u32) -> Vec<u8>,
    server: SocketAddr,
    ctrl: &ControlChannel,
    native: Option<linerate_proto::wire::Cookie>,
) -> Result<StreamSet> {
    let local_ip = ctrl.stream().local_addr().ok().map(|a| a.ip());
    let mut set = StreamSet::new(spec, End::Client)?;
    let layout = plan.threads.layout(crate::plan::threads::cores());
    if let Some(r) = linerate_proto::limits::buffer_refusal(spec, layout) {
        return Err(Failure::new(FailureKind::Usage, r.message).into());
    }
    set.set_layout(layout);
    set.set_cpus(&plan.cpus).map_err(|e| Failure::new(FailureKind::Usage, e))?;
    ctrl.streams_running(spec.streams as usize);
    if let Some(cookie) = native {
        set.set_datagram_format(DatagramFormat::native(&cookie.0));
        if spec.rr.is_some_and(|rr| rr.connect_each) {
            set.set_crr_connector(
                transaction_connector(plan, server, set.socket_options()),
                cookie,
            );
        }
    }
    let rtt = sys::tcp_internals(ctrl.stream()).map(|t| Duration::from_micros(t.rtt_us.into()));
    set.set_rtt(rtt);
    // A client names no node of its own: `--node-name` is a server's.
    set.record_environment(local_ip, &crate::plan::server::Place::default());
    let opts = set.socket_options().clone();
    for (id, _) in spec.stream_plan() {
        let port = match plan.cport {
            Some(p) => Some(u16::try_from(u32::from(p) + id - 1).ok().context(
                "--cport plus the stream count runs past port 65535; pick a lower --cport",
            )?),
            None => None,
        };
        let bind = Bind { ip: plan.bind.or(if port.is_some() { local_ip } else { None }), port };
        if spec.protocol == Protocol::Udp {
            let bytes = hello(id);
            let echo = [bytes.as_slice()];
            let hs = if native.is_none() {
                Handshake::iperf3()
            } else {
                Handshake::native(&bytes, &echo)
            };
            let data = connect_stream(server, bind, &opts, hs)
                .with_context(|| format!("UDP stream {id}"))?;
            set.add_udp(id, data).with_context(|| format!("UDP stream {id}"))?;
            continue;
        }
        let mut data = socket::connect_data(server, bind, &opts, plan.connect_timeout)
            .map_err(|e| setup_error(e, server, plan))
            .with_context(|| format!("data stream {id} could not connect"))?;
        data.stream
            .write_all(&hello(id))
            .with_context(|| format!("data stream {id}: cannot send its hello"))?;
        set.add(id, data).with_context(|| format!("data stream {id}"))?;
    }
    Ok(set)
}

/// How a `--crr` stream opens each transaction's connection: to the server, from `-B`'s
/// address (never `--cport`'s port, which the stream's own connection holds), with the
/// test's socket options.
fn transaction_connector(
    plan: &ClientPlan,
    server: SocketAddr,
    opts: &SocketOptions,
) -> crate::traffic::rr_crr::Connector {
    let (bind, opts, timeout) =
        (Bind { ip: plan.bind, port: None }, opts.clone(), plan.connect_timeout);
    std::sync::Arc::new(move || {
        socket::connect(server, bind, &opts, timeout)
            .map_err(|e| std::io::Error::new(e.io().kind(), e.to_string()))
    })
}

/// The spec as run: with `-u` and no `-l`, datagrams sized to the control connection's path
/// MTU (minus IP and UDP headers), so they are never fragmented, and small enough for the
/// pacing rate to send enough of them (`plan::auto_udp_datagram` says why); with the path
/// MTU unknown, from a 1500-byte IPv4 MTU's.
fn effective_spec(plan: &ClientPlan, ctrl: &TcpStream, server: SocketAddr) -> TestSpec {
    if !plan.udp_length_auto {
        return plan.spec.clone();
    }
    let headers = if server.is_ipv6() { 48 } else { 28 };
    let payload = sys::path_mtu(ctrl, server.is_ipv6())
        .map_or(crate::plan::DEFAULT_UDP_DATAGRAM, |mtu| mtu.saturating_sub(headers));
    plan.sized(crate::plan::auto_udp_datagram(payload, plan.spec.bits_per_second))
}

/// Turns an error into the failure the record keeps: its kind, and the one line the user
/// sees, with what to try where we know. `fleet`: the test is one host's of a fleet.
pub(super) fn explain(e: &anyhow::Error, plan: &ClientPlan, fleet: bool) -> Failure {
    let Failure { kind, message: base } = Failure::of(e);
    let hint = match e.downcast_ref::<ProtoError>() {
        Some(ProtoError::TimedOut { what, .. }) if what.contains("hello") => Some(format!(
            "is {} a linerate server? (for an iperf3 server, add --iperf3)",
            format_host_port(&plan.host, plan.port)
        )),
        Some(ProtoError::Garbage(_)) => {
            Some("the port is served by another program; check -p".to_string())
        }
        Some(ProtoError::Closed(_)) => {
            Some("the server process may have exited or crashed; check its log".to_string())
        }
        // A fleet's host waits no longer than the fleet waits for every host to be ready.
        Some(ProtoError::QueueLimit { .. }) if fleet => Some(format!(
            "a fleet waits at most {} s for its hosts to be ready (and at most --queue-timeout \
             in a queue): run the fleet when this server is idle, or leave it out",
            crate::plan::fleet::SETUP_LIMIT.as_secs()
        )),
        Some(ProtoError::QueueLimit { .. }) => Some(format!(
            "raise --queue-timeout (now {} s) to wait longer, or test when the server is idle",
            plan.queue_timeout.as_secs_f64()
        )),
        _ => None,
    };
    match hint {
        Some(h) => Failure::new(kind, format!("{base}; {h}")),
        None => Failure::new(kind, base),
    }
}
