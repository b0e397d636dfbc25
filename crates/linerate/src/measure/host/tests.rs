//! Parser tests against recorded kernel text: sysctl values of several distributions,
//! /proc/cpuinfo from x86 and arm64, sysfs lists and ethtool's raw link values.

use super::*;

/// Recorded on the 2-vCPU test VM (Firecracker, kernel 6.18), trimmed.
const CPUINFO_X86: &str = "\
processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
cpu MHz\t\t: 2596.120
flags\t\t: fpu vme de pse tsc msr pae hypervisor lahf_lm cmp_legacy
processor\t: 1
model name\t: AMD EPYC
";

/// An AWS Graviton2 (arm64, kernel 5.15), trimmed: no model name, no MHz.
const CPUINFO_ARM64: &str = "\
processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x3
CPU part\t: 0xd0c
CPU revision\t: 1
";

/// A Raspberry Pi 3 in 32-bit mode prints a model name with its implementer.
const CPUINFO_ARMV7: &str = "\
processor\t: 0
model name\t: ARMv7 Processor rev 4 (v7l)
CPU implementer\t: 0x41
CPU part\t: 0xd03
";

/// `(distribution, net.core.rmem_max, net.ipv4.tcp_rmem)` exactly as /proc/sys prints them.
const SYSCTL_SETS: [(&str, &str, &str); 4] = [
    ("debian 12 default", "212992\n", "4096\t131072\t6291456\n"),
    ("centos 7 default", "212992\n", "4096\t87380\t6291456\n"),
    ("this test VM (tuned)", "4194304\n", "4096\t131072\t33554432\n"),
    ("fasterdata 100G tuning", "2147483647\n", "4096\t67108864\t2147483647\n"),
];

#[test]
fn sysctl_values_fold_whitespace() {
    let folded: Vec<(String, String)> =
        SYSCTL_SETS.iter().map(|(_, m, r)| (fold_sysctl(m), fold_sysctl(r))).collect();
    assert_eq!(folded[0], ("212992".into(), "4096 131072 6291456".into()));
    assert_eq!(folded[1].1, "4096 87380 6291456");
    assert_eq!(folded[2], ("4194304".into(), "4096 131072 33554432".into()));
    assert_eq!(folded[3].0, "2147483647");
    assert_eq!(fold_sysctl("cubic\n"), "cubic");
    assert_eq!(sysctl_path("net.ipv4.tcp_rmem"), "/proc/sys/net/ipv4/tcp_rmem");
}

#[test]
fn read_sysctls_keeps_reasons() {
    let m = read_sysctls(|name| match name {
        "net.core.rmem_max" => Ok("212992\n".into()),
        _ => Err("no permission".into()),
    });
    assert_eq!(m.len(), SYSCTLS.len());
    assert_eq!(m["net.core.rmem_max"], Fact::Value("212992".to_string()));
    assert_eq!(m["net.ipv4.tcp_rmem"], Fact::na("no permission"));
}

#[test]
fn cpu_models() {
    assert_eq!(parse_cpu_model(CPUINFO_X86).as_deref(), Some("AMD EPYC"));
    assert_eq!(parse_cpu_model(CPUINFO_ARM64).as_deref(), Some("ARM Neoverse-N1"));
    assert_eq!(parse_cpu_model(CPUINFO_ARMV7).as_deref(), Some("ARMv7 Processor rev 4 (v7l)"));
    let unknown = "CPU implementer\t: 0x61\nCPU part\t: 0x022\n";
    assert_eq!(parse_cpu_model(unknown).as_deref(), Some("ARM implementer 0x61 part 0x022"));
    assert_eq!(parse_cpu_model("processor : 0\n"), None);
}

#[test]
fn cpu_lists() {
    assert_eq!(parse_cpu_list("0-1\n"), Some(2));
    assert_eq!(parse_cpu_list("0\n"), Some(1));
    assert_eq!(parse_cpu_list("0-3,8-11"), Some(8));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("x"), None);
    assert_eq!(parse_cpu_list(""), None);
}

#[test]
fn os_release() {
    let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n";
    assert_eq!(parse_os_release(debian).as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
    let alpine = "NAME=\"Alpine Linux\"\nPRETTY_NAME='Alpine Linux v3.20'\n";
    assert_eq!(parse_os_release(alpine).as_deref(), Some("Alpine Linux v3.20"));
    assert_eq!(parse_os_release("NAME=x\n"), None);
}

#[test]
fn virtualization() {
    let this_vm = VirtEvidence {
        hypervisor_flag: cpuinfo_has_hypervisor_flag(CPUINFO_X86),
        container: Some("docker".into()),
        ..VirtEvidence::default()
    };
    assert_eq!(
        detect_virtualization(&this_vm),
        "vm (CPU hypervisor flag; no DMI vendor); container (docker)"
    );
    let vmware = VirtEvidence {
        dmi_vendor: Some("VMware, Inc.".into()),
        dmi_product: Some("VMware Virtual Platform".into()),
        hypervisor_flag: true,
        container: None,
    };
    assert_eq!(detect_virtualization(&vmware), "vmware");
    let kvm = VirtEvidence {
        dmi_vendor: Some("QEMU".into()),
        dmi_product: Some("Standard PC (Q35 + ICH9, 2009)".into()),
        ..VirtEvidence::default()
    };
    assert_eq!(detect_virtualization(&kvm), "qemu");
    assert!(!cpuinfo_has_hypervisor_flag(CPUINFO_ARM64));
    assert_eq!(detect_virtualization(&VirtEvidence::default()), "none");
    let lxc = VirtEvidence { container: Some("lxc".into()), ..VirtEvidence::default() };
    assert_eq!(detect_virtualization(&lxc), "container (lxc)");
}

#[test]
fn link_values() {
    assert_eq!(link_speed_mbit(10_000), Some(10_000));
    assert_eq!(link_speed_mbit(100_000), Some(100_000));
    assert_eq!(link_speed_mbit(u32::MAX), None, "SPEED_UNKNOWN");
    assert_eq!(link_speed_mbit(0xffff), None, "old SPEED_UNKNOWN in the low half");
    assert_eq!(link_speed_mbit(0), None);
    assert_eq!(duplex_name(1), Some("full"));
    assert_eq!(duplex_name(0), Some("half"));
    assert_eq!(duplex_name(0xff), None);
}

#[test]
fn queue_counts() {
    let listing = ["rx-0", "rx-1", "tx-0", "tx-1", "tx-2", "rx-x", "power"];
    assert_eq!(count_queues(listing, "rx-"), 2);
    assert_eq!(count_queues(listing, "tx-"), 3);
}

#[cfg(target_os = "linux")]
#[test]
fn snapshot_of_loopback_names_lo() {
    let env = snapshot(Scope::Test(Some("127.0.0.1".parse().expect("ip"))));
    assert!(env.kernel.value().is_some_and(|k| !k.is_empty()));
    assert!(env.cpu.count.value().is_some_and(|n| *n >= 1));
    assert!(env.sysctl("net.core.rmem_max").is_some_and(|v| v.parse::<u64>().is_ok()));
    let lo = env.interfaces.first().expect("lo recorded");
    assert_eq!((lo.name.as_str(), lo.role.as_str()), ("lo", "test"));
    assert_eq!(env.interfaces.len(), 1, "a test records only its own interface");
    assert!(lo.mtu_bytes.value().is_some_and(|m| *m >= 1280));
    assert!(lo.offloads.get("gso").and_then(Fact::value).is_some(), "{:?}", lo.offloads);
}
