//! What changed between two runs' environments, end by end: "lo MTU 65536 → 9000,
//! net.core.rmem_max 212992 → 8388608". `linerate compare` prints it next to the
//! performance change, because a throughput change is only explained once the configuration
//! change behind it is visible.
//!
//! An environment is flattened into `(key, value)` pairs in a fixed order and the pairs are
//! diffed, so every fact is compared the same way. The CPU's current clock is left out (it
//! moves from moment to moment under any governor; the governor itself is compared).
//! Missing facts compare as `n/a`: a fact that became unreadable is a change, a reason that
//! changed wording is not. Pure: no I/O.

use serde::Serialize;

use linerate_proto::{Environment, Fact, InterfaceEnvironment};

use crate::record::End;

/// One changed fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvChange {
    /// What changed, e.g. `lo MTU`, `net.core.rmem_max`, `kernel`.
    pub key: String,
    /// In run A.
    pub before: String,
    /// In run B.
    pub after: String,
}

/// The changes of one end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndChanges {
    /// The end (printed and serialised as `client` or `server`).
    pub end: End,
    /// Changed facts, in a stable order (empty = the same).
    pub changes: Vec<EnvChange>,
    /// Why the ends could not be compared, e.g. one run has no environment record.
    pub not_compared: Option<String>,
}

fn shown<T: std::fmt::Display>(f: &Fact<T>) -> String {
    match f {
        Fact::Value(v) => v.to_string(),
        Fact::NA(_) => "n/a".into(),
    }
}

fn on_off(f: &Fact<bool>) -> String {
    match f {
        Fact::Value(true) => "on".into(),
        Fact::Value(false) => "off".into(),
        Fact::NA(_) => "n/a".into(),
    }
}

/// The comparable facts of an interface, keyed `NAME FACT`.
fn interface_pairs(i: &InterfaceEnvironment) -> Vec<(String, String)> {
    let n = &i.name;
    let mut v = vec![
        (format!("{n} MTU"), shown(&i.mtu_bytes)),
        (format!("{n} speed Mbit/s"), shown(&i.speed_mbit_per_second)),
        (format!("{n} duplex"), shown(&i.duplex)),
        (format!("{n} driver"), shown(&i.driver)),
        (format!("{n} RX queues"), shown(&i.rx_queues)),
        (format!("{n} TX queues"), shown(&i.tx_queues)),
        (format!("{n} max RX queues"), shown(&i.max_rx_queues)),
    ];
    for (name, fact) in &i.offloads {
        v.push((format!("{n} {}", name.to_uppercase().replace('_', "-")), on_off(fact)));
    }
    v
}

/// Every comparable fact of an environment as `(key, value)`, in a fixed order.
pub fn flatten(e: &Environment) -> Vec<(String, String)> {
    let mut v = vec![
        ("os".to_string(), shown(&e.os)),
        ("kernel".to_string(), shown(&e.kernel)),
        ("hostname".to_string(), shown(&e.hostname)),
        ("node".to_string(), e.node.clone().unwrap_or_else(|| "n/a".into())),
        ("zone".to_string(), e.zone.clone().unwrap_or_else(|| "n/a".into())),
        ("virtualization".to_string(), shown(&e.virtualization)),
        ("CPUs".to_string(), shown(&e.cpu.count)),
        ("CPU model".to_string(), shown(&e.cpu.model)),
        ("CPU governor".to_string(), shown(&e.cpu.governor)),
    ];
    v.extend(e.sysctls.iter().map(|(k, f)| (k.clone(), shown(f))));
    let test: Vec<&str> =
        e.interfaces.iter().filter(|i| i.role == "test").map(|i| i.name.as_str()).collect();
    v.push((
        "test interface".to_string(),
        if test.is_empty() { "n/a".into() } else { test.join(",") },
    ));
    for i in &e.interfaces {
        v.extend(interface_pairs(i));
    }
    v
}

/// What differs from `a` to `b`. A key only one side has is shown as `absent` on the other.
pub fn diff(a: &Environment, b: &Environment) -> Vec<EnvChange> {
    let (fa, fb) = (flatten(a), flatten(b));
    let lookup = |pairs: &[(String, String)], k: &str| {
        pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
    };
    let mut keys: Vec<&String> = fa.iter().map(|(k, _)| k).collect();
    keys.extend(fb.iter().map(|(k, _)| k).filter(|k| !fa.iter().any(|(ka, _)| ka == *k)));
    keys.into_iter()
        .filter_map(|k| {
            let before = lookup(&fa, k).unwrap_or_else(|| "absent".into());
            let after = lookup(&fb, k).unwrap_or_else(|| "absent".into());
            (before != after).then(|| EnvChange { key: k.clone(), before, after })
        })
        .collect()
}

