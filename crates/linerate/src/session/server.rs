//! The server driver: one listener, many concurrent tests.
//!
//! Every accepted connection gets a short-lived thread that reads its first bytes (within
//! [`CLASSIFY_TIMEOUT`]) to tell a control connection from a data connection, and linerate
//! from iperf3: linerate connections start with a binary magic (first byte 0x89), iperf3
//! connections with a 37-byte printable cookie. A control connection becomes a test session on
//! that thread; a data connection is handed, by its cookie, to the session that owns it. An
//! iperf3 cookie that no running test owns starts a new iperf3 session (iperf3 data and control
//! connections look alike; only the cookie tells them apart). Sessions share nothing but the
//! cookie registries, so tests from different clients are isolated: own streams, own counters,
//! own results — and unlike iperf3, several iperf3 clients are served at once.
//!
//! On SIGINT/SIGTERM the accept loop stops, every running session sends `abort` with reason
//! `server_shutdown` to its client, and the server exits within [`SHUTDOWN_GRACE`].

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use linerate_proto::iperf3::COOKIE_LEN;
use linerate_proto::server::{ServerConn, ServerEvent};
use linerate_proto::wire::{
    AbortReason, CONTROL_MAGIC, Cookie, DATA_HELLO_LEN, DATA_MAGIC, DataHello,
};
use linerate_proto::{LimitKind, ProtoError, Refusal, SideResults, TestSpec};
use socket2::{Domain, Socket, Type};

use crate::measure::sys;
use crate::plan::{Family, ServerPlan};
use crate::session::admission::{Admission, Pending};
use crate::session::served::ServedTest;
use crate::session::udp::UdpAcceptor;
use crate::session::{Clock, ControlChannel, End, Interrupt, SOFTWARE, StreamSet};

/// How long a new connection has to send its first 8 bytes.
pub const CLASSIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the server waits for sessions to wind down after a shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Something the server reports (the renderer turns these into log lines).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ServerNote {
    /// Listening.
    Listening {
        /// The bound address.
        addr: SocketAddr,
    },
    /// A test was accepted.
    TestAccepted {
        /// Server-local test number.
        test: u64,
        /// The client's control address.
        peer: SocketAddr,
        /// The client's software, as it said (iperf3 clients: "iperf3 <version>").
        client: String,
        /// What it asked for.
        spec: TestSpec,
    },
    /// A test ended (normally or not).
    TestEnded {
        /// Server-local test number.
        test: u64,
        /// The client's control address.
        peer: SocketAddr,
        /// The server's own figures.
        server: Option<SideResults>,
        /// The client's figures, as it reported them.
        client: Option<SideResults>,
        /// Why it failed, if it did.
        error: Option<String>,
    },
    /// A connection was dropped before it became part of a test.
    Rejected {
        /// Who.
        peer: SocketAddr,
        /// Why.
        reason: String,
    },
    /// Shutting down.
    ShuttingDown {
        /// Which signal.
        signal: &'static str,
        /// Tests still running.
        running: usize,
    },
}

/// Where notes go. Called from many threads.
pub type NoteSink = Arc<dyn Fn(&ServerNote) + Send + Sync>;

/// A data stream presented to the session that owns its cookie.
pub(crate) enum DataSock {
    /// A TCP data connection (its hello already read).
    Tcp(TcpStream),
    /// A UDP stream hello from this client address, received by the acceptor.
    Udp(SocketAddr),
}

type DataConn = (u32, DataSock);

/// An iperf3 data connection and its place in the server's accept order.
pub(crate) type Iperf3Conn = (u64, TcpStream);

/// What every session of one server shares.
pub(crate) struct Shared {
    registry: Mutex<HashMap<[u8; 16], Sender<DataConn>>>,
    pub(crate) iperf3: Mutex<HashMap<[u8; COOKIE_LEN], Sender<Iperf3Conn>>>,
    /// iperf3 UDP tests opening their streams, by client address.
    pub(crate) iperf3_udp: Mutex<HashMap<IpAddr, Sender<SocketAddr>>>,
    shutting_down: AtomicBool,
    signal_name: Mutex<&'static str>,
    next_test: AtomicU64,
    /// Tests accepted and not yet ended.
    active_tests: AtomicU32,
    /// Why UDP tests cannot be served, if they cannot.
    udp_unavailable: Option<String>,
    /// The operator's limits and per-address counts.
    pub(crate) admission: Arc<Admission>,
    /// The listening port (UDP streams use the same number).
    pub(crate) port: u16,
    pub(crate) notes: NoteSink,
}

