//! `linerate doctor`'s judgement: from the environments of both hosts and the path facts,
//! recommendations with a stable id, the reason in numbers, the exact Linux command, and the
//! FreeBSD equivalent as text where tuning guides cover FreeBSD.
//!
//! Pure: the facts come in as data (`DoctorReport` without recommendations), the rules return
//! recommendations; no I/O. Rules never guess: a rule whose inputs are n/a does not fire, and
//! the report's `notes` say which checks could not run and why. Ids are stable (scripts and
//! dashboards key on them) and documented in docs/JSON.md.

use serde::Serialize;

use linerate_proto::{Environment, Fact, InterfaceEnvironment};

/// What the doctor found about the server and the path to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteFacts {
    /// `host:port` as given.
    pub server: String,
    /// The server's software string.
    pub software: Fact<String>,
    /// The server's environment.
    pub environment: Fact<Environment>,
    /// Round trip of the control connection (TCP_INFO min RTT, else smoothed), microseconds.
    pub rtt_us: Fact<u32>,
    /// Largest IP packet that crossed the path with don't-fragment set, bytes.
    pub path_mtu_bytes: Fact<u32>,
    /// The largest size the search tried (the local interface's MTU, at most 9216).
    pub searched_up_to_bytes: u32,
}

/// One recommendation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recommendation {
    /// Stable id, e.g. `rmem-max-below-bdp`.
    pub id: &'static str,
    /// `local` or `remote`: where to apply it.
    pub host: &'static str,
    /// Why, with the numbers.
    pub reason: String,
    /// The Linux command that fixes it.
    pub linux: String,
    /// The FreeBSD equivalent, where one exists.
    pub freebsd: Option<String>,
}

/// Everything `linerate doctor` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    /// This host.
    pub local: Environment,
    /// The server and path, when a HOST was given.
    pub remote: Option<RemoteFacts>,
    /// The link rate the buffer checks used, bits per second.
    pub link_bits_per_second: Option<u64>,
    /// Where that rate came from (`--link-speed`, or `interface eth0`).
    pub link_source: Option<String>,
    /// What to change.
    pub recommendations: Vec<Recommendation>,
    /// Checks that could not run, and why.
    pub notes: Vec<String>,
}

/// The interface carrying the test (role `test`), if recorded.
pub fn test_interface(e: &Environment) -> Option<&InterfaceEnvironment> {
    e.interfaces.iter().find(|i| i.role == "test")
}

/// The link rate for the buffer checks: `--link-speed`, else the local test interface's
/// speed. Returns the rate and where it came from.
pub fn link_rate(given: Option<u64>, local: &Environment) -> Option<(u64, String)> {
    if let Some(r) = given {
        return Some((r, "--link-speed".into()));
    }
    let i = test_interface(local)?;
    let mbit = *i.speed_mbit_per_second.value()?;
    Some((mbit * 1_000_000, format!("interface {}", i.name)))
}

/// Fills in the recommendations and notes of a report from its facts.
pub fn diagnose(mut report: DoctorReport) -> DoctorReport {
    let mut recs = Vec::new();
    let mut notes = Vec::new();
    let rtt = report.remote.as_ref().and_then(|r| r.rtt_us.value().copied());
    match (report.link_bits_per_second, rtt) {
        (Some(rate), Some(rtt)) => {
            let bdp = bdp_bytes(rate, rtt);
            recs.extend(buffer_rules("local", &report.local, rate, rtt, bdp));
            if let Some(Fact::Value(env)) = report.remote.as_ref().map(|r| &r.environment) {
                recs.extend(buffer_rules("remote", env, rate, rtt, bdp));
            }
        }
        (None, _) => notes.push(
            "socket buffers not checked against the bandwidth-delay product: no link rate (give --link-speed; no test interface reports its speed)".into(),
        ),
        (_, None) => notes.push(
            "socket buffers not checked against the bandwidth-delay product: no round trip (give a HOST running `linerate server`)".into(),
        ),
    }
    recs.extend(host_rules("local", &report.local));
    if let Some(Fact::Value(env)) = report.remote.as_ref().map(|r| &r.environment) {
        recs.extend(host_rules("remote", env));
    }
    if let Some(r) = &report.remote {
        recs.extend(crate::stats::doctor_path::path_rules(&report.local, r));
    }
    report.recommendations = recs;
    report.notes.extend(notes);
    report
}

