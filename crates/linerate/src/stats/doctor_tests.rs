//! The doctor's rules on fixture environments: a Debian default host, a tuned host, a
//! FreeBSD-style VM with offloads off, and paths with and without an MTU mismatch.

use super::*;
use linerate_proto::CpuEnvironment;

fn iface(name: &str, mtu: u32, offloads_on: bool) -> InterfaceEnvironment {
    InterfaceEnvironment {
        name: name.into(),
        role: "test".into(),
        mtu_bytes: Fact::Value(mtu),
        speed_mbit_per_second: Fact::Value(10_000),
        duplex: Fact::Value("full".into()),
        offloads: ["tso", "gso", "gro", "lro", "rx_checksum", "tx_checksum"]
            .iter()
            .map(|k| (k.to_string(), Fact::Value(offloads_on && *k != "lro")))
            .collect(),
        ..InterfaceEnvironment::default()
    }
}

/// A host with these sysctls (Debian 12 defaults unless given) and interface.
fn host(rmem_max: &str, tcp_rmem: &str, governor: &str, i: InterfaceEnvironment) -> Environment {
    let sysctls = [
        ("net.core.rmem_max", rmem_max),
        ("net.core.wmem_max", rmem_max),
        ("net.ipv4.tcp_rmem", tcp_rmem),
        ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
    ];
    Environment {
        cpu: CpuEnvironment { governor: Fact::Value(governor.into()), ..CpuEnvironment::default() },
        sysctls: sysctls.iter().map(|(k, v)| (k.to_string(), Fact::Value(v.to_string()))).collect(),
        interfaces: vec![i],
        ..Environment::default()
    }
}

fn debian() -> Environment {
    host("212992", "4096 131072 6291456", "performance", iface("eth0", 1500, true))
}

fn tuned() -> Environment {
    host("67108864", "4096 131072 67108864", "performance", iface("eth0", 9000, true))
}

fn remote(env: Environment, rtt_us: u32, path_mtu: Option<u32>) -> RemoteFacts {
    RemoteFacts {
        server: "10.0.0.2:5201".into(),
        software: Fact::Value("linerate 0.1.0".into()),
        environment: Fact::Value(env),
        rtt_us: Fact::Value(rtt_us),
        path_mtu_bytes: Fact::from_option(path_mtu, || "no echo".into()),
        searched_up_to_bytes: 9000,
    }
}

fn report(local: Environment, remote: Option<RemoteFacts>, link: Option<u64>) -> DoctorReport {
    diagnose(DoctorReport {
        link_bits_per_second: link_rate(link, &local).map(|(r, _)| r),
        link_source: None,
        local,
        remote,
        recommendations: vec![],
        notes: vec![],
    })
}

fn ids(r: &DoctorReport) -> Vec<(&'static str, &'static str)> {
    r.recommendations.iter().map(|x| (x.id, x.host)).collect()
}

#[test]
fn bdp_and_buffer_sizes() {
    assert_eq!(bdp_bytes(10_000_000_000, 2_000), 2_500_000, "10 Gbit/s x 2 ms = 2.5 MB");
    assert_eq!(recommended_buffer(2_500_000), 5 << 20);
    assert_eq!(recommended_buffer(1000), 4 << 20, "at least 4 MiB");
    assert_eq!(triple_max("4096 131072 6291456"), Some(6_291_456));
    assert_eq!(triple_max("4096"), None);
}

#[test]
fn default_buffers_are_too_small_for_10g_over_2ms() {
    let r = report(debian(), Some(remote(debian(), 2_000, Some(1500))), Some(10_000_000_000));
    let got = ids(&r);
    for id in ["rmem-max-below-bdp", "wmem-max-below-bdp"] {
        assert!(got.contains(&(id, "local")) && got.contains(&(id, "remote")), "{id}: {got:?}");
    }
    assert!(!got.iter().any(|(id, _)| id.starts_with("tcp-")), "4 and 6 MiB > 2.5 MB: {got:?}");
    let rmem = &r.recommendations[0];
    assert_eq!(rmem.id, "rmem-max-below-bdp");
    assert!(
        rmem.reason.contains("net.core.rmem_max 212992") && rmem.reason.contains("208 KiB"),
        "{}",
        rmem.reason
    );
    assert!(rmem.reason.contains("≥ 2441 KiB"), "{}", rmem.reason);
    assert_eq!(rmem.linux, "sysctl -w net.core.rmem_max=5242880");
    assert_eq!(rmem.freebsd.as_deref(), Some("sysctl kern.ipc.maxsockbuf=5242880"));
    let small = host("212992", "4096 87380 2097152", "performance", iface("eth0", 1500, true));
    let r = report(small, Some(remote(debian(), 2_000, Some(1500))), Some(10_000_000_000));
    let tcp = r.recommendations.iter().find(|x| x.id == "tcp-rmem-below-bdp").expect("tcp_rmem");
    assert_eq!(tcp.host, "local");
    assert_eq!(tcp.linux, "sysctl -w net.ipv4.tcp_rmem=\"4096 87380 5242880\"");
    assert_eq!(tcp.freebsd.as_deref(), Some("sysctl net.inet.tcp.recvbuf_max=5242880"));
}

#[test]
fn tuned_hosts_get_no_buffer_advice() {
    let r = report(tuned(), Some(remote(tuned(), 2_000, Some(9000))), Some(10_000_000_000));
    assert!(r.recommendations.iter().all(|x| !x.id.contains("mem")), "{:?}", ids(&r));
}

