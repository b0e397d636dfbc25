//! The front door: every connection the server accepts waits here — one thread, one epoll
//! set — until it has proved it is part of a test. A thread is spent only on a test the server
//! admitted (or queued), never on a connection that has merely opened.
//!
//! Why: a thread per accepted connection let a crowd crash the server without a key. Sixty
//! addresses holding 32 silent connections each (each sent its preamble and hello, then
//! nothing) made 533 threads whose stacks filled a 2 GiB address space and aborted the process.
//! Here a waiting connection costs a descriptor, about a kilobyte of state and whatever part of
//! one handshake frame it sent (at most 64 KiB).
//!
//! What happens here, cheapest first, so an abuser spends before the server does:
//! - the allow-list, then the per-client cap on waiting connections (`admission.rs`; a client
//!   is an address cut to `--ipv4-prefix`/`--ipv6-prefix`), then the **total** cap on waiting
//!   connections (`--max-connections`, derived from the open-file limit). When the total is
//!   full, a newcomer takes the place of the oldest waiting connection of the client that
//!   holds the most, if that client holds more than the newcomer's: a crowd of many addresses
//!   squeezes itself, and a client with few connections always gets in. Otherwise the newcomer
//!   is closed unread.
//! - the first bytes, within [`CLASSIFY_TIMEOUT`] however they trickle: linerate's control
//!   magic, a data hello (routed by its cookie to the session that owns it), or an iperf3
//!   cookie (a data connection of a running iperf3 test, or a new iperf3 control connection);
//! - the greeting, driven through the same sans-IO machines a session uses (native: preamble,
//!   hello, `auth`, the request, within the protocol's 5 s; iperf3: the parameters);
//! - admission of the request: the operator's limits, the client's share and token bucket,
//!   a slot and the server's totals (`Shared::admit`). A refusal is written and the
//!   connection closed here; an admitted (or queued) test moves, machine and all, to a thread
//!   of its own (`native::run_admitted`, `iperf3::server::run_admitted`).
//!
//! Deadlines are swept every [`TICK`]; nothing here blocks. Level-triggered epoll (see
//! `sys::epoll`), so a connection left with unread bytes is seen again on the next wait.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_proto::iperf3::{COOKIE_LEN, Iperf3Server, Iperf3ServerEvent};
use linerate_proto::server::{ServerConn, ServerEvent};
use linerate_proto::wire::{AbortReason, CONTROL_MAGIC, DATA_HELLO_LEN, DATA_MAGIC, DataHello};
use linerate_proto::{Machine, ProtoError};

use crate::session::admission::Pending;
use crate::session::crowd::Crowd;
use crate::session::metrics::{Dropped, REFUSED_AUTH};
use crate::session::served::{Greeted, ServedTest};
use crate::session::shared::{DataSock, Iperf3Conn, Shared};
use crate::session::{Clock, SOFTWARE, random_nonce};
use crate::sys::epoll::{BROKEN, Epoll, READABLE, WRITABLE};

/// How long a new connection has to send its first bytes (the 8-byte magic and the rest of a
/// data hello or an iperf3 cookie), however they trickle.
pub const CLASSIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// How often deadlines are checked (and the longest wait for readiness).
const TICK: Duration = Duration::from_millis(50);
/// How long a refusal or farewell may take to leave before the connection is closed anyway.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Most bytes read from one connection per readiness event: a peer sending a lot cannot keep
/// the door from the others.
const READ_CHUNK: usize = 16 << 10;
/// Most connections accepted per readiness of the listener, for the same reason.
const ACCEPT_BATCH: usize = 256;
/// The listener's token; connections count up from 1.
pub(crate) const LISTENER: u64 = 0;

/// An epoll set of `batch` events watching `listener`, made non-blocking, as [`LISTENER`].
pub(crate) fn listening(listener: &TcpListener, batch: usize) -> std::io::Result<Epoll> {
    listener.set_nonblocking(true)?;
    let epoll = Epoll::new(batch)?;
    epoll.add(listener, LISTENER, READABLE)?;
    Ok(epoll)
}

