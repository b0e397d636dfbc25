//! The environment one end ran in: kernel, CPU, virtualisation, socket-buffer sysctls and the
//! network interfaces that carried the test. Recorded with every run (in
//! [`crate::SideResults::environment`]) and answered to `linerate doctor`, because results
//! without their configuration cannot be compared: half of every hand-written benchmark
//! report is "which MTU, which buffers, which offloads".
//!
//! Every fact is a [`Fact`]: a value, or "n/a" with the reason it is missing (no permission,
//! not Linux, a virtual interface without a link speed). Nothing here reads the host; the
//! application's `measure::host` fills these in, and `stats` diffs and judges them.
//! Unknown keys are ignored on decode and every field defaults, so records from older and
//! newer versions still parse.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A value, or why there is none. JSON: `{"value": X}` or `{"n_a": "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fact<T> {
    /// The measured value.
    Value(T),
    /// Not available, and why.
    NA(String),
}

impl<T> Default for Fact<T> {
    fn default() -> Self {
        Fact::NA("not recorded".into())
    }
}

impl<T> Fact<T> {
    /// A missing fact with this reason.
    pub fn na(reason: impl Into<String>) -> Self {
        Fact::NA(reason.into())
    }

    /// From an option, with the reason used when it is None.
    pub fn from_option(v: Option<T>, reason: impl FnOnce() -> String) -> Self {
        match v {
            Some(v) => Fact::Value(v),
            None => Fact::NA(reason()),
        }
    }

    /// The value, if there is one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Fact::Value(v) => Some(v),
            Fact::NA(_) => None,
        }
    }
}

impl<T: std::fmt::Display> Fact<T> {
    /// The value as text, or `n/a (reason)`.
    pub fn display(&self) -> String {
        match self {
            Fact::Value(v) => v.to_string(),
            Fact::NA(r) => format!("n/a ({r})"),
        }
    }
}

/// The CPU as the OS describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuEnvironment {
    /// Online CPUs (hardware threads).
    pub count: Fact<u32>,
    /// Model name (`/proc/cpuinfo` `model name`, or implementer/part on ARM).
    pub model: Fact<String>,
    /// Current clock of CPU 0, Hz (cpufreq, else `/proc/cpuinfo` MHz).
    pub frequency_hz: Fact<u64>,
    /// The cpufreq scaling governor of CPU 0, e.g. `performance`, `powersave`.
    pub governor: Fact<String>,
}

/// One network interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct InterfaceEnvironment {
    /// Name, e.g. `eth0`, `lo`.
    pub name: String,
    /// Why it was recorded: `test` (it carries the test's control connection) or `up`.
    pub role: String,
    /// IP MTU, bytes.
    pub mtu_bytes: Fact<u32>,
    /// Negotiated link speed, megabits per second (10^6 bit/s).
    pub speed_mbit_per_second: Fact<u64>,
    /// `full` or `half`.
    pub duplex: Fact<String>,
    /// Kernel driver, e.g. `virtio_net`, `veth`, `mlx5_core`.
    pub driver: Fact<String>,
    /// Offloads by name (`tso`, `gso`, `gro`, `lro`, `rx_checksum`, `tx_checksum`): on/off.
    pub offloads: BTreeMap<String, Fact<bool>>,
    /// Receive queues.
    pub rx_queues: Fact<u32>,
    /// Transmit queues.
    pub tx_queues: Fact<u32>,
    /// The most receive queues the driver can be set to (ETHTOOL_GCHANNELS: the larger of
    /// max rx and max combined channels).
    pub max_rx_queues: Fact<u32>,
}

