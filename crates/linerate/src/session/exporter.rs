//! The metrics endpoint (`--metrics ADDR:PORT`): `GET /metrics` answers with the server's
//! counters (`metrics.rs`) and `GET /probe?target=IP:PORT` with a probe's figures
//! (`probe.rs`); anything else gets a status and one sentence.
//!
//! It faces the same strangers as the test port, so it is built like the front door
//! (`front.rs`): one thread, one epoll set, no thread per connection; at most
//! [`MAX_CONNECTIONS`] at once, [`PER_CLIENT`] from one client (an address cut to the
//! server's prefixes), and when it is full a newcomer takes the place of the oldest of the
//! client holding the most (`crowd.rs`), so a crowd of slow connections cannot keep a scrape
//! out; [`REQUEST_TIMEOUT`] to send a whole request of at most [`MAX_REQUEST`] bytes, however
//! it trickles; [`WRITE_TIMEOUT`] to take the answer. One request per connection. A probe
//! runs on one thread of its own, one probe at a time; its connection waits here meanwhile.
//!
//! **The probe budget.** A probe is a real test: an unauthenticated scraper asking back to
//! back would keep the server sending all the time (15 probes in 15.8 s, each about 3.3 GiB,
//! before the budget). So each target has one: after a probe of it that took T (connection,
//! handshake and test), the next waits T × (100 / share − 1), `--probe-share` (10 % by default:
//! a 1 s probe, about 1.1 s in all, then 10 s of rest). A request before then is answered
//! `429 Too Many Requests` with `Retry-After` (whole seconds) and counted as
//! `linerate_probes_total{outcome="too_soon"}`; so is one while another probe runs (`busy`).
//! With `--probe-token-file`, `/probe` asks for `Authorization: Bearer TOKEN` first ([`bearer_ok`]):
//! a request without it, or with another, is answered 401 (`unauthorized`), before any of the
//! above; `/metrics` never asks.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_proto::auth::Psk;

use crate::plan::server::ProbePlan;
use crate::session::Interrupt;
use crate::session::crowd::Crowd;
use crate::session::front::{LISTENER, listening};
use crate::session::metrics::CONTENT_TYPE;
use crate::session::probe::{self, Probed};
use crate::session::server_note::ServerNote;
use crate::session::shared::Shared;
use crate::sys::epoll::{BROKEN, Epoll, READABLE, WRITABLE};

/// Connections the endpoint holds at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Connections one client holds at once; more are closed unread.
pub const PER_CLIENT: usize = 8;
/// How long a connection has to send its whole request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a connection has to take its answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request (line and headers) read; a longer one is answered 431.
pub const MAX_REQUEST: usize = 4096;
/// How long a probe's connection waits beyond the probe's duration (connection, handshake
/// and results, each under the protocol's deadlines) before it is answered 504.
const PROBE_SLACK: Duration = Duration::from_secs(8);
/// How often deadlines are checked, and the longest wait for readiness.
const TICK: Duration = Duration::from_millis(50);
/// Most connections accepted per readiness of the listener.
const ACCEPT_BATCH: usize = 64;

/// What a connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading its request.
    Reading,
    /// Its probe runs; answered when it ends.
    Probing,
    /// Writing the answer, then closing.
    Writing,
}

struct Http {
    sock: TcpStream,
    key: IpAddr,
    request: Vec<u8>,
    state: State,
    deadline: Instant,
    out: Vec<u8>,
}

/// The probe thread, one at a time: which connection waits for it, and its answer.
#[derive(Default)]
struct Prober {
    /// The connection waiting, the target, when the probe began, its thread.
    running: Option<(u64, SocketAddr, Instant, JoinHandle<()>)>,
    /// By target: the earliest time its next probe may begin (the budget).
    rested: HashMap<SocketAddr, Instant>,
    done: Arc<Mutex<Option<Probed>>>,
    stop: Interrupt,
}

/// The endpoint: its listener, its connections and its probe.
pub(crate) struct Exporter {
    shared: Arc<Shared>,
    listener: TcpListener,
    epoll: Epoll,
    conns: HashMap<u64, Http>,
    crowd: Crowd,
    next_token: u64,
    probe: ProbePlan,
    prober: Prober,
}

