//! Speaking iperf3: the client driver for iperf3 servers ([`client`]) and the server session
//! for iperf3 clients ([`server`]), with what both share: turning the figures an iperf3 peer
//! reports into linerate's shape, and forgiving the resets iperf3 ends its streams with.

pub mod client;
pub mod server;

use linerate_proto::iperf3::{Iperf3Results, Iperf3Stream};
use linerate_proto::udp::{UdpCounts, UdpReceiverResult, UdpSenderResult};
use linerate_proto::{
    HostCost, ProcessCpu, Protocol, SideResults, SocketReport, StreamResult, StreamRole, TestSpec,
};

use crate::record::End;
use crate::traffic::LoopError;

/// Whether a stream's error, once the test ended, is the end and not a failure: iperf3 ends
/// close their data connections at the end, often with a reset, and a receiver still
/// waiting when the session stops its streams is aborted. A sender's error, or a receiver's
/// that is neither (a timeout, an unreachable host), stays a failure. For
/// [`crate::session::StreamSet::forgive`], once the end of the test was signalled.
pub(crate) fn end_of_test_close(role: StreamRole, e: &LoopError) -> bool {
    role == StreamRole::Receiver && matches!(e, LoopError::Aborted | LoopError::PeerClosed { .. })
}

/// An iperf3 server's receivers count until TEST_END, the client's clock: a receiver's time
/// is the test's, not the span of what arrived. (At low UDP rates the span is shorter: with
/// four datagrams in `-t 1` the last arrives at 0.75 s, which read as 0.75 s and 1.40 Mbit/s
/// where iperf3 says 1.00 s and 1.05 Mbit/s.) `at` is TEST_END from the test's start.
pub(crate) fn receivers_end_at(side: &mut SideResults, at: std::time::Duration) {
    let at_us = u64::try_from(at.as_micros()).unwrap_or(u64::MAX);
    for st in side.streams.iter_mut().filter(|s| s.role == StreamRole::Receiver) {
        st.duration_us = at_us.max(st.omitted_us);
    }
}

/// An iperf3 peer's figures in linerate's shape: streams matched by creation order (which is
/// how iperf3 itself matches them), and its process CPU (the only cost figure iperf3 reports).
/// `peer` is the end the iperf3 program played.
pub(crate) fn peer_side(r: &Iperf3Results, spec: &TestSpec, peer: End) -> SideResults {
    let plan_streams = spec.stream_plan();
    let udp = spec.protocol == Protocol::Udp;
    let streams: Vec<StreamResult> = r
        .streams
        .iter()
        .zip(&plan_streams)
        .map(|(s, &(id, flow))| {
            let secs = (s.end_time.unwrap_or(0.0) - s.start_time.unwrap_or(0.0)).max(0.0);
            StreamResult {
                id,
                flow,
                role: peer.role(flow),
                bytes: u64::try_from(s.bytes).unwrap_or(0),
                omitted_bytes: 0,
                duration_us: (secs * 1e6) as u64,
                omitted_us: 0,
                intervals: Vec::new(),
                socket: SocketReport {
                    congestion: r.congestion_used.clone(),
                    ..SocketReport::default()
                },
                retransmits: u64::try_from(s.retransmits).ok(),
                tcp: None,
                thread_cpu: None,
                thread_wait_us: None,
                udp_sender: (udp && peer.role(flow) == StreamRole::Sender)
                    .then(|| udp_sender(s, spec)),
                udp_receiver: (udp && peer.role(flow) == StreamRole::Receiver)
                    .then(|| udp_receiver(s)),
                error: None,
                latency: None,
            }
        })
        .collect();
    let window_us = streams.iter().map(|s| s.duration_us).max().unwrap_or(0);
    let share = |pct: f64| (pct.max(0.0) / 100.0 * window_us as f64) as u64;
    let cost = HostCost {
        window_us,
        process: Some(ProcessCpu {
            user_us: share(r.cpu_util_user),
            system_us: share(r.cpu_util_system),
        }),
        unavailable: vec!["iperf3 reports only its process CPU and per-stream totals".into()],
        ..HostCost::default()
    };
    SideResults {
        software: peer_software(r),
        streams,
        intervals_dropped: false,
        intervals_per_sample: 1,
        cost: Some(Box::new(cost)),
        environment: Some(Box::new(linerate_proto::Environment::unavailable(
            "the peer is iperf3, which does not report its environment",
        ))),
    }
}

/// What an iperf3 peer's results reveal of its version. iperf3 3.14 and later send every
/// stream's `omitted_packets` and `omitted_errors` (TCP streams too, as 0); 3.13 and earlier
/// never do. Nothing else in the results differs between 3.12 and 3.21 (checked with both on
/// either side), so no finer version can be told from them; `--get-server-output` with a
/// server run as `iperf3 -s -J` returns its exact version (see `client::exact_version`).
fn peer_software(r: &Iperf3Results) -> String {
    match r.streams.first() {
        Some(s) if s.omitted_packets.is_some() || s.omitted_errors.is_some() => {
            "iperf3 (3.14 or later)".into()
        }
        Some(_) => "iperf3 (3.13 or earlier)".into(),
        None => "iperf3".into(),
    }
}

/// An iperf3 UDP sender's stream: it reports only how many datagrams it sent (3.14+: and how
/// many of them in the warm-up; older versions count the warm-up in).
fn udp_sender(s: &Iperf3Stream, spec: &TestSpec) -> UdpSenderResult {
    let (datagrams, omitted) = with_omitted(s.packets, s.omitted_packets);
    UdpSenderResult {
        datagrams,
        omitted_datagrams: omitted,
        datagram_bytes: spec.block_bytes,
        ..UdpSenderResult::default()
    }
}

