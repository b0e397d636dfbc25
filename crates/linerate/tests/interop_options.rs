//! iperf3's socket options (`-S/--tos`, `--dscp`, `--fq-rate`) on loopback, three ways: a
//! linerate client and server, a linerate client against `iperf3 -s`, and an `iperf3 -c`
//! against a linerate server. Each checks what the kernel holds on the data sockets (the
//! `socket` facts both ends read back with getsockopt), not just that nothing failed.

use serde_json::Value;

use crate::interop::Iperf3Server;
use crate::interop_server::{have_iperf3, iperf3_client, server_record};
use crate::util::{Server, client_json, streams};

/// (type of service, pacing cap) every stream in `streams` read back.
fn qos(streams: &[Value]) -> Vec<(Option<u64>, Option<u64>)> {
    streams
        .iter()
        .map(|s| (s["socket"]["tos"].as_u64(), s["socket"]["max_pacing_rate_bps"].as_u64()))
        .collect()
}

#[test]
fn tos_and_fq_rate_reach_every_data_socket_of_both_linerate_ends() {
    let srv = Server::start(&[]);
    let cases: [(&[&str], u64); 3] = [
        (&["-S", "0xb8", "--bidir"], 0xb8),
        (&["--dscp", "AF41", "-R", "-P", "2"], 0x88),
        (&["-u", "--dscp", "10", "-b", "10M"], 10 << 2),
    ];
    for (extra, tos) in cases {
        let mut args = vec!["-t", "0.5", "--fq-rate", "400M"];
        args.extend_from_slice(extra);
        let doc = client_json(srv.port, &args);
        for end in ["client", "server_results"] {
            let got = qos(streams(&doc, end));
            assert!(!got.is_empty(), "{extra:?} {end}");
            for g in got {
                assert_eq!(g, (Some(tos), Some(400_000_000)), "{extra:?}: the {end}'s sockets");
            }
        }
    }
    // --dont-fragment: both ends' UDP sockets never fragment.
    let doc = client_json(srv.port, &["-t", "0.3", "-u", "--dont-fragment", "-R"]);
    for end in ["client", "server_results"] {
        for s in streams(&doc, end) {
            assert_eq!(s["socket"]["dont_fragment"], true, "{end}: {s}");
        }
    }
    // Without the flags none is reported (nor set).
    let doc = client_json(srv.port, &["-t", "0.3"]);
    assert_eq!(qos(streams(&doc, "server_results")), vec![(None, None)]);
    assert!(streams(&doc, "server_results")[0]["socket"].get("dont_fragment").is_none());
}

