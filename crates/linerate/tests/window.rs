//! `-w` has an effect, not just a read-back value: a 16 KiB window bounds throughput to
//! window / RTT, on both ends (the server sets it after accept, the client before connect),
//! and the verdict says receive-window-bound.
//!
//! Where the round trip comes from: this kernel has no netem, so no delay can be added, and a
//! window only binds where it is smaller than rate × round trip. On loopback the round trip
//! is tens of µs and, on a loaded 2-core machine, swings with scheduling: over four runs of
//! `-w 16K` there, rate × RTT ranged from 0.45 to 11 windows, and the unlimited run was no
//! faster than the limited one in two of them — no clean signal. So this runs over a veth
//! link between two namespaces whose return path (the receiver's ACKs) is shaped to 1 Mbit/s
//! with tbf, like a line with a slow uplink: ACKs queue there (about 0.5 ms each), which gives
//! the path a round trip near a millisecond, well above scheduling noise. The data path is
//! not shaped.
//!
//! The check is Little's law: a sender keeps on average rate × RTT bytes in flight, and what
//! is in flight is at most the receiver's window, itself at most the receive buffer the
//! kernel granted. Measured in 7 runs of this test and 11 by hand of the same set-up (debug
//! and release builds, a 2-core machine shared with other builds, some runs with two or four
//! extra busy loops): with `-w 16K`, rate × mean RTT was 0.28–0.90 of the 32 KiB granted
//! buffer and the rate 6–26 % of the unlimited run's, which kept 10–52 buffers' worth in
//! flight. With the window not applied (tried: `accepted` skipping it), the `-w 16K` run
//! looks like the unlimited one and fails the checks below by far.

use std::time::Duration;

use serde_json::Value;

use crate::netns::{KillOnDrop, ShapedLink, namespaces_available, run_in, spawn_in};
use crate::util::streams;

/// The return path: 1 Mbit/s, a burst of two full frames, 50 ms of queue (so the control
/// connection's few kilobytes of results pass it without loss).
const ACK_PATH: [&str; 3] = ["1mbit", "3000", "50ms"];
/// How far rate × mean RTT may exceed the granted buffer. The RTT is the sender's smoothed
/// RTT sampled every 100 ms, the rate a mean over the test, so their product only estimates
/// the mean in flight; 25 % covers that (observed at most 0.90 of the buffer).
const IN_FLIGHT_TOLERANCE: f64 = 1.25;

/// One run's figures for its one direction.
#[derive(Debug)]
struct Run {
    /// Received, bit/s.
    rate: f64,
    /// Mean of the sender's per-interval smoothed RTT, seconds.
    rtt: f64,
    /// The receiving socket's granted receive buffer, bytes.
    buffer: f64,
    limit: String,
    verdict: String,
}

impl Run {
    fn in_flight(&self) -> f64 {
        self.rate / 8.0 * self.rtt
    }
}

fn measure(link: &ShapedLink, extra: &[&str]) -> Run {
    let mut args = vec!["client", &link.addr_b, "-t", "2", "-i", "0.1", "-J"];
    args.extend_from_slice(extra);
    let out = run_in(&link.a, &args);
    assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
    let doc = out.json();
    let (sender, receiver) = if extra.contains(&"-R") {
        ("server_results", "client")
    } else {
        ("client", "server_results")
    };
    let intervals = streams(&doc, sender)[0]["intervals"].as_array().expect("intervals");
    let rtts: Vec<f64> = intervals.iter().filter_map(|i| i["tcp"]["rtt_us"].as_f64()).collect();
    assert!(rtts.len() >= 10, "{args:?}: {} RTT samples", rtts.len());
    let number = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("{args:?}: not a number: {v}"));
    let verdict = &doc["summary"]["verdicts"][0];
    Run {
        rate: number(&doc["summary"]["directions"][0]["receiver"]["bits_per_second"]),
        rtt: rtts.iter().sum::<f64>() / rtts.len() as f64 / 1e6,
        buffer: number(&streams(&doc, receiver)[0]["socket"]["recv_buffer_bytes"]),
        limit: verdict["limit"].as_str().unwrap_or_default().to_string(),
        verdict: verdict.to_string(),
    }
}

#[test]
fn a_16k_window_bounds_throughput_to_window_over_rtt_on_both_ends() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let link = ShapedLink::unshaped("w");
    let _server = KillOnDrop(spawn_in(&link.b, &["server", "-p", "5201", "-B", &link.addr_b]));
    std::thread::sleep(Duration::from_millis(400));
    // Upload: the server receives (its window set after accept), its ACKs leave from b.
    // Download: the client receives (its window set before connect), its ACKs leave from a.
    for (dir, receiver_in_a) in [(&[][..], false), (&["-R"][..], true)] {
        link.shape(receiver_in_a, Some(ACK_PATH));
        link.shape(!receiver_in_a, None);
        let small = measure(&link, &[&["-w", "16K"], dir].concat());
        let free = measure(&link, dir);
        let ctx = format!("{dir:?}: -w 16K {small:?}, unlimited {free:?}");
        assert_eq!(small.buffer, 32_768.0, "Linux grants twice the 16 KiB asked: {ctx}");
        assert_eq!(small.limit, "receive_window", "{dir:?}: {}", small.verdict);
        assert!(small.in_flight() <= IN_FLIGHT_TOLERANCE * small.buffer, "{ctx}");
        assert!(small.rate <= 0.5 * free.rate, "clearly below the unlimited run: {ctx}");
        // The bound above can fail: without -w the sender keeps far more in flight.
        assert!(free.in_flight() >= 2.0 * small.buffer, "{ctx}");
    }
}
