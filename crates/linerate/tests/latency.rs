//! Request/response tests (`--rr`) against a real `linerate server` on loopback: the figures
//! agree with the bytes both ends moved, and an open loop shows a server stall that a closed
//! loop hides (coordinated omission). The stall is real: the server process is stopped with
//! SIGSTOP and continued with SIGCONT while the test runs.

use std::time::Duration;

use serde_json::Value;

use crate::util::{Server, client_json, run, streams};

fn ns(latency: &Value, key: &str) -> u64 {
    latency[key].as_u64().unwrap_or_else(|| panic!("summary.latency.{key} missing: {latency}"))
}

#[test]
fn request_response_reports_transactions_and_ordered_percentiles() {
    let _x = crate::util::exclusive();
    let srv = Server::start(&[]);
    let args = ["--rr", "-t", "2", "-P", "2", "--in-flight", "2", "--request-size", "64"];
    let doc =
        client_json(srv.port, &[&args[..], &["--response-size", "512", "--no-store"]].concat());
    let l = &doc["summary"]["latency"];
    let transactions = l["transactions"].as_u64().expect("transactions");
    assert!(transactions > 1000, "a loopback closed loop does thousands per second: {l}");
    let tps = l["transactions_per_second"].as_f64().expect("rate");
    assert!((transactions as f64 / tps - 2.0).abs() < 0.3, "rate over the 2 s test: {l}");
    let order = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns", "max_ns"];
    let figures: Vec<u64> = order.iter().map(|k| ns(l, k)).collect();
    assert!(figures.windows(2).all(|w| w[0] <= w[1]), "percentiles in order: {l}");
    assert!(figures[0] > 0 && ns(l, "mean_ns") >= figures[0], "{l}");
    assert_eq!(l["loop_kind"], "closed");
    assert_eq!(l["unanswered"], 0, "every request was answered: {l}");
    for end in ["client_cpu_us_per_transaction", "server_cpu_us_per_transaction"] {
        assert!(l[end].as_f64().is_some_and(|v| v > 0.0), "{end}: {l}");
    }
    // Every request the client wrote reached the server and was answered: the bytes agree
    // with the transactions exactly, stream by stream.
    let client = streams(&doc, "client");
    assert_eq!(client.len(), 2);
    let mut counted = 0;
    for s in client {
        let lat = &s["latency"];
        let done = lat["transactions"].as_u64().expect("stream transactions")
            + lat["omitted_transactions"].as_u64().expect("omitted");
        assert_eq!(s["bytes"].as_u64(), Some(done * 64), "requests written: {s}");
        let buckets: u64 = lat["histogram"]["buckets"]
            .as_array()
            .expect("buckets")
            .iter()
            .map(|b| b[1].as_u64().expect("count"))
            .sum();
        assert_eq!(buckets, lat["transactions"].as_u64().expect("n"), "histogram holds them all");
        counted += lat["transactions"].as_u64().expect("n");
        let server_side = streams(&doc, "server_results")
            .iter()
            .find(|r| r["id"] == s["id"])
            .expect("the server reported the stream");
        assert_eq!(server_side["bytes"], s["bytes"], "the server read every request");
    }
    assert_eq!(counted, transactions);
}

