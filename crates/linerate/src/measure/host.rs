//! The environment snapshot: what kernel, CPU, virtualisation, socket sysctls and network
//! interfaces a test ran on ([`linerate_proto::Environment`]).
//!
//! Taken once per test before traffic starts (never on the hot path: it reads a few dozen
//! small files and makes a few ioctls, a millisecond or two). A run records only the
//! interface that carries its control connection (`lo` on loopback): that is the one whose
//! MTU and offloads shape the test, and keeping records small keeps `compare` readable.
//! `linerate doctor` records every interface that is up as well.
//!
//! The parsers here are pure functions over the kernel's text, tested against recorded
//! fixtures (several distributions, x86 and ARM). The readers live in `linux` (files under
//! /proc and /sys, and SIOCETHTOOL / SIOCGIFMTU ioctls — never another program's output).
//! On other systems every fact is "n/a: not Linux".

use std::collections::BTreeMap;
use std::net::IpAddr;

use linerate_proto::{Environment, Fact};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(test)]
mod tests;

/// The socket and TCP sysctls recorded, in this order.
pub const SYSCTLS: [&str; 8] = [
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
    "net.core.default_qdisc",
];

/// The offloads recorded per interface, by the names used in records.
pub const OFFLOADS: [&str; 6] = ["tso", "gso", "gro", "lro", "rx_checksum", "tx_checksum"];

/// Which interfaces to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only the interface holding this local address (the test's control connection).
    Test(Option<IpAddr>),
    /// That interface (if any) and every interface that is up (`linerate doctor`).
    AllUp(Option<IpAddr>),
}

/// This host's environment now.
pub fn snapshot(scope: Scope) -> Environment {
    #[cfg(target_os = "linux")]
    {
        linux::snapshot(scope)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = scope;
        Environment::unavailable(&format!(
            "not Linux ({}): this linerate reads the environment on Linux only",
            std::env::consts::OS
        ))
    }
}

/// This host's CPU model and kernel release, read without the rest of the snapshot (the
/// loopback placement's calibration is keyed by them, `plan/placement.rs`); None for what
/// cannot be read.
pub fn cpu_model_and_kernel() -> (Option<String>, Option<String>) {
    #[cfg(target_os = "linux")]
    {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok();
        let kernel = match linux::uname_release() {
            Fact::Value(k) => Some(k),
            _ => None,
        };
        (cpuinfo.as_deref().and_then(parse_cpu_model), kernel)
    }
    #[cfg(not(target_os = "linux"))]
    {
        (None, None)
    }
}

/// A sysctl value as the kernel prints it, with tabs and runs of spaces folded to one space
/// (`4096\t131072\t6291456\n` -> `4096 131072 6291456`).
pub fn fold_sysctl(text: &str) -> String {
    text.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `/proc/sys/...` path of a dotted sysctl name.
pub fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

/// `PRETTY_NAME` from `/etc/os-release` (quotes removed).
pub fn parse_os_release(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|v| !v.is_empty())
}

/// The number of CPUs in a sysfs CPU list such as `0-3,8-11` or `0`.
pub fn parse_cpu_list(text: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let v = part.parse::<u32>().ok()?;
                (v, v)
            }
        };
        n = n.checked_add(hi.checked_sub(lo)? + 1)?;
    }
    (n > 0).then_some(n)
}

/// The CPU model from `/proc/cpuinfo`: `model name` (x86, some ARM), else the ARM
/// implementer and part numbers named where known (arm64 kernels print no model name).
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string()).filter(|v| !v.is_empty())
        })
    };
    if let Some(m) = field("model name") {
        return Some(m);
    }
    let implementer = field("CPU implementer")?;
    let part = field("CPU part").unwrap_or_default();
    Some(arm_cpu_name(&implementer, &part))
}

/// A readable name for an ARM (implementer, part) pair, keeping the numbers when unknown.
fn arm_cpu_name(implementer: &str, part: &str) -> String {
    let known = match (implementer, part) {
        ("0x41", "0xd03") => Some("ARM Cortex-A53"),
        ("0x41", "0xd08") => Some("ARM Cortex-A72"),
        ("0x41", "0xd0b") => Some("ARM Cortex-A76"),
        ("0x41", "0xd0c") => Some("ARM Neoverse-N1"),
        ("0x41", "0xd40") => Some("ARM Neoverse-V1"),
        ("0x41", "0xd49") => Some("ARM Neoverse-N2"),
        ("0x41", "0xd4f") => Some("ARM Neoverse-V2"),
        ("0xc0", "0xac3") => Some("Ampere AmpereOne"),
        _ => None,
    };
    match known {
        Some(name) => name.to_string(),
        None => format!("ARM implementer {implementer} part {part}"),
    }
}

