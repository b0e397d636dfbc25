//! The fidelity suite (issue 20), server role: the real iperf3 client (Debian's 3.12 in CI)
//! run the same way against an iperf3 server and against `linerate server`, flag set by flag
//! set. Its JSON must have the same keys either way (its whole `end` and `intervals`, where
//! the figures live), and each run's figures must agree with themselves (what the client sent
//! is what the server counted, within what was in flight at the end). The rates themselves
//! differ between the two runs by the machine's noise, so they are compared only within a
//! run. Keys that legitimately differ are listed in docs/IPERF3.md.
//!
//! Loopback only; every run is bounded by `timeout`.

use serde_json::Value;
use std::collections::BTreeSet;

use crate::interop_server::{have_iperf3, iperf3_client};
use crate::util::Server;

/// Every key path in `v` (arrays by their first element), e.g. `end/sum_sent/bytes`.
fn paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                paths(x, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            if let Some(first) = a.first() {
                paths(first, &format!("{at}[]"), out);
            }
        }
        _ => {
            out.insert(at.to_string());
        }
    }
}

/// The key paths of a client document's results (`end` and `intervals`).
fn result_keys(doc: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    paths(&doc["end"], "end", &mut out);
    paths(&doc["intervals"], "intervals", &mut out);
    out
}

#[test]
fn iperf3_clients_get_the_same_keys_from_linerate_as_from_iperf3() {
    let _x = crate::util::exclusive();
    if !have_iperf3() {
        return;
    }
    let Some(theirs) = crate::interop::Iperf3Server::start() else { return };
    let ours = Server::start(&[]);
    let cases: [&[&str]; 10] = [
        &["-t", "1"],
        &["-t", "1", "-R"],
        &["-t", "1", "--bidir"],
        &["-t", "1", "-P", "2"],
        &["-t", "1", "-u", "-b", "10M"],
        &["-t", "1", "-u", "-b", "10M", "-R"],
        &["-t", "1", "-O", "1"],
        &["-t", "1", "-Z"],
        &["-t", "1", "--get-server-output"],
        &["-n", "20M"],
    ];
    for args in cases {
        let (code_a, a, err_a) = iperf3_client(theirs.port, args);
        let (code_b, b, err_b) = iperf3_client(ours.port, args);
        assert_eq!(code_a, Some(0), "{args:?} against iperf3: {err_a}");
        assert_eq!(code_b, Some(0), "{args:?} against linerate: {err_b}");
        let (ka, kb) = (result_keys(&a), result_keys(&b));
        // The server's own output (`--get-server-output`) is its text: a linerate server's
        // is its own log lines, not iperf3's.
        let differs: Vec<_> =
            ka.symmetric_difference(&kb).filter(|k| !k.contains("server_output")).collect();
        assert!(differs.is_empty(), "{args:?}: keys only one server's results have: {differs:?}");
        // Within the run against linerate: TCP bytes sent are the bytes received, up to what
        // was in flight at TEST_END; UDP packets sent are packets received plus lost.
        let end = &b["end"];
        if args.contains(&"-u") {
            let s = &end["sum"];
            let lost = s["lost_packets"].as_u64().expect("lost");
            assert!(lost * 100 <= s["packets"].as_u64().expect("packets"), "{args:?}: {s}");
        } else {
            let sent = end["sum_sent"]["bytes"].as_f64().expect("sent");
            let received = end["sum_received"]["bytes"].as_f64().expect("received");
            assert!((received / sent - 1.0).abs() < 0.05, "{args:?}: {sent} sent, {received}");
        }
    }
}
