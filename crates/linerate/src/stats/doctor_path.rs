//! The doctor's rules about interfaces and the path: MTU mismatches (local interface against
//! the probed path MTU, and one end's interface against the other's) and offloads that are
//! off. Pure; see `stats::doctor` for the report they fill.

use linerate_proto::{Environment, Fact, InterfaceEnvironment};

use crate::plan::pmtu::PMTU_MAX;
use crate::stats::doctor::{Recommendation, RemoteFacts, test_interface};

/// Rules that need the path: MTU against the path MTU and against the other end.
pub fn path_rules(local: &Environment, remote: &RemoteFacts) -> Vec<Recommendation> {
    let mut out = Vec::new();
    let local_if = test_interface(local);
    let local_mtu = local_if.and_then(|i| i.mtu_bytes.value().copied());
    if let (Some(i), Some(mtu), Some(path)) =
        (local_if, local_mtu, remote.path_mtu_bytes.value().copied())
        && path < mtu
        && path < PMTU_MAX
    {
        out.push(Recommendation {
            id: "mtu-mismatch",
            host: "local",
            reason: format!(
                "{} has MTU {mtu} but the path to {} carries at most {path}-byte packets: bigger packets are dropped (TCP stalls until PMTU discovery, UDP datagrams above {path} vanish); set the MTU to {path} here or raise the smaller MTU along the path",
                i.name, remote.server
            ),
            linux: format!("ip link set dev {} mtu {path}", i.name),
            freebsd: Some(format!("ifconfig {} mtu {path}", i.name)),
        });
    }
    let remote_if = match &remote.environment {
        Fact::Value(e) => test_interface(e),
        Fact::NA(_) => None,
    };
    let remote_mtu = remote_if.and_then(|i| i.mtu_bytes.value().copied());
    if let (Some(l), Some(r), Some(ri)) = (local_mtu, remote_mtu, remote_if)
        && l != r
        && local_if.is_some_and(|i| i.name != "lo")
        && ri.name != "lo"
    {
        let (low, high) = (l.min(r), l.max(r));
        out.push(Recommendation {
            id: "mtu-ends-differ",
            host: if l < r { "local" } else { "remote" },
            reason: format!(
                "the ends' interfaces differ: local {} MTU {l}, remote {} MTU {r}; packets above {low} cannot be received whole by one end, so use one MTU end to end",
                local_if.map_or("?", |i| i.name.as_str()),
                ri.name
            ),
            linux: format!(
                "ip link set dev {} mtu {high}   # if the path carries it; else lower the other end to {low}",
                if l < r { local_if.map_or("IFACE", |i| i.name.as_str()) } else { ri.name.as_str() }
            ),
            freebsd: Some(format!("ifconfig IFACE mtu {high}")),
        });
    }
    out
}

/// Offloads that cost throughput when off on a real interface.
pub fn offload_rules(host: &'static str, i: &InterfaceEnvironment) -> Vec<Recommendation> {
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
    let n = &i.name;
    Some(Recommendation {
        id: "single-rx-queue",
        host,
        reason: format!(
            "{n} ({driver}) has 1 receive queue on a host with {cpus} CPUs: all receive processing runs on one CPU, which caps parallel streams at one core's worth (more queues need NIC or hypervisor support: multiqueue virtio, SR-IOV)"
        ),
        linux: format!("ethtool -L {n} combined {cpus}"),
        freebsd: Some(
            "sysctl net.inet.rss.enabled=1 (kernel with options RSS), and the driver's queue tunables"
                .into(),
        ),
    })
}
