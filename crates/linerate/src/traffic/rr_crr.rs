//! Connect/request/response/close (`--crr`, netperf's TCP_CRR): every transaction on a TCP
//! connection of its own, one at a time per stream.
//!
//! The stream's own data connection stays open as its anchor and carries nothing: it attached
//! the stream, and the client's closing it ends the stream on the server, as for any test.
//! Each transaction the client connects anew (the test's socket options applied, as for
//! every data socket), writes the data hello of its stream with `TRANSACTION_FLAG` set and
//! the request in one write, and reads the response; the server, having read the request,
//! writes the response and closes first, so the connection's TIME_WAIT stays on the server and
//! the client's ephemeral ports do not run out at high rates. The client times the phases:
//! **connect** (the call until the connection is up: the handshake), **first byte** (request
//! written until the first response byte: the server's accept, hand-off and answer) and
//! **close** (last response byte until the server's FIN arrived); the transaction's latency
//! runs from the connect call (or the intended send time, in an open loop) to that FIN.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use linerate_proto::latency::RrSpec;

use crate::traffic::rr::{RequestOptions, RrRecorder, Schedule, WAIT_SLICE};
use crate::traffic::{LoopError, StreamCounters, TrafficControl};

/// Opens one transaction's connection to the server with the test's socket options.
pub type Connector = Arc<dyn Fn() -> std::io::Result<TcpStream> + Send + Sync>;

/// The longest one transaction's reads and writes wait (on either end) before it is given
/// up; the stream then goes on (client: counted unanswered and the loop ends at the stop).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(5);

/// The times of one transaction, for the recorder.
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    /// When its latency starts: the connect call, or its intended send time.
    pub from: Instant,
    /// The connect call, the connection up, the first response byte, the last, the FIN.
    pub times: [Instant; 5],
}

