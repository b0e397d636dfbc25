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
//! Admission happens in layers, cheapest first, so an abuser spends his resources before the
//! server spends its own: a per-address cap on unidentified connections before a thread is
//! started (`admission.rs`), one overall deadline for the first bytes ([`read_by`]), the
//! protocol's handshake deadline, then the operator's limits, the address's share of tests,
//! slots and exclusive queue ([`Shared::admit`]) before anything is allocated for a test.
//! Doctor sessions are admitted the same way ([`Shared::admit_doctor`]): they take a test
//! token, a share and a slot, and at most a quarter of the slots, so a doctor flood can
//! neither spend a thread per connection for long nor keep tests out. The native session is
//! in `native.rs`, the iperf3 one in `iperf3/server.rs`.
//!
//! On SIGINT/SIGTERM the accept loop stops, every running session sends `abort` with reason
//! `server_shutdown` to its client, and the server exits within [`SHUTDOWN_GRACE`].

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use linerate_proto::iperf3::COOKIE_LEN;
use linerate_proto::limits::requested_rate;
use linerate_proto::wire::{CONTROL_MAGIC, DATA_HELLO_LEN, DATA_MAGIC, DataHello};
use linerate_proto::{LimitKind, Refusal, SideResults, TestSpec};

use crate::plan::server::Access;
use crate::plan::{Family, ServerPlan};
use crate::session::Interrupt;
use crate::session::admission::{Admission, Pending, Place, Ticket};
use crate::session::frame_budget::{FrameBudget, SERVER_FRAME_MEMORY};
use crate::session::log_limit::{LogLimit, Verdict, bounding};
use crate::session::udp::UdpAcceptor;
use crate::sys;
use crate::traffic::socket;

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
        /// The one-line summary: who, what, how much, how it ended.
        summary: crate::session::test_log::TestLogLine,
    },
    /// A doctor (`linerate doctor HOST`) was sent this server's environment.
    DoctorAnswered {
        /// The client's control address.
        peer: SocketAddr,
        /// The client's software, as it said.
        client: String,
    },
    /// A connection was dropped before it became part of a test.
    Rejected {
        /// Who.
        peer: SocketAddr,
        /// Why.
        reason: String,
    },
    /// More connections were dropped than the log shows (see `log_limit.rs`).
    Suppressed {
        /// How many drop lines were not written.
        count: u64,
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

/// How notes read as the server's log text (`report::text`), for an iperf3 client's
/// `--get-server-output`: sessions produce notes, only `report/` formats them.
pub type NoteText = fn(&[ServerNote]) -> String;

/// Where a server's notes go: the operator's sink, and the text renderer for clients that
/// ask for the server's output.
#[derive(Clone)]
pub struct Notes {
    /// Every note, as it happens.
    pub sink: NoteSink,
    /// Notes as log text.
    pub text: NoteText,
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notes")
    }
}

/// A data stream presented to the session that owns its cookie.
pub(crate) enum DataSock {
    /// A TCP data connection (its hello already read).
    Tcp(TcpStream),
    /// A UDP stream hello from this client address, received by the acceptor.
    Udp(SocketAddr),
}

pub(crate) type DataConn = (u32, DataSock);

/// An iperf3 data connection and its place in the server's accept order.
pub(crate) type Iperf3Conn = (u64, TcpStream);

/// What every session of one server shares.
pub(crate) struct Shared {
    pub(crate) registry: Mutex<HashMap<[u8; 16], Sender<DataConn>>>,
    pub(crate) iperf3: Mutex<HashMap<[u8; COOKIE_LEN], Sender<Iperf3Conn>>>,
    /// iperf3 UDP tests opening their streams, by client address.
    pub(crate) iperf3_udp: Mutex<HashMap<IpAddr, Sender<SocketAddr>>>,
    shutting_down: AtomicBool,
    signal_name: Mutex<&'static str>,
    next_test: AtomicU64,
    /// Slots held: tests accepted and not yet ended, and doctor sessions.
    held_slots: AtomicU32,
    /// Tests accepted and not yet ended.
    active_tests: AtomicU32,
    /// Doctor sessions holding a slot.
    doctors: AtomicU32,
    /// The requested rates of those tests, summed (for `--max-total-bitrate`).
    committed_bps: AtomicU64,
    /// Why UDP tests cannot be served, if they cannot.
    udp_unavailable: Option<String>,
    /// The operator's limits and per-address counts.
    pub(crate) admission: Arc<Admission>,
    /// Who may connect (allow-list, pre-shared key).
    pub(crate) access: Access,
    log_limit: LogLimit,
    /// The listening port (UDP streams use the same number).
    pub(crate) port: u16,
    pub(crate) notes: NoteSink,
    /// Notes as log text (`--get-server-output`).
    pub(crate) note_text: NoteText,
    /// Memory for clients' large results frames (`frame_budget.rs`).
    pub(crate) frames: FrameBudget,
}

