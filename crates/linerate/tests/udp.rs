//! UDP tests on real loopback sockets: pacing, accounting on both ends, directions, the
//! datagram size default, and refusals. Loopback only; every run is bounded.

use std::time::Duration;

use serde_json::Value;

use crate::util::{Server, client_json, run, streams};

fn udp(doc: &Value, dir: usize) -> &Value {
    &doc["summary"]["udp"][dir]
}

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

#[test]
fn paced_udp_arrives_whole_at_the_rate_asked() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    let doc = client_json(srv.port, &["-u", "-b", "200M", "-l", "1472", "-t", "2", "-i", "0.5"]);
    assert_eq!(doc["record"]["outcome"]["status"], "completed", "{doc}");
    let u = udp(&doc, 0);
    let sent = n(u, "sent");
    assert!(sent > 30_000, "{u}");
    assert_eq!(n(u, "received"), sent, "loopback at 200M loses nothing: {u}");
    assert_eq!(n(u, "lost"), 0);
    assert_eq!(n(u, "duplicates"), 0);
    let rate = doc["summary"]["directions"][0]["sender"]["bits_per_second"].as_f64().expect("r");
    assert!((rate / 200e6 - 1.0).abs() < 0.01, "sender rate {rate} within 1 % of 200M");
    let rx_rate =
        doc["summary"]["directions"][0]["receiver"]["bits_per_second"].as_f64().expect("r");
    assert!((rx_rate / 200e6 - 1.0).abs() < 0.02, "receiver rate {rx_rate}");
    let burst = u["burstiness"].as_f64().expect("burstiness");
    assert!(burst < 3.0, "smooth pacing: at most {burst}x the even share per ms");
    assert_eq!(
        doc["summary"]["verdicts"][0]["limit"], "pacing_target",
        "{}",
        doc["summary"]["verdicts"]
    );
    // Interval lines carry datagram counts that add up to the total.
    let rx = &streams(&doc, "server_results")[0];
    let per_interval: u64 =
        rx["intervals"].as_array().expect("iv").iter().map(|i| n(&i["udp"], "datagrams")).sum();
    assert_eq!(per_interval, n(&rx["udp_receiver"]["counts"], "received"));
    assert!(rx["udp_receiver"]["nap_us_max"].is_null(), "a paced receiver never naps: {rx}");
    assert!(u["nap_us_max"].is_null(), "{u}");
}

#[test]
fn reverse_parallel_and_bidir_udp_account_for_every_datagram() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    for args in [&["-R", "-P", "2"][..], &["--bidir"][..]] {
        let mut all = vec!["-u", "-b", "50M", "-l", "1400", "-t", "1"];
        all.extend_from_slice(args);
        let doc = client_json(srv.port, &all);
        let dirs = doc["summary"]["udp"].as_array().expect("udp");
        assert_eq!(dirs.len(), if args[0] == "--bidir" { 2 } else { 1 }, "{args:?}");
        for u in dirs {
            assert!(n(u, "sent") > 3000, "{args:?}: {u}");
            assert_eq!(n(u, "received") + n(u, "lost"), n(u, "sent"), "{args:?}: {u}");
            assert_eq!(n(u, "lost"), 0, "{args:?}: loopback at 50M: {u}");
        }
    }
}

#[test]
fn byte_budget_udp_stops_and_ends_without_a_stop_message() {
    let srv = Server::start(&[]);
    for extra in [&[][..], &["-R"][..]] {
        let mut args = vec!["-u", "-b", "100M", "-l", "1000", "-n", "2M"];
        args.extend_from_slice(extra);
        let doc = client_json(srv.port, &args);
        let u = udp(&doc, 0);
        let sent = n(u, "sent");
        assert_eq!(sent, 2 * 1024 * 1024 / 1000 + 1, "{extra:?}: whole datagrams to cover -n: {u}");
        assert_eq!(n(u, "received"), sent, "{extra:?}");
    }
}

