//! Linux readers for the environment snapshot: files under /proc and /sys, `uname`,
//! `getifaddrs`, and the SIOCETHTOOL / SIOCGIFMTU ioctls (driver, link settings, offloads,
//! MTU). The ioctls are per network namespace, like /proc/sys/net, so a test inside a
//! namespace records that namespace's view; /sys/class/net belongs to whoever mounted /sys,
//! so queue counts are only trusted when sysfs's ifindex matches the namespace's.
//!
//! Nothing here interprets a value beyond decoding it; the pure parsers are in the parent.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use linerate_proto::{CpuEnvironment, Environment, Fact, InterfaceEnvironment};

use super::{
    OFFLOADS, Scope, VirtEvidence, count_queues, cpuinfo_has_hypervisor_flag,
    detect_virtualization, duplex_name, io_reason, link_speed_mbit, parse_cpu_list,
    parse_cpu_model, parse_os_release, read_sysctls, sysctl_path,
};
use crate::measure::procfs::{parse_cpufreq_khz, parse_cpuinfo_hz};

const ETHTOOL_GSET: u32 = 0x01;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GRXCSUM: u32 = 0x14;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
/// ETH_FLAG_LRO in ETHTOOL_GFLAGS.
const ETH_FLAG_LRO: u32 = 1 << 15;
/// sizeof(struct ethtool_cmd) and sizeof(struct ethtool_drvinfo).
const ETHTOOL_CMD_LEN: usize = 44;
const DRVINFO_LEN: usize = 196;

/// The whole snapshot.
pub fn snapshot(scope: Scope) -> Environment {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo");
    Environment {
        os: Fact::Value(os_name()),
        kernel: uname_release(),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        cpu: cpu(cpuinfo.as_deref().ok()),
        virtualization: Fact::Value(detect_virtualization(&virt_evidence(
            cpuinfo.as_deref().unwrap_or(""),
        ))),
        sysctls: read_sysctls(|name| {
            std::fs::read_to_string(sysctl_path(name)).map_err(|e| io_reason(&e))
        }),
        interfaces: interfaces(scope),
        // Names the operator gives, not facts of the host: a server stamps them
        // (`plan::server::Place`).
        node: None,
        zone: None,
        network: None,
        // A server's doctor answer says how long it has served (`session::native`).
        serving_s: None,
    }
}

fn read_trimmed(path: &str) -> Fact<String> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => Fact::Value(t.trim().to_string()),
        Ok(_) => Fact::na(format!("{path} is empty")),
        Err(e) => Fact::na(format!("{path}: {}", io_reason(&e))),
    }
}

fn os_name() -> String {
    let distro = ["/etc/os-release", "/usr/lib/os-release"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| parse_os_release(&t));
    match distro {
        Some(d) => format!("Linux ({d})"),
        None => "Linux".into(),
    }
}

pub(super) fn uname_release() -> Fact<String> {
    // SAFETY: utsname is plain data; uname fills it and NUL-terminates every field.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Fact::na(format!("uname failed: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel NUL-terminates `release` within its length.
    let release = unsafe { CStr::from_ptr(u.release.as_ptr()) };
    Fact::Value(release.to_string_lossy().into_owned())
}

fn cpu(cpuinfo: Option<&str>) -> CpuEnvironment {
    let no_cpuinfo = || "/proc/cpuinfo unreadable".to_string();
    let count = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| parse_cpu_list(&t));
    let cpufreq = "/sys/devices/system/cpu/cpu0/cpufreq";
    let freq = std::fs::read_to_string(format!("{cpufreq}/scaling_cur_freq"))
        .ok()
        .and_then(|t| parse_cpufreq_khz(&t))
        .or_else(|| cpuinfo.and_then(parse_cpuinfo_hz));
    let governor = std::fs::read_to_string(format!("{cpufreq}/scaling_governor"))
        .map(|t| t.trim().to_string())
        .map_err(|_| "no cpufreq driver (typical in virtual machines)".to_string());
    CpuEnvironment {
        count: Fact::from_option(count, || "/sys/devices/system/cpu/online unreadable".into()),
        model: Fact::from_option(cpuinfo.and_then(parse_cpu_model), no_cpuinfo),
        frequency_hz: Fact::from_option(freq, || {
            "neither cpufreq nor /proc/cpuinfo gives a clock".into()
        }),
        governor: match governor {
            Ok(g) => Fact::Value(g),
            Err(why) => Fact::NA(why),
        },
    }
}