/// Whether `/proc/cpuinfo` lists the `hypervisor` CPU flag (x86 guests).
pub fn cpuinfo_has_hypervisor_flag(cpuinfo: &str) -> bool {
    cpuinfo.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim() == "flags" && v.split_ascii_whitespace().any(|f| f == "hypervisor")
        })
    })
}

/// What the host reveals about virtualisation, as read by the Linux reader.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VirtEvidence {
    /// `/sys/class/dmi/id/sys_vendor`.
    pub dmi_vendor: Option<String>,
    /// `/sys/class/dmi/id/product_name`.
    pub dmi_product: Option<String>,
    /// The `hypervisor` CPU flag.
    pub hypervisor_flag: bool,
    /// A container runtime's marker: `docker` (/.dockerenv), `podman` (/run/.containerenv)
    /// or what /run/systemd/container says.
    pub container: Option<String>,
}

/// `none`, a hypervisor's name, `vm (...)` when only the CPU flag tells, and
/// `; container (NAME)` appended inside a container.
pub fn detect_virtualization(e: &VirtEvidence) -> String {
    let dmi = format!(
        "{} {}",
        e.dmi_vendor.as_deref().unwrap_or(""),
        e.dmi_product.as_deref().unwrap_or("")
    )
    .to_ascii_lowercase();
    const HYPERVISORS: [(&str, &str); 9] = [
        ("vmware", "vmware"),
        ("virtualbox", "virtualbox"),
        ("qemu", "qemu"),
        ("kvm", "kvm"),
        ("microsoft corporation virtual", "hyper-v"),
        ("xen", "xen"),
        ("amazon ec2", "amazon ec2"),
        ("google compute engine", "google compute engine"),
        ("firecracker", "firecracker"),
    ];
    let vm = HYPERVISORS.iter().find(|(needle, _)| dmi.contains(needle)).map(|(_, n)| *n);
    let mut out = match (vm, e.hypervisor_flag) {
        (Some(name), _) => name.to_string(),
        (None, true) => "vm (CPU hypervisor flag; no DMI vendor)".to_string(),
        (None, false) => "none".to_string(),
    };
    if let Some(c) = &e.container {
        out = if out == "none" {
            format!("container ({c})")
        } else {
            format!("{out}; container ({c})")
        };
    }
    out
}

/// A link speed from ETHTOOL_GSET's `speed | speed_hi << 16`, Mbit/s; None for the kernel's
/// "unknown" values (0, 0xffff, 0xffffffff: link down or a virtual device).
pub fn link_speed_mbit(raw: u32) -> Option<u64> {
    (!matches!(raw, 0 | 0xffff | u32::MAX)).then_some(u64::from(raw))
}

/// ETHTOOL_GSET's duplex byte.
pub fn duplex_name(raw: u8) -> Option<&'static str> {
    match raw {
        0 => Some("half"),
        1 => Some("full"),
        _ => None,
    }
}

/// The number of `rx-N` (or `tx-N`) entries in a sysfs `queues` directory listing.
pub fn count_queues<'a>(names: impl IntoIterator<Item = &'a str>, prefix: &str) -> u32 {
    names
        .into_iter()
        .filter(|n| n.strip_prefix(prefix).is_some_and(|i| i.parse::<u32>().is_ok()))
        .count() as u32
}

/// The sysctls as facts from a reader returning the text or why it could not.
pub fn read_sysctls(
    read: impl Fn(&str) -> Result<String, String>,
) -> BTreeMap<String, Fact<String>> {
    SYSCTLS
        .iter()
        .map(|name| {
            let fact = match read(name) {
                Ok(text) => Fact::Value(fold_sysctl(&text)),
                Err(why) => Fact::NA(why),
            };
            (name.to_string(), fact)
        })
        .collect()
}

/// Why a file could not be read, in words (`no permission`, `not present on this kernel`).
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "no permission".into(),
        std::io::ErrorKind::NotFound => {
            "not present on this kernel or in this network namespace".into()
        }
        _ => e.to_string(),
    }
}
