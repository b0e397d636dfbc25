//! The doctor's rules about interfaces and the path: MTU mismatches (local interface against
//! the probed path MTU, and one end's interface against the other's) and offloads that are
//! off. Pure; see `stats::doctor` for the report they fill.

use linerate_proto::{Environment, Fact, InterfaceEnvironment};

use crate::plan::pmtu::PMTU_MAX;
use crate::stats::doctor::{Recommendation, RemoteFacts, test_interface};

/// One end's test interface: its name and MTU, when both are known (loopback excluded:
/// its MTU says nothing about a path).
fn end_mtu(e: Option<&Environment>) -> Option<(&str, u32)> {
    let i = test_interface(e?)?;
    Some((i.name.as_str(), *i.mtu_bytes.value()?)).filter(|(n, _)| *n != "lo")
}

fn set_mtu(
    id: &'static str,
    host: &'static str,
    dev: &str,
    mtu: u32,
    reason: String,
) -> Recommendation {
    Recommendation {
        id,
        host,
        reason,
        linux: format!("ip link set dev {dev} mtu {mtu}"),
        freebsd: Some(format!("ifconfig {dev} mtu {mtu}")),
    }
}

/// Rules that need the path. With the path MTU P known (and below the search's top): an end
/// whose interface MTU exceeds P is told to use P (`mtu-mismatch`; the probes measure the
/// client-to-server direction, paths are nearly always symmetric). When P is unknown or
/// carries the larger MTU, two ends with different MTUs are told to raise the smaller one
/// (`mtu-ends-differ`).
pub fn path_rules(local: &Environment, remote: &RemoteFacts) -> Vec<Recommendation> {
    let mut out = Vec::new();
    let remote_env = match &remote.environment {
        Fact::Value(e) => Some(e),
        Fact::NA(_) => None,
    };
    let ends = [("local", end_mtu(Some(local))), ("remote", end_mtu(remote_env))];
    let path = remote.path_mtu_bytes.value().copied().filter(|p| *p < PMTU_MAX);
    if let Some(p) = path {
        for (host, end) in ends {
            let Some((dev, mtu)) = end.filter(|(_, m)| *m > p) else { continue };
            let reason = format!(
                "{host} {dev} has MTU {mtu} but the path to {} carries at most {p}-byte packets: bigger ones are dropped (TCP stalls until PMTU discovery, UDP datagrams above {p} vanish); use {p} on {dev}, or raise the smaller MTU along the path",
                remote.server
            );
            out.push(set_mtu("mtu-mismatch", host, dev, p, reason));
        }
    }
    if let [(_, Some((ld, l))), (_, Some((rd, r)))] = ends
        && l != r
        && path.is_none_or(|p| p >= l.max(r))
    {
        let (host, dev, low, high) = if l < r { ("local", ld, l, r) } else { ("remote", rd, r, l) };
        let reason = format!(
            "the ends' interfaces differ: local {ld} MTU {l}, remote {rd} MTU {r}; the larger end's packets above {low} cannot be received whole, so use {high} on both ends (the path carries it{})",
            if path.is_some() { "" } else { " if the doctor could not probe it: check" }
        );
        out.push(set_mtu("mtu-ends-differ", host, dev, high, reason));
    }
    out
}

/// Offloads that cost throughput when off on a NIC (software devices such as veth, whose
/// GRO is off by default, are not advised on).
pub fn offload_rules(host: &'static str, i: &InterfaceEnvironment) -> Vec<Recommendation> {
    if i.driver.value().is_some_and(|d| SOFTWARE_DRIVERS.contains(&d.as_str())) {
        return Vec::new();
    }
    let on = |k: &str| i.offloads.get(k).and_then(Fact::value).copied();
    let n = &i.name;
    let mut out = Vec::new();
    let rule = |id, what: &str, feature: &str, bsd: Option<&str>| Recommendation {
        id,
        host,
        reason: format!(
            "{what} is off on {n}: every packet costs the CPU more work, which caps throughput per core"
        ),
        linux: format!("ethtool -K {n} {feature} on"),
        freebsd: bsd.map(|b| format!("ifconfig {n} {b}")),
    };
    if on("tso") == Some(false) {
        out.push(rule("tso-off", "TCP segmentation offload (TSO)", "tso", Some("tso4 tso6")));
    }
    if on("gso") == Some(false) {
        // FreeBSD has no separate GSO switch; TSO covers it.
        out.push(rule("gso-off", "generic segmentation offload (GSO)", "gso", None));
    }
    if on("gro") == Some(false) && on("lro") != Some(true) {
        out.push(rule("gro-off", "receive coalescing (GRO, and LRO)", "gro", Some("lro")));
    }
    if on("rx_checksum") == Some(false) || on("tx_checksum") == Some(false) {
        let bsd = Some("rxcsum txcsum");
        out.push(rule("checksum-offload-off", "checksum offload", "rx on tx", bsd));
    }
    out
}

/// Drivers of software devices, whose queue count says nothing about the hardware.
const SOFTWARE_DRIVERS: [&str; 6] = ["veth", "bridge", "tun", "dummy", "vxlan", "bonding"];

/// One receive queue on a NIC of a host with several CPUs: all receive work (interrupts,
/// softirq, GRO) lands on one CPU, which caps a multi-stream test at what one core handles.
pub fn queue_rule(
    host: &'static str,
    cpus: Option<u32>,
    i: &InterfaceEnvironment,
) -> Option<Recommendation> {
    let driver = i.driver.value()?;
    let cpus = cpus.filter(|c| *c > 1)?;
    if SOFTWARE_DRIVERS.contains(&driver.as_str()) || *i.rx_queues.value()? != 1 {
        return None;
    }
    // Only where the driver offers more queues: otherwise there is no command to give.
    let target = cpus.min(*i.max_rx_queues.value().filter(|m| **m > 1)?);
    let n = &i.name;
    Some(Recommendation {
        id: "single-rx-queue",
        host,
        reason: format!(
            "{n} ({driver}) uses 1 receive queue of the {} it offers, on a host with {cpus} CPUs: all receive processing runs on one CPU, which caps parallel streams at one core's worth",
            i.max_rx_queues.display()
        ),
        linux: format!("ethtool -L {n} combined {target}"),
        freebsd: Some(
            "sysctl net.inet.rss.enabled=1 (kernel with options RSS), and the driver's queue tunables"
                .into(),
        ),
    })
}