/// What one waiting connection is doing.
enum Phase {
    /// Reading its first bytes: 8, then the rest of a data hello or an iperf3 cookie.
    First { buf: [u8; COOKIE_LEN], got: usize, need: usize, deadline: Instant },
    /// A linerate control connection in its greeting.
    Native { conn: Box<ServerConn>, clock: Clock },
    /// An iperf3 control connection before its parameters.
    Iperf3 { m: Box<Iperf3Server>, clock: Clock },
    /// Writing a refusal or farewell, then closing (by `until` at the latest).
    Closing { until: Instant },
}

struct Conn {
    sock: TcpStream,
    peer: SocketAddr,
    key: IpAddr,
    seq: u64,
    pending: Option<Pending>,
    phase: Phase,
    /// Bytes still to write.
    out: Vec<u8>,
    /// WRITABLE is in its interest set.
    writing: bool,
}

/// What to do with a connection after it was served.
enum Next {
    Keep,
    Close,
    /// A data connection: to the session that owns its cookie.
    Data(DataHello),
    /// An iperf3 connection whose cookie a running test owns: one of its data connections.
    Iperf3Data(Sender<Iperf3Conn>),
    /// A greeted control connection, admitted (or queued): to a thread of its own.
    Native(Box<(ServedTest, ServerEvent)>),
    /// The same for iperf3.
    Iperf3(Box<(ServedTest, Iperf3ServerEvent)>),
}

/// The door: the listener, the waiting connections and the sessions it started.
pub(crate) struct FrontDoor {
    shared: Arc<Shared>,
    listener: TcpListener,
    epoll: Epoll,
    conns: HashMap<u64, Conn>,
    /// Each client's waiting connections, and which goes when the door is full.
    crowd: Crowd,
    /// Most waiting connections at once (`Budgets::connections`).
    cap: usize,
    next_token: u64,
    accepted: u64,
    /// The listener is out of the epoll set until then (accept failed: out of descriptors).
    paused_until: Option<Instant>,
    /// When deadlines were last swept.
    swept: Instant,
    scratch: Vec<u8>,
    /// Sessions started, joined at shutdown.
    pub(crate) sessions: Vec<JoinHandle<()>>,
    /// Sessions that ended (for `-1`).
    pub(crate) done: Arc<AtomicU64>,
}