/// Receive offload is on by default and changes no count: every datagram of a coalesced
/// buffer is accounted by its own header. The sender segments at every size, 64 B included.
#[test]
fn gro_by_default_gso_at_every_size_and_every_datagram_accounted() {
    let _serial = crate::util::exclusive();
    let srv = Server::start(&[]);
    for (size, extra) in [("1472", None), ("1472", Some("--no-gro")), ("64", None)] {
        let mut args = vec!["-u", "-b", "0", "-l", size, "-t", "1", "-i", "0"];
        args.extend(extra);
        let doc = client_json(srv.port, &args);
        assert_eq!(doc["record"]["outcome"]["status"], "completed", "{args:?}");
        let u = udp(&doc, 0);
        assert_eq!(u["gro"], extra.is_none(), "{args:?}: {u}");
        assert_eq!(u["gso"], true, "{args:?}: the sender segments at {size} B: {u}");
        let rx = &streams(&doc, "server_results")[0]["udp_receiver"];
        assert_eq!(rx["gro"], extra.is_none(), "{args:?}");
        // Unpaced: a receiver that drained its socket napped, 20–200 µs at a time, and the
        // direction names its longest nap. One that never drained it (a receiver too slow
        // for the sender, as on a busy machine) never napped, so the nap may be absent.
        if let Some(nap) = rx["nap_us_max"].as_u64() {
            assert!((20..=200).contains(&nap), "{args:?}: {rx}");
        }
        assert_eq!(u["nap_us_max"], rx["nap_us_max"], "{args:?}: the direction's longest nap");
        assert!(n(u, "sent") > 10_000, "{args:?}: {u}");
        assert_eq!(n(u, "received") + n(u, "lost"), n(u, "sent"), "{args:?}: {u}");
        assert_eq!(n(u, "duplicates") + n(u, "invalid"), 0, "{args:?}: {u}");
        let bytes = doc["summary"]["directions"][0]["receiver"]["bytes"].as_u64().expect("bytes");
        assert_eq!(bytes, n(u, "received") * size.parse::<u64>().expect("size"), "{args:?}");
    }
    let out = run(&["client", "127.0.0.1", "-p", "1", "--no-gro"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "--no-gro without -u: {}", out.stderr);
}

/// Issue 34: `-u` on loopback sent 65,507-byte datagrams at 1.05 Mbit/s — 5 in 2 s — reached
/// 1.31 Mbit/s (+25 %) and said "pacing target reached". The default datagram fits the path
/// MTU and leaves the paced stream 100 datagrams a second; the verdict says "reached" only
/// within 2 % of the rate asked.
#[test]
fn default_udp_sends_enough_datagrams_to_reach_its_rate() {
    let srv = Server::start(&[]);
    let doc = client_json(srv.port, &["-u", "-t", "1"]);
    assert_eq!(doc["record"]["spec"]["bits_per_second"], 1 << 20, "default rate 1 Mbit/s");
    // 1,048,576 bit/s ÷ 8 ÷ 100 a second.
    assert_eq!(doc["record"]["spec"]["block_bytes"], 1310);
    let u = udp(&doc, 0);
    assert_eq!(n(u, "datagram_bytes"), 1310);
    assert!(n(u, "sent") >= 100, "{u}");
    let rate = doc["summary"]["directions"][0]["sender"]["bits_per_second"].as_f64().expect("r");
    let miss = rate / f64::from(1 << 20) - 1.0;
    let v = &doc["summary"]["verdicts"][0];
    let text = v["summary"].as_str().expect("summary");
    println!("FIGURE udp_default_rate_miss_percent = {:.2}", miss * 100.0);
    assert!(miss.abs() <= 0.02, "{rate} bit/s: {text}");
    assert!(text.starts_with("pacing target reached"), "{text}");
    // Fast enough for 100 a second of the largest: loopback's MTU (65536) is the bound.
    let doc = client_json(srv.port, &["-u", "-b", "1G", "-t", "0.5"]);
    assert_eq!(doc["record"]["spec"]["block_bytes"], 65507);
}

#[test]
fn tcp_only_flags_with_udp_are_refused_by_name() {
    for (flag, val) in [("-C", Some("cubic")), ("-M", Some("1000")), ("-N", None), ("-Z", None)] {
        let mut args = vec!["client", "127.0.0.1", "-p", "1", "-u", flag];
        args.extend(val);
        let out = run(&args, Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("TCP only"), "{args:?}: {}", out.stderr);
    }
    let out = run(&["client", "127.0.0.1", "-p", "1", "-u", "-l", "8"], Duration::from_secs(10));
    assert!(out.stderr.contains("24..=65507"), "{}", out.stderr);
    let out = run(
        &["client", "127.0.0.1", "-p", "1", "-u", "--read-size", "4K"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--read-size") && out.stderr.contains("TCP only"),
        "{}",
        out.stderr
    );
}

#[test]
fn text_output_shows_udp_accounting() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-u", "-b", "10M", "-t", "1", "-i", "0.5"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // 10 Mbit/s ÷ 8 ÷ 100 a second.
    assert!(out.stdout.contains("UDP C->S: 12500 B datagrams: sent"), "{}", out.stdout);
    assert!(out.stdout.contains("lost 0 (0.000%)"), "{}", out.stdout);
    assert!(out.stdout.contains("jitter"), "{}", out.stdout);
    // The client prints its own interval lines: with -R it is the receiver.
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-u", "-b", "10M", "-t", "1", "-i", "0.5", "-R"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("datagrams, 0 lost, 0 out of order, jitter"), "{}", out.stdout);
}

#[test]
fn iperf3_shaped_json_has_iperf3s_udp_keys() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let out = run(
        &[
            "client",
            "127.0.0.1",
            "-p",
            &port,
            "-u",
            "-b",
            "20M",
            "-l",
            "1000",
            "-t",
            "1",
            "-J",
            "--json-format",
            "iperf3",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc = out.json();
    let sum = &doc["end"]["sum"];
    let packets = n(sum, "packets");
    assert!((2400..=2600).contains(&packets), "20 Mbit/s of 1000-byte datagrams for 1 s: {sum}");
    assert_eq!(n(sum, "lost_packets"), 0);
    assert!(sum["jitter_ms"].as_f64().is_some(), "{sum}");
    assert_eq!(n(&doc["end"]["sum_sent"], "packets"), packets);
}