impl Shared {
    /// Why sessions must end now, if the server is shutting down.
    pub(crate) fn shutdown_reason(&self) -> Option<String> {
        self.shutting_down.load(Ordering::SeqCst).then(|| {
            let signal = *self.signal_name.lock().unwrap_or_else(|e| e.into_inner());
            format!("the server is shutting down ({signal}); run the test again when it is back")
        })
    }

    /// A numbered test ended.
    pub(crate) fn end_test(&self) {
        self.active_tests.fetch_sub(1, Ordering::SeqCst);
    }

    /// How many other tests run now, besides the caller's.
    pub(crate) fn others_running(&self) -> u32 {
        self.active_tests.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// Routes a datagram that reached the UDP port's unconnected socket: a linerate hello by
    /// its cookie, an iperf3 connect by the client's address (iperf3 sends no cookie on UDP).
    fn route_udp(&self, datagram: &[u8], from: SocketAddr) {
        if let Some(h) = crate::session::udp::native_hello(datagram) {
            let tx = self.registry.lock().ok().and_then(|r| r.get(&h.cookie.0).cloned());
            if let Some(tx) = tx {
                let _ = tx.send((h.stream_id, DataSock::Udp(from)));
            }
        } else if crate::session::udp::is_iperf3_connect(datagram) {
            let ip = crate::session::streams::canonical(from).ip();
            let tx = self.iperf3_udp.lock().ok().and_then(|r| r.get(&ip).cloned());
            if let Some(tx) = tx {
                let _ = tx.send(from);
            }
        }
    }

    /// Admits a requested test or says why not: the protocol the server can serve, the
    /// operator's limits (pure checks first, then the free slots, then the client's rate).
    /// On success the test is numbered and counted as running until [`Shared::end_test`].
    pub(crate) fn admit(&self, spec: &TestSpec, peer: IpAddr) -> Result<u64, Refusal> {
        if spec.protocol == linerate_proto::Protocol::Udp
            && let Some(why) = &self.udp_unavailable
        {
            let why = format!("this server cannot serve UDP tests: {why}");
            return Err(Refusal::new(LimitKind::NotAllowed, why));
        }
        let limits = &self.admission.limits;
        limits.check(spec)?;
        if let Some(why) = policy_refusal(spec) {
            return Err(Refusal::new(LimitKind::NotAllowed, why));
        }
        let max = limits.max_tests;
        self.active_tests
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .map_err(|running| limits.busy(running).unwrap_or_else(|| busy_fallback(max)))?;
        if let Err(r) = self.admission.take_test_token(peer, Instant::now()) {
            self.end_test();
            return Err(r);
        }
        Ok(self.next_test.fetch_add(1, Ordering::SeqCst))
    }

    /// Reports a connection dropped before it became part of a test.
    pub(crate) fn reject(&self, peer: SocketAddr, reason: String) {
        (self.notes)(&ServerNote::Rejected { peer, reason });
    }
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    /// The UDP socket on the same port, or why there is none (UDP tests are then refused).
    udp: std::result::Result<UdpAcceptor, String>,
    plan: ServerPlan,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.listener.local_addr().ok()).finish()
    }
}

impl Server {
    /// Binds the listening socket (dual-stack unless -4/-6/-B say otherwise).
    pub fn bind(plan: &ServerPlan) -> Result<Self> {
        sys::raise_fd_limit();
        let listener = listen(plan)?;
        let addr = listener.local_addr().context("cannot read the listening address")?;
        let dual = plan.bind.is_none() && plan.family == Family::Any && addr.is_ipv6();
        let udp = UdpAcceptor::bind(addr, dual).map_err(|e| format!("{e:#}"));
        Ok(Self { listener, udp, plan: plan.clone() })
    }

