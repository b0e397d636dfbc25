//! `linerate fleet` across 16 network namespaces on one Linux bridge, one `linerate server` in
//! each, and the coordinator in its own namespace whose link to the bridge is shaped with
//! `tbf` at 1 Gbit/s: the VMware paper's many-VMs-one-NIC design, in miniature. The
//! namespaces, links and servers are this test's own and are removed afterwards.
//!
//! Needs root and iproute2, like tests/netns.rs.

use std::process::Command;
use std::time::Duration;

use linerate::units::format_bits_per_second;
use serde_json::Value;

use crate::netns::{KillOnDrop, ip, namespaces_available, run_in, spawn_in};
use crate::util::{Server, run, test_dir};

/// The coordinator's link: what the fleet's total must come to.
const LINK: &str = "1gbit";
const LINK_BPS: f64 = 1e9;

/// A hub namespace with a bridge, a coordinator namespace and `n` host namespaces, each
/// joined to the bridge by a veth pair; a `linerate server` in every host. Removed on drop.
struct Fleet {
    prefix: String,
    hosts: Vec<String>,
    addrs: Vec<String>,
    servers: Vec<KillOnDrop>,
}

fn tc(args: &[&str]) {
    let out = Command::new("tc").args(args).output().expect("run tc (install iproute2)");
    assert!(out.status.success(), "tc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Fleet {
    fn new(n: usize) -> Fleet {
        let prefix = format!("lf{}", std::process::id() % 10_000);
        let net = format!("10.204.{}", 1 + std::process::id() % 200);
        let hub = format!("{prefix}hub");
        let mut fleet = Fleet {
            prefix: prefix.clone(),
            hosts: Vec::new(),
            addrs: Vec::new(),
            servers: Vec::new(),
        };
        ip(&["netns", "add", &hub]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        // Index 0 is the coordinator; 1..=n the hosts.
        for i in 0..=n {
            let ns = fleet.ns(i);
            let (inside, port) = (format!("{prefix}i{i}"), format!("{prefix}p{i}"));
            ip(&["netns", "add", &ns]);
            ip(&["link", "add", &inside, "type", "veth", "peer", "name", &port]);
            ip(&["link", "set", &inside, "netns", &ns]);
            ip(&["link", "set", &port, "netns", &hub]);
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"]);
            let addr = format!("{net}.{}", 10 + i);
            ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", &inside]);
            ip(&["-n", &ns, "link", "set", &inside, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            if i > 0 {
                fleet.hosts.push(ns);
                fleet.addrs.push(addr);
            }
        }
        // The coordinator's link, both ways: what it sends (its own end) and what the bridge
        // sends it (the hub's port toward it). burst >= 128 KiB keeps tbf at its rate.
        let tbf = |ns: &str, dev: &str, rate: &str| {
            tc(&[
                "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst",
                "256kb", "latency", "20ms",
            ]);
        };
        tbf(&fleet.ns(0), &format!("{prefix}i0"), LINK);
        tbf(&hub, &format!("{prefix}p0"), LINK);
        for (i, ns) in fleet.hosts.clone().iter().enumerate() {
            let server = spawn_in(ns, &["server", "-p", "5201", "-B", &fleet.addrs[i]]);
            fleet.servers.push(KillOnDrop(server));
        }
        std::thread::sleep(Duration::from_millis(500));
        fleet
    }

    fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    /// Shapes what host `i` (1-based) sends.
    fn shape_host(&self, i: usize, rate: &str) {
        let dev = format!("{}i{i}", self.prefix);
        tc(&[
            "-n",
            &self.ns(i),
            "qdisc",
            "replace",
            "dev",
            &dev,
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            "64kb",
            "latency",
            "20ms",
        ]);
    }

    /// `linerate fleet` over the first `k` hosts from the coordinator, as JSON.
    fn run(&self, k: usize, extra: &[&str]) -> (Option<i32>, Value, String) {
        let targets: Vec<String> =
            self.addrs[..k].iter().enumerate().map(|(i, a)| format!("{a}=vm{}", i + 1)).collect();
        let mut args: Vec<&str> = vec!["fleet"];
        args.extend(targets.iter().map(String::as_str));
        args.extend_from_slice(&["-J", "--no-store"]);
        args.extend_from_slice(extra);
        let out = run_in(&self.ns(0), &args);
        assert!(out.elapsed < Duration::from_secs(60), "bounded: {:?}", out.elapsed);
        let doc = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
        (out.code, doc, out.stderr)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.servers.clear();
        for i in 0..=self.hosts.len() {
            let _ = Command::new("ip").args(["netns", "del", &self.ns(i)]).status();
        }
        let _ = Command::new("ip").args(["netns", "del", &format!("{}hub", self.prefix)]).status();
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn sixteen_hosts_share_a_shaped_link_fairly_and_a_slow_one_is_named() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let fleet = Fleet::new(16);

    // 16 hosts × 5 flows to the hosts, through the coordinator's 1 Gbit/s link.
    let (code, doc, err) = fleet.run(16, &["-P", "5", "-t", "4"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(doc["kind"], "linerate.fleet");
    let s = &doc["summary"];
    assert_eq!((s["hosts_planned"].as_u64(), s["hosts_measured"].as_u64()), (Some(16), Some(16)));
    let d = &s["directions"][0];
    let total = f(&d["total_bits_per_second"]);
    // tbf counts the Ethernet header: TCP payload is at most 1448/1514 of the rate.
    let goodput = LINK_BPS * 1448.0 / 1514.0;
    assert!(total <= LINK_BPS * 1.01, "{total} above the shaper");
    // Within 3 % of the goodput on a quiet host (seen: 97-101 %); the floor is 85 % because
    // the debug coordinator receives 80 flows on 2 vCPUs shared with the other tests of the
    // suite, and read 95.3 % and 89.6 % there (CI, 2026-11-29): a fleet far from its link
    // (half of it, say) still fails.
    assert!(
        total <= goodput * 1.03 && total >= goodput * 0.85,
        "total {total} vs goodput {goodput}"
    );
    let hosts = d["hosts"].as_array().expect("hosts");
    assert_eq!(hosts.len(), 16);
    assert!(hosts.iter().all(|h| h["flows"].as_array().is_some_and(|f| f.len() == 5)), "{d}");
    let shares: f64 = hosts.iter().map(|h| f(&h["share"])).sum();
    assert!((shares - 1.0).abs() < 1e-6, "shares add up: {shares}");
    let across = &d["across_hosts"];
    assert_eq!(across["n"], 16);
    assert!(f(&across["jain"]) > 0.9 && f(&across["jain"]) <= 1.0, "{across}");
    assert!(across["stddev"].is_f64() && d["across_flows"]["n"] == 80, "{d}");
    // Measured, and bounded (a quarter of the test: the debug coordinator starting 80 flows
    // beside the suite's other tests on 2 vCPUs passed 0.5 s once); the start-skew figure
    // itself is the benchmark's (see below).
    assert!(f(&s["skew"]["start_seconds"]) < 1.0, "{}", s["skew"]);
    assert_eq!(doc["hosts"].as_array().map(Vec::len), Some(16), "every host's own run");

    // One host sends at 20 Mbit/s where its fair share of the link is about 60: the fleet
    // names it, and the others take what it leaves.
    fleet.shape_host(16, "20mbit");
    let (code, doc, err) = fleet.run(16, &["-R", "-P", "2", "-t", "3"]);
    assert_eq!(code, Some(0), "{err}");
    let d = &doc["summary"]["directions"][0];
    assert_eq!(d["flow"], "server_to_client");
    let outliers: Vec<&str> = d["outliers"]
        .as_array()
        .expect("outliers")
        .iter()
        .filter_map(|o| o["label"].as_str())
        .collect();
    assert!(outliers.contains(&"vm16"), "{}", d["outliers"]);
    let slow =
        d["outliers"].as_array().expect("o").iter().find(|o| o["label"] == "vm16").expect("vm16");
    assert!(f(&slow["against_median_percent"]) < -50.0, "{slow}");
    // Its reason is what sets it apart: its own verdict only when most other hosts gave
    // another (a verdict every host gave explains none of them).
    let reason = slow["reason"].as_str().expect("a reason");
    let hosts = d["hosts"].as_array().expect("hosts");
    let limit = |label: &str| hosts.iter().find(|h| h["label"] == label).map(|h| &h["limit"]);
    let sharing =
        hosts.iter().filter(|h| h["label"] != "vm16" && Some(&h["limit"]) == limit("vm16")).count();
    if slow["limit_summary"].as_str() == Some(reason) {
        assert!(sharing * 2 <= 15, "{reason} is the verdict of {sharing} other hosts");
    }
    let total = f(&d["total_bits_per_second"]);
    assert!((total / goodput - 1.0).abs() < 0.05, "the others fill the link: {total}");
}

/// The VMware paper's scaling curve in miniature: every host can send 200 Mbit/s, the
/// coordinator's link carries 1 Gbit/s, so the total rises with the hosts until four or five
/// fill the link, then holds: `--scale` names 8 (of 1, 2, 4, 8, 16) as where it stops rising.
#[test]
fn a_scaling_curve_rises_then_saturates_at_the_link() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let fleet = Fleet::new(16);
    for i in 1..=16 {
        fleet.shape_host(i, "200mbit");
    }
    let (code, doc, err) = fleet.run(16, &["-R", "--scale", "1,2,4,8,16", "-t", "2"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(doc["kind"], "linerate.fleet_scale");
    assert_eq!(doc["runs"].as_array().map(Vec::len), Some(5));
    let d = &doc["summary"]["directions"][0];
    let points = d["points"].as_array().expect("points");
    let total = |k: u64| {
        let p = points.iter().find(|p| p["hosts"] == k).expect("point");
        f(&p["total"]["mean"])
    };
    let goodput = LINK_BPS * 1448.0 / 1514.0;
    let host = 200e6 * 1448.0 / 1514.0;
    assert!((total(1) / host - 1.0).abs() < 0.05, "one host: {}", total(1));
    assert!((total(2) / (2.0 * host) - 1.0).abs() < 0.05, "two hosts: {}", total(2));
    assert!((total(16) / goodput - 1.0).abs() < 0.05, "sixteen hosts: {}", total(16));
    assert_eq!(d["stops_rising_at"], 8, "{d}");
    assert_eq!(d["still_rising"], false);
}

/// The start skew is measured on every run and reported; how small it is on a quiet machine
/// is a benchmark's figure (benches/fleet-skew.py), not a timed assertion: 16 servers and the
/// coordinator share this machine's two cores, and early hosts' data threads delay the rest's
/// control threads on a busy machine. Here: measured, plausible, and far below the test.
/// Issue 46: a wrong key failed every host's test, stored a fleet with nothing measured and
/// said so host by host. Now the hosts are greeted with the key before any test, and the
/// fleet stops once, naming the key file.
#[test]
fn a_wrong_key_stops_the_fleet_once_before_any_test_naming_the_key_file() {
    let _g = crate::util::exclusive();
    let dir = test_dir("fleet-key");
    let (key, other) = (dir.join("psk"), dir.join("other"));
    std::fs::write(&key, [b'k'; 32]).expect("key");
    std::fs::write(&other, [b'q'; 32]).expect("key");
    let key = key.to_string_lossy().into_owned();
    let other = other.to_string_lossy().into_owned();
    let a = Server::start(&["--psk-file", &key]);
    let b = Server::start(&["--psk-file", &key]);
    let hosts = [format!("127.0.0.1:{}=a", a.port), format!("127.0.0.1:{}=b", b.port)];
    let fleet = |k: &str| {
        let mut args = vec!["fleet", "-t", "0.3", "--no-store", "--psk-file", k];
        args.extend(hosts.iter().map(String::as_str));
        run(&args, Duration::from_secs(60))
    };
    let out = fleet(&other);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let once = format!("2 of 2 refuse the key in {other} (--psk-file)");
    assert!(out.stderr.contains(&once), "{}", out.stderr);
    assert!(
        !out.stdout.contains("Fleet total") && !out.stderr.contains("--resume"),
        "{}",
        out.stdout
    );
    assert!(!a.log().contains("accepted"), "no test reached a server: {}", a.log());
    let out = fleet(&key);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Fleet total"), "{}", out.stdout);
}

#[test]
fn hosts_start_together_and_a_dead_one_does_not_stop_the_rest() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let fleet = Fleet::new(16);
    let mut skews: Vec<f64> = (0..5)
        .map(|_| {
            let (code, doc, err) = fleet.run(16, &["-t", "1"]);
            assert_eq!(code, Some(0), "{err}");
            f(&doc["summary"]["skew"]["start_seconds"])
        })
        .collect();
    skews.sort_by(f64::total_cmp);
    eprintln!("start skews of 5 runs: {skews:?}");
    assert!(skews.iter().all(|s| *s >= 0.0) && skews[2] < 0.25, "median of 5 runs: {skews:?}");

    // A host whose server is gone: named with its error, the rest measured, exit 3.
    let mut targets: Vec<String> = fleet.addrs[..3].iter().map(|a| a.to_string()).collect();
    targets.push(format!("{}:5999=gone", fleet.addrs[3]));
    let mut args: Vec<&str> = vec!["fleet"];
    args.extend(targets.iter().map(String::as_str));
    args.extend_from_slice(&["-t", "1", "--no-store"]);
    let out = run_in(&fleet.ns(0), &args);
    assert_eq!(out.code, Some(3), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("Not measured (1 of 4 hosts)"), "{}", out.stdout);
    assert!(out.stdout.contains("gone: cannot connect"), "{}", out.stdout);
    assert!(out.stdout.contains("over 3 of 4 hosts"), "{}", out.stdout);
    assert!(out.stderr.contains("the fleet is partial"), "{}", out.stderr);
}

/// On loopback (no namespaces needed): a fleet of two servers is stored as one group, and
/// `report fN` gives its figures again from the history alone, in text, JSON, Markdown, CSV
/// (the JSON's figures, a row per host) and HTML (whose charts read in headless Chromium);
/// duplicate targets are refused.
#[test]
fn a_stored_fleet_reports_again_from_the_history() {
    use crate::util::{Server, run, test_dir};
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    let db = test_dir("fleet-report").join("h.sqlite");
    let db = db.to_str().expect("utf-8 path");
    let (ta, tb) = (format!("127.0.0.1:{}=a", a.port), format!("127.0.0.1:{}=b", b.port));
    let out = loaded(|| {
        run(&["fleet", &ta, &tb, "-t", "1", "-P", "2", "--db", db], Duration::from_secs(30))
    });
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("Fleet total to the hosts (upload)"), "{}", out.stdout);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("Stored as fleet f1"), "{said}");
    let text = run(&["report", "f1", "--db", db], Duration::from_secs(10));
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(text.stdout.contains("over 2 of 2 hosts"), "{}", text.stdout);
    let json = run(&["report", "f1", "--db", db, "--format", "json"], Duration::from_secs(10));
    let doc: Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(doc["kind"], "linerate.fleet");
    assert_eq!(doc["group"], 1);
    let hosts = doc["summary"]["directions"][0]["hosts"].as_array().expect("hosts");
    let labels: Vec<&str> = hosts.iter().filter_map(|h| h["label"].as_str()).collect();
    assert_eq!(labels, ["a", "b"]);
    assert!(doc["summary"]["skew"]["start_seconds"].is_f64(), "{}", doc["summary"]);
    let rates: Vec<f64> = hosts.iter().map(|h| f(&h["bits_per_second"])).collect();
    assert!(rates.iter().all(|r| *r > 0.0), "{rates:?}");
    let total = f(&doc["summary"]["directions"][0]["total_bits_per_second"]);

    // Markdown: the text's tables as pipe tables, the same figures.
    let md = report_of(db, "f1", "md");
    assert!(md.starts_with("# linerate report: fleet f1\n"), "{md}");
    for needle in [
        "- **Measured:** 2 of 2 hosts",
        "## Data to the hosts (upload)",
        "| host | ",
        " | share | flows min–max (",
        "- across hosts (n=2): mean ",
        "- across flows (n=4): mean ",
        "## Totals",
        &format!(
            "- Fleet total to the hosts (upload): {} over 2 of 2 hosts",
            format_bits_per_second(total)
        ),
    ] {
        assert!(md.contains(needle), "no {needle:?} in\n{md}");
    }
    assert!(md.contains("\n| a | ") && md.contains("\n| b | "), "a row per host:\n{md}");

    // CSV: one row per host and direction, the JSON's figures, the run ids of the history.
    let csv = report_of(db, "f1", "csv");
    let rows = csv_rows(&csv);
    assert_eq!(rows[0][..5], ["fleet", "hosts_in_run", "repetition", "host", "server"]);
    assert_eq!(rows.len(), 3, "a header and a row per host:\n{csv}");
    let col = |name: &str| rows[0].iter().position(|c| c == name).expect(name);
    for (row, rate) in rows[1..].iter().zip(&rates) {
        assert_eq!(row[col("fleet")], "f1");
        assert_eq!(row[col("flow")], "client_to_server");
        assert_eq!(row[col("flows")], "2");
        assert_eq!(row[col("counted_over")], "shared_window");
        assert_eq!(row[col("bits_per_second")], format!("{rate:.0}"), "{row:?}");
        let id: i64 = row[col("run_id")].parse().expect("a stored run's id");
        assert!(
            run(&["show", &id.to_string(), "--db", db], Duration::from_secs(10)).code == Some(0)
        );
        let mean: f64 = row[col("flow_mean_bits_per_second")].parse().expect("flow mean");
        assert!((mean * 2.0 - rate).abs() / rate < 1e-6, "two flows' mean is half the host's rate");
        assert_eq!(row[col("run_total_bits_per_second")], format!("{total:.0}"));
    }

    // HTML: the tables, and the fairness chart with every host's flows and the hosts' mean.
    let needles = [
        "<h2>Data to the hosts (upload)</h2>",
        "<h3>Spread across hosts and flows</h3>",
        "data-kind=\"fairness\"",
        "Fairness across hosts: data to the hosts (upload)",
        "a: flow 1 of 2: ",
        "b: flow 2 of 2: ",
        "mean of the 2 hosts: ",
    ];
    if let Some(kinds) = html_page(db, "fleet-report-html", &needles) {
        assert_eq!(kinds, ["fairness", "fairness"], "one chart, in both windows");
    }
    // --csv-kind intervals: every interval of each host's streams, as both ends saw them.
    let out = run(
        &["report", "f1", "--db", db, "-f", "csv", "--csv-kind", "intervals"],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rows = csv_rows(&out.stdout);
    assert_eq!(rows[0][..4], ["run_id", "tier", "cell", "repetition"]);
    for host in ["a", "b"] {
        for end in ["client", "server"] {
            let n =
                rows[1..].iter().filter(|r| r[1] == "f1" && r[2] == host && r[6] == end).count();
            assert!(n >= 2, "{host}, {end} end: {n} interval rows");
        }
    }
    let twice =
        run(&["fleet", &ta, &ta.replace("=a", "=c"), "--no-store"], Duration::from_secs(10));
    assert_eq!(twice.code, Some(2), "{}", twice.stderr);
    assert!(twice.stderr.contains("named twice"), "{}", twice.stderr);
}

/// On loopback: a fleet with one host whose port nothing listens on is stored partial (exit
/// 3), and every format of `report fN` names the missing host with its error and leaves its
/// figures empty or n/a, never 0; the measured host's figures are still there.
#[test]
fn a_partial_fleet_names_its_missing_host_in_every_format() {
    use crate::util::{Server, run, test_dir};
    let a = Server::start(&[]);
    let closed =
        std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let db = test_dir("fleet-partial").join("h.sqlite");
    let db = db.to_str().expect("utf-8 path");
    let (ta, gone) =
        (format!("127.0.0.1:{}=a", a.port), format!("127.0.0.1:{}=gone", closed.port()));
    let out = loaded(|| {
        run(&["fleet", &ta, &gone, "-t", "1", "-P", "2", "--db", db], Duration::from_secs(30))
    });
    assert_eq!(out.code, Some(3), "{}\n{}", out.stdout, out.stderr);
    let md = report_of(db, "f1", "md");
    for needle in [
        "- **Measured:** 1 of 2 hosts (the others: see Not measured)",
        "## Not measured (1 of 2 hosts)",
        "- gone: cannot connect to 127.0.0.1:",
        "- across hosts (n=1): mean ",
        "σ n/a (one value)",
        "Jain n/a (one value)",
        "over 1 of 2 hosts",
    ] {
        assert!(md.contains(needle), "no {needle:?} in\n{md}");
    }
    let rows = csv_rows(&report_of(db, "f1", "csv"));
    let col = |name: &str| rows[0].iter().position(|c| c == name).expect(name);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let (measured, missing) = (&rows[1], &rows[2]);
    assert_eq!(
        (measured[col("host")].as_str(), measured[col("run_outcome")].as_str()),
        ("a", "completed")
    );
    assert!(measured[col("bits_per_second")].parse::<f64>().expect("a rate") > 0.0);
    assert_eq!(measured[col("share_fraction")], "1");
    assert_eq!(
        (missing[col("host")].as_str(), missing[col("run_outcome")].as_str()),
        ("gone", "failed")
    );
    assert!(missing[col("not_measured_reason")].starts_with("cannot connect"), "{missing:?}");
    assert!(missing[col("flow")..].iter().all(String::is_empty), "no figure invented: {missing:?}");
    let needles = [
        "<h3>Not measured (1 of 2 hosts)</h3>",
        "gone: cannot connect to 127.0.0.1:",
        "data-kind=\"fairness\"",
        "mean of the 1 host: ",
        "σ n/a (one host)",
    ];
    if let Some(kinds) = html_page(db, "fleet-partial-html", &needles) {
        assert_eq!(kinds, ["fairness", "fairness"], "the measured host's chart, in both windows");
    }
}

/// A scaling curve on loopback: every host count run `--repeat` times, stored, and rebuilt by
/// `report fN` from the history.
#[test]
fn a_scaling_curve_is_stored_and_reported_again() {
    use crate::util::{Server, run, test_dir};
    let servers = [Server::start(&[]), Server::start(&[]), Server::start(&[])];
    let targets: Vec<String> = servers.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
    let db = test_dir("fleet-scale").join("h.sqlite");
    let db = db.to_str().expect("utf-8 path");
    let mut args = vec!["fleet"];
    args.extend(targets.iter().map(String::as_str));
    args.extend_from_slice(&["--scale", "1..3", "--repeat", "2", "-t", "1", "--db", db, "-J"]);
    let out = loaded(|| run(&args, Duration::from_secs(90)));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(doc["kind"], "linerate.fleet_scale");
    let points = doc["summary"]["directions"][0]["points"].as_array().expect("points");
    let shape: Vec<(u64, usize)> = points
        .iter()
        .map(|p| (p["hosts"].as_u64().expect("k"), p["totals"].as_array().map_or(0, Vec::len)))
        .collect();
    assert_eq!(shape, [(1, 2), (2, 2), (3, 2)]);
    assert_eq!(out.stderr.matches("] ").count(), 6, "a progress line per run: {}", out.stderr);
    let text = run(&["report", "f1", "--db", db], Duration::from_secs(10));
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(text.stdout.contains("Scaling, data to the hosts (upload)"), "{}", text.stdout);
    let again = run(&["report", "f1", "--db", db, "-f", "json"], Duration::from_secs(10));
    let again: Value = serde_json::from_str(&again.stdout).expect("json");
    assert_eq!(again["summary"], doc["summary"], "the history gives the same curve");
    assert_eq!(again["seed"], doc["seed"]);

    let md = report_of(db, "f1", "md");
    for needle in [
        "# linerate report: scaling curve f1\n",
        "- **Host counts:** 1, 2, 3",
        "## Scaling, data to the hosts (upload)",
        "| hosts | runs | total ",
        "\n| 3 | 2",
    ] {
        assert!(md.contains(needle), "no {needle:?} in\n{md}");
    }
    // CSV: a row per host of every fleet run, each with its run's total.
    let rows = csv_rows(&report_of(db, "f1", "csv"));
    let col = |name: &str| rows[0].iter().position(|c| c == name).expect(name);
    let mut runs: Vec<(String, String)> = rows[1..]
        .iter()
        .map(|r| (r[col("hosts_in_run")].clone(), r[col("repetition")].clone()))
        .collect();
    runs.sort();
    let want: Vec<(String, String)> = [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 1),
        (2, 2),
        (2, 2),
        (3, 1),
        (3, 1),
        (3, 1),
        (3, 2),
        (3, 2),
        (3, 2),
    ]
    .iter()
    .map(|(k, r)| (k.to_string(), r.to_string()))
    .collect();
    assert_eq!(runs, want);
    for r in doc["runs"].as_array().expect("runs") {
        let total = format!("{:.0}", f(&r["summary"]["directions"][0]["total_bits_per_second"]));
        let (k, rep) = (r["hosts"].to_string(), r["repetition"].to_string());
        let of_run: Vec<&Vec<String>> = rows[1..]
            .iter()
            .filter(|row| row[col("hosts_in_run")] == k && row[col("repetition")] == rep)
            .collect();
        assert!(
            of_run.iter().all(|row| row[col("run_total_bits_per_second")] == total),
            "{k} hosts, run {rep}"
        );
    }
    // HTML: the per-k table and the scaling chart with its intervals, read in Chromium.
    let needles = [
        "<h2>Scaling, data to the hosts (upload)</h2>",
        "data-kind=\"scaling\"",
        "to the hosts (upload), 3 hosts: mean total ",
        "to the hosts (upload), 2 hosts: 95% CI of the mean total ",
        "to the hosts (upload), 1 host: min–max of the 2 run(s) ",
    ];
    if let Some(kinds) = html_page(db, "fleet-scale-html", &needles) {
        assert_eq!(kinds, ["scaling", "scaling"], "one chart, in both windows");
    }
}

/// `report f1 -f html -o FILE`: the page must hold every needle, need nothing from the
/// network and read in headless Chromium (no layout problem in either window). Returns the
/// kinds of chart Chromium found (None without Chromium, outside CI).
fn html_page(db: &str, dir: &str, needles: &[&str]) -> Option<Vec<String>> {
    let page = crate::util::test_dir(dir).join("f1.html");
    let out = crate::util::run(
        &["report", "f1", "--db", db, "-f", "html", "-o", page.to_str().expect("path")],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let html = std::fs::read_to_string(&page).expect("page");
    for needle in needles {
        assert!(html.contains(needle), "no {needle:?} in the page");
    }
    assert!(!html.contains("<script") && !html.contains("https://"), "self-contained");
    let (problems, kinds) = crate::chart_layout::check_page(&page)?;
    assert!(problems.is_empty(), "layout problems:\n{}", problems.join("\n"));
    Some(kinds)
}

/// Runs `f` (a loopback fleet, which keeps every core busy) while no timing-sensitive test
/// (the namespace fleets' skew and totals) runs.
fn loaded<T>(f: impl FnOnce() -> T) -> T {
    let _serial = crate::util::exclusive();
    f()
}

/// `linerate report REF --db DB -f FORMAT`, asserting exit 0.
fn report_of(db: &str, which: &str, format: &str) -> String {
    let out =
        crate::util::run(&["report", which, "--db", db, "-f", format], Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "report {which} -f {format}: {}", out.stderr);
    out.stdout
}

/// CSV records split into fields (no field here holds a comma or quote), CRLF-terminated.
fn csv_rows(csv: &str) -> Vec<Vec<String>> {
    assert!(csv.ends_with("\r\n"), "records end with CRLF");
    csv.split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(String::from).collect())
        .collect()
}

/// Issue 30: the stand-alone scaling curve is a grid like a matrix, so three fleet runs in a
/// row that measure no host stop it (before, it ran all six against servers that were gone).
#[test]
fn a_scaling_curve_stops_after_three_fleet_runs_that_measured_no_host() {
    // Nothing listens on this port: every host is refused at once.
    let port = crate::util::free_port();
    let (a, b) = (format!("127.0.0.1:{port}"), format!("127.0.0.2:{port}"));
    let out = crate::util::run(
        &["fleet", &a, &b, "--scale", "1,2", "--repeat", "3", "-t", "0.2", "--no-store"],
        std::time::Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let runs = out.stderr.lines().filter(|l| l.starts_with('[')).count();
    assert_eq!(runs, 3, "three fleet runs, then the stop: {}", out.stderr);
    assert!(
        out.stderr.contains("3 fleet runs in a row measured no host")
            && out.stderr.contains("stopping the curve"),
        "{}",
        out.stderr
    );
}

/// A targets file with several bad lines names each with its number, a line that is not UTF-8
/// text too (it used to name the first bad line only, and no line for a non-UTF-8 byte).
#[test]
fn a_targets_file_names_every_bad_line() {
    let dir = crate::util::test_dir("fleet-targets-file");
    let file = dir.join("hosts.txt");
    std::fs::write(&file, b"127.0.0.1:5201=a\nvm2:http\n# fine\nv\xffm3\n=nameless\n")
        .expect("write");
    let path = file.to_str().expect("utf-8 path");
    let out =
        crate::util::run(&["fleet", "--targets", path, "--no-store"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    for says in ["line 2:", "line 4: byte 2 is not UTF-8 text", "line 5:"] {
        assert!(out.stderr.contains(says), "{says}: {}", out.stderr);
    }
}

/// A short fleet's total stays within the link it crossed: 16 hosts × 5 flows for 1 s through
/// the 1 Gbit/s shaper read 970–978 Mbit/s (102 % of its TCP goodput) when the shared window
/// reached into each host's first and last interval samples, spread evenly over them.
///
/// The upper bound holds on every host. The lower one (90 %) is the run's own: it applies when
/// the hosts started within a tenth of the test. A coordinator too slow to start 80 flows at
/// once (a debug build on a 2-vCPU host: 0.33 s of start skew, 64–86 % of the link; the
/// release binary 956 Mbit/s on the same host) measures late flows still in slow start, and
/// its skew says so.
#[test]
fn a_short_fleets_total_stays_within_the_link() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let fleet = Fleet::new(16);
    let goodput = LINK_BPS * 1448.0 / 1514.0;
    for t in ["1", "1", "2"] {
        let (code, doc, err) = fleet.run(16, &["-P", "5", "-t", t]);
        assert_eq!(code, Some(0), "{err}");
        let total = f(&doc["summary"]["directions"][0]["total_bits_per_second"]);
        let skew = f(&doc["summary"]["skew"]["start_seconds"]);
        let seconds: f64 = t.parse().expect("t");
        // Above the goodput by at most 0.75 % plus tbf's full 256 KB bucket over the shared
        // window (0.22 % of a one-second window; the window's edges are spread evenly over
        // interval samples): seen up to 100.4 % in 100 runs with the hosts started together,
        // and 101.05 % in CI when a 0.35 s start skew left a 0.65 s window, where the bucket is
        // 0.34 %.
        let window = (seconds - skew).max(0.1);
        let ceiling = goodput * (1.0075 + 256.0 * 1024.0 * 8.0 / (goodput * window));
        assert!(
            total <= ceiling,
            "-t {t}: {total} above the link's goodput {goodput} (skew {skew} s)"
        );
        // The floor holds only for a fleet whose hosts started together: one that took a
        // tenth of its test to start them (a debug build on a 2-vCPU host: 0.33 s of 1 s)
        // measures a window where late flows are still in slow start, and says so.
        eprintln!(
            "-t {t}: {:.0} % of the goodput, start skew {skew:.3} s",
            100.0 * total / goodput
        );
        if skew < 0.1 * seconds {
            assert!(
                total >= goodput * 0.9,
                "-t {t}: {total} far below the link's goodput {goodput}, hosts started within {skew} s"
            );
        }
    }
}

/// `--wait-agents` with `--expect`: a fleet started before its agent waits for it (on
/// loopback, the agent starts 2 s later), and a second fleet on the same history waits for
/// the first to finish (the requester lock): their runs never overlap. Too few agents past
/// the wait is a failure naming what answered.
#[test]
fn a_fleet_waits_for_a_late_agent_and_a_second_one_for_its_turn() {
    let dir = test_dir("fleet-wait");
    let db = dir.join("history.sqlite");
    let db = db.to_str().expect("path");
    let port = crate::util::free_port();
    let target = format!("127.0.0.1:{port}");
    let args = ["fleet", "--each-address", &target, "--wait-agents", "30s", "--expect", "1"];
    let args: Vec<String> =
        [&args[..], &["-t", "1", "--db", db]].concat().iter().map(|s| s.to_string()).collect();
    let spawn = |args: Vec<String>| {
        std::thread::spawn(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&a, Duration::from_secs(60))
        })
    };
    let first = spawn(args.clone());
    std::thread::sleep(Duration::from_millis(700));
    let second = spawn(args);
    std::thread::sleep(Duration::from_millis(1300));
    let _agent = Server::start_on(port);
    let (first, second) = (first.join().expect("first"), second.join().expect("second"));
    for (what, out) in [("first", &first), ("second", &second)] {
        assert_eq!(out.code, Some(0), "{what}: {}{}", out.stdout, out.stderr);
    }
    let (waited_agents, waited_turn) = match first.stderr.contains("requester lock") {
        false => (&first, &second),
        true => (&second, &first),
    };
    assert!(
        waited_agents.stderr.contains("waiting for the agents: 0 of 1 agent(s) answer"),
        "{}",
        waited_agents.stderr
    );
    assert!(waited_turn.stderr.contains("waiting for a fleet (pid"), "{}", waited_turn.stderr);
    let history = run(&["history", "--db", db, "-J"], Duration::from_secs(20));
    let runs: Value = serde_json::from_str(&history.stdout).expect("history JSON");
    let mut starts: Vec<u64> = runs
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["started_unix_ms"].as_u64().expect("start"))
        .collect();
    starts.sort_unstable();
    assert_eq!(starts.len(), 2, "{runs}");
    assert!(
        starts[1] - starts[0] >= 1000,
        "the second fleet started inside the first's 1 s test: {starts:?}"
    );

    let two =
        ["fleet", "--each-address", &target, "--wait-agents", "1s", "--expect", "2", "--no-store"];
    let out = run(&[&two[..], &["-t", "0.5"]].concat(), Duration::from_secs(30));
    assert_eq!(out.code, Some(3), "{}{}", out.stdout, out.stderr);
    for words in ["waited 1 s", "1 of 1 agent(s) answer (127.0.0.1:", "; 2 expected (--expect)"] {
        assert!(out.stderr.contains(words), "{words:?} not in: {}", out.stderr);
    }
}
