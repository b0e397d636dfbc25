//! Tests of `sys::udp` on loopback UDP socket pairs (127.0.0.1 only, bounded counts/waits).

use super::*;
use std::net::UdpSocket;
use std::time::Duration;

/// Two UDP sockets on 127.0.0.1 connected to each other: (sender, receiver).
fn pair() -> (UdpSocket, UdpSocket) {
    let a = UdpSocket::bind("127.0.0.1:0").expect("bind a");
    let b = UdpSocket::bind("127.0.0.1:0").expect("bind b");
    a.connect(b.local_addr().expect("addr b")).expect("connect a");
    b.connect(a.local_addr().expect("addr a")).expect("connect b");
    b.set_read_timeout(Some(Duration::from_millis(500))).expect("timeout");
    (a, b)
}

/// Receives until `want` messages arrived (or 50 calls); returns (bytes, meta) per message.
fn recv_n(sock: &UdpSocket, want: usize, buf_len: usize) -> Vec<(Vec<u8>, RecvMeta)> {
    let mut bufs = vec![vec![0u8; buf_len]; MAX_BATCH];
    let mut metas = [RecvMeta::default(); MAX_BATCH];
    let mut got = Vec::new();
    for _ in 0..50 {
        if got.len() >= want {
            break;
        }
        let n = match recv_batch(sock, &mut bufs, &mut metas) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                break;
            }
            Err(e) => panic!("recv_batch: {e}"),
        };
        for (b, m) in bufs.iter().zip(&metas).take(n) {
            got.push((b[..m.len].to_vec(), *m));
        }
    }
    got
}

fn datagram(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i * 7 + k) as u8).collect()
}

#[test]
fn batch_round_trip_keeps_boundaries_and_order() {
    let (tx, rx) = pair();
    let owned: Vec<Vec<u8>> = (0..MAX_BATCH + 6).map(|i| datagram(i, 1 + i * 13)).collect();
    let slices: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let first = send_batch(&tx, &slices).expect("sendmmsg");
    assert_eq!(first, MAX_BATCH, "one call sends at most MAX_BATCH");
    assert_eq!(send_batch(&tx, &slices[first..]).expect("rest"), 6);
    assert_eq!(send_batch(&tx, &[]).expect("empty"), 0);
    let got = recv_n(&rx, owned.len(), 2048);
    assert_eq!(got.len(), owned.len());
    for ((bytes, meta), want) in got.iter().zip(&owned) {
        assert_eq!(bytes, want);
        assert_eq!((meta.gro_segment, meta.truncated), (None, false));
    }
}

#[test]
fn timeout_is_would_block_and_truncation_is_flagged() {
    let (tx, rx) = pair();
    rx.set_read_timeout(Some(Duration::from_millis(20))).expect("timeout");
    let mut bufs = vec![vec![0u8; 8]; 4];
    let mut metas = [RecvMeta::default(); 4];
    let err = recv_batch(&rx, &mut bufs, &mut metas).expect_err("nothing sent");
    assert!(matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut), "{err}");
    tx.send(&[9u8; 100]).expect("send");
    assert_eq!(recv_batch(&rx, &mut bufs, &mut metas).expect("recv"), 1);
    assert_eq!((metas[0].len, metas[0].truncated), (8, true));
    assert_eq!(recv_batch(&rx, &mut [], &mut metas).expect("no buffers"), 0);
}