    /// The address actually bound (port 0 resolves to the chosen port).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr().context("cannot read the listening address")
    }

    /// Serves until `interrupt` fires (or, with `-1`, until the first test ends).
    pub fn run(self, interrupt: &Interrupt, notes: NoteSink) -> Result<()> {
        let shared = Arc::new(Shared {
            registry: Mutex::new(HashMap::new()),
            iperf3: Mutex::new(HashMap::new()),
            iperf3_udp: Mutex::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
            signal_name: Mutex::new("a stop request"),
            next_test: AtomicU64::new(1),
            active_tests: AtomicU32::new(0),
            udp_unavailable: self.udp.as_ref().err().cloned(),
            admission: Admission::new(self.plan.limits.clone()),
            port: self.local_addr()?.port(),
            notes,
        });
        (shared.notes)(&ServerNote::Listening { addr: self.local_addr()? });
        let udp_stop = Arc::new(AtomicBool::new(false));
        let udp_thread = match self.udp {
            Ok(acceptor) => {
                let routes = shared.clone();
                Some(acceptor.spawn(udp_stop.clone(), move |d, from| routes.route_udp(d, from))?)
            }
            Err(_) => None,
        };
        let sessions_done = Arc::new(AtomicU64::new(0));
        let mut handles: Vec<JoinHandle<()>> = Vec::new();
        let mut accepted: u64 = 0;
        while interrupt.count() == 0 {
            if self.plan.one_off && sessions_done.load(Ordering::SeqCst) > 0 {
                break;
            }
            handles.retain(|h| !h.is_finished());
            match self.listener.accept() {
                Ok((sock, peer)) => {
                    accepted += 1;
                    let seq = accepted;
                    let peer = crate::session::streams::canonical(peer);
                    let pending = match shared.admission.open(peer.ip()) {
                        Ok(p) => p,
                        Err(r) => {
                            // Dropped unread: a flood from one address costs no thread.
                            eprintln_note(&shared, peer, r.message);
                            continue;
                        }
                    };
                    let (conn_shared, done) = (shared.clone(), sessions_done.clone());
                    let conn = Accepted { sock, peer, seq, pending };
                    let h = std::thread::Builder::new()
                        .name("lr-conn".into())
                        .spawn(move || classify(conn, &conn_shared, &done));
                    match h {
                        Ok(h) => handles.push(h),
                        Err(e) => {
                            eprintln_note(&shared, peer, format!("cannot start a thread: {e}"))
                        }
                    }
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) => {
                    // Out of fds and the like: back off instead of spinning.
                    eprintln_note(&shared, unspecified(), format!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        if interrupt.count() > 0 {
            *shared.signal_name.lock().unwrap_or_else(|e| e.into_inner()) = interrupt.last_name();
            let running = handles.iter().filter(|h| !h.is_finished()).count();
            (shared.notes)(&ServerNote::ShuttingDown { signal: interrupt.last_name(), running });
        }
        shared.shutting_down.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while handles.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        udp_stop.store(true, Ordering::SeqCst);
        if let Some(t) = udp_thread {
            let _ = t.join();
        }
        Ok(())
    }
}

fn unspecified() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
}

fn eprintln_note(shared: &Shared, peer: SocketAddr, reason: String) {
    shared.reject(peer, reason);
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

fn listen(plan: &ServerPlan) -> Result<TcpListener> {
    let (addr, dual) = match (plan.bind, plan.family) {
        (Some(ip), _) => (SocketAddr::new(ip, plan.port), false),
        (None, Family::V4) => {
            (SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), plan.port), false)
        }
        (None, Family::V6) => {
            (SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), plan.port), false)
        }
        (None, Family::Any) => {
            (SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), plan.port), true)
        }
    };
    match listen_on(addr, dual) {
        Ok(l) => Ok(l),
        // Hosts without IPv6 still get a server on all IPv4 addresses.
        Err(_) if dual => {
            listen_on(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), plan.port), false)
        }
        Err(e) => Err(e),
    }
}

fn listen_on(addr: SocketAddr, dual: bool) -> Result<TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)
        .context("cannot create the listening socket")?;
    if addr.is_ipv6() {
        sock.set_only_v6(!dual).context("cannot configure IPV6_V6ONLY")?;
    }
    sock.set_reuse_address(true).context("cannot set SO_REUSEADDR")?;
    sock.bind(&addr.into()).with_context(|| {
        format!("cannot listen on {addr}: is another server using the port? pick another with -p")
    })?;
    sock.listen(1024).with_context(|| format!("cannot listen on {addr}"))?;
    // accept() honours SO_RCVTIMEO on Linux, so the loop can notice signals without polling.
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .context("cannot set the accept timeout")?;
    Ok(sock.into())
}

/// A connection just accepted, counted against its address until identified.
struct Accepted {
    sock: TcpStream,
    peer: SocketAddr,
    /// Its place in accept order.
    seq: u64,
    pending: Pending,
}