#[test]
fn bad_tos_and_dscp_values_name_the_flag_and_the_fix() {
    for (args, needle) in [
        (&["-S", "256"][..], "0..255"),
        (&["--dscp", "AF44"][..], "0..63"),
        (&["-S", "8", "--dscp", "EF"][..], "--dscp"),
        (&["--fq-rate", "fast"][..], "--fq-rate"),
        (&["--dont-fragment"][..], "--udp"),
        (&["-b", "10M/0"][..], "1..1000"),
        (&["-b", "10M/1001"][..], "1..1000"),
    ] {
        let mut all = vec!["client", "127.0.0.1", "-t", "1"];
        all.extend_from_slice(args);
        let out = crate::util::run(&all, std::time::Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
}

/// linerate sends iperf3's own `TOS` and `fqrate` parameters: the iperf3 server's JSON start
/// (fetched with `--get-server-output`) says the TOS it took, and our sockets hold both.
#[test]
fn tos_and_fq_rate_reach_a_real_iperf3_server() {
    let _serial = crate::util::exclusive();
    let Some(srv) = Iperf3Server::start_with(&["-J"]) else { return };
    let doc = srv.client(&["-t", "1", "--dscp", "EF", "--fq-rate", "200M", "--get-server-output"]);
    // An iperf3 server with -J sends its document, kept as JSON.
    let theirs = &doc["record"]["server_output"]["start"]["test_start"];
    assert_eq!(theirs["tos"], 0xb8, "{theirs}");
    assert_eq!(qos(streams(&doc, "client")), vec![(Some(0xb8), Some(200_000_000))]);
    // The pacing cap holds the iperf3 server's receive rate under it.
    let rate = doc["summary"]["directions"][0]["receiver"]["bits_per_second"].as_f64();
    assert!(rate.is_some_and(|r| r <= 210e6), "{rate:?}");
}

/// `--dont-fragment` reaches an iperf3 server as 3.21's `dont_fragment` (3.12 sets the bit on
/// its client only and ignores the key); our UDP sockets hold the bit either way.
#[test]
fn dont_fragment_runs_against_a_real_iperf3_server() {
    let _serial = crate::util::exclusive();
    let Some(srv) = Iperf3Server::start_with(&[]) else { return };
    for extra in [&["-u", "--dont-fragment"][..], &["-u", "--dont-fragment", "-R"][..]] {
        let mut args = vec!["-t", "1", "-b", "10M"];
        args.extend_from_slice(extra);
        let doc = srv.client(&args);
        let client = streams(&doc, "client");
        assert!(client.iter().all(|s| s["socket"]["dont_fragment"] == true), "{extra:?}");
    }
}

/// An iperf3 client's `-S` and `--fq-rate` are served, no longer refused: the linerate
/// server's own record shows the kernel's values on its sockets, both directions.
#[test]
fn an_iperf3_clients_tos_and_fq_rate_are_served() {
    if !have_iperf3() {
        return;
    }
    let srv = Server::start(&["-J", "--log-results", "full"]);
    let cases: [&[&str]; 2] = [
        &["-t", "1", "-S", "0x28", "--fq-rate", "300M", "-R"],
        &["-t", "1", "-u", "--dscp", "cs1"],
    ];
    for (test, args) in (1u64..).zip(cases) {
        let (code, doc, stderr) = iperf3_client(srv.port, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(doc.get("error").is_none(), "{args:?}: {}", doc["error"]);
        let rec = server_record(&srv, test);
        let server = rec["server"]["streams"].as_array().expect("server streams");
        let want = if test == 1 { (Some(0x28), Some(300_000_000)) } else { (Some(0x20), None) };
        for g in qos(server) {
            assert_eq!(g, want, "{args:?}");
        }
    }
}

/// iperf3 3.12's own `--dont-fragment` and `--repeating-payload` against a linerate server:
/// the first is the client's own socket option, the second is served (linerate's senders
/// always write a repeating pattern); both tests run whole.
#[test]
fn an_iperf3_clients_dont_fragment_and_repeating_payload_run() {
    if !have_iperf3() {
        return;
    }
    let srv = Server::start(&[]);
    let cases: [&[&str]; 2] =
        [&["-t", "1", "-u", "--dont-fragment"], &["-t", "1", "-R", "--repeating-payload"]];
    for args in cases {
        let (code, doc, stderr) = iperf3_client(srv.port, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(doc.get("error").is_none(), "{args:?}: {}", doc["error"]);
        assert!(doc["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0) > 0, "{args:?}");
    }
}

/// The most datagrams the first UDP sender in `streams` sent in one millisecond.
fn max_per_ms(streams: &[Value]) -> u64 {
    let sender = streams.iter().find(|s| s["role"] == "sender").expect("a UDP sender");
    sender["udp_sender"]["max_per_ms"].as_u64().unwrap_or_else(|| panic!("{sender}"))
}

/// `-b RATE/BURST` on both linerate ends: UDP sends ten datagrams at once (1.25 a
/// millisecond is the even share of 10 Mbit/s in 1000-byte datagrams) and keeps the rate;
/// TCP keeps its rate too.
#[test]
fn bursts_go_at_once_and_keep_the_rate() {
    let srv = Server::start(&[]);
    let udp = |b: &str| client_json(srv.port, &["-t", "1", "-u", "-l", "1000", "-b", b, "-R"]);
    let (burst, smooth) = (udp("10M/10"), udp("10M"));
    assert!(max_per_ms(streams(&burst, "server_results")) >= 8, "{burst}");
    assert!(max_per_ms(streams(&smooth, "server_results")) < 8, "{smooth}");
    let tcp = client_json(srv.port, &["-t", "1", "-l", "8K", "-b", "40M/10"]);
    for doc in [&burst, &tcp] {
        let paced = doc["record"]["spec"]["bits_per_second"].as_f64().expect("rate");
        let rate = doc["summary"]["directions"][0]["receiver"]["bits_per_second"].as_f64();
        assert!(rate.is_some_and(|r| (r / paced - 1.0).abs() < 0.1), "{rate:?} for {paced}");
    }
}

/// iperf3's burst both ways: linerate sends `burst` to an iperf3 server and bursts itself; an
/// iperf3 client's `-b RATE/BURST` is served (it was refused) and the server sends in bursts.
#[test]
fn bursts_with_a_real_iperf3_both_ways() {
    let _serial = crate::util::exclusive();
    if let Some(srv) = Iperf3Server::start_with(&[]) {
        let doc = srv.client(&["-t", "1", "-u", "-l", "1000", "-b", "10M/10"]);
        assert!(max_per_ms(streams(&doc, "client")) >= 8, "{doc}");
    }
    if !have_iperf3() {
        return;
    }
    let srv = Server::start(&["-J", "--log-results", "full"]);
    let (code, doc, stderr) =
        iperf3_client(srv.port, &["-t", "1", "-u", "-l", "1000", "-b", "10M/10", "-R"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(doc.get("error").is_none(), "{}", doc["error"]);
    let rec = server_record(&srv, 1);
    let server = rec["server"]["streams"].as_array().expect("server streams");
    assert!(max_per_ms(server) >= 8, "{rec}");
}
