//! `linerate doctor`: on loopback (environment, round trip, probe echo) and across three
//! network namespaces this test creates — client, a forwarding router, server — whose middle
//! hop has a smaller MTU (9000 -> 1400), so the path-MTU search must find 1400 and flag the
//! mismatch; then with a low per-namespace `net.ipv4.tcp_rmem` the buffer recommendation must
//! appear. Traffic stays on loopback or inside the namespaces, which are removed on drop.

use std::time::Duration;

use serde_json::Value;

use crate::environment::sysctl_in;
use crate::netns::{KillOnDrop, Routed, namespaces_available, run_in, spawn_in};
use crate::util::{Server, run};

fn ids(doc: &Value) -> Vec<(String, String)> {
    doc["recommendations"]
        .as_array()
        .expect("recommendations")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or("").to_string(),
                r["host"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn doctor_on_loopback_reports_both_ends_and_the_path() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let out = run(
        &["doctor", "127.0.0.1", "-p", &port, "-J", "--link-speed", "10G"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc = out.json();
    assert_eq!(doc["kind"], "linerate.doctor");
    assert_eq!(doc["local"]["interfaces"][0]["name"], "lo", "the test interface first");
    assert_eq!(doc["local"]["interfaces"][0]["role"], "test");
    let remote = &doc["remote"];
    assert!(
        remote["software"]["value"].as_str().is_some_and(|s| s.starts_with("linerate")),
        "{remote}"
    );
    assert!(remote["environment"]["value"]["kernel"]["value"].is_string(), "{remote}");
    let rtt = remote["rtt_us"]["value"].as_u64().expect("rtt");
    assert!(rtt > 0 && rtt < 100_000, "loopback round trip {rtt} us");
    assert_eq!(remote["path_mtu_bytes"]["value"], 9216, "lo carries the whole search: {remote}");
    assert_eq!(doc["link_bits_per_second"], 10_000_000_000u64);
    assert!(srv.wait_for_log("Doctor from 127.0.0.1", Duration::from_secs(5)), "{}", srv.log());
    let text = run(&["doctor", "127.0.0.1", "-p", &port], Duration::from_secs(30)).stdout;
    assert!(
        text.contains("path MTU    ≥ 9216 bytes") && text.contains("Server 127.0.0.1:"),
        "{text}"
    );
}

#[test]
fn doctor_without_a_server_prints_this_host_and_fails_clearly() {
    let alone = run(&["doctor", "-J"], Duration::from_secs(20));
    assert_eq!(alone.code, Some(0), "{}", alone.stderr);
    assert!(alone.json()["local"]["sysctls"]["net.ipv4.tcp_rmem"].is_object());
    // A port nothing listens on: the local part is printed, then one error line, exit 3.
    let sock = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = sock.local_addr().expect("addr").port().to_string();
    drop(sock);
    let out = run(&["doctor", "127.0.0.1", "-p", &port], Duration::from_secs(20));
    assert_eq!(out.code, Some(3), "{}", out.stdout);
    assert!(out.stdout.contains("This host:"), "{}", out.stdout);
    assert!(out.stderr.contains("linerate server"), "{}", out.stderr);
}

impl Routed {
    fn doctor(&self) -> Value {
        let args = ["doctor", &self.server_ip, "-J", "--link-speed", "100G"];
        let out = run_in(&self.ns.0[0], &args);
        assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
        assert!(out.elapsed < Duration::from_secs(20), "doctor took {:?}", out.elapsed);
        serde_json::from_str(&out.stdout).expect("doctor json")
    }
}

#[test]
fn doctor_finds_the_1400_hop_and_low_receive_buffers_across_a_router() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let net = Routed::new("d", ["9000", "1400"]);
    let (c, s) = (&net.ns.0[0], &net.ns.0[2]);
    for netns in [c, s] {
        sysctl_in(netns, "net.ipv4.tcp_rmem", "4096 131072 67108864");
    }
    let _server = KillOnDrop(spawn_in(s, &["server", "-p", "5201", "-B", &net.server_ip]));
    std::thread::sleep(Duration::from_millis(400));
    let doc = net.doctor();
    assert_eq!(doc["remote"]["path_mtu_bytes"]["value"], 1400, "{}", doc["remote"]);
    assert_eq!(doc["local"]["interfaces"][0]["name"], net.client_dev.as_str());
    let mismatch = doc["recommendations"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == "mtu-mismatch"))
        .unwrap_or_else(|| panic!("no mtu-mismatch in {:?}", ids(&doc)));
    assert_eq!(mismatch["linux"], format!("ip link set dev {} mtu 1400", net.client_dev));
    let mtu: Vec<_> = ids(&doc).into_iter().filter(|(id, _)| id.starts_with("mtu")).collect();
    assert_eq!(
        mtu,
        [("mtu-mismatch".to_string(), "local".to_string())],
        "1400 at the server is right"
    );
    assert!(
        !ids(&doc).iter().any(|(id, _)| id == "tcp-rmem-below-bdp"),
        "64 MiB is plenty: {:?}",
        ids(&doc)
    );
    for netns in [c, s] {
        sysctl_in(netns, "net.ipv4.tcp_rmem", "4096 16384 16384");
    }
    let low = net.doctor();
    let got = ids(&low);
    for host in ["local", "remote"] {
        assert!(got.contains(&("tcp-rmem-below-bdp".into(), host.into())), "{host}: {got:?}");
    }
    let rec = low["recommendations"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == "tcp-rmem-below-bdp"))
        .expect("rule");
    assert!(rec["reason"].as_str().is_some_and(|r| r.contains("net.ipv4.tcp_rmem 16384")), "{rec}");
}