#[test]
fn without_rtt_or_rate_buffers_are_not_judged_and_the_note_says_why() {
    let r = report(debian(), None, Some(10_000_000_000));
    assert!(r.recommendations.is_empty(), "{:?}", ids(&r));
    assert!(r.notes[0].contains("no round trip"), "{:?}", r.notes);
    let mut lo_only = debian();
    lo_only.interfaces[0].speed_mbit_per_second = Fact::na("virtual");
    let r = report(lo_only, Some(remote(debian(), 100, None)), None);
    assert!(r.notes[0].contains("no link rate"), "{:?}", r.notes);
}

#[test]
fn link_rate_falls_back_to_the_interface() {
    assert_eq!(link_rate(None, &debian()), Some((10_000_000_000, "interface eth0".into())));
    assert_eq!(link_rate(Some(1), &debian()).map(|x| x.0), Some(1));
}

#[test]
fn path_mtu_below_the_interface_is_a_mismatch() {
    let r = report(tuned(), Some(remote(tuned(), 100, Some(1400))), None);
    let m = r.recommendations.iter().find(|x| x.id == "mtu-mismatch").expect("flagged");
    assert!(
        m.reason.contains("eth0 has MTU 9000") && m.reason.contains("at most 1400"),
        "{}",
        m.reason
    );
    assert_eq!(m.linux, "ip link set dev eth0 mtu 1400");
    assert_eq!(m.freebsd.as_deref(), Some("ifconfig eth0 mtu 1400"));
    let fine = report(tuned(), Some(remote(tuned(), 100, Some(9000))), None);
    assert!(!ids(&fine).iter().any(|(id, _)| id.starts_with("mtu")), "{:?}", ids(&fine));
}

#[test]
fn ends_with_different_mtus() {
    // The path carries only 1500: the 9000-byte remote end must come down.
    let r = report(debian(), Some(remote(tuned(), 100, Some(1500))), None);
    let got = ids(&r);
    assert_eq!(got, [("mtu-mismatch", "remote")]);
    assert_eq!(r.recommendations[0].linux, "ip link set dev eth0 mtu 1500");
    assert!(
        r.recommendations[0].reason.starts_with("remote eth0 has MTU 9000"),
        "{}",
        r.recommendations[0].reason
    );
    // The path carries 9000 (or could not be probed): raise the smaller end.
    for path in [Some(9000), None] {
        let r = report(debian(), Some(remote(tuned(), 100, path)), None);
        let m = r.recommendations.iter().find(|x| x.id == "mtu-ends-differ").expect("flagged");
        assert_eq!(
            (m.host, m.linux.as_str()),
            ("local", "ip link set dev eth0 mtu 9000"),
            "{path:?}"
        );
        assert!(m.reason.contains("local eth0 MTU 1500, remote eth0 MTU 9000"), "{}", m.reason);
    }
}

#[test]
fn offloads_off_and_powersave_are_flagged_with_freebsd_equivalents() {
    let vm = host("67108864", "4096 131072 67108864", "powersave", iface("vmx0", 1500, false));
    let r = report(vm, None, None);
    let got: Vec<&str> = r.recommendations.iter().map(|x| x.id).collect();
    assert_eq!(
        got,
        ["cpu-governor-powersave", "tso-off", "gso-off", "gro-off", "checksum-offload-off"]
    );
    let gro = &r.recommendations[3];
    assert_eq!(gro.linux, "ethtool -K vmx0 gro on");
    assert_eq!(gro.freebsd.as_deref(), Some("ifconfig vmx0 lro"));
    assert_eq!(r.recommendations[4].linux, "ethtool -K vmx0 rx on tx on");
    assert_eq!(r.recommendations[2].freebsd, None, "FreeBSD has no GSO switch");
    let lo = host("67108864", "4096 131072 67108864", "performance", iface("lo", 65536, false));
    assert!(report(lo, None, None).recommendations.is_empty(), "loopback offloads are not advice");
}

#[test]
fn one_receive_queue_on_a_multi_cpu_host_is_flagged_for_nics_only() {
    let mut nic = iface("eth0", 1500, true);
    nic.driver = Fact::Value("virtio_net".into());
    nic.rx_queues = Fact::Value(1);
    nic.max_rx_queues = Fact::Value(16);
    let mut e = host("67108864", "4096 131072 67108864", "performance", nic.clone());
    e.cpu.count = Fact::Value(8);
    let r = report(e.clone(), None, None);
    let q = r.recommendations.iter().find(|x| x.id == "single-rx-queue").expect("flagged");
    assert_eq!(q.linux, "ethtool -L eth0 combined 8");
    let want = "eth0 (virtio_net) uses 1 receive queue of the 16 it offers, on a host with 8 CPUs";
    assert!(q.reason.contains(want), "{}", q.reason);
    e.interfaces[0].max_rx_queues = Fact::Value(1);
    assert!(report(e.clone(), None, None).recommendations.is_empty(), "nothing more to offer");
    e.interfaces[0].max_rx_queues = Fact::Value(4);
    let r = report(e.clone(), None, None);
    assert_eq!(r.recommendations[0].linux, "ethtool -L eth0 combined 4", "as many as it offers");
    e.interfaces[0].driver = Fact::Value("veth".into());
    assert!(
        report(e.clone(), None, None).recommendations.is_empty(),
        "veth queues are not hardware"
    );
    e.interfaces[0].driver = Fact::Value("virtio_net".into());
    e.interfaces[0].rx_queues = Fact::Value(4);
    assert!(report(e.clone(), None, None).recommendations.is_empty());
    e.cpu.count = Fact::Value(1);
    e.interfaces[0].rx_queues = Fact::Value(1);
    assert!(report(e, None, None).recommendations.is_empty(), "one CPU: one queue is enough");
}
