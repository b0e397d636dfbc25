//! Loopback tests of the UDP loops (127.0.0.1 only; every run bounded by a budget or a stop
//! after well under a second).

use super::*;
use crate::sys::udp;
use crate::traffic::{ByteBudget, StreamCounters, TrafficControl};
use linerate_proto::udp::{DatagramFormat, DatagramHeader, SeqWidth, TrackerCounts};
use std::time::Instant;

/// Connected sockets (sender, receiver) with 4 MiB buffers so that the kernel does not drop.
fn pair() -> (UdpSocket, UdpSocket) {
    let a = UdpSocket::bind("127.0.0.1:0").expect("bind a");
    let b = UdpSocket::bind("127.0.0.1:0").expect("bind b");
    a.connect(b.local_addr().expect("addr b")).expect("connect a");
    b.connect(a.local_addr().expect("addr a")).expect("connect b");
    udp::set_udp_buffers(&b, 4 << 20).expect("buffers");
    (a, b)
}

/// The native format of a test with cookie 5…5.
const NATIVE: DatagramFormat = DatagramFormat { width: SeqWidth::Bits64, secret: Some(0x5eed) };

fn send_opts(dg: usize, bps: u64, epoch: Instant) -> UdpSendOptions<'static> {
    UdpSendOptions {
        datagram_bytes: dg,
        bits_per_second: bps,
        burst: 1,
        budget: None,
        format: NATIVE,
        epoch,
        gso: false,
    }
}

fn recv_opts(dg: usize, epoch: Instant) -> UdpReceiveOptions {
    UdpReceiveOptions {
        datagram_bytes: dg,
        format: NATIVE,
        epoch,
        quiet: Duration::from_millis(100),
        gro: false,
        nap: false,
    }
}

/// Runs one sender and one receiver; the sender stops after `run` (or its budget), then the
/// receiver is told to finish. Returns both results and the start instant.
fn run_pair(
    send: UdpSendOptions<'_>,
    recv: UdpReceiveOptions,
    run: Duration,
) -> (UdpSendFinal, UdpReceiveFinal, Instant) {
    let (tx, rx) = pair();
    let ctl = TrafficControl::default();
    let (sc, rc) = (StreamCounters::default(), StreamCounters::default());
    let (ss, rs) = (UdpShared::default(), UdpShared::default());
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let mut start = Instant::now();
    let (sent, got) = std::thread::scope(|s| {
        let r = s.spawn(|| udp_receive_loop(&rx, &ctl, &rc, &rs, recv));
        let ctl = &ctl;
        let stopper = s.spawn(move || {
            // Ends early when the sender finishes first (a budget).
            let _ = done_rx.recv_timeout(run);
            ctl.request_stop(Instant::now());
        });
        start = Instant::now();
        let sent = udp_send_loop(&tx, start, ctl, &sc, &ss, send).expect("send");
        drop(done_tx);
        let _ = ctl.finish_at.set(Instant::now());
        stopper.join().expect("stopper");
        (sent, r.join().expect("join").expect("receive"))
    });
    assert_eq!(sc.bytes(), sent.bytes, "counters carry the final total");
    assert_eq!(ss.snapshot().datagrams_sent, sent.datagrams);
    assert_eq!(rs.snapshot().counts, got.counts, "the final snapshot is published");
    (sent, got, start)
}

#[test]
fn counts_add_up_at_a_fixed_rate() {
    let epoch = Instant::now();
    // 50 Mbit/s of 1000-byte datagrams: 6250 per second.
    let (sent, got, start) = run_pair(
        send_opts(1000, 50_000_000, epoch),
        recv_opts(1000, epoch),
        Duration::from_millis(500),
    );
    let c = got.counts;
    assert_eq!((c.received, c.lost, c.highest_seq), (sent.datagrams, 0, sent.datagrams));
    assert_eq!((c.duplicates, c.out_of_order, c.invalid), (0, 0, 0));
    assert_eq!(got.kernel_drops, Some(0));
    let last = sent.last.expect("sent something");
    let rate = (sent.datagrams - 1) as f64 * 8000.0 / (last - start).as_secs_f64();
    // Never faster than asked; as fast as asked whenever the sender got the CPU on time (a
    // starved sender skips what it missed and counts it: on a loaded machine it may).
    assert!(rate < 50e6 * 1.02, "achieved {rate} bit/s");
    if sent.skipped == 0 {
        assert!(rate > 50e6 * 0.98, "achieved {rate} bit/s without skipping: {sent:?}");
    }
    assert!(got.jitter.samples + 1 == c.received && got.jitter.jitter_seconds < 0.01);
    assert!(got.last.is_some() && !sent.gso && !got.gro);
}