#[test]
fn gso_splits_into_equal_segments_with_a_short_tail() {
    let (tx, rx) = pair();
    if !gso_supported(&tx) {
        println!("note: UDP GSO not supported by this kernel; test skipped");
        return;
    }
    let buf: Vec<u8> = (0..GSO_MAX_SEGMENTS * 100 + 50).map(|k| k as u8).collect();
    assert_eq!(send_gso(&tx, &buf[..64 * 100], 100).expect("64 segments"), 6400);
    assert_eq!(send_gso(&tx, &buf[..250], 100).expect("short tail"), 250);
    let got = recv_n(&rx, 67, 2048);
    let lens: Vec<usize> = got.iter().map(|(b, _)| b.len()).collect();
    assert_eq!(lens.len(), 67);
    assert!(lens[..66].iter().all(|&l| l == 100) && lens[66] == 50, "{lens:?}");
    assert_eq!(got[5].0, buf[500..600], "segments in order");
    assert_eq!(
        send_gso(&tx, &buf[..10], 0).expect_err("size 0").kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn gso_limits_are_the_documented_ones() {
    let (tx, _rx) = pair();
    if !gso_supported(&tx) {
        println!("note: UDP GSO not supported by this kernel; test skipped");
        return;
    }
    let big = vec![0u8; GSO_MAX_BYTES + 1];
    let err = send_gso(&tx, &big, 1400).expect_err("one byte over 65507");
    assert_eq!(err.raw_os_error(), Some(libc::EMSGSIZE), "{err}");
    send_gso(&tx, &big[..GSO_MAX_BYTES], 1400).expect("65507 bytes");
    // 129 segments are beyond every kernel's UDP_MAX_SEGMENTS.
    let err = send_gso(&tx, &big[..129 * 10], 10).expect_err("129 segments");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    match send_gso(&tx, &big[..128 * 10], 10) {
        Ok(_) => println!("note: this kernel accepts 128 GSO segments (UDP_MAX_SEGMENTS = 128)"),
        Err(e) => println!("note: this kernel refuses 128 GSO segments ({e}): limit 64"),
    }
}

#[test]
fn gro_delivers_coalesced_gso_datagrams_with_their_size() {
    let (tx, rx) = pair();
    if !gso_supported(&tx) || !enable_gro(&rx) {
        println!("note: UDP GSO/GRO not supported by this kernel; test skipped");
        return;
    }
    let buf = datagram(1, 1000);
    send_gso(&tx, &buf, 100).expect("gso");
    tx.send(&buf[..100]).expect("plain datagram");
    let got = recv_n(&rx, 2, 65536);
    // On loopback the GSO packet reaches a GRO socket unsegmented.
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].0.len(), got[0].1.gro_segment), (1000, Some(100)));
    assert_eq!(got[0].0, buf);
    assert_eq!((got[1].0.len(), got[1].1.gro_segment), (100, None), "a lone datagram");
}

#[test]
fn drop_counter_tells_socket_overflow_apart() {
    let (tx, rx) = pair();
    set_udp_buffers(&rx, 4096).expect("tiny receive buffer");
    assert!(enable_drop_counter(&rx), "SO_RXQ_OVFL is Linux 2.6.33+");
    assert_eq!(kernel_drops(&rx), Some(0));
    let d = vec![3u8; 1000];
    let sent = 300;
    for _ in 0..sent {
        tx.send(&d).expect("send");
    }
    let drops = kernel_drops(&rx).expect("SO_MEMINFO");
    assert!(drops > 0, "a 4 KiB buffer cannot hold 300 KB");
    let got = recv_n(&rx, sent, 2048);
    assert_eq!(got.len() as u64 + drops, sent as u64, "every datagram arrived or was dropped");
    assert!(got.iter().all(|(_, m)| m.drops.is_none()), "queued before any drop: no count");
    // The count rides on datagrams queued after the drops.
    tx.send(&d).expect("send after drain");
    let after = recv_n(&rx, 1, 2048);
    assert_eq!(after[0].1.drops.map(u64::from), Some(drops));
}

#[test]
fn buffers_are_granted_and_read_back() {
    let (tx, _rx) = pair();
    let want: u64 = 6 * 1024 * 1024;
    let (snd, rcv) = set_udp_buffers(&tx, want).expect("buffers");
    let sysctl = |p: &str| -> u64 {
        std::fs::read_to_string(p).expect("sysctl").trim().parse().expect("number")
    };
    // Plain options are capped by the sysctls; the FORCE ones (as root) are not. Either way
    // Linux reads back double.
    assert!(snd >= 2 * want.min(sysctl("/proc/sys/net/core/wmem_max")), "{snd}");
    assert!(rcv >= 2 * want.min(sysctl("/proc/sys/net/core/rmem_max")), "{rcv}");
    assert!(snd <= 2 * want && rcv <= 2 * want);
    let err = set_udp_buffers(&tx, u64::MAX).expect_err("too large");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn portable_fallback_sends_and_receives_one_by_one() {
    let (tx, rx) = pair();
    let owned: Vec<Vec<u8>> = (0..5).map(|i| datagram(i, 10 + i)).collect();
    let slices: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    assert_eq!(portable::send_batch(tx.as_fd(), &slices).expect("send"), 5);
    let mut bufs = vec![vec![0u8; 64]; 3];
    let mut metas = [RecvMeta::default(); 3];
    for want in &owned {
        let n = portable::recv_batch(rx.as_fd(), &mut bufs, &mut metas).expect("recv");
        assert_eq!(n, 1, "one datagram per call");
        assert_eq!(&bufs[0][..metas[0].len], want.as_slice());
    }
    let (snd, rcv) = portable::set_udp_buffers(tx.as_fd(), 65536).expect("buffers");
    assert!(snd >= 65536 && rcv >= 65536);
}

#[test]
fn timer_slack_is_set_and_restored() {
    std::thread::spawn(|| {
        let default = set_timer_slack(1).expect("Linux has timer slack");
        assert!(default >= 1, "{default}");
        assert_eq!(set_timer_slack(default), Some(1));
    })
    .join()
    .expect("thread");
}