#[test]
fn connect_request_response_close_times_every_phase() {
    let _x = crate::util::exclusive();
    let srv = Server::start(&[]);
    let args = ["--crr", "-t", "2", "-P", "2", "--request-size", "100", "--response-size", "2000"];
    let doc = client_json(srv.port, &[&args[..], &["--no-store"]].concat());
    let l = &doc["summary"]["latency"];
    let transactions = l["transactions"].as_u64().expect("transactions");
    assert!(transactions > 100, "hundreds of connections per second on loopback: {l}");
    assert_eq!(l["unanswered"], 0, "{l}");
    for phase in ["connect", "first_byte", "close"] {
        let p = &l["phases"][phase];
        assert!(p["p50_ns"].as_u64().is_some_and(|v| v > 0), "{phase}: {l}");
        assert!(p["max_ns"].as_u64() <= l["max_ns"].as_u64(), "a phase is part of the whole: {l}");
    }
    // Every transaction's request reached the server on a connection of its own.
    for s in streams(&doc, "client") {
        let done = s["latency"]["transactions"].as_u64().expect("n")
            + s["latency"]["omitted_transactions"].as_u64().expect("omitted");
        assert_eq!(s["bytes"].as_u64(), Some(done * 100), "{s}");
        let server_side = streams(&doc, "server_results")
            .iter()
            .find(|r| r["id"] == s["id"])
            .expect("the server reported the stream");
        assert_eq!(server_side["bytes"], s["bytes"], "the server answered every transaction");
    }
    let port = srv.port.to_string();
    for (flags, words) in
        [(&["--in-flight", "2"][..], "one transaction at a time"), (&["-u"][..], "drop -u")]
    {
        let out = run(
            &[&["client", "127.0.0.1", "-p", &port, "--crr", "-t", "1"][..], flags].concat(),
            Duration::from_secs(10),
        );
        assert_eq!(out.code, Some(2), "{flags:?}: {}", out.stderr);
        assert!(out.stderr.contains(words), "{flags:?}: {}", out.stderr);
    }
}

