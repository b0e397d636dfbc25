//! Shaped-link tests in network namespaces this test creates and removes: two namespaces
//! joined by a veth pair, each end shaped with `tc tbf`. Traffic stays inside them.
//!
//! Needs root and iproute2. CI runs as root and must run these: without root they fail there
//! with a clear message; elsewhere they are skipped with a note.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::{Output, bin};

/// Two namespaces with a shaped veth link; removed on drop.
pub struct ShapedLink {
    pub a: String,
    pub b: String,
    pub addr_b: String,
    /// The veth end in namespace `a` (its qdisc shapes a -> b).
    dev_a: String,
    /// The veth end in namespace `b` (its qdisc shapes b -> a).
    dev_b: String,
}

pub(crate) fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip (install iproute2)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn tc(args: &[&str]) {
    let out = Command::new("tc").args(args).output().expect("run tc (install iproute2)");
    assert!(out.status.success(), "tc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl ShapedLink {
    /// Namespaces `lr<pid><tag>a/b`, link 10.203.<n>.1 <-> .2, tbf at `rate` on both ends.
    pub fn new(tag: &str, rate: &str) -> ShapedLink {
        let link = Self::unshaped(tag);
        for side_a in [true, false] {
            // burst >= 128 KiB keeps tbf at its theoretical rate (research: perf-baseline.md).
            link.shape(side_a, Some([rate, "256kb", "20ms"]));
        }
        link
    }

    /// The namespaces and link of [`ShapedLink::new`], no qdisc on either end yet.
    pub fn unshaped(tag: &str) -> ShapedLink {
        let id = format!("lr{}{tag}", std::process::id() % 100_000);
        let (a, b) = (format!("{id}a"), format!("{id}b"));
        let (va, vb) = (format!("{id}x"), format!("{id}y"));
        let net = 1 + (std::process::id() % 200) as u8;
        let link = ShapedLink {
            a: a.clone(),
            b: b.clone(),
            addr_b: format!("10.203.{net}.2"),
            dev_a: va.clone(),
            dev_b: vb.clone(),
        };
        ip(&["netns", "add", &a]);
        ip(&["netns", "add", &b]);
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
        ip(&["link", "set", &va, "netns", &a]);
        ip(&["link", "set", &vb, "netns", &b]);
        for (ns, dev, host) in [(&a, &va, 1), (&b, &vb, 2)] {
            ip(&["-n", ns, "addr", "add", &format!("10.203.{net}.{host}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        link
    }

    /// Shapes what leaves `a` (`side_a`) or `b` with tbf at [rate, burst, latency], or
    /// removes the shaping (None).
    pub fn shape(&self, side_a: bool, tbf: Option<[&str; 3]>) {
        let (ns, dev) = if side_a { (&self.a, &self.dev_a) } else { (&self.b, &self.dev_b) };
        match tbf {
            Some([rate, burst, latency]) => tc(&[
                "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst",
                burst, "latency", latency,
            ]),
            None => {
                // Deleting a qdisc that is not there fails; that is fine here.
                let _ = Command::new("tc")
                    .args(["-n", ns, "qdisc", "del", "dev", dev, "root"])
                    .output();
            }
        }
    }

    pub(crate) fn spawn_in(&self, ns: &str, args: &[&str]) -> Child {
        spawn_in(ns, args)
    }

    fn run_in(&self, ns: &str, args: &[&str]) -> Output {
        run_in(ns, args)
    }
}

/// `linerate ARGS` started inside namespace `ns` (history under the tests' data home).
pub(crate) fn spawn_in(ns: &str, args: &[&str]) -> Child {
    Command::new("ip")
        .env("XDG_DATA_HOME", crate::util::data_home())
        .args(["netns", "exec", ns, bin()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ip netns exec")
}

/// `linerate ARGS` run to its end inside namespace `ns`.
pub(crate) fn run_in(ns: &str, args: &[&str]) -> Output {
    let start = std::time::Instant::now();
    let child = spawn_in(ns, args);
    let out = child.wait_with_output().expect("wait");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

impl ShapedLink {
    /// Sets `a`'s end of the link down (or up): the peer vanishes without FIN or RST.
    pub fn set_a(&self, up: bool) {
        ip(&["-n", &self.a, "link", "set", &self.dev_a, if up { "up" } else { "down" }]);
    }

    /// Packets the tbf qdisc on `a`'s end has passed on and dropped so far. "Sent … pkt"
    /// counts segments; "dropped" counts queue entries, and one GSO entry can hold many.
    fn qdisc_counts_a(&self) -> (u64, u64) {
        let out = Command::new("tc")
            .args(["-s", "-n", &self.a, "qdisc", "show", "dev", &self.dev_a])
            .output()
            .expect("tc -s");
        let text = String::from_utf8_lossy(&out.stdout);
        let number_after = |key: &str| -> u64 {
            let after = text.split(key).nth(1).unwrap_or_else(|| panic!("no {key:?} in {text}"));
            let digits = after.trim_start().split(|c: char| !c.is_ascii_digit()).next();
            digits.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{key:?} in {text}"))
        };
        let sent = text
            .split(" pkt")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no packet count in {text}"));
        (sent, number_after("dropped "))
    }
}

impl Drop for ShapedLink {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// client -- router -- server in three namespaces this test creates (removed on drop), on
/// 10.221.N.0/24 and 10.222.N.0/24, with each side's MTU: a forwarded hop, so the router's
/// queue is one no sender's socket accounting (TCP small queues) can see.
pub(crate) struct Routed {
    pub ns: crate::environment::Namespaces,
    pub server_ip: String,
    pub client_dev: String,
    /// The router's device toward the server: a qdisc there queues client -> server traffic.
    pub router_dev: String,
}

impl Routed {
    pub(crate) fn new(tag: &str, [mtu_c, mtu_s]: [&str; 2]) -> Routed {
        let ns = crate::environment::Namespaces::new(tag, &["c", "r", "s"]);
        let (c, r, s) = (&ns.0[0], &ns.0[1], &ns.0[2]);
        let n = 1 + (std::process::id() % 200);
        let (a, b) = (format!("10.221.{n}"), format!("10.222.{n}"));
        let devs = [format!("{c}0"), format!("{r}0"), format!("{r}1"), format!("{s}0")];
        ip(&["link", "add", &devs[0], "type", "veth", "peer", "name", &devs[1]]);
        ip(&["link", "add", &devs[2], "type", "veth", "peer", "name", &devs[3]]);
        let plan = [
            (c, &devs[0], format!("{a}.1/24"), mtu_c),
            (r, &devs[1], format!("{a}.2/24"), mtu_c),
            (r, &devs[2], format!("{b}.1/24"), mtu_s),
            (s, &devs[3], format!("{b}.2/24"), mtu_s),
        ];
        for (netns, dev, addr, mtu) in &plan {
            ip(&["link", "set", dev, "netns", netns]);
            ip(&["-n", netns, "addr", "add", addr, "dev", dev]);
            ip(&["-n", netns, "link", "set", dev, "mtu", mtu, "up"]);
        }
        ip(&["-n", c, "route", "add", "default", "via", &format!("{a}.2")]);
        ip(&["-n", s, "route", "add", "default", "via", &format!("{b}.1")]);
        crate::environment::sysctl_in(r, "net.ipv4.ip_forward", "1");
        Routed {
            server_ip: format!("{b}.2"),
            client_dev: devs[0].clone(),
            router_dev: devs[2].clone(),
            ns,
        }
    }

    /// Replaces the router's qdisc toward the server with `tc` words after `root`.
    pub(crate) fn router_qdisc(&self, qdisc: &[&str]) {
        let head = ["-n", &self.ns.0[1], "qdisc", "replace", "dev", &self.router_dev, "root"];
        tc(&[&head[..], qdisc].concat());
    }
}

/// A child process killed when dropped, also while a failing test unwinds.
pub(crate) struct KillOnDrop(pub(crate) Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// True if this host can run namespace tests; in CI a missing capability is a failure.
pub(crate) fn namespaces_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success());
    if root && ip {
        return true;
    }
    let why = if root { "iproute2 (`ip`, `tc`) is not installed" } else { "they need root" };
    assert!(std::env::var_os("CI").is_none(), "network-namespace tests cannot run in CI: {why}");
    eprintln!("skipping network-namespace test: {why}");
    false
}

#[test]
fn shaped_link_is_measured_at_its_rate_and_called_path_bound() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let link = ShapedLink::new("s", "500mbit");
    let _server = KillOnDrop(link.spawn_in(&link.b, &["server", "-p", "5201", "-B", &link.addr_b]));
    std::thread::sleep(Duration::from_millis(400));
    for dir in [&[][..], &["-R"][..]] {
        let mut args = vec!["client", &link.addr_b, "-t", "3", "-i", "0", "-J"];
        args.extend_from_slice(dir);
        let out = link.run_in(&link.a, &args);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
        let got =
            doc["summary"]["directions"][0]["receiver"]["bits_per_second"].as_f64().expect("rate");
        // tbf counts the 14-byte Ethernet header: TCP payload is at most 1448/1514 of the rate.
        let theoretical = 500e6 * 1448.0 / 1514.0;
        // Never above the shaped rate; within 3 % of what TCP can carry through it (the
        // payload ceiling is already 4.4 % below the nominal rate, so a band around 500 Mbit/s
        // left only 0.6 % for a busy machine).
        assert!(got <= 500e6 * 1.01, "{dir:?}: {got} bit/s above the 500 Mbit/s shaper");
        assert!(got >= 0.97 * theoretical, "{dir:?}: {got} vs theoretical {theoretical}");
        // The shaper, unless other builds on a shared machine crowded the test's cores.
        crate::util::assert_verdict_or_busy_host(&doc, "path", &[], &format!("{dir:?}"));
        assert!(out.elapsed < Duration::from_secs(10));
        let warnings = doc["summary"]["warnings"].to_string();
        assert!(warnings.contains("same machine"), "namespaces share one kernel: {warnings}");
    }
}

fn n(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

#[test]
fn udp_loss_over_a_shaped_link_matches_the_qdisc_drops() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let link = ShapedLink::new("u", "200mbit");
    let _server = KillOnDrop(link.spawn_in(&link.b, &["server", "-p", "5201", "-B", &link.addr_b]));
    std::thread::sleep(Duration::from_millis(400));
    let (passed0, dropped0) = link.qdisc_counts_a();
    let args = ["client", &link.addr_b, "-u", "-b", "300M", "-t", "2", "-i", "0", "-J"];
    let out = link.run_in(&link.a, &args);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (passed1, dropped1) = link.qdisc_counts_a();
    let (passed, dropped) = (passed1 - passed0, dropped1 - dropped0);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let u = &doc["summary"]["udp"][0];
    assert_eq!(u["datagram_bytes"], 1472, "the default fits the veth's 1500-byte MTU");
    let (sent, received, lost) = (n(u, "sent"), n(u, "received"), n(u, "lost"));
    // 300 Mbit/s into a 200 Mbit/s shaper: about a third is dropped, all by the qdisc, so
    // what the qdisc let through is what arrived (plus a few control-connection packets) and
    // what it did not is linerate's loss.
    assert!(dropped > 100, "the shaper dropped {dropped} queue entries");
    let control = 200;
    assert!(
        passed >= received && passed - received <= control,
        "qdisc passed {passed} packets, linerate received {received} datagrams"
    );
    assert_eq!(lost, sent - received, "loss is settled from the sender's count");
    assert!(lost * 100 >= sent * 25, "about a third lost: {lost} of {sent}");
    assert_eq!(u["kernel_drops"], 0, "the receiver kept up: {u}");
    assert_eq!(
        doc["summary"]["verdicts"][0]["limit"], "path_loss",
        "{}",
        doc["summary"]["verdicts"]
    );
}

#[test]
fn find_max_lands_near_the_shaped_rate() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let link = ShapedLink::new("f", "200mbit");
    let _server = KillOnDrop(link.spawn_in(&link.b, &["server", "-p", "5201", "-B", &link.addr_b]));
    std::thread::sleep(Duration::from_millis(400));
    let args = ["client", &link.addr_b, "-u", "--find-max", "--trial", "1", "-i", "0", "-J"];
    let out = link.run_in(&link.a, &args);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let best = &doc["answer"]["best"];
    let got = best["received_bits_per_second"].as_f64().expect("an answer");
    // tbf counts Ethernet frames: 1472 bytes of UDP payload per 1514-byte frame.
    let shaped = 200e6 * 1472.0 / 1514.0;
    assert!((got / shaped - 1.0).abs() < 0.10, "found {got}, shaped goodput {shaped}");
    let trials = doc["answer"]["trials"].as_array().expect("trials");
    // The unpaced first trial delivered about the shaped rate, which bounds the search.
    assert!(trials.len() >= 3 && trials.len() <= 9, "{} trials", trials.len());
    assert_eq!(trials[0]["passed"], false, "the unpaced first trial overloads the shaper");
    assert!(out.elapsed < Duration::from_secs(60), "{:?}", out.elapsed);
}