impl Exporter {
    /// The endpoint on `listener` (made non-blocking here).
    pub(crate) fn new(
        shared: Arc<Shared>,
        listener: TcpListener,
        probe: ProbePlan,
    ) -> std::io::Result<Self> {
        let epoll = listening(&listener, 64)?;
        Ok(Self {
            shared,
            listener,
            epoll,
            conns: HashMap::new(),
            crowd: Crowd::default(),
            next_token: LISTENER + 1,
            probe,
            prober: Prober::default(),
        })
    }

    /// Serves on a thread of its own until `stop` is set; a running probe is then told to
    /// stop too.
    pub(crate) fn spawn(mut self, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new().name("lr-metrics".into()).spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                self.turn();
            }
            self.prober.stop.trigger();
        })
    }

    fn turn(&mut self) {
        let n = self.epoll.wait(TICK).unwrap_or_else(|_| {
            std::thread::sleep(TICK);
            0
        });
        let ready: Vec<_> = (0..n).map(|i| self.epoll.ready(i)).collect();
        for r in ready {
            if r.token == LISTENER {
                self.accept_batch();
            } else if r.events & BROKEN != 0 {
                self.close(r.token, Some("closed"));
            } else if r.events & READABLE != 0 {
                self.read(r.token);
            } else if r.events & WRITABLE != 0 {
                self.flush(r.token);
            }
        }
        self.answer_probe();
        self.sweep(Instant::now());
    }

    fn accept_batch(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((sock, peer)) => self.admit(sock, crate::record::canonical(peer)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    // Out of descriptors: make room from the busiest client.
                    if let Some((token, _)) = self.crowd.victim(None) {
                        self.close(token, Some("full"));
                    }
                    return;
                }
            }
        }
    }

    /// A new connection: its client's cap, then the total (a place made from the busiest
    /// client, if it holds more than this one's).
    fn admit(&mut self, sock: TcpStream, peer: SocketAddr) {
        let key = linerate_proto::limits::client_key(peer.ip(), &self.shared.admission.limits);
        let mine = self.crowd.held(key);
        if mine >= PER_CLIENT {
            return self.shared.metrics.http_dropped("client_connections");
        }
        if self.conns.len() >= MAX_CONNECTIONS {
            match self.crowd.victim(Some(key)) {
                Some((token, _)) => self.close(token, Some("full")),
                None => return self.shared.metrics.http_dropped("full"),
            }
        }
        let token = self.next_token;
        if sock.set_nonblocking(true).is_err() || self.epoll.add(&sock, token, READABLE).is_err() {
            return;
        }
        self.next_token += 1;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let http = Http {
            sock,
            key,
            request: Vec::new(),
            state: State::Reading,
            deadline,
            out: Vec::new(),
        };
        self.conns.insert(token, http);
        self.crowd.join(key, token);
    }

    /// Closes a connection; `dropped`: it got no answer, for this reason.
    fn close(&mut self, token: u64, dropped: Option<&'static str>) {
        if let Some(c) = self.conns.remove(&token) {
            let _ = self.epoll.remove(&c.sock);
            self.crowd.leave(c.key, token);
            if let Some(why) = dropped.filter(|_| c.state != State::Writing) {
                self.shared.metrics.http_dropped(why);
            }
        }
    }

    fn read(&mut self, token: u64) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        if c.state != State::Reading {
            return;
        }
        let mut buf = [0u8; 1024];
        let room = (MAX_REQUEST + 1 - c.request.len()).min(buf.len());
        match (&c.sock).read(&mut buf[..room]) {
            Ok(0) => return self.close(token, Some("closed")),
            Ok(n) => c.request.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => return,
            Err(_) => return self.close(token, Some("closed")),
        }
        let Some(end) = c.request.windows(4).position(|w| w == b"\r\n\r\n") else {
            if c.request.len() > MAX_REQUEST {
                let why = format!("requests are at most {MAX_REQUEST} bytes");
                self.respond(token, Answer::text(431, "Request Header Fields Too Large", why));
            }
            return;
        };
        let head = String::from_utf8_lossy(&c.request[..end]).into_owned();
        let answer = self.route(token, &head);
        if let Some(answer) = answer {
            self.respond(token, answer);
        }
    }

    /// What a request asks for: an answer now, or None while its probe runs.
    fn route(&mut self, token: u64, head: &str) -> Option<Answer> {
        let line = head.lines().next().unwrap_or_default();
        let mut words = line.split(' ');
        let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if method != "GET" {
            let why = "this endpoint answers GET /metrics and GET /probe only".to_string();
            return Some(Answer::text(405, "Method Not Allowed", why));
        }
        match path {
            "/metrics" => {
                let active = self.shared.active_tests();
                let queued = self.shared.admission.queued();
                Some(Answer::metrics(self.shared.metrics.encode(active, queued)))
            }
            "/probe" if !bearer_ok(self.probe.token.as_ref(), head) => {
                self.shared.metrics.probe("unauthorized");
                let why = "this server's probes need `Authorization: Bearer TOKEN` with the token \
                           of its --probe-token-file"
                    .to_string();
                Some(Answer { challenge: true, ..Answer::text(401, "Unauthorized", why) })
            }
            "/probe" => self.start_probe(token, query),
            _ => {
                let why = "not found: this endpoint serves /metrics and /probe?target=IP:PORT";
                Some(Answer::text(404, "Not Found", why.to_string()))
            }
        }
    }

    /// Starts a probe for `token` if its target is allowed and none runs; else the refusal.
    fn start_probe(&mut self, token: u64, query: &str) -> Option<Answer> {
        let target = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "target")
            .map(|(_, v)| percent_decoded(v));
        let refused = probe_refusal(&self.probe, target.as_deref());
        let metrics = &self.shared.metrics;
        let target = match refused {
            Err(answer) => {
                metrics.probe("refused");
                return Some(answer);
            }
            Ok(t) => t,
        };
        if self.prober.running.is_some() {
            metrics.probe("busy");
            let why = "a probe is running; this server runs one at a time: try again in a few \
                       seconds (or scrape less often)";
            return Some(Answer::text(429, "Too Many Requests", why.to_string()).retry_after(2));
        }
        let now = Instant::now();
        if let Some(left) =
            self.prober.rested.get(&target).and_then(|t| t.checked_duration_since(now))
        {
            metrics.probe("too_soon");
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            let why = format!(
                "{target} was probed moments ago, and probes keep a target busy at most {} % of \
                 the time (--probe-share): try again in {secs} s, or scrape less often",
                self.probe.share
            );
            return Some(Answer::text(429, "Too Many Requests", why).retry_after(secs));
        }
        let done = self.prober.done.clone();
        let stop = self.prober.stop.clone();
        let duration = self.probe.duration;
        let spawned = std::thread::Builder::new().name("lr-probe".into()).spawn(move || {
            let probed = probe::run(target, duration, &stop);
            *done.lock().unwrap_or_else(|e| e.into_inner()) = Some(probed);
        });
        match spawned {
            Ok(handle) => {
                self.prober.running = Some((token, target, now, handle));
                if let Some(c) = self.conns.get_mut(&token) {
                    c.state = State::Probing;
                    c.deadline = Instant::now() + duration + PROBE_SLACK;
                    // Nothing to read while the probe runs: a peer's FIN or more bytes must
                    // not wake the loop (level-triggered); errors and hang-ups still do.
                    let _ = self.epoll.modify(&c.sock, token, 0);
                }
                None
            }
            Err(e) => {
                metrics.probe("failed");
                let why = format!("cannot start the probe: {e}");
                Some(Answer::text(503, "Service Unavailable", why))
            }
        }
    }

    /// The probe's answer to its connection, once its thread has ended.
    fn answer_probe(&mut self) {
        let finished = self.prober.running.as_ref().is_some_and(|(.., h)| h.is_finished());
        if !finished {
            return;
        }
        let Some((token, target, began, handle)) = self.prober.running.take() else { return };
        let _ = handle.join();
        let took = began.elapsed();
        let rest = took.mul_f64(100.0 / f64::from(self.probe.share.clamp(1, 100)) - 1.0);
        self.prober.rested.insert(target, Instant::now() + rest);
        let probed = self.prober.done.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(probed) = probed else { return };
        let outcome = if probed.error.is_some() { "failed" } else { "completed" };
        self.shared.metrics.probe(outcome);
        (self.shared.notes)(&ServerNote::Probed { target, error: probed.error.clone() });
        if self.conns.get(&token).is_some_and(|c| c.state == State::Probing) {
            self.respond(token, Answer::metrics(probed.text));
        }
    }

    /// Queues `answer` and starts writing it.
    fn respond(&mut self, token: u64, answer: Answer) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        c.out = answer.bytes();
        c.state = State::Writing;
        c.deadline = Instant::now() + WRITE_TIMEOUT;
        let _ = self.epoll.modify(&c.sock, token, WRITABLE);
        self.flush(token);
    }

    fn flush(&mut self, token: u64) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        while !c.out.is_empty() {
            match (&c.sock).write(&c.out) {
                Ok(0) => break,
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    return;
                }
                Err(_) => break,
            }
        }
        let _ = c.sock.shutdown(std::net::Shutdown::Write);
        self.close(token, None);
    }

    fn sweep(&mut self, now: Instant) {
        let due: Vec<(u64, State)> = self
            .conns
            .iter()
            .filter(|(_, c)| now >= c.deadline)
            .map(|(t, c)| (*t, c.state))
            .collect();
        for (token, state) in due {
            match state {
                State::Reading => self.close(token, Some("request_timeout")),
                State::Writing => {
                    self.shared.metrics.http_dropped("write_timeout");
                    self.close(token, None);
                }
                State::Probing => {
                    let why = "the probe did not end in time; its figures are not known";
                    self.respond(token, Answer::text(504, "Gateway Timeout", why.to_string()));
                }
            }
        }
    }
}