/// What one end ran in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Environment {
    /// Operating system and distribution, e.g. `Linux (Debian GNU/Linux 13 (trixie))`.
    pub os: Fact<String>,
    /// Kernel release, e.g. `6.18.44`.
    pub kernel: Fact<String>,
    /// Host name.
    pub hostname: Fact<String>,
    /// CPU facts.
    pub cpu: CpuEnvironment,
    /// `none`, a hypervisor (`kvm`, `vmware`, ...) or a container (`container (docker)`).
    pub virtualization: Fact<String>,
    /// Socket and TCP sysctls by name (`net.core.rmem_max`, ...), as the kernel prints them
    /// (tabs and runs of spaces folded to one space).
    pub sysctls: BTreeMap<String, Fact<String>>,
    /// The interfaces recorded (see `InterfaceEnvironment::role`).
    pub interfaces: Vec<InterfaceEnvironment>,
    /// The node this end ran on, as its operator named it (`linerate server --node-name`;
    /// the Kubernetes DaemonSet passes the node's name): in a pod, `hostname` is the pod's.
    /// Absent when not given, and from older servers, which never send it (and older clients
    /// ignore it: unknown keys are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The zone (failure domain, rack, site) this end ran in, as its operator named it
    /// (`linerate server --zone`); absent when not given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The network this end served on, as its operator named it (`linerate server
    /// --network`, e.g. `pod` or `host` on Kubernetes): a mesh over agents of several
    /// networks on the same nodes tests each network's pairs and sets them side by side.
    /// Absent when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// How long this server had been serving, in whole seconds, when it answered a doctor's
    /// greeting: a requester waiting for agents (`linerate fleet|mesh --wait-agents`) waits
    /// longer for more of them while the ones it hears are young (a rollout under way).
    /// Absent from test results and from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_s: Option<u64>,
}

impl Environment {
    /// One sysctl's value, if recorded and readable.
    pub fn sysctl(&self, name: &str) -> Option<&str> {
        self.sysctls.get(name).and_then(Fact::value).map(String::as_str)
    }

    /// An environment where nothing could be read, for a peer that does not report one.
    pub fn unavailable(reason: &str) -> Self {
        Self {
            os: Fact::na(reason),
            kernel: Fact::na(reason),
            hostname: Fact::na(reason),
            cpu: CpuEnvironment {
                count: Fact::na(reason),
                model: Fact::na(reason),
                frequency_hz: Fact::na(reason),
                governor: Fact::na(reason),
            },
            virtualization: Fact::na(reason),
            sysctls: BTreeMap::new(),
            interfaces: Vec::new(),
            node: None,
            zone: None,
            network: None,
            serving_s: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fact_json_shapes() {
        let v: Fact<u64> = Fact::Value(9000);
        assert_eq!(serde_json::to_string(&v).expect("ser"), r#"{"value":9000}"#);
        let n: Fact<u64> = Fact::na("no permission");
        assert_eq!(serde_json::to_string(&n).expect("ser"), r#"{"n_a":"no permission"}"#);
        assert_eq!(n.display(), "n/a (no permission)");
        assert_eq!(v.display(), "9000");
    }

    #[test]
    fn partial_and_future_documents_parse() {
        let e: Environment =
            serde_json::from_str(r#"{"kernel":{"value":"6.1"},"future_key":1}"#).expect("parses");
        assert_eq!(e.kernel, Fact::Value("6.1".to_string()));
        assert_eq!(e.hostname, Fact::na("not recorded"));
        assert!(e.interfaces.is_empty());
        assert_eq!((e.node, e.zone, e.network), (None, None, None));
    }

    #[test]
    fn node_and_zone_are_sent_only_when_named() {
        // An environment without them encodes as older ones did, so older peers see no change.
        let plain = serde_json::to_value(Environment::default()).expect("ser");
        for key in ["node", "zone", "network", "serving_s"] {
            assert!(plain.get(key).is_none(), "{key}: {plain}");
        }
        let placed = Environment {
            node: Some("node-a".into()),
            zone: Some("zone-b".into()),
            network: Some("pod".into()),
            ..Environment::default()
        };
        let text = serde_json::to_string(&placed).expect("ser");
        let back: Environment = serde_json::from_str(&text).expect("parses");
        assert_eq!((back.node.as_deref(), back.zone.as_deref()), (Some("node-a"), Some("zone-b")));
        assert_eq!(back.network.as_deref(), Some("pod"));
    }
}