fn virt_evidence(cpuinfo: &str) -> VirtEvidence {
    let read = |p: &str| {
        std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
    };
    let exists = |p: &str| std::path::Path::new(p).exists();
    let container = if exists("/.dockerenv") {
        Some("docker".to_string())
    } else if exists("/run/.containerenv") {
        Some("podman".to_string())
    } else {
        read("/run/systemd/container")
    };
    VirtEvidence {
        dmi_vendor: read("/sys/class/dmi/id/sys_vendor"),
        dmi_product: read("/sys/class/dmi/id/product_name"),
        hypervisor_flag: cpuinfo_has_hypervisor_flag(cpuinfo),
        container,
    }
}

/// Interface names with their addresses and whether they are up, from getifaddrs.
fn interface_table() -> BTreeMap<String, (bool, Vec<IpAddr>)> {
    let mut table: BTreeMap<String, (bool, Vec<IpAddr>)> = BTreeMap::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return table;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
        let entry = table.entry(name).or_insert((up, Vec::new()));
        entry.0 |= up;
        // SAFETY: ifa_addr is null or points to a sockaddr of the family it names.
        if let Some(ip) = unsafe { sockaddr_ip(ifa.ifa_addr) } {
            entry.1.push(ip);
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    table
}

/// # Safety
/// `sa` is null or points to a valid sockaddr whose family field is accurate.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: non-null and valid per the contract; the family selects the real type.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let a = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))))
            }
            libc::AF_INET6 => {
                let a = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

fn interfaces(scope: Scope) -> Vec<InterfaceEnvironment> {
    let table = interface_table();
    let (local, all) = match scope {
        Scope::Test(ip) => (ip, false),
        Scope::AllUp(ip) => (ip, true),
    };
    // A dual-stack server sees IPv4 clients as ::ffff:a.b.c.d; interfaces list a.b.c.d.
    let local = local.map(|ip| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    });
    let Ok(sock) = control_socket() else { return Vec::new() };
    let mut out = Vec::new();
    for (name, (up, addrs)) in &table {
        let carries_test = local.is_some_and(|ip| addrs.contains(&ip));
        if carries_test || (all && *up) {
            let role = if carries_test { "test" } else { "up" };
            out.push(interface(&sock, name, role));
        }
    }
    out.sort_by_key(|i| i.role != "test");
    out
}

fn control_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn interface(sock: &OwnedFd, name: &str, role: &str) -> InterfaceEnvironment {
    let (speed, duplex) = link_settings(sock, name);
    let (rx_queues, tx_queues) = queues(name);
    InterfaceEnvironment {
        name: name.to_string(),
        role: role.to_string(),
        mtu_bytes: mtu(sock, name),
        speed_mbit_per_second: speed,
        duplex,
        driver: driver(sock, name),
        offloads: offloads(sock, name),
        rx_queues,
        tx_queues,
        max_rx_queues: max_rx_queues(sock, name),
    }
}

/// ETHTOOL_GCHANNELS: `struct ethtool_channels` is cmd and eight u32s, the maxima first
/// (rx, tx, other, combined).
fn max_rx_queues(sock: &OwnedFd, name: &str) -> Fact<u32> {
    let mut buf = command(ETHTOOL_GCHANNELS, 36);
    if let Err(why) = ethtool(sock, name, &mut buf) {
        return Fact::NA(why);
    }
    let word = |i: usize| u32::from_ne_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
    Fact::Value(word(4).max(word(16)))
}

/// An ifreq naming `name`, or None if the name does not fit.
fn ifreq(name: &str) -> Option<libc::ifreq> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return None;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Some(req)
}