/// Why an environment holds nothing at all (an iperf3 peer, another OS), if it does not.
fn blank(e: &Environment) -> Option<&str> {
    match &e.kernel {
        Fact::NA(why) if e.sysctls.is_empty() && e.interfaces.is_empty() => Some(why),
        _ => None,
    }
}

/// The changes of one end, given both runs' environments of that end (None = not recorded).
pub fn end_changes(end: End, a: Option<&Environment>, b: Option<&Environment>) -> EndChanges {
    let missing = |run: &str| {
        format!("run {run} has no {end} environment (stored before linerate recorded one)")
    };
    let (changes, not_compared) = match (a, b) {
        (Some(a), Some(b)) => match (blank(a), blank(b)) {
            (Some(why), _) => (Vec::new(), Some(format!("run A: {why}"))),
            (_, Some(why)) => (Vec::new(), Some(format!("run B: {why}"))),
            _ => (diff(a, b), None),
        },
        (None, _) => (Vec::new(), Some(missing("A"))),
        (_, None) => (Vec::new(), Some(missing("B"))),
    };
    EndChanges { end, changes, not_compared }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::CpuEnvironment;

    fn env(mtu: u32, rmem_max: &str, tso: bool) -> Environment {
        let lo = InterfaceEnvironment {
            name: "lo".into(),
            role: "test".into(),
            mtu_bytes: Fact::Value(mtu),
            speed_mbit_per_second: Fact::na("virtual device"),
            offloads: [("tso".to_string(), Fact::Value(tso))].into(),
            ..InterfaceEnvironment::default()
        };
        Environment {
            kernel: Fact::Value("6.18.44".into()),
            cpu: CpuEnvironment {
                count: Fact::Value(2),
                frequency_hz: Fact::Value(2_596_120_000),
                ..CpuEnvironment::default()
            },
            sysctls: [("net.core.rmem_max".to_string(), Fact::Value(rmem_max.to_string()))].into(),
            interfaces: vec![lo],
            ..Environment::default()
        }
    }

    #[test]
    fn same_environment_has_no_changes() {
        assert!(diff(&env(65536, "212992", true), &env(65536, "212992", true)).is_empty());
    }

    #[test]
    fn mtu_buffer_and_offload_changes_are_listed_in_order() {
        let d = diff(&env(65536, "212992", true), &env(9000, "8388608", false));
        let text: Vec<String> =
            d.iter().map(|c| format!("{} {} → {}", c.key, c.before, c.after)).collect();
        assert_eq!(
            text,
            ["net.core.rmem_max 212992 → 8388608", "lo MTU 65536 → 9000", "lo TSO on → off"]
        );
    }

    #[test]
    fn clock_and_na_reasons_are_not_changes_but_unreadable_is() {
        let a = env(1500, "212992", true);
        let mut b = a.clone();
        b.cpu.frequency_hz = Fact::Value(1_200_000_000);
        b.interfaces[0].speed_mbit_per_second = Fact::na("other words");
        assert!(diff(&a, &b).is_empty());
        b.sysctls.insert("net.core.rmem_max".into(), Fact::na("no permission"));
        assert_eq!(diff(&a, &b)[0].after, "n/a");
    }

    #[test]
    fn interfaces_present_on_one_side_only() {
        let a = env(1500, "212992", true);
        let mut b = a.clone();
        b.interfaces[0].name = "eth0".into();
        let d = diff(&a, &b);
        assert_eq!(
            d[0],
            EnvChange { key: "test interface".into(), before: "lo".into(), after: "eth0".into() }
        );
        assert!(d.iter().any(|c| c.key == "lo MTU" && c.after == "absent"));
        assert!(d.iter().any(|c| c.key == "eth0 MTU" && c.before == "absent"));
    }

    #[test]
    fn missing_records_are_named() {
        let e = env(1500, "1", true);
        let c = end_changes(End::Server, Some(&e), None);
        assert!(c.changes.is_empty());
        assert!(c.not_compared.as_deref().is_some_and(|w| w.contains("run B has no server")));
        assert_eq!(end_changes(End::Client, Some(&e), Some(&e)).not_compared, None);
        let iperf3 = Environment::unavailable("the peer is iperf3");
        let c = end_changes(End::Server, Some(&iperf3), Some(&iperf3));
        assert_eq!(c.not_compared.as_deref(), Some("run A: the peer is iperf3"));
    }
}
