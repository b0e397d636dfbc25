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
    let rule = |id, what: &str, feature: &str, bsd: &str| Recommendation {
        id,
        host,
        reason: format!(
            "{what} is off on {n}: every packet costs the CPU more work, which caps throughput per core"
        ),
        linux: format!("ethtool -K {n} {feature} on"),
        freebsd: Some(format!("ifconfig {n} {bsd}")),
    };
    if on("tso") == Some(false) {
        out.push(rule("tso-off", "TCP segmentation offload (TSO)", "tso", "tso4 tso6"));
    }
    if on("gso") == Some(false) {
        out.push(rule("gso-off", "generic segmentation offload (GSO)", "gso", "tso4 tso6"));
    }
    if on("gro") == Some(false) && on("lro") != Some(true) {
        out.push(rule("gro-off", "receive coalescing (GRO, and LRO)", "gro", "lro"));
    }
    if on("rx_checksum") == Some(false) || on("tx_checksum") == Some(false) {
        out.push(rule("checksum-offload-off", "checksum offload", "rx on tx", "rxcsum txcsum"));
    }
    out
}
