//! The request/response half of [`super::StreamSet`] (`--rr`): a stream's thread body, TCP or
//! UDP, requesting on the client (timing every transaction into an [`RrRecorder`]) and
//! answering on the server. The loops live in `traffic::rr` and `traffic::rr_udp`; this module
//! wires them to the stream's start gate, controls and counters, and must not print or speak
//! the protocol.

use std::net::{Shutdown, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use linerate_proto::latency::RrSpec;
use linerate_proto::udp::DatagramFormat;

use crate::session::thread_clock::ThreadClock;
use crate::traffic::rr::{self, RequestOptions, RrRecorder};
use crate::traffic::{LoopError, StartGate, StreamCounters, TrafficControl, rr_crr, rr_udp};

/// Everything a request/response stream thread needs besides its socket.
pub(super) struct RrSetup {
    pub ctl: Arc<TrafficControl>,
    pub gate: Arc<StartGate>,
    pub counters: Arc<StreamCounters>,
    /// The client's recorder; None on the answering end.
    pub recorder: Option<Arc<RrRecorder>>,
    pub rr: RrSpec,
    /// The warm-up (`-O`): transactions completed before its end are counted apart.
    pub omit: Duration,
    /// `--crr`: how this end gets its per-transaction connections.
    pub crr: Option<Crr>,
}

/// One end of a `--crr` stream.
pub(super) enum Crr {
    /// The client opens them: the stream's flagged hello, and how to connect.
    Client { hello: Vec<u8>, connect: rr_crr::Connector },
    /// The server is handed them by its session, their hellos read.
    Server { incoming: Receiver<TcpStream> },
}

/// How a UDP request/response stream frames its datagrams and ends.
pub(super) struct UdpFraming {
    pub format: DatagramFormat,
    /// Time base of the send times in requests.
    pub epoch: Instant,
    /// How long the answering end waits, once the test is finishing, for a quiet socket.
    pub quiet: Duration,
}

/// The body of a TCP stream's thread. The client shuts its side down after its last
/// response, which ends the server's answer loop.
pub(super) fn tcp_body(s: RrSetup, sock: Arc<TcpStream>) -> impl FnOnce() + Send + 'static {
    move || {
        run(&s, |start, rec| match (rec, &s.crr) {
            (Some(rec), Some(Crr::Client { hello, connect })) => {
                let opts = RequestOptions { rr: s.rr, measured_from: start + s.omit };
                let r = rr_crr::crr_loop(start, &s.ctl, &s.counters, opts, hello, connect, rec);
                let _ = sock.shutdown(Shutdown::Write);
                r
            }
            (None, Some(Crr::Server { incoming })) => {
                rr_crr::crr_answer_loop(&sock, incoming, &s.ctl, &s.counters, s.rr)
            }
            (rec, _) => match rec {
                Some(rec) => {
                    let opts = RequestOptions { rr: s.rr, measured_from: start + s.omit };
                    let r = rr::request_loop(&sock, start, &s.ctl, &s.counters, opts, rec);
                    let _ = sock.shutdown(Shutdown::Write);
                    r
                }
                None => rr::answer_loop(&sock, &s.ctl, &s.counters, s.rr),
            },
        });
    }
}

/// The body of a UDP stream's thread.
pub(super) fn udp_body(
    s: RrSetup,
    sock: UdpSocket,
    f: UdpFraming,
) -> impl FnOnce() + Send + 'static {
    move || {
        run(&s, |start, rec| match rec {
            Some(rec) => {
                let rr = RequestOptions { rr: s.rr, measured_from: start + s.omit };
                let opts = rr_udp::UdpRequestOptions { rr, format: f.format, epoch: f.epoch };
                rr_udp::udp_request_loop(&sock, start, &s.ctl, &s.counters, opts, rec)
            }
            None => rr_udp::udp_answer_loop(&sock, &s.ctl, &s.counters, s.rr, f.format, f.quiet),
        });
    }
}

/// Waits for the start, runs the loop, and ends the stream at its last transaction (or now,
/// if none completed) with the thread's CPU and wait.
fn run(
    s: &RrSetup,
    body: impl FnOnce(Instant, Option<&RrRecorder>) -> Result<Option<Instant>, LoopError>,
) {
    let clock = ThreadClock::now();
    let Some(start) = s.gate.wait() else { return };
    let (last, error) = match body(start, s.recorder.as_deref()) {
        Ok(last) => (last, None),
        Err(e) => (None, Some(e)),
    };
    let end = last.unwrap_or_else(Instant::now);
    clock.finish(&s.counters, end.saturating_duration_since(start), error);
}