impl FrontDoor {
    /// A door on `listener` (made non-blocking here) holding at most `cap` waiting connections.
    pub(crate) fn new(
        shared: Arc<Shared>,
        listener: TcpListener,
        cap: u32,
    ) -> std::io::Result<Self> {
        let epoll = listening(&listener, 256)?;
        Ok(Self {
            shared,
            listener,
            epoll,
            conns: HashMap::new(),
            crowd: Crowd::default(),
            cap: cap.max(1) as usize,
            next_token: LISTENER + 1,
            accepted: 0,
            paused_until: None,
            swept: Instant::now(),
            scratch: vec![0u8; READ_CHUNK],
            sessions: Vec::new(),
            done: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Serves the door for one wait (at most [`TICK`]): accepts, reads, sweeps deadlines.
    pub(crate) fn turn(&mut self) {
        self.sessions.retain(|h| !h.is_finished());
        self.shared.metrics.waiting.set(i64::try_from(self.conns.len()).unwrap_or(i64::MAX));
        let n = match self.epoll.wait(TICK) {
            Ok(n) => n,
            Err(e) => {
                self.shared.reject(unspecified(), format!("epoll wait failed: {e}"));
                std::thread::sleep(TICK);
                0
            }
        };
        let ready: Vec<_> = (0..n).map(|i| self.epoll.ready(i)).collect();
        for r in ready {
            if r.token == LISTENER {
                self.accept_batch();
            } else {
                self.serve(r.token, r.events);
            }
        }
        // At most once a tick: under a flood of readiness events a sweep per event would
        // spend the door's time walking every waiting connection.
        let now = Instant::now();
        if now.duration_since(self.swept) >= TICK {
            self.swept = now;
            self.sweep(now);
        }
    }

    fn accept_batch(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((sock, peer)) => self.admit_connection(sock, crate::record::canonical(peer)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors and the like: make room from the busiest client and
                    // stop listening for a moment instead of spinning on a ready listener.
                    self.shared.reject(unspecified(), format!("accept failed: {e}"));
                    self.evict_busiest(None);
                    let _ = self.epoll.remove(&self.listener);
                    self.paused_until = Some(Instant::now() + Duration::from_millis(100));
                    return;
                }
            }
        }
    }

    /// A new connection: the allow-list, the client's cap and the total, in that order.
    fn admit_connection(&mut self, sock: TcpStream, peer: SocketAddr) {
        self.accepted += 1;
        if !self.shared.access.allows(peer.ip()) {
            self.shared.metrics.dropped(Dropped::AllowList);
            return self.shared.reject(peer, "not in the allow-list (--allow)".into());
        }
        let limits = &self.shared.admission.limits;
        let key = linerate_proto::limits::client_key(peer.ip(), limits);
        if self.conns.len() >= self.cap && !self.evict_busiest(Some(key)) {
            let why = format!(
                "the server already holds {} connections not yet part of a test \
                 (--max-connections) and this client holds its share of them",
                self.cap
            );
            self.shared.metrics.dropped(Dropped::MaxConnections);
            return self.shared.reject(peer, why);
        }
        let pending = match self.shared.admission.open(peer.ip()) {
            Ok(p) => p,
            Err(r) => {
                self.shared.metrics.dropped(Dropped::ClientConnections);
                return self.shared.reject(peer, r.message);
            }
        };
        if let Err(e) = sock.set_nonblocking(true) {
            return self.shared.reject(peer, format!("cannot serve the connection: {e}"));
        }
        let token = self.next_token;
        if let Err(e) = self.epoll.add(&sock, token, READABLE) {
            return self.shared.reject(peer, format!("cannot watch the connection: {e}"));
        }
        self.next_token += 1;
        let deadline = Instant::now() + CLASSIFY_TIMEOUT;
        let phase = Phase::First { buf: [0; COOKIE_LEN], got: 0, need: 8, deadline };
        let conn = Conn {
            sock,
            peer,
            key,
            seq: self.accepted,
            pending: Some(pending),
            phase,
            out: Vec::new(),
            writing: false,
        };
        self.conns.insert(token, conn);
        self.crowd.join(key, token);
    }

    /// Closes the waiting connection `crowd.rs` picks to make room for a newcomer of client
    /// `newcomer` (None: for no one). True if one was closed.
    fn evict_busiest(&mut self, newcomer: Option<IpAddr>) -> bool {
        let Some((token, held)) = self.crowd.victim(newcomer) else { return false };
        if let Some(c) = self.conns.get(&token) {
            let why = format!(
                "closed to make room: the server holds {} connections not yet part of a test \
                 (--max-connections) and this client held the most ({held})",
                self.cap
            );
            self.shared.reject(c.peer, why);
        }
        self.shared.metrics.dropped(Dropped::MaxConnections);
        self.close(token);
        true
    }

    /// Removes a connection from the door (closing it unless it was taken out).
    fn close(&mut self, token: u64) -> Option<Conn> {
        let c = self.conns.remove(&token)?;
        let _ = self.epoll.remove(&c.sock);
        self.crowd.leave(c.key, token);
        Some(c)
    }

    fn serve(&mut self, token: u64, events: u32) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        let next = if events & (READABLE | BROKEN) != 0 {
            c.read(&self.shared, &mut self.scratch)
        } else {
            Next::Keep
        };
        self.after(token, next);
    }