fn mtu(sock: &OwnedFd, name: &str) -> Fact<u32> {
    let Some(mut req) = ifreq(name) else { return Fact::na("interface name too long") };
    // SAFETY: SIOCGIFMTU reads the name and writes ifru_mtu inside `req`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) };
    if rc != 0 {
        return Fact::na(format!("SIOCGIFMTU: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel filled the mtu member of the union.
    Fact::Value(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// Runs one SIOCETHTOOL command whose buffer starts with `cmd`; Err says why it failed.
fn ethtool(sock: &OwnedFd, name: &str, buf: &mut [u8]) -> Result<(), String> {
    let mut req = ifreq(name).ok_or("interface name too long")?;
    req.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // SAFETY: ifru_data points to `buf`, which is as large as the command's struct.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "the driver does not report it".into(),
        Some(libc::EPERM) => "no permission".into(),
        _ => format!("SIOCETHTOOL: {e}"),
    })
}

fn command(cmd: u32, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    buf[..4].copy_from_slice(&cmd.to_ne_bytes());
    buf
}

fn driver(sock: &OwnedFd, name: &str) -> Fact<String> {
    let mut buf = command(ETHTOOL_GDRVINFO, DRVINFO_LEN);
    if let Err(why) = ethtool(sock, name, &mut buf) {
        return Fact::NA(why);
    }
    let field = &buf[4..36];
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    let driver = String::from_utf8_lossy(&field[..end]).into_owned();
    if driver.is_empty() {
        return Fact::na("the interface has no driver (software device)");
    }
    Fact::Value(driver)
}

fn link_settings(sock: &OwnedFd, name: &str) -> (Fact<u64>, Fact<String>) {
    let mut buf = command(ETHTOOL_GSET, ETHTOOL_CMD_LEN);
    if let Err(why) = ethtool(sock, name, &mut buf) {
        let why = format!("no link settings: {why}");
        return (Fact::na(why.clone()), Fact::na(why));
    }
    let speed_lo = u16::from_ne_bytes([buf[12], buf[13]]);
    let speed_hi = u16::from_ne_bytes([buf[28], buf[29]]);
    let raw = u32::from(speed_lo) | u32::from(speed_hi) << 16;
    let speed = Fact::from_option(link_speed_mbit(raw), || {
        "speed unknown (link down or virtual device)".into()
    });
    let duplex = Fact::from_option(duplex_name(buf[14]).map(str::to_string), || {
        "duplex unknown (link down or virtual device)".into()
    });
    (speed, duplex)
}

fn ethtool_value(sock: &OwnedFd, name: &str, cmd: u32) -> Result<u32, String> {
    let mut buf = command(cmd, 8);
    ethtool(sock, name, &mut buf)?;
    Ok(u32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]))
}

fn offloads(sock: &OwnedFd, name: &str) -> BTreeMap<String, Fact<bool>> {
    let commands = [
        ETHTOOL_GTSO,
        ETHTOOL_GGSO,
        ETHTOOL_GGRO,
        ETHTOOL_GFLAGS,
        ETHTOOL_GRXCSUM,
        ETHTOOL_GTXCSUM,
    ];
    OFFLOADS
        .iter()
        .zip(commands)
        .map(|(key, cmd)| {
            let fact = match ethtool_value(sock, name, cmd) {
                Ok(v) if cmd == ETHTOOL_GFLAGS => Fact::Value(v & ETH_FLAG_LRO != 0),
                Ok(v) => Fact::Value(v != 0),
                Err(why) => Fact::NA(why),
            };
            (key.to_string(), fact)
        })
        .collect()
}

/// RX and TX queue counts from /sys/class/net/NAME/queues, if sysfs shows this namespace.
fn queues(name: &str) -> (Fact<u32>, Fact<u32>) {
    let dir = format!("/sys/class/net/{name}");
    let Ok(cname) = std::ffi::CString::new(name) else {
        return (Fact::na("bad interface name"), Fact::na("bad interface name"));
    };
    // SAFETY: `cname` is a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    let sysfs_index = std::fs::read_to_string(format!("{dir}/ifindex"))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    if sysfs_index != Some(ifindex) {
        let why = "sysfs shows another network namespace (remount /sys inside it)";
        return (Fact::na(why), Fact::na(why));
    }
    let names: Vec<String> = match std::fs::read_dir(format!("{dir}/queues")) {
        Ok(d) => d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into()).collect(),
        Err(e) => {
            let why = format!("{dir}/queues: {}", io_reason(&e));
            return (Fact::na(why.clone()), Fact::na(why));
        }
    };
    let count = |prefix| Fact::Value(count_queues(names.iter().map(String::as_str), prefix));
    (count("rx-"), count("tx-"))
}