#[test]
fn pacing_is_smooth_at_200_mbit() {
    let epoch = Instant::now();
    let (sent, got, _) = run_pair(
        send_opts(1250, 200_000_000, epoch),
        recv_opts(1250, epoch),
        Duration::from_millis(500),
    );
    let burst = sent.burst.burstiness(200_000_000, 1250).expect("rate set");
    // 20 datagrams per ms are due. Other tests share the two vCPUs, so the sender is
    // sometimes woken late; it may then catch up at most the pacer's cap (1 ms worth), so no
    // window ever holds more than twice the rate (iperf3 catches up 100 ms at once).
    // The peak of a single window is not asserted tighter: on a loaded CI machine a few
    // late wake-ups of ~0.5 ms each fill one window to 1.85x (seen in CI) while the pacing
    // itself stays regular. Regularity is what the gaps show (CV: 0 for a metronome, 1 for
    // random sending; the default 50 µs timer slack gave about 1 here).
    assert!(burst <= 2.1, "burstiness {burst}: {sent:?}");
    if sent.burst.max_gap < Duration::from_micros(500) {
        assert!(sent.burst.gap_cv.expect("gaps") < 0.8, "gaps irregular without a stall: {sent:?}");
    }
    if sent.skipped == 0 {
        assert!(sent.datagrams > 9000, "{} of ~10000 sent without skipping", sent.datagrams);
    }
    assert_eq!(got.counts.received + got.counts.lost, got.counts.highest_seq);
}

#[test]
fn budget_is_sent_in_whole_datagrams() {
    let epoch = Instant::now();
    let budget = ByteBudget::new(1_000_001);
    let send = UdpSendOptions { budget: Some(&budget), ..send_opts(1000, 0, epoch) };
    let (sent, got, _) = run_pair(send, recv_opts(1000, epoch), Duration::from_secs(5));
    assert_eq!((sent.datagrams, sent.bytes), (1001, 1_001_000), "the last one goes whole");
    assert_eq!((got.counts.received, got.counts.lost), (1001, 0));
}

#[test]
fn finish_counts_datagrams_still_queued() {
    let (tx, rx) = pair();
    let epoch = Instant::now();
    let mut buf = [0u8; 200];
    for seq in 1..=2000u64 {
        NATIVE
            .encode(&DatagramHeader { send_time: epoch.elapsed(), seq }, &mut buf)
            .expect("encode");
        tx.send(&buf).expect("send");
    }
    let ctl = TrafficControl::default();
    let finished = Instant::now();
    ctl.finish_at.set(finished).expect("finish");
    let (rc, rs) = (StreamCounters::default(), UdpShared::default());
    let got = udp_receive_loop(&rx, &ctl, &rc, &rs, recv_opts(200, epoch)).expect("receive");
    assert!(finished.elapsed() >= Duration::from_millis(100), "waited for quiet");
    assert_eq!((got.counts.received, got.counts.lost), (2000, 0));
    assert_eq!(rc.bytes(), 400_000);
    assert!(got.last.expect("arrived") < finished + Duration::from_millis(100));
}

/// Sends hand-made datagrams for `seqs` (plus a hello and a runt) and receives them.
fn receive_crafted(format: DatagramFormat, seqs: &[u64]) -> UdpReceiveFinal {
    let (got, bytes) = receive_with_spoofs(format, seqs, &[]);
    assert_eq!(bytes, 64 * seqs.len() as u64, "the hello and the runt are not data");
    got
}

/// [`receive_crafted`], with a datagram of `spoofs` (the same sequence numbers under another
/// secret) after each of ours. Returns the figures and the bytes counted.
fn receive_with_spoofs(
    format: DatagramFormat,
    seqs: &[u64],
    spoofs: &[u64],
) -> (UdpReceiveFinal, u64) {
    let spoofer = DatagramFormat { secret: Some(0xbad), ..format };
    let (tx, rx) = pair();
    let epoch = Instant::now();
    let mut buf = [0u8; 64];
    tx.send(&linerate_proto::wire::DATA_MAGIC).expect("hello");
    for (i, &seq) in seqs.iter().enumerate() {
        let send_time = Duration::from_micros(100 * i as u64);
        format.encode(&DatagramHeader { send_time, seq }, &mut buf).expect("encode");
        tx.send(&buf).expect("send");
        if let Some(&forged) = spoofs.get(i) {
            let send_time = Duration::from_micros(100 * i as u64 + 7_000);
            spoofer.encode(&DatagramHeader { send_time, seq: forged }, &mut buf).expect("encode");
            tx.send(&buf).expect("send");
        }
    }
    tx.send(&[1, 2, 3, 4, 5]).expect("runt");
    let ctl = TrafficControl::default();
    ctl.finish_at.set(Instant::now()).expect("finish");
    let (rc, rs) = (StreamCounters::default(), UdpShared::default());
    let opts =
        UdpReceiveOptions { format, quiet: Duration::from_millis(50), ..recv_opts(64, epoch) };
    let got = udp_receive_loop(&rx, &ctl, &rc, &rs, opts).expect("receive");
    (got, rc.bytes())
}