    /// Flushes what the connection has to say and acts on `next`.
    fn after(&mut self, token: u64, next: Next) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        let next = match next {
            Next::Keep => c.flush(),
            other => other,
        };
        match next {
            Next::Keep => {
                let want = !c.out.is_empty();
                if want != c.writing {
                    let interest = if want { READABLE | WRITABLE } else { READABLE };
                    let _ = self.epoll.modify(&c.sock, token, interest);
                    c.writing = want;
                }
            }
            Next::Close => {
                self.close(token);
            }
            next => {
                if let Some(c) = self.close(token) {
                    self.hand_over(c, next);
                }
            }
        }
    }

    /// Deadlines: first bytes, the machines' own, closing grace. Also resumes listening.
    fn sweep(&mut self, now: Instant) {
        if self.paused_until.is_some_and(|t| now >= t) {
            self.paused_until = None;
            let _ = self.epoll.add(&self.listener, LISTENER, READABLE);
        }
        let mut due = Vec::new();
        for (token, c) in &mut self.conns {
            let next = c.check_deadline(&self.shared, now);
            if !matches!(next, Next::Keep) || !c.out.is_empty() {
                due.push((*token, next));
            }
        }
        for (token, next) in due {
            self.after(token, next);
        }
    }

    /// Takes a connection that left the door where it belongs: a data connection to its
    /// test, a greeted control connection to a thread of its own.
    fn hand_over(&mut self, c: Conn, next: Next) {
        let Conn { sock, peer, phase, out, pending, seq, .. } = c;
        // A connection that is part of a test no longer counts against its client.
        drop(pending);
        if sock.set_nonblocking(false).is_err() {
            return self.shared.reject(peer, "cannot serve the connection".into());
        }
        let shared = self.shared.clone();
        let done = self.done.clone();
        let spawned = match (next, phase) {
            (Next::Data(hello), _) => return route_data(&self.shared, peer, hello, sock),
            (Next::Iperf3Data(tx), _) => {
                let _ = tx.send((seq, sock));
                return;
            }
            (Next::Native(admitted), Phase::Native { conn, clock }) => {
                let (test, event) = *admitted;
                let g = Greeted { sock, machine: *conn, clock, test, event, unsent: out };
                spawn_session(move || {
                    super::native::run_admitted(g, &shared);
                    done.fetch_add(1, Ordering::SeqCst);
                })
            }
            (Next::Iperf3(admitted), Phase::Iperf3 { m, clock }) => {
                let (test, event) = *admitted;
                let g = Greeted { sock, machine: *m, clock, test, event, unsent: out };
                spawn_session(move || {
                    super::iperf3::server::run_admitted(g, &shared);
                    done.fetch_add(1, Ordering::SeqCst);
                })
            }
            _ => return,
        };
        match spawned {
            Ok(h) => self.sessions.push(h),
            // The test, moved into the closure, was dropped with it: its slot is given back.
            Err(e) => self.shared.reject(peer, format!("cannot start a session thread: {e}")),
        }
    }
}

fn spawn_session(f: impl FnOnce() + Send + 'static) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("lr-session".into()).spawn(f)
}

/// Hands a data connection to the session that owns its cookie.
fn route_data(shared: &Shared, peer: SocketAddr, h: DataHello, sock: TcpStream) {
    let tx = shared.registry.lock().ok().and_then(|r| r.get(&h.cookie.0).cloned());
    match tx {
        Some(tx) => {
            let _ = tx.send((h.stream_id, DataSock::Tcp(sock)));
        }
        None => {
            shared.metrics.dropped(Dropped::UnknownCookie);
            shared.reject(peer, "data connection with an unknown test cookie".into());
        }
    }
}