/// Bandwidth-delay product, bytes: rate × RTT / 8.
pub fn bdp_bytes(bits_per_second: u64, rtt_us: u32) -> u64 {
    (u128::from(bits_per_second) * u128::from(rtt_us) / 8_000_000) as u64
}

/// A buffer size to recommend: twice the BDP (the kernel counts its overhead against the
/// buffer, and the window is about half of it by default), rounded up to a MiB, at least 4 MiB.
pub fn recommended_buffer(bdp: u64) -> u64 {
    let mib = 1 << 20;
    (bdp.saturating_mul(2).div_ceil(mib) * mib).max(4 * mib)
}

fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes / 1024)
}

/// The third field of `tcp_rmem`/`tcp_wmem` (the autotuning maximum).
pub fn triple_max(v: &str) -> Option<u64> {
    v.split_ascii_whitespace().nth(2)?.parse().ok()
}

fn buffer_rules(
    host: &'static str,
    e: &Environment,
    rate: u64,
    rtt_us: u32,
    bdp: u64,
) -> Vec<Recommendation> {
    let want = recommended_buffer(bdp);
    let path = format!(
        "for {} × {:.2} ms RTT you need ≥ {} (the bandwidth-delay product)",
        crate::units::format_bits_per_second(rate as f64),
        f64::from(rtt_us) / 1000.0,
        kib(bdp)
    );
    let mut out = Vec::new();
    let rules: [(&'static str, &str, &str, &str); 4] = [
        (
            "rmem-max-below-bdp",
            "net.core.rmem_max",
            "caps a receive buffer set with -w (SO_RCVBUF), and so the window,",
            "kern.ipc.maxsockbuf",
        ),
        (
            "wmem-max-below-bdp",
            "net.core.wmem_max",
            "caps a send buffer set with -w (SO_SNDBUF)",
            "kern.ipc.maxsockbuf",
        ),
        (
            "tcp-rmem-below-bdp",
            "net.ipv4.tcp_rmem",
            "caps the autotuned receive buffer, and so the window,",
            "net.inet.tcp.recvbuf_max",
        ),
        (
            "tcp-wmem-below-bdp",
            "net.ipv4.tcp_wmem",
            "caps the autotuned send buffer",
            "net.inet.tcp.sendbuf_max",
        ),
    ];
    for (id, key, what, bsd) in rules {
        let Some(v) = e.sysctl(key) else { continue };
        let (limit, linux) = if key.starts_with("net.ipv4") {
            let Some(max) = triple_max(v) else { continue };
            let fields: Vec<&str> = v.split_ascii_whitespace().collect();
            (max, format!("sysctl -w {key}=\"{} {} {want}\"", fields[0], fields[1]))
        } else {
            let Ok(max) = v.parse::<u64>() else { continue };
            (max, format!("sysctl -w {key}={want}"))
        };
        if limit >= bdp {
            continue;
        }
        out.push(Recommendation {
            id,
            host,
            reason: format!("{key} {limit} {what} at {}; {path}", kib(limit)),
            linux,
            freebsd: Some(format!("sysctl {bsd}={want}")),
        });
    }
    out
}

fn host_rules(host: &'static str, e: &Environment) -> Vec<Recommendation> {
    let mut out = Vec::new();
    if let Some(g) =
        e.cpu.governor.value().filter(|g| matches!(g.as_str(), "powersave" | "conservative"))
    {
        out.push(Recommendation {
            id: "cpu-governor-powersave",
            host,
            reason: format!("the CPU frequency governor is {g}: the clock ramps up late under load and per-packet work costs more; benchmarks need a fixed high clock"),
            linux: "cpupower frequency-set -g performance".into(),
            freebsd: Some("service powerd stop; sysctl dev.cpu.0.freq=<highest in dev.cpu.0.freq_levels>".into()),
        });
    }
    let cpus = e.cpu.count.value().copied();
    for i in e.interfaces.iter().filter(|i| i.name != "lo") {
        out.extend(crate::stats::doctor_path::offload_rules(host, i));
        out.extend(crate::stats::doctor_path::queue_rule(host, cpus, i));
    }
    out
}

#[cfg(test)]
#[path = "doctor_tests.rs"]
mod tests;