/// The target a probe may test, or the answer that refuses it.
fn probe_refusal(plan: &ProbePlan, target: Option<&str>) -> Result<SocketAddr, Answer> {
    if plan.allow.is_empty() {
        let why = "probes are off on this server: start it with --probe-allow IP:PORT,... \
                   (probe_allow in its config) naming the targets it may test";
        return Err(Answer::text(403, "Forbidden", why.to_string()));
    }
    let Some(target) = target.filter(|t| !t.is_empty()) else {
        let why = "name the target: /probe?target=IP:PORT (one of --probe-allow)";
        return Err(Answer::text(400, "Bad Request", why.to_string()));
    };
    match target.parse::<SocketAddr>() {
        Ok(t) if plan.allow.contains(&t) => Ok(t),
        _ => {
            let allowed: Vec<String> = plan.allow.iter().map(ToString::to_string).collect();
            let shown: String = target.chars().take(64).filter(|c| !c.is_control()).collect();
            let why = format!(
                "target {shown:?} is not allowed: this server probes only {} (--probe-allow; \
                 written as IP:PORT, never a host name)",
                allowed.join(", ")
            );
            Err(Answer::text(403, "Forbidden", why))
        }
    }
}

/// `%XX` escapes and `+` decoded (Prometheus escapes `:` in parameters); a bad escape is
/// kept as written, and then matches no allowed target.
fn percent_decoded(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True if `/probe` may run for a request with this `head`: no token is asked for, or its
/// `Authorization: Bearer` header carries it (the header's name in any case, the scheme too,
/// as HTTP has them; compared in constant time).
fn bearer_ok(token: Option<&Psk>, head: &str) -> bool {
    let Some(token) = token else { return true };
    head.lines().skip(1).any(|line| {
        let Some((name, value)) = line.split_once(':') else { return false };
        let mut words = value.split_whitespace();
        name.trim().eq_ignore_ascii_case("authorization")
            && words.next().is_some_and(|s| s.eq_ignore_ascii_case("bearer"))
            && words.next().is_some_and(|t| token.is(t.as_bytes()))
            && words.next().is_none()
    })
}

/// An HTTP answer.
struct Answer {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    body: String,
    /// `Retry-After`, seconds (429 only).
    retry_after: Option<u64>,
    /// `WWW-Authenticate: Bearer` (401 only).
    challenge: bool,
}

impl Answer {
    fn metrics(body: String) -> Self {
        Self {
            status: 200,
            reason: "OK",
            content_type: CONTENT_TYPE,
            body,
            retry_after: None,
            challenge: false,
        }
    }

    /// With `Retry-After: secs`.
    fn retry_after(self, secs: u64) -> Self {
        Self { retry_after: Some(secs.max(1)), ..self }
    }

    /// An error status with one sentence.
    fn text(status: u16, reason: &'static str, sentence: String) -> Self {
        let content_type = "text/plain; charset=utf-8";
        let body = format!("{sentence}\n");
        Self { status, reason, content_type, body, retry_after: None, challenge: false }
    }

    fn bytes(&self) -> Vec<u8> {
        let Self { status, reason, content_type, body, retry_after, challenge } = self;
        let retry = retry_after.map(|s| format!("Retry-After: {s}\r\n")).unwrap_or_default();
        let challenge = match challenge {
            true => "WWW-Authenticate: Bearer realm=\"linerate probe\"\r\n",
            false => "",
        };
        format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             {retry}{challenge}Connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(targets: &[&str]) -> ProbePlan {
        let allow = targets.iter().map(|t| t.parse().expect("addr")).collect();
        ProbePlan { allow, ..ProbePlan::default() }
    }

    #[test]
    fn probes_are_refused_unless_the_target_is_allowed_exactly() {
        let off = probe_refusal(&ProbePlan::default(), Some("127.0.0.1:5201"));
        assert!(off.is_err_and(|a| a.status == 403 && a.body.contains("--probe-allow")));
        let plan = allow(&["127.0.0.1:5201", "[::1]:5201"]);
        assert_eq!(
            probe_refusal(&plan, Some("127.0.0.1:5201")).ok(),
            "127.0.0.1:5201".parse().ok()
        );
        assert!(probe_refusal(&plan, Some("[::1]:5201")).is_ok());
        for other in ["127.0.0.1:5202", "127.0.0.2:5201", "localhost:5201", "127.0.0.1"] {
            let a = probe_refusal(&plan, Some(other)).expect_err(other);
            assert_eq!(a.status, 403, "{other}");
            assert!(a.body.contains("is not allowed"), "{}", a.body);
        }
        assert!(probe_refusal(&plan, None).is_err_and(|a| a.status == 400));
    }

    #[test]
    fn parameters_are_percent_decoded() {
        assert_eq!(percent_decoded("127.0.0.1%3A5201"), "127.0.0.1:5201");
        assert_eq!(percent_decoded("%5B%3A%3A1%5D%3A5201"), "[::1]:5201");
        assert_eq!(percent_decoded("a%zz+b%4"), "a%zz b%4");
    }

    #[test]
    fn a_bearer_token_is_read_from_its_header_only() {
        let token = Psk::new(b"the-probe-token-1".to_vec()).expect("token");
        let head = |h: &str| format!("GET /probe?target=x HTTP/1.1\r\nHost: y\r\n{h}");
        assert!(bearer_ok(None, &head("")), "no token asked for");
        let ok = |h: &str| bearer_ok(Some(&token), &head(h));
        assert!(ok("Authorization: Bearer the-probe-token-1"));
        assert!(ok("authorization:  BEARER   the-probe-token-1 "));
        assert!(!ok(""));
        assert!(!ok("Authorization: Bearer the-probe-token-2"));
        assert!(!ok("Authorization: Bearer the-probe-token-1 extra"));
        assert!(!ok("Authorization: Basic the-probe-token-1"));
        assert!(!ok("X-Authorization: Bearer the-probe-token-1"));
        // The request line is not a header.
        assert!(!bearer_ok(Some(&token), "Authorization: Bearer the-probe-token-1\r\n"));
    }
}