impl Conn {
    /// Reads what arrived (at most [`READ_CHUNK`]) and acts on it.
    fn read(&mut self, shared: &Arc<Shared>, scratch: &mut [u8]) -> Next {
        if let Phase::First { buf, got, need, .. } = &mut self.phase {
            // Exactly what is still missing: a data connection's or a `--crr` transaction's
            // bytes after its hello belong to its stream.
            match (&self.sock).read(&mut buf[*got..*need]) {
                Ok(0) => return self.drop_first(shared, "closed before its first bytes".into()),
                Ok(n) => *got += n,
                Err(e) if is_transient(&e) => return Next::Keep,
                Err(e) => return self.drop_first(shared, e.to_string()),
            }
            return self.classify(shared);
        }
        if matches!(self.phase, Phase::Closing { .. }) {
            // Whatever a refused peer still sends is read and thrown away (a close with
            // unread bytes would reset the connection before the refusal arrives).
            return match (&self.sock).read(scratch) {
                Ok(0) => Next::Close,
                Ok(_) => Next::Keep,
                Err(e) if is_transient(&e) => Next::Keep,
                Err(_) => Next::Close,
            };
        }
        let bytes = match (&self.sock).read(scratch) {
            Ok(0) => None,
            Ok(n) => Some(&scratch[..n]),
            Err(e) if is_transient(&e) => return Next::Keep,
            Err(e) => return self.drop_with(shared, e.to_string()),
        };
        match &mut self.phase {
            Phase::Native { conn, clock } => {
                let fed = match bytes {
                    Some(b) => conn.handle_input(b, clock.now()),
                    None => conn.handle_eof(),
                };
                self.after_native(shared, fed.err())
            }
            Phase::Iperf3 { m, clock } => {
                let fed = match bytes {
                    Some(b) => m.handle_input(b, clock.now()),
                    None => m.handle_eof(),
                };
                self.after_iperf3(shared, fed.err())
            }
            Phase::First { .. } | Phase::Closing { .. } => Next::Keep,
        }
    }

    /// The first bytes are in (or some of them): what kind of connection this is.
    fn classify(&mut self, shared: &Arc<Shared>) -> Next {
        let Phase::First { buf, got, need, .. } = &mut self.phase else { return Next::Keep };
        if *got < *need {
            return Next::Keep;
        }
        let first: [u8; 8] = match buf[..8].try_into() {
            Ok(f) => f,
            Err(_) => return Next::Close,
        };
        if *need == 8 {
            if first == CONTROL_MAGIC {
                return self.start_native(shared, first);
            } else if first == DATA_MAGIC {
                *need = DATA_HELLO_LEN;
            } else if first.iter().all(|b| (0x20..0x7f).contains(b)) {
                *need = COOKIE_LEN;
            } else {
                let why = format!("neither linerate nor iperf3 (first bytes {first:02x?})");
                return self.drop_first(shared, why);
            }
            return Next::Keep;
        }
        if first == DATA_MAGIC {
            let mut hello = [0u8; DATA_HELLO_LEN];
            hello.copy_from_slice(&buf[..DATA_HELLO_LEN]);
            return match DataHello::decode(&hello) {
                Some(h) => Next::Data(h),
                None => Next::Close,
            };
        }
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(&buf[..COOKIE_LEN]);
        self.iperf3_cookie(shared, cookie)
    }

    fn start_native(&mut self, shared: &Arc<Shared>, first: [u8; 8]) -> Next {
        let clock = Clock::new();
        let mut conn = match &shared.access.psk {
            None => ServerConn::new(SOFTWARE, clock.now()),
            Some(key) => match random_nonce() {
                Ok(nonce) if shared.agent => {
                    ServerConn::agent(SOFTWARE, clock.now(), key.clone(), nonce)
                }
                Ok(nonce) => ServerConn::with_psk(SOFTWARE, clock.now(), key.clone(), nonce),
                Err(e) => return self.drop_with(shared, format!("{e:#}")),
            },
        };
        let fed = conn.handle_input(&first, clock.now());
        self.phase = Phase::Native { conn: Box::new(conn), clock };
        self.after_native(shared, fed.err())
    }

