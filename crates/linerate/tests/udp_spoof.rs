//! Off-path spoofing of a native UDP test (docs/SECURITY.md, threat model): during a real
//! loopback test, datagrams forged with the sender's source address and port and
//! valid-looking sequence numbers, but without the test's secret, reach the receiver's
//! connected socket. They must be counted as invalid and change nothing else: no loss,
//! duplicates, reordering or bytes. Loopback only; the forger is a raw socket (root).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use serde_json::Value;

use crate::util::{Server, bytes, client_json, free_port};

/// Forged datagrams per test, and their size (the test's `-l`).
const FORGED: u64 = 300;
const LEN: usize = 64;

/// One IPv4/UDP packet from `from` to `to` carrying `payload`, sent through a raw socket
/// (the kernel fills in the IP checksum, length and id; UDP checksum 0 means none).
fn forge(raw: &socket2::Socket, from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) {
    let udp_len = 8 + payload.len();
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
    p.extend(from.ip().octets());
    p.extend(to.ip().octets());
    p.extend(from.port().to_be_bytes());
    p.extend(to.port().to_be_bytes());
    p.extend((udp_len as u16).to_be_bytes());
    p.extend([0, 0]);
    p.extend(payload);
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    raw.send_to(&p, &std::net::SocketAddr::V4(to).into()).expect("send a forged datagram");
}

/// A native header with sequence number `seq` and a secret that is not the test's.
fn forged_payload(seq: u64) -> [u8; LEN] {
    let mut d = [0u8; LEN];
    d[0..4].copy_from_slice(&1u32.to_be_bytes());
    d[4..8].copy_from_slice(&500u32.to_be_bytes());
    d[8..16].copy_from_slice(&seq.to_be_bytes());
    d[16..24].copy_from_slice(&0x4c52_5350_4f4f_4621u64.to_be_bytes());
    d
}

/// Runs a 3 s UDP test (`extra` chooses the direction) while forging [`FORGED`] datagrams
/// from the sender's address to the receiver's from 1 s on; returns the client's document.
fn spoofed_run(srv: &Server, cport: u16, reverse: bool) -> Value {
    let raw = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::RAW,
        Some(socket2::Protocol::from(255)), // IPPROTO_RAW: we write the IP header
    )
    .expect("a raw socket (the test runs as root)");
    let client = SocketAddrV4::new(Ipv4Addr::LOCALHOST, cport);
    let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, srv.port);
    let (from, to) = if reverse { (server, client) } else { (client, server) };
    let forger = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        for i in 0..FORGED {
            // Duplicates of early numbers, numbers just ahead, one far ahead: all plausible.
            let seq = match i % 3 {
                0 => 1 + i,
                1 => 2000 + i,
                _ => 50_000 + i,
            };
            forge(&raw, from, to, &forged_payload(seq));
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let cport_s = cport.to_string();
    let mut args = vec!["-u", "-b", "1M", "-l", "64", "-t", "3", "--cport", &cport_s];
    if reverse {
        args.push("-R");
    }
    let doc = client_json(srv.port, &args);
    forger.join().expect("forger");
    doc
}

#[test]
fn forged_datagrams_without_the_secret_change_nothing_but_the_invalid_count() {
    let srv = Server::start(&[]);
    for reverse in [false, true] {
        let doc = spoofed_run(&srv, free_port(), reverse);
        assert_eq!(doc["record"]["outcome"]["status"], "completed", "{doc}");
        let udp = &doc["summary"]["udp"][0];
        let n = |k: &str| udp[k].as_u64().unwrap_or_else(|| panic!("no {k} in {udp}"));
        assert_eq!(n("invalid"), FORGED, "every forged datagram counted invalid: {udp}");
        assert_eq!((n("lost"), n("duplicates"), n("out_of_order")), (0, 0, 0), "{udp}");
        assert_eq!(n("received"), n("sent"), "{udp}");
        let receiver = if reverse { "client" } else { "server_results" };
        let received = bytes(&doc, receiver, "receiver");
        assert_eq!(received, n("received") * LEN as u64, "no forged byte counted: {udp}");
    }
}