#[test]
fn bulk_only_flags_are_refused_with_rr_by_name() {
    let _x = crate::util::exclusive();
    for (flag, words) in [
        (&["-R"][..], "-R/--bidir"),
        (&["-u", "--request-size", "10"][..], "24..=65507"),
        (&["-b", "1M"][..], "--rr-rate"),
        (&["--in-flight", "0"][..], "--in-flight"),
        (&["--request-size", "2M"][..], "--request-size"),
    ] {
        let out = run(
            &[&["client", "127.0.0.1", "-p", "9", "--rr", "-t", "1"][..], flag].concat(),
            Duration::from_secs(10),
        );
        assert_eq!(out.code, Some(2), "{flag:?}: {}", out.stderr);
        assert!(out.stderr.contains(words), "{flag:?} names {words}: {}", out.stderr);
    }
    let out =
        run(&["client", "127.0.0.1", "-p", "9", "--request-size", "10"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("--rr"), "{}", out.stderr);
    // Gates judge bit rates: refused with a request/response test rather than judging the
    // requests' bytes.
    let out = run(
        &["client", "127.0.0.1", "-p", "9", "--rr", "--fail-below", "1M"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("drop the gate"), "{}", out.stderr);
    // Not a fleet test yet: refused before any host is contacted, not run as a bulk test.
    let out =
        run(&["fleet", "127.0.0.1:9", "127.0.0.2:9", "--under-load"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("per host"), "{}", out.stderr);
}

#[test]
fn udp_request_response_matches_every_response_to_its_request() {
    let _x = crate::util::exclusive();
    let srv = Server::start(&[]);
    let args = ["--rr", "-u", "-t", "2", "--in-flight", "4", "--request-size", "64"];
    let doc =
        client_json(srv.port, &[&args[..], &["--response-size", "200", "--no-store"]].concat());
    let l = &doc["summary"]["latency"];
    let transactions = l["transactions"].as_u64().expect("transactions");
    assert!(transactions > 1000, "{l}");
    assert_eq!((l["lost"].as_u64(), l["unanswered"].as_u64()), (Some(0), Some(0)), "{l}");
    let order = ["min_ns", "p50_ns", "p99_ns", "max_ns"];
    let figures: Vec<u64> = order.iter().map(|k| ns(l, k)).collect();
    assert!(figures.windows(2).all(|w| w[0] <= w[1]), "percentiles in order: {l}");
    let s = &streams(&doc, "client")[0];
    let done = s["latency"]["transactions"].as_u64().expect("n")
        + s["latency"]["omitted_transactions"].as_u64().expect("omitted");
    assert_eq!(s["bytes"].as_u64(), Some(done * 64), "one 64-byte datagram per request: {s}");
    assert_eq!(streams(&doc, "server_results")[0]["bytes"], s["bytes"], "all reached the server");
    assert!(doc["summary"]["verdicts"].as_array().is_some_and(Vec::is_empty));
}

/// Runs a 3 s request/response test while the server is stopped for `STALL` after 1.5 s;
/// returns the summary's latency object.
fn stalled_run(extra: &[&str]) -> Value {
    stalled_for(Duration::from_millis(300), extra)
}

fn stalled_for(stall: Duration, extra: &[&str]) -> Value {
    let srv = Server::start(&[]);
    let (port, pid) = (srv.port, srv.child.id());
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let client = std::thread::spawn(move || {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        client_json(port, &[&["--rr", "-t", "3", "-i", "0", "--no-store"][..], &extra].concat())
    });
    std::thread::sleep(Duration::from_millis(1500));
    let signal = |sig: &str| {
        let ok = std::process::Command::new("sh")
            .args(["-c", &format!("kill -{sig} {pid}")])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} {pid}");
    };
    signal("STOP");
    std::thread::sleep(stall);
    signal("CONT");
    let doc = client.join().expect("client thread");
    drop(srv);
    doc["summary"]["latency"].clone()
}

#[test]
fn udp_requests_unanswered_for_a_second_are_lost_and_late_answers_ignored() {
    let _x = crate::util::exclusive();
    // The server sleeps 1.5 s: what it was sent meanwhile waits in its socket and is answered
    // when it wakes, too late for the requests sent in the stall's first half second.
    let l = stalled_for(
        Duration::from_millis(1500),
        &["-u", "--rr-rate", "1000", "--in-flight", "1024"],
    );
    let lost = l["lost"].as_u64().expect("lost");
    assert!((200..=800).contains(&lost), "about 500 requests waited over 1 s: {l}");
    assert!(ns(&l, "max_ns") < 1_100_000_000, "no latency past the loss timeout: {l}");
    assert!(ns(&l, "p99_ns") > 100_000_000, "the rest of the stall shows: {l}");
}

#[test]
fn an_open_loop_shows_a_server_stall_that_a_closed_loop_hides() {
    let _x = crate::util::exclusive();
    let closed = stalled_run(&[]);
    let open = stalled_run(&["--rr-rate", "2000"]);
    // Both saw the stall in their slowest transaction...
    for (name, l) in [("closed", &closed), ("open", &open)] {
        assert!(ns(l, "max_ns") >= 250_000_000, "{name} loop's max shows the 300 ms stall: {l}");
    }
    // ...but the closed loop sent nothing while it waited, so the stall is one sample among
    // tens of thousands; the open loop kept its schedule, so the ~600 requests due during the
    // stall all count their wait from their intended send time.
    assert!(ns(&closed, "p99_9_ns") < 100_000_000, "closed loop hides the stall: {closed}");
    assert!(ns(&open, "p99_ns") >= 150_000_000, "open loop shows it at p99: {open}");
    assert_eq!(open["loop_kind"], "open");
    assert!(open["late_requests"].as_u64().is_some_and(|n| n >= 100), "{open}");
    let tps = open["transactions_per_second"].as_f64().expect("rate");
    assert!((tps - 2000.0).abs() < 200.0, "the open loop kept its rate: {open}");
}

#[test]
fn under_load_reports_idle_and_loaded_probes_and_responsiveness() {
    let _x = crate::util::exclusive();
    let srv = Server::start(&[]);
    let args = ["--under-load", "-t", "3", "--idle-time", "1", "--no-store"];
    let doc = client_json(srv.port, &args);
    let probes = &doc["record"]["probes"];
    assert_eq!(probes["probe"]["rate_per_second"], 100);
    let count = |phase: &str| probes[phase]["latency"]["transactions"].as_u64().unwrap_or(0);
    // 100 per second: 1 s idle, and from 1 s to 2.75 s of the 3 s test.
    assert!((95..=105).contains(&count("idle")), "{probes}");
    assert!((165..=185).contains(&count("loaded")), "{probes}");
    assert_eq!(probes["loaded"]["from_ms"], 1000);
    let u = &doc["summary"]["under_load"];
    for phase in ["idle", "loaded"] {
        assert!(u[phase]["p50_ns"].as_u64().is_some_and(|v| v > 0), "{phase}: {u}");
        // Handshake probes at a tenth of the rate: 10/s, a new connection each.
        assert!(u[phase]["connects"].as_u64().is_some_and(|n| n >= 5), "{phase}: {u}");
        assert!(u[phase]["connect_p50_ns"].as_u64().is_some_and(|v| v > 0), "{phase}: {u}");
    }
    assert!(u["added_p50_ns"].is_i64(), "{u}");
    assert!(u["loaded_connections"]["samples"].as_u64().is_some_and(|n| n >= 1), "{u}");
    let r = &u["responsiveness"];
    assert!(r["rpm"].as_f64().is_some_and(|v| v > 0.0), "{u}");
    assert!(["low", "medium", "high"].contains(&r["rating"].as_str().unwrap_or("")), "{u}");
    assert!(["low", "medium", "high"].contains(&r["confidence"].as_str().unwrap_or("")), "{u}");
    assert!(u["finding"].as_str().is_some_and(|f| f.contains("idle")), "{u}");
    for (flags, words) in [
        (&["--probe-rate", "0"][..], "--probe-rate"),
        (&["-t", "1"][..], "-t of at least 2 s"),
        (&["--rr"][..], "--rr"),
    ] {
        let port = srv.port.to_string();
        let out = run(
            &[&["client", "127.0.0.1", "-p", &port, "--under-load"][..], flags].concat(),
            Duration::from_secs(10),
        );
        assert_eq!(out.code, Some(2), "{flags:?}: {}", out.stderr);
        assert!(out.stderr.contains(words), "{flags:?} names {words}: {}", out.stderr);
    }
}

/// Issue 35: the server cut the probes under load and the client still printed "Test
/// complete" (the error only in the JSON). A server that allows three new tests a minute per
/// address admits the idle probes (request and handshake sessions) and the test, then
/// refuses both loaded probe sessions: the run fails visibly, exit 3, its figures kept.
#[test]
fn a_failed_probe_session_under_load_fails_the_run_and_keeps_its_figures() {
    let srv = Server::start(&["--max-client-tests-per-minute", "3"]);
    let port = srv.port.to_string();
    let args = ["client", "127.0.0.1", "-p", &port, "--under-load", "-t", "3", "--idle-time", "1"];
    let out = run(&[&args[..], &["-b", "100M", "--no-store"]].concat(), Duration::from_secs(30));
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(!out.stdout.contains("Test complete"), "{}", out.stdout);
    assert!(out.stdout.contains("Test FAILED: the figures above are partial."), "{}", out.stdout);
    assert!(out.stdout.contains("receiver (server)"), "the throughput is kept: {}", out.stdout);
    assert!(out.stdout.contains("  idle  : p50 "), "the idle probes are kept: {}", out.stdout);
    assert!(
        out.stderr.contains("the latency probes under load failed")
            && out.stderr.contains("--max-client-tests-per-minute"),
        "{}",
        out.stderr
    );
}

/// Client, router and server namespaces; the router's link toward the server is a 20 Mbit/s
/// tbf with a queue of `limit` bytes. Returns the summary's `under_load` of an upload with
/// probes beside it (cubic, a loss-based sender that fills whatever queue it meets).
fn upload_under_load_through(limit: &str) -> Value {
    use crate::netns::{KillOnDrop, Routed, run_in, spawn_in};
    let net = Routed::new("q", ["1500", "1500"]);
    net.router_qdisc(&["tbf", "rate", "20mbit", "burst", "32kb", "limit", limit]);
    let _server =
        KillOnDrop(spawn_in(&net.ns.0[2], &["server", "-p", "5201", "-B", &net.server_ip]));
    std::thread::sleep(Duration::from_millis(400));
    let args = [
        "client",
        &net.server_ip,
        "--under-load",
        "-t",
        "6",
        "-O",
        "2",
        "--idle-time",
        "1",
        "-P",
        "4",
        "-C",
        "cubic",
        "-J",
        "--no-store",
    ];
    let out = run_in(&net.ns.0[0], &args);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    doc["summary"]["under_load"].clone()
}

#[test]
fn a_deep_queue_adds_its_length_in_delay_and_a_shallow_one_does_not() {
    let _serial = crate::util::exclusive();
    if !crate::netns::namespaces_available() {
        return;
    }
    // 1,000,000 bytes drain at 20 Mbit/s in 400 ms: a full queue adds that to every probe.
    let deep = upload_under_load_through("1000000");
    let added = deep["added_p50_ns"].as_i64().expect("added") as f64 / 1e6;
    assert!((320.0..=480.0).contains(&added), "deep queue: +{added} ms, want 400 ± 20 %: {deep}");
    assert!(deep["finding"].as_str().is_some_and(|f| f.contains("bufferbloat")), "{deep}");
    // The estimate is the added delay times the goodput reached, which runs 4.4 % under the
    // shaped rate (1448 payload bytes in each 1514-byte frame), so the delay's ± 20 % band
    // reads 0.8 × 0.956 ..= 1.2 of the queue here.
    let queued = deep["queue_bytes"].as_u64().expect("queue") as f64;
    assert!((764_000.0..=1_200_000.0).contains(&queued), "queue estimate {queued}: {deep}");
    assert_eq!(deep["responsiveness"]["rating"], "low", "{deep}");
    // The handshake probes ran and were timed. How long a SYN waits behind the load varied
    // between runs (340 ms in one, under 1 ms at the median in another, not yet explained),
    // so only their presence is asserted here.
    assert!(deep["loaded"]["connects"].as_u64().is_some_and(|n| n > 0), "{deep}");
    // 15,000 bytes (ten full packets) drain in 6 ms.
    let shallow = upload_under_load_through("15000");
    let added = shallow["added_p50_ns"].as_i64().expect("added") as f64 / 1e6;
    assert!(added < 10.0, "shallow queue: +{added} ms: {shallow}");
    assert!(shallow["finding"].as_str().is_some_and(|f| f.contains("held")), "{shallow}");
}

#[test]
fn iperf3_servers_are_told_apart_from_latency_tests() {
    let _x = crate::util::exclusive();
    let Some(iperf3) = crate::interop::Iperf3Server::start() else { return };
    let port = iperf3.port.to_string();
    for (flags, words) in [
        (&["--rr", "-t", "1"][..], "not supported by iperf3"),
        (&["--under-load", "-t", "2", "--idle-time", "0.5"][..], "not supported by iperf3"),
    ] {
        let args = [&["client", "127.0.0.1", "-p", &port, "--no-store"][..], flags].concat();
        let out = run(&args, Duration::from_secs(20));
        assert_ne!(out.code, Some(0), "{flags:?}: {}", out.stdout);
        assert!(out.stderr.contains(words), "{flags:?}: {}", out.stderr);
    }
}

#[test]
fn a_fleet_of_request_response_tests_reports_each_host_and_the_whole() {
    let _x = crate::util::exclusive();
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    for mode in ["--rr", "--crr"] {
        let targets = [format!("127.0.0.1:{}", a.port), format!("127.0.0.1:{}=b", b.port)];
        let args = ["fleet", &targets[0], &targets[1], mode, "-t", "1", "-J", "--no-store"];
        let out = run(&args, Duration::from_secs(60));
        assert_eq!(out.code, Some(0), "{mode}: {}", out.stderr);
        let l = &out.json()["summary"]["latency"];
        let hosts = l["hosts"].as_array().expect("hosts");
        assert_eq!(hosts.len(), 2, "{mode}: {l}");
        assert_eq!(hosts[1]["label"], "b");
        let each: Vec<f64> =
            hosts.iter().map(|h| h["transactions_per_second"].as_f64().expect("rate")).collect();
        assert!(each.iter().all(|r| *r > 50.0), "{mode}: {l}");
        let total = l["transactions_per_second"].as_f64().expect("total");
        assert!((total - each.iter().sum::<f64>()).abs() < 1e-6, "{mode}: {l}");
        assert!(l["p50_ns"].as_u64() <= l["p99_ns"].as_u64(), "{mode}: {l}");
    }
}

#[test]
fn a_campaign_tier_of_request_response_cells_runs_rr_tests() {
    let _x = crate::util::exclusive();
    let srv = Server::start(&[]);
    let dir = crate::util::test_dir("latency-campaign");
    let file = dir.join("plan.toml");
    let text = format!(
        "[defaults]\ntime = 0.5\nrepeat = 1\n\n[tiers.rr]\nhost = \"127.0.0.1\"\nport = {}\n\
         parallel = [1, 2]\nrr = {{ request_size = 64, response_size = 256, in_flight = 2 }}\n\n\
         [tiers.crr]\nhost = \"127.0.0.1\"\nport = {}\nrr = {{ connect_each = true }}\n",
        srv.port, srv.port
    );
    std::fs::write(&file, text).expect("write the campaign");
    let out =
        run(&["campaign", &file.to_string_lossy(), "--no-store", "-J"], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    let doc = out.json();
    let tiers = doc["tiers"].as_array().expect("tiers");
    assert_eq!(tiers.len(), 2, "{doc}");
    // Every run of both tiers was a request/response test with the tier's sizes.
    let text = doc.to_string();
    assert!(
        text.contains("\"request_bytes\":64") && text.contains("\"connect_each\":true"),
        "{text}"
    );
    assert!(text.contains("\"transactions\""), "the runs measured transactions: {text}");
    let bad = "[tiers.u]\nhost = \"127.0.0.1\"\nrr = { request_sise = 1 }\n";
    std::fs::write(&file, bad).expect("write");
    let out = run(&["campaign", &file.to_string_lossy(), "--no-store"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("request_sise"), "the unknown key is named: {}", out.stderr);
}

/// A fleet of request/response tests reads as one: its transactions and latency, never a byte
/// table with "limited by n/a" or a total in kbit/s (its bytes are requests).
#[test]
fn a_request_response_fleet_is_read_by_its_transactions_not_its_bytes() {
    let _x = crate::util::exclusive();
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    let targets = [format!("127.0.0.1:{}=a", a.port), format!("127.0.0.1:{}=b", b.port)];
    for mode in ["--rr", "--crr"] {
        let args = ["fleet", &targets[0], &targets[1], mode, "-t", "1", "--no-store"];
        let out = run(&args, Duration::from_secs(60));
        assert_eq!(out.code, Some(0), "{mode}: {}", out.stderr);
        let text = &out.stdout;
        assert!(text.contains("request/response ("), "{mode}: {text}");
        assert!(text.contains("Transactions (request/response):"), "{mode}: {text}");
        let total = text.lines().find(|l| l.starts_with("Fleet total")).expect("a total line");
        assert!(total.contains("transactions per second over 2 of 2 hosts"), "{mode}: {total}");
        for bulk in ["Data to the hosts", "limited by", "bit/s", "has no verdict"] {
            assert!(!text.contains(bulk), "{mode}: {bulk:?} in\n{text}");
        }
    }
}