    /// An iperf3 cookie: a data connection of a running test, or a new control connection.
    fn iperf3_cookie(&mut self, shared: &Arc<Shared>, cookie: [u8; COOKIE_LEN]) -> Next {
        let printable = cookie[..COOKIE_LEN - 1].iter().all(|b| (0x20..0x7f).contains(b));
        if !printable || cookie[COOKIE_LEN - 1] != 0 {
            let why = "neither linerate nor iperf3 (no 36-character cookie and NUL)";
            return self.drop_first(shared, why.into());
        }
        if let Some(tx) = shared.iperf3.lock().ok().and_then(|r| r.get(&cookie).cloned()) {
            return Next::Iperf3Data(tx);
        }
        if shared.access.psk.is_some() {
            // iperf3 cannot answer our challenge: it hears what a busy iperf3 server says.
            self.out.push(linerate_proto::iperf3::State::AccessDenied.byte());
            let why = "iperf3 client refused: this server requires a pre-shared key (--psk-file)";
            shared.metrics.refused(REFUSED_AUTH);
            return self.farewell(shared, why.into());
        }
        let clock = Clock::new();
        let mut m = Iperf3Server::new(clock.now());
        let fed = m.handle_input(&cookie, clock.now());
        self.phase = Phase::Iperf3 { m: Box::new(m), clock };
        self.after_iperf3(shared, fed.err())
    }

    /// After the native machine took input, an EOF or a timeout: its output, its failure, or
    /// the request it reached (admitted here).
    fn after_native(&mut self, shared: &Arc<Shared>, failed: Option<ProtoError>) -> Next {
        let Phase::Native { conn, .. } = &mut self.phase else { return Next::Keep };
        if let Some(e) = failed {
            // The greeting's only refusal is the key's (`ServerConn::on_auth`); a request
            // is refused below, by admission, and counted there.
            match e {
                ProtoError::Refused(_) => shared.metrics.refused(REFUSED_AUTH),
                _ => shared.metrics.dropped(Dropped::Handshake),
            }
            if !matches!(e, ProtoError::Closed(_) | ProtoError::Aborted { .. }) {
                conn.abort(AbortReason::Other, &e.to_string());
            }
            self.out.extend(conn.poll_transmit().unwrap_or_default());
            return self.farewell(shared, e.to_string());
        }
        self.out.extend(conn.poll_transmit().unwrap_or_default());
        if conn.is_finished() {
            shared.metrics.dropped(Dropped::Handshake);
            return self.farewell(shared, "closed during the greeting".into());
        }
        let Some(event) = conn.poll_event() else { return Next::Keep };
        let Some(pending) = self.pending.take() else { return Next::Close };
        let mut test = ServedTest::new(shared.clone(), self.peer, pending);
        let admitted = match &event {
            ServerEvent::TestRequested { spec, .. } => {
                test.admit(spec, conn.can_queue()).map(|_| ())
            }
            ServerEvent::EnvironmentRequested { .. } => test.admit_doctor(),
            // A pair test takes a slot and the operator's limits like a test served here:
            // one at a time per slot, the same duration, streams and rate caps.
            ServerEvent::PairTestRequested { spec, .. } => test.admit(spec, false).map(|_| ()),
            _ => {
                let why = "the client skipped its request";
                conn.abort(AbortReason::Other, why);
                self.out.extend(conn.poll_transmit().unwrap_or_default());
                return self.farewell(shared, why.into());
            }
        };
        match admitted {
            Ok(()) => Next::Native(Box::new((test, event))),
            Err(r) => {
                conn.refuse(&r.message);
                self.out.extend(conn.poll_transmit().unwrap_or_default());
                let what = match event {
                    ServerEvent::EnvironmentRequested { .. } => "refused a doctor",
                    _ => "refused",
                };
                // Not admitted: nothing to end but the log line (no `finish`, whose heap trim
                // is for a session that ran, not for the door's thread on every refusal).
                self.farewell(shared, format!("{what}: {r}"))
            }
        }
    }