impl Shared {
    /// Why sessions must end now, if the server is shutting down.
    pub(crate) fn shutdown_reason(&self) -> Option<String> {
        self.shutting_down.load(Ordering::SeqCst).then(|| {
            let signal = *self.signal_name.lock().unwrap_or_else(|e| e.into_inner());
            format!("the server is shutting down ({signal}); run the test again when it is back")
        })
    }

    /// A numbered test that asked for `rate` bit/s in total ended.
    pub(crate) fn end_test(&self, rate: u64) {
        self.active_tests.fetch_sub(1, Ordering::SeqCst);
        self.held_slots.fetch_sub(1, Ordering::SeqCst);
        self.committed_bps.fetch_sub(rate, Ordering::SeqCst);
    }

    /// Admits a doctor session from `peer` like a test without a spec: the address's test
    /// token, a slot (never queued: the doctor cannot wait), and one of the doctor places
    /// ([`linerate_proto::Limits::doctor_slots`]). The slot is held until the guard drops.
    pub(crate) fn admit_doctor(&self, peer: IpAddr) -> Result<DoctorSlot<'_>, Refusal> {
        let adm = &self.admission;
        adm.take_test_token(peer, Instant::now())?;
        let limits = &adm.limits;
        self.doctors
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                limits.doctors_busy(n).is_none().then_some(n + 1)
            })
            .map_err(|n| limits.doctors_busy(n).unwrap_or_else(|| busy_fallback(n)))?;
        let slot = if adm.queue_empty() { self.take_slot() } else { Err(u32::MAX) };
        if let Err(running) = slot {
            self.doctors.fetch_sub(1, Ordering::SeqCst);
            let running = running.min(limits.slots());
            return Err(limits.busy(running).unwrap_or_else(|| busy_fallback(running)));
        }
        Ok(DoctorSlot { shared: self })
    }

    /// Counts `spec`'s requested rate against `--max-total-bitrate`, or says why not.
    fn commit_rate(&self, spec: &TestSpec) -> Result<(), Refusal> {
        let limits = &self.admission.limits;
        let asked = requested_rate(spec);
        let rate = asked.unwrap_or(0);
        self.committed_bps
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                limits.total_rate_refusal(used, asked).is_none().then_some(used + rate)
            })
            .map(|_| ())
            .map_err(|used| {
                limits.total_rate_refusal(used, asked).unwrap_or_else(|| busy_fallback(0))
            })
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
            let ip = crate::record::canonical(from).ip();
            let tx = self.iperf3_udp.lock().ok().and_then(|r| r.get(&ip).cloned());
            if let Some(tx) = tx {
                let _ = tx.send(from);
            }
        }
    }

    /// Admits a requested test, queues it (`--exclusive`, for clients that can wait) or says
    /// why not: the protocol the server can serve and the operator's limits (pure checks and
    /// the client's rate on the first call, then the slots). A running test is numbered and
    /// counted until [`Shared::end_test`]. Call again with the same `ticket` while it waits.
    pub(crate) fn admit(
        &self,
        spec: &TestSpec,
        peer: IpAddr,
        ticket: &mut Option<Ticket>,
        can_queue: bool,
    ) -> Result<Admitted, Refusal> {
        let adm = &self.admission;
        let now = Instant::now();
        if ticket.is_none() {
            self.check_request(spec)?;
            adm.take_test_token(peer, now)?;
        }
        let my_turn = match ticket {
            Some(t) => adm.is_next(t),
            None => adm.queue_empty(),
        };
        let slot = if my_turn { self.take_slot() } else { Err(u32::MAX) };
        match slot {
            Ok(()) => {
                if let Err(r) = self.commit_rate(spec) {
                    self.held_slots.fetch_sub(1, Ordering::SeqCst);
                    return Err(r);
                }
                self.active_tests.fetch_add(1, Ordering::SeqCst);
                *ticket = None;
                adm.running(expected_length(spec), now);
                Ok(Admitted::Run(self.next_test.fetch_add(1, Ordering::SeqCst)))
            }
            Err(running) if !adm.limits.exclusive || (ticket.is_none() && !can_queue) => {
                Err(adm.limits.busy(running).unwrap_or_else(|| busy_fallback(running)))
            }
            Err(_) => {
                let t = match ticket.take() {
                    Some(t) => t,
                    None => adm.join_queue(expected_length(spec))?,
                };
                Ok(Admitted::Wait(adm.place(ticket.insert(t), now)))
            }
        }
    }

    /// The checks that need no state: what this server can serve and its limits.
    fn check_request(&self, spec: &TestSpec) -> Result<(), Refusal> {
        if spec.protocol == linerate_proto::Protocol::Udp
            && let Some(why) = &self.udp_unavailable
        {
            let why = format!("this server cannot serve UDP tests: {why}");
            return Err(Refusal::new(LimitKind::NotAllowed, why));
        }
        self.admission.limits.check(spec)?;
        match policy_refusal(spec) {
            Some(why) => Err(Refusal::new(LimitKind::NotAllowed, why)),
            None => Ok(()),
        }
    }

    /// The busy refusal, if every slot is held now (never with `--exclusive`, where later
    /// tests queue rather than hear "busy").
    pub(crate) fn busy_now(&self) -> Option<Refusal> {
        let limits = &self.admission.limits;
        (!limits.exclusive).then(|| limits.busy(self.held_slots.load(Ordering::SeqCst)))?
    }

    /// Takes a slot, or returns how many tests and doctors hold them.
    fn take_slot(&self) -> Result<(), u32> {
        let max = self.admission.limits.slots();
        self.held_slots
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .map(|_| ())
    }

    /// Reports a connection dropped before it became part of a test.
    /// Rate-limited (see `log_limit.rs`): a flood of bad connections is summarized.
    pub(crate) fn reject(&self, peer: SocketAddr, reason: String) {
        match self.log_limit.admit(Instant::now()) {
            Verdict::Suppress => {}
            Verdict::Log { suppressed_before } => {
                if suppressed_before > 0 {
                    (self.notes)(&ServerNote::Suppressed { count: suppressed_before });
                }
                (self.notes)(&ServerNote::Rejected { peer, reason });
            }
        }
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
    pub fn run(self, interrupt: &Interrupt, notes: Notes) -> Result<()> {
        let shared = Arc::new(Shared {
            registry: Mutex::new(HashMap::new()),
            iperf3: Mutex::new(HashMap::new()),
            iperf3_udp: Mutex::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
            signal_name: Mutex::new("a stop request"),
            next_test: AtomicU64::new(1),
            held_slots: AtomicU32::new(0),
            active_tests: AtomicU32::new(0),
            doctors: AtomicU32::new(0),
            committed_bps: AtomicU64::new(0),
            udp_unavailable: self.udp.as_ref().err().cloned(),
            admission: Admission::new(self.plan.limits.clone()),
            access: self.plan.access.clone(),
            log_limit: LogLimit::new(),
            port: self.local_addr()?.port(),
            notes: bounding(notes.sink),
            note_text: notes.text,
            frames: FrameBudget::new(SERVER_FRAME_MEMORY),
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
                    let peer = crate::record::canonical(peer);
                    if !shared.access.allows(peer.ip()) {
                        eprintln_note(&shared, peer, "not in the allow-list (--allow)".into());
                        continue;
                    }
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

/// The shared listener: no per-test options can be set on it (`traffic::socket` says why and
/// applies them on accept).
fn listen_on(addr: SocketAddr, dual: bool) -> Result<TcpListener> {
    Ok(socket::listen(addr, dual)?)
}

/// A connection just accepted, counted against its address until identified.
pub(crate) struct Accepted {
    pub(crate) sock: TcpStream,
    pub(crate) peer: SocketAddr,
    /// Its place in accept order.
    seq: u64,
    pub(crate) pending: Pending,
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
        super::native::run_session(c, first, shared);
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
        None if shared.access.psk.is_some() => {
            // iperf3 cannot answer our challenge: it hears what a busy iperf3 server says.
            let _ = c.sock.write_all(&[linerate_proto::iperf3::State::AccessDenied.byte()]);
            let why = "iperf3 client refused: this server requires a pre-shared key (--psk-file)";
            eprintln_note(shared, c.peer, why.into());
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

/// A doctor session's slot, given back when dropped.
pub(crate) struct DoctorSlot<'a> {
    shared: &'a Shared,
}

impl Drop for DoctorSlot<'_> {
    fn drop(&mut self) {
        self.shared.held_slots.fetch_sub(1, Ordering::SeqCst);
        self.shared.doctors.fetch_sub(1, Ordering::SeqCst);
    }
}

fn busy_fallback(running: u32) -> Refusal {
    Refusal::new(LimitKind::Busy, format!("server is busy ({running} tests running)"))
}

/// How long a test should hold its slot: its duration and warm-up plus a second of setup;
/// None for byte-bound tests.
fn expected_length(spec: &TestSpec) -> Option<Duration> {
    let ms = spec.duration_ms()?.saturating_add(spec.omit_ms).saturating_add(1000);
    Some(Duration::from_millis(ms))
}

/// What [`Shared::admit`] decided.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// Run now, as this test number.
    Run(u64),
    /// Wait in the exclusive queue.
    Wait(Place),
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