/// The client's side of one `--crr` stream: transactions until the stop. `hello` is the data
/// hello of the stream with `TRANSACTION_FLAG` set. Returns when the last transaction ended.
pub fn crr_loop(
    start: Instant,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    opts: RequestOptions,
    hello: &[u8],
    connect: &Connector,
    rec: &RrRecorder,
) -> Result<Option<Instant>, LoopError> {
    let rr = opts.rr;
    let mut message = hello.to_vec();
    message.extend(crate::traffic::pattern(rr.request_bytes as usize));
    let mut buf = vec![0u8; (rr.response_bytes as usize).clamp(4096, 1 << 20)];
    let mut schedule = Schedule::new(start, rr.rate_per_second);
    let mut due: VecDeque<Instant> = VecDeque::new();
    let (mut written, mut last) = (0u64, None);
    counters.first_byte_moves();
    while !ctl.stopping() {
        let now = Instant::now();
        schedule.take_due(now, 1, &mut due, rec);
        let Some(from) = due.pop_front() else {
            std::thread::sleep(schedule.wait(now).min(WAIT_SLICE));
            continue;
        };
        let t0 = Instant::now();
        let sock = connect().map_err(LoopError::doing("a transaction could not connect"))?;
        let t1 = Instant::now();
        match transact(&sock, &message, rr.response_bytes as usize, &mut buf) {
            Ok([t2, t3, t4]) => {
                written += rr.request_bytes as u64;
                counters.set_bytes(written);
                let phases = Phases {
                    from: if rr.open_loop() { from } else { t0 },
                    times: [t0, t1, t2, t3, t4],
                };
                rec.completed_crr(phases, t4 >= opts.measured_from);
                last = Some(t4);
            }
            Err(e) if ctl.stopping() => {
                let _ = e;
                rec.with(|t| t.unanswered += 1);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(last)
}

/// Sends hello and request on a fresh connection and reads the response and the server's
/// close: returns when the first response byte came, the last, and the FIN.
fn transact(
    mut sock: &TcpStream,
    message: &[u8],
    response: usize,
    buf: &mut [u8],
) -> Result<[Instant; 3], LoopError> {
    let set = |r: std::io::Result<()>| r.map_err(LoopError::doing("cannot set a timeout"));
    set(sock.set_read_timeout(Some(TRANSACTION_TIMEOUT)))?;
    set(sock.set_write_timeout(Some(TRANSACTION_TIMEOUT)))?;
    sock.write_all(message).map_err(LoopError::doing("sending a request failed"))?;
    let (mut got, mut first) = (0usize, None);
    let room = buf.len();
    while got < response {
        match sock.read(&mut buf[..(response - got).min(room)]) {
            Ok(0) => {
                return Err(LoopError::Failed(format!(
                    "the server closed after {got} of {response} response bytes"
                )));
            }
            Ok(n) => {
                first.get_or_insert_with(Instant::now);
                got += n;
            }
            Err(e) => return Err(LoopError::io("receiving a response failed", e)),
        }
    }
    let done = Instant::now();
    match sock.read(buf) {
        Ok(0) => {}
        Ok(_) => return Err(LoopError::Failed("the server sent more than the response".into())),
        Err(e) => return Err(LoopError::io("waiting for the server's close failed", e)),
    }
    let fin = Instant::now();
    let _ = sock.shutdown(Shutdown::Both);
    Ok([first.unwrap_or(done), done, fin])
}

/// The server's side of one `--crr` stream: answers each transaction connection handed over
/// on `incoming` (its hello already read), until the client closes the stream's `anchor`.
/// Returns when the last request arrived (None if none did). Requests are read and responses
/// written through bounded buffers (`RrSpec::answer_buffers`), and each transaction answered
/// is counted for the server's watchdog.
pub fn crr_answer_loop(
    mut anchor: &TcpStream,
    incoming: &Receiver<TcpStream>,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    rr: RrSpec,
) -> Result<Option<Instant>, LoopError> {
    anchor.set_nonblocking(true).map_err(LoopError::doing("cannot poll the stream"))?;
    let (read_size, pattern_size) = rr.answer_buffers();
    let mut buffers =
        Buffers { request: vec![0u8; read_size], response: crate::traffic::pattern(pattern_size) };
    let (mut got, mut answered, mut last) = (0u64, 0u64, None);
    loop {
        match incoming.recv_timeout(Duration::from_millis(20)) {
            // A transaction that fails (its client gone) costs only itself.
            Ok(sock) => {
                if answer(&sock, rr, &mut buffers).is_ok() {
                    got += rr.request_bytes as u64;
                    answered += 1;
                    counters.set_bytes(got);
                    counters.set_transactions(answered);
                    last = Some(Instant::now());
                }
                continue;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(last),
        }
        match anchor.read(&mut [0u8; 64]) {
            Ok(0) => return Ok(last),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(LoopError::io("the stream's connection failed", e)),
        }
        if ctl.aborted() {
            return Err(LoopError::Aborted);
        }
        if ctl.finishing().is_some() {
            return Ok(last);
        }
    }
}

/// The answering end's buffers: requests are read into one, responses written from the other.
struct Buffers {
    request: Vec<u8>,
    response: Vec<u8>,
}

/// Reads one request, writes the response and closes (the server closes first); a message
/// larger than its buffer is read or written in pieces.
fn answer(mut sock: &TcpStream, rr: RrSpec, b: &mut Buffers) -> std::io::Result<()> {
    sock.set_read_timeout(Some(TRANSACTION_TIMEOUT))?;
    sock.set_write_timeout(Some(TRANSACTION_TIMEOUT))?;
    let mut left = rr.request_bytes as usize;
    while left > 0 {
        let n = left.min(b.request.len());
        sock.read_exact(&mut b.request[..n])?;
        left -= n;
    }
    let mut left = rr.response_bytes as usize;
    while left > 0 {
        let n = left.min(b.response.len());
        sock.write_all(&b.response[..n])?;
        left -= n;
    }
    sock.shutdown(Shutdown::Write)
}