    /// The same for iperf3: its parameters are its request.
    fn after_iperf3(&mut self, shared: &Arc<Shared>, failed: Option<ProtoError>) -> Next {
        let Phase::Iperf3 { m, .. } = &mut self.phase else { return Next::Keep };
        self.out.extend(m.poll_transmit().unwrap_or_default());
        if let Some(e) = failed {
            shared.metrics.dropped(Dropped::Handshake);
            return self.farewell(shared, e.to_string());
        }
        if m.is_finished() {
            shared.metrics.dropped(Dropped::Handshake);
            return self.farewell(shared, "closed before its parameters".into());
        }
        let Some(event) = m.poll_event() else { return Next::Keep };
        let mut request = match event {
            Iperf3ServerEvent::TestRequested(Ok(req)) => req,
            Iperf3ServerEvent::TestRequested(Err(why)) => {
                self.out.extend(m.poll_transmit().unwrap_or_default());
                return self.farewell(shared, format!("refused an iperf3 client: {why}"));
            }
            _ => return self.farewell(shared, "an iperf3 client skipped its parameters".into()),
        };
        let Some(pending) = self.pending.take() else { return Next::Close };
        let mut test = ServedTest::new(shared.clone(), self.peer, pending);
        match super::iperf3::server::admit(&mut test, &mut request, m) {
            Ok(()) => Next::Iperf3(Box::new((test, Iperf3ServerEvent::TestRequested(Ok(request))))),
            Err(e) => {
                self.out.extend(m.poll_transmit().unwrap_or_default());
                self.farewell(shared, format!("{e:#}"))
            }
        }
    }

    /// Logs why the connection is dropped, then says goodbye with what is queued.
    fn farewell(&mut self, shared: &Shared, why: String) -> Next {
        shared.reject(self.peer, why);
        self.closing()
    }

    /// Drops a connection whose first bytes did not come, or were neither protocol.
    fn drop_first(&mut self, shared: &Shared, why: String) -> Next {
        shared.metrics.dropped(Dropped::FirstBytes);
        self.drop_with(shared, why)
    }

    /// Logs why the connection is dropped and closes it at once.
    fn drop_with(&mut self, shared: &Shared, why: String) -> Next {
        shared.reject(self.peer, why);
        Next::Close
    }

    fn closing(&mut self) -> Next {
        self.phase = Phase::Closing { until: Instant::now() + CLOSE_GRACE };
        if self.out.is_empty() { Next::Close } else { Next::Keep }
    }

    /// Writes what it can of `out`; a closing connection with nothing left is closed.
    fn flush(&mut self) -> Next {
        while !self.out.is_empty() {
            match (&self.sock).write(&self.out) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if is_transient(&e) => break,
                Err(_) => return Next::Close,
            }
        }
        if self.out.is_empty() && matches!(self.phase, Phase::Closing { .. }) {
            let _ = self.sock.shutdown(std::net::Shutdown::Write);
            return Next::Close;
        }
        Next::Keep
    }

    fn check_deadline(&mut self, shared: &Arc<Shared>, now: Instant) -> Next {
        match &mut self.phase {
            Phase::First { deadline, .. } if now >= *deadline => {
                let why = format!("sent no hello within {} s", CLASSIFY_TIMEOUT.as_secs());
                self.drop_first(shared, why)
            }
            Phase::Native { conn, clock } => {
                let failed = conn.handle_timeout(clock.now()).err();
                if failed.is_some() { self.after_native(shared, failed) } else { Next::Keep }
            }
            Phase::Iperf3 { m, clock } => {
                let failed = m.handle_timeout(clock.now()).err();
                if failed.is_some() { self.after_iperf3(shared, failed) } else { Next::Keep }
            }
            Phase::Closing { until } if now >= *until => Next::Close,
            _ => Next::Keep,
        }
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

fn unspecified() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0)
}