/// An iperf3 UDP receiver's stream: the highest sequence number it saw (`packets`), the gaps
/// below it (`errors`, which iperf3 reduces again for late arrivals) and its jitter; 3.14+
/// also say how much of both fell in the warm-up.
fn udp_receiver(s: &Iperf3Stream) -> UdpReceiverResult {
    let counts = |highest: u64, lost: u64| {
        let lost = lost.min(highest);
        UdpCounts { highest_seq: highest, received: highest - lost, lost, ..UdpCounts::default() }
    };
    let (highest, omitted_highest) = with_omitted(s.packets, s.omitted_packets);
    let (lost, omitted_lost) = with_omitted(s.errors, s.omitted_errors);
    UdpReceiverResult {
        counts: counts(highest, lost),
        omitted: counts(omitted_highest, omitted_lost),
        jitter_ns: (s.jitter.max(0.0) * 1e9).round() as u64,
        ..UdpReceiverResult::default()
    }
}

/// An iperf3 count and its warm-up part (none reported: none), never more than the count.
fn with_omitted(total: i64, omitted: Option<i64>) -> (u64, u64) {
    let total = u64::try_from(total).unwrap_or(0);
    let omitted = omitted.and_then(|o| u64::try_from(o).ok()).unwrap_or(0);
    (total, omitted.min(total))
}

#[cfg(test)]
mod tests {
    use std::io::{self, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    use linerate_proto::Direction;

    use super::*;
    use crate::session::StreamSet;
    use crate::traffic::socket::TcpData;
    use crate::traffic::{StreamCounters, TrafficControl, receive_loop};

    fn os(n: i32) -> io::Error {
        io::Error::from_raw_os_error(n)
    }

    #[test]
    fn a_receivers_reset_or_abort_is_the_end_other_errors_are_failures() {
        let reset = LoopError::io("receive failed", os(libc::ECONNRESET));
        assert!(end_of_test_close(StreamRole::Receiver, &reset));
        assert!(end_of_test_close(StreamRole::Receiver, &LoopError::Aborted));
        for other in [
            LoopError::io("receive failed", os(libc::ETIMEDOUT)),
            LoopError::io("receive failed", os(libc::EHOSTUNREACH)),
            LoopError::io("waiting for socket readiness failed", os(libc::EBADF)),
            LoopError::Failed("the peer stopped accepting data (write returned 0)".into()),
        ] {
            assert!(!end_of_test_close(StreamRole::Receiver, &other), "{other}");
        }
        // A sender decides a reset itself (after the stop it is no error: `traffic::tcp`);
        // one it reports failed before the stop.
        assert!(!end_of_test_close(StreamRole::Sender, &reset));
        assert!(!end_of_test_close(StreamRole::Sender, &LoopError::Aborted));
    }

    /// A connected pair on loopback: (ours, the peer's).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let peer = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (ours, _) = listener.accept().expect("accept");
        ours.set_read_timeout(Some(Duration::from_millis(250))).expect("timeout");
        (ours, peer)
    }

    /// The peer sends a byte and closes with `SO_LINGER` 0: a reset, as an iperf3 server may
    /// close its data connections at the end.
    fn reset(mut peer: TcpStream) {
        peer.write_all(b"x").expect("write");
        socket2::SockRef::from(&peer).set_linger(Some(Duration::ZERO)).expect("linger");
        drop(peer);
    }

    /// A real reset under a real receive loop: forgiven for a receiver at the end of an
    /// iperf3 test, and otherwise reported in the words results always gave.
    #[test]
    fn a_real_reset_under_a_receiver_is_forgiven_at_the_end() {
        let (rx, tx) = pair();
        reset(tx);
        let (ctl, c) = (TrafficControl::default(), StreamCounters::default());
        let mut buf = vec![0u8; 4096];
        let e = receive_loop(&rx, &ctl, &c, &mut buf).expect_err("the reset ends the loop");
        assert!(matches!(e, LoopError::PeerClosed { .. }), "{e:?}");
        let words = e.to_string();
        assert!(words.starts_with("receive failed: Connection reset by peer"), "{words}");
        c.finish(Duration::ZERO, Some(e));
        assert_eq!(c.error_unless(|e| end_of_test_close(StreamRole::Receiver, e)), None);
        let kept = c.error_unless(|e| end_of_test_close(StreamRole::Sender, e));
        assert_eq!(kept.as_deref(), Some(words.as_str()));
        assert_eq!(c.error(), Some(words));
    }

    /// The stream set applies the decision where a result is written: a download receiver
    /// whose iperf3 server reset the connection reports no error once the client signalled
    /// the end (`forgive`), and the reset in its usual words when it did not.
    #[test]
    fn a_stream_set_leaves_out_a_forgiven_reset_and_keeps_it_otherwise() {
        for forgiving in [true, false] {
            let spec =
                TestSpec { direction: Direction::Download, streams: 1, ..TestSpec::default_tcp() };
            let mut set = StreamSet::new(&spec, End::Client).expect("stream set");
            let (ours, theirs) = pair();
            set.add(1, TcpData { stream: ours, granted: Default::default() }).expect("add");
            if forgiving {
                set.forgive(end_of_test_close);
            }
            set.start();
            reset(theirs);
            assert!(set.wait_done(Duration::from_secs(5)), "the reset ends the receiver");
            let side = set.results("test", 0);
            let error = side.streams[0].error.as_deref();
            assert_eq!(side.streams[0].role, StreamRole::Receiver);
            if forgiving {
                assert_eq!(error, None, "forgiven at the end of an iperf3 test");
            } else {
                let e = error.expect("a reset during the test is a failure");
                assert!(e.starts_with("receive failed: Connection reset by peer"), "{e}");
            }
        }
    }
}