#[test]
fn reordered_and_duplicated_datagrams_are_told_apart() {
    let got = receive_crafted(NATIVE, &[1, 2, 4, 3, 5, 5, 7, 8]);
    let c = got.counts;
    assert_eq!((c.highest_seq, c.received, c.lost), (8, 7, 1), "6 never came");
    assert_eq!((c.out_of_order, c.duplicates, c.invalid), (1, 1, 1), "{c:?}");
    assert_eq!(c.max_reorder_distance, 1);
    // 32-bit sequence numbers (iperf3's default) go through the unwrapper.
    let c = receive_crafted(DatagramFormat::iperf3(SeqWidth::Bits32), &[1, 3, 2, 2, 4]).counts;
    assert_eq!((c.highest_seq, c.received, c.lost), (4, 4, 0));
    assert_eq!((c.out_of_order, c.duplicates, c.invalid), (1, 1, 1));
}

#[test]
fn spoofed_datagrams_are_counted_invalid_and_change_nothing_else() {
    let seqs = [1, 2, 3, 4, 5, 6];
    let clean = receive_crafted(NATIVE, &seqs);
    // Duplicates, a reorder, a jump ahead and the next number: each would move a figure.
    let (got, bytes) = receive_with_spoofs(NATIVE, &seqs, &[1, 5, 3, 1000, 7, 2]);
    assert_eq!(bytes, 64 * seqs.len() as u64, "no spoofed byte counted");
    let (a, b) = (clean.counts, got.counts);
    assert_eq!(b.invalid, a.invalid + 6, "{b:?}");
    assert_eq!(TrackerCounts { invalid: a.invalid, ..b }, a, "only the invalid count moved");
    assert_eq!(got.jitter.samples, clean.jitter.samples, "jitter saw only ours");
    // A spoof stamped 7 ms later would show as 7 ms of transit variation.
    assert!(got.jitter.ipdv_max < Some(Duration::from_millis(5)), "{:?}", got.jitter);
    assert_eq!(got.last.is_some(), clean.last.is_some());
    // Without the secret check, the same datagrams are taken for ours.
    let blind = DatagramFormat::iperf3(SeqWidth::Bits64);
    let fooled = receive_with_spoofs(blind, &seqs, &[1, 5, 3, 1000, 7, 2]).0.counts;
    assert!(fooled.duplicates > 0 && fooled.highest_seq == 1000, "{fooled:?}");
}

#[test]
fn abort_ends_a_receiver_with_an_error() {
    let (_tx, rx) = pair();
    let ctl = TrafficControl::default();
    ctl.abort.store(true, std::sync::atomic::Ordering::Relaxed);
    let (rc, rs) = (StreamCounters::default(), UdpShared::default());
    let err = udp_receive_loop(&rx, &ctl, &rc, &rs, recv_opts(100, Instant::now()));
    assert!(matches!(err, Err(crate::traffic::LoopError::Aborted)), "{err:?}");
    let err = err.map_err(|e| e.to_string());
    assert_eq!(err, Err("aborted".to_string()));
}

#[test]
fn refused_sends_are_counted_not_fatal() {
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let gone = UdpSocket::bind("127.0.0.1:0").expect("bind peer");
    tx.connect(gone.local_addr().expect("addr")).expect("connect");
    drop(gone); // every datagram now draws an ICMP port unreachable
    let ctl = TrafficControl::default();
    let (sc, ss) = (StreamCounters::default(), UdpShared::default());
    let epoch = Instant::now();
    let sent = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            ctl.request_stop(Instant::now());
        });
        udp_send_loop(&tx, epoch, &ctl, &sc, &ss, send_opts(100, 8_000_000, epoch))
    })
    .expect("refusals do not end the test");
    assert!(sent.refused > 0 && sent.datagrams > 0, "{sent:?}");
}

#[test]
fn gso_sender_and_gro_receiver_account_every_datagram() {
    let (probe, _) = pair();
    if !udp::gso_supported(&probe) {
        println!("note: UDP GSO not supported by this kernel; test skipped");
        return;
    }
    let epoch = Instant::now();
    for gro in [false, true] {
        let budget = ByteBudget::new(3000 * 500);
        let send = UdpSendOptions { budget: Some(&budget), gso: true, ..send_opts(500, 0, epoch) };
        let recv = UdpReceiveOptions { gro, ..recv_opts(500, epoch) };
        let (sent, got, _) = run_pair(send, recv, Duration::from_secs(5));
        assert!(sent.gso, "GSO was used");
        assert_eq!(got.gro, gro && udp::enable_gro(&probe));
        let c = got.counts;
        assert_eq!((sent.datagrams, c.received, c.lost, c.invalid), (3000, 3000, 0, 0), "{gro}");
        assert_eq!((c.out_of_order, c.duplicates), (0, 0));
    }
}

#[test]
fn datagram_size_is_checked() {
    let (tx, _rx) = pair();
    let ctl = TrafficControl::default();
    let (sc, ss) = (StreamCounters::default(), UdpShared::default());
    let epoch = Instant::now();
    for bad in [23, 65_508] {
        let r = udp_send_loop(&tx, epoch, &ctl, &sc, &ss, send_opts(bad, 0, epoch));
        assert!(r.expect_err("bad size").to_string().contains("outside 24..=65507"));
    }
}