/// Reads exactly `buf.len()` bytes, all of them before `deadline`: a peer trickling one byte
/// at a time cannot stretch the wait, whatever the per-read timeout.
fn read_by(sock: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        sock.set_read_timeout(Some(left))?;
        match sock.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads the first bytes of a new connection and routes it.
fn classify(mut c: Accepted, shared: &Arc<Shared>, done: &AtomicU64) {
    let deadline = Instant::now() + CLASSIFY_TIMEOUT;
    let mut first = [0u8; 8];
    if let Err(e) = read_by(&mut c.sock, &mut first, deadline) {
        let why = if is_timeout(&e) {
            format!("sent no hello within {} s", CLASSIFY_TIMEOUT.as_secs())
        } else {
            e.to_string()
        };
        eprintln_note(shared, c.peer, why);
        return;
    }
    if first == CONTROL_MAGIC {
        run_session(c, first, shared);
        done.fetch_add(1, Ordering::SeqCst);
    } else if first == DATA_MAGIC {
        route_data(c, first, deadline, shared);
    } else if first.iter().all(|b| (0x20..0x7f).contains(b)) {
        route_iperf3(c, first, deadline, shared, done);
    } else {
        eprintln_note(
            shared,
            c.peer,
            format!("neither linerate nor iperf3 (first bytes {first:02x?})"),
        );
    }
}

/// An iperf3 connection: a data stream of a running test if a session owns its cookie, else a
/// new control connection.
fn route_iperf3(
    mut c: Accepted,
    first: [u8; 8],
    deadline: Instant,
    shared: &Shared,
    done: &AtomicU64,
) {
    let mut cookie = [0u8; COOKIE_LEN];
    cookie[..8].copy_from_slice(&first);
    if let Err(e) = read_by(&mut c.sock, &mut cookie[8..], deadline) {
        return eprintln_note(shared, c.peer, format!("incomplete iperf3 cookie: {e}"));
    }
    let printable = cookie[..COOKIE_LEN - 1].iter().all(|b| (0x20..0x7f).contains(b));
    if !printable || cookie[COOKIE_LEN - 1] != 0 {
        return eprintln_note(
            shared,
            c.peer,
            "neither linerate nor iperf3 (no 36-character cookie and NUL)".into(),
        );
    }
    let owner = shared.iperf3.lock().ok().and_then(|r| r.get(&cookie).cloned());
    match owner {
        Some(tx) => {
            drop(c.pending);
            let _ = tx.send((c.seq, c.sock));
        }
        None => {
            super::iperf3::server::run_session(c.sock, c.peer, c.pending, cookie, shared);
            done.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn route_data(mut c: Accepted, first: [u8; 8], deadline: Instant, shared: &Shared) {
    let mut hello = [0u8; DATA_HELLO_LEN];
    hello[..8].copy_from_slice(&first);
    if read_by(&mut c.sock, &mut hello[8..], deadline).is_err() {
        return eprintln_note(shared, c.peer, "data connection sent an incomplete hello".into());
    }
    let Some(h) = DataHello::decode(&hello) else { return };
    let tx = shared.registry.lock().ok().and_then(|r| r.get(&h.cookie.0).cloned());
    match tx {
        Some(tx) => {
            drop(c.pending);
            let _ = tx.send((h.stream_id, DataSock::Tcp(c.sock)));
        }
        None => eprintln_note(shared, c.peer, "data connection with an unknown test cookie".into()),
    }
}

/// Removes a test's cookie from its registry when the session ends, however it ends.
pub(crate) struct Registration<'a, K: std::hash::Hash + Eq, V> {
    registry: &'a Mutex<HashMap<K, V>>,
    cookie: Option<K>,
}

impl<'a, K: std::hash::Hash + Eq + Copy, V> Registration<'a, K, V> {
    /// Nothing registered yet.
    pub(crate) fn new(registry: &'a Mutex<HashMap<K, V>>) -> Self {
        Self { registry, cookie: None }
    }

    /// Routes connections presenting `cookie` to `to` until this registration drops.
    pub(crate) fn register(&mut self, cookie: K, to: V) -> Result<()> {
        self.registry.lock().map_err(|_| anyhow::anyhow!("registry poisoned"))?.insert(cookie, to);
        self.cookie = Some(cookie);
        Ok(())
    }
}

impl<K: std::hash::Hash + Eq, V> Drop for Registration<'_, K, V> {
    fn drop(&mut self) {
        if let (Some(c), Ok(mut r)) = (self.cookie.take(), self.registry.lock()) {
            r.remove(&c);
        }
    }
}

struct Session<'a> {
    t: ServedTest<'a>,
    /// The server address the client reached (UDP stream sockets bind to it).
    local_ip: IpAddr,
    /// Round trip of the control connection when it opened.
    rtt: Option<Duration>,
    cookie: [u8; 16],
    data_rx: Option<Receiver<DataConn>>,
    registration: Registration<'a, [u8; 16], Sender<DataConn>>,
}

fn run_session(c: Accepted, first: [u8; 8], shared: &Shared) {
    let (stream, peer) = (c.sock, c.peer);
    let clock = Clock::new();
    let mut conn = ServerConn::new(SOFTWARE, clock.now());
    let local_ip = stream
        .local_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| crate::session::streams::canonical(a).ip());
    let mut s = Session {
        t: ServedTest::new(shared, peer, c.pending),
        local_ip,
        rtt: sys::tcp_internals(&stream).map(|t| Duration::from_micros(t.rtt_us.into())),
        cookie: [0; 16],
        data_rx: None,
        registration: Registration::new(&shared.registry),
    };
    let result = ControlChannel::new(stream).and_then(|mut ctrl| {
        let r = conn.handle_input(&first, clock.now()).map_err(anyhow::Error::from);
        let r = r.and_then(|_| s.pump(&mut ctrl, &mut conn, &clock));
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
            if let Some(bytes) = conn.poll_transmit() {
                let _ = ctrl.send(&bytes);
            }
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
            while let Some(ev) = conn.poll_event() {
                self.on_event(ev, conn, clock)?;
            }
            self.t.watch()?;
            if self.t.running() && self.t.streams.as_ref().is_some_and(StreamSet::all_done) {
                let results = self.t.take_results().context("results without streams")?;
                conn.send_results(results, clock.now())?;
            }
        }
        Ok(())
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
            let streams = self.t.streams.as_mut().context("streams arrived before the test")?;
            match sock {
                DataSock::Tcp(sock) => streams.add(id, sock)?,
                DataSock::Udp(from) => {
                    let local = SocketAddr::new(self.local_ip, self.t.shared.port);
                    let hello = DataHello { cookie: Cookie(self.cookie), stream_id: id }.encode();
                    let sock = crate::session::udp::accept_stream(local, from, &hello)
                        .with_context(|| format!("UDP stream {id}"))?;
                    streams.add_udp(id, sock)?;
                }
            }
            conn.attach_stream(id, clock.now())?;
        }
    }

    fn on_event(&mut self, ev: ServerEvent, conn: &mut ServerConn, clock: &Clock) -> Result<()> {
        match ev {
            ServerEvent::TestRequested { spec, client_software } => {
                self.on_request(spec, client_software, conn, clock)?
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
        }
        Ok(())
    }

    fn on_request(
        &mut self,
        spec: TestSpec,
        client: String,
        conn: &mut ServerConn,
        clock: &Clock,
    ) -> Result<()> {
        if let Err(r) = self.t.admit(&spec) {
            conn.refuse(&r.message);
            bail!("refused: {r}");
        }
        let mut streams = match StreamSet::new(&spec, End::Server) {
            Ok(s) => s,
            Err(e) => {
                conn.refuse(&format!("{e:#}"));
                return Err(e);
            }
        };
        streams.set_rtt(self.rtt);
        let mut cookie = [0u8; 16];
        getrandom::getrandom(&mut cookie)
            .map_err(|e| anyhow::anyhow!("no randomness for the test cookie: {e}"))?;
        let (tx, rx) = channel();
        self.registration.register(cookie, tx)?;
        self.cookie = cookie;
        self.data_rx = Some(rx);
        self.t.begin(streams, client, spec);
        conn.accept(Cookie(cookie), clock.now())?;
        Ok(())
    }
}

fn busy_fallback(max: u32) -> Refusal {
    Refusal::new(LimitKind::Busy, format!("server is busy (--max-tests {max})"))
}

/// Server-side checks a valid spec can still fail here.
fn policy_refusal(spec: &TestSpec) -> Option<String> {
    let cc = spec.congestion.as_ref()?;
    let available = sys::available_congestion()?;
    (!available.iter().any(|a| a == cc)).then(|| {
        format!(
            "congestion control {cc:?} is not available on the server (available: {})",
            available.join(" ")
        )
    })
}
