//! `linerate mesh` and `server --agent`: agents testing each other, and every refusal that
//! keeps an agent from being aimed anywhere else.
//!
//! The mesh test builds its own network: six agent namespaces in two "zones", each zone a
//! bridge in a hub namespace, the two bridges joined by a veth pair shaped with `tbf` both
//! ways. Traffic stays inside these namespaces, which are removed afterwards. The refusals
//! run on loopback.

use std::time::Duration;

use serde_json::Value;

use crate::environment::Namespaces;
use crate::netns::{KillOnDrop, ip, namespaces_available, run_in, spawn_in};
use crate::util::{Server, run, test_dir};

fn tc(args: &[&str]) {
    let out = std::process::Command::new("tc").args(args).output().expect("run tc");
    assert!(out.status.success(), "tc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Joins namespace `agent_ns` to bridge `bridge` of namespace `hub` with a veth pair
/// (`<ns>i` inside, `<ns>o` on the bridge) and gives it `addr`/24; the two ends' names.
fn join_bridge(hub: &str, bridge: &str, agent_ns: &str, addr: &str) -> (String, String) {
    let (inner, outer) = (format!("{agent_ns}i"), format!("{agent_ns}o"));
    ip(&["link", "add", &inner, "type", "veth", "peer", "name", &outer]);
    ip(&["link", "set", &inner, "netns", agent_ns]);
    ip(&["link", "set", &outer, "netns", hub]);
    ip(&["-n", hub, "link", "set", &outer, "master", bridge]);
    ip(&["-n", hub, "link", "set", &outer, "up"]);
    ip(&["-n", agent_ns, "addr", "add", &format!("{addr}/24"), "dev", &inner]);
    ip(&["-n", agent_ns, "link", "set", &inner, "up"]);
    (inner, outer)
}

/// An agent (`server --agent`) in namespace `ns` on `addr`, naming its node (and zone).
fn agent_in(ns: &str, addr: &str, key: &str, node: &str, zone: Option<&str>) -> KillOnDrop {
    let mut args = vec!["server", "-B", addr, "--agent", "--psk-file", key, "--node-name", node];
    args.extend(zone.iter().flat_map(|z| ["--zone", z]));
    KillOnDrop(spawn_in(ns, &args))
}

fn key_file(dir: &std::path::Path, name: &str, byte: u8) -> String {
    let path = dir.join(name);
    std::fs::write(&path, vec![byte; 32]).expect("key");
    path.to_string_lossy().into_owned()
}

#[test]
fn six_agents_in_two_zones_report_every_pair_and_name_the_slow_cross_zone_pairs() {
    if !namespaces_available() {
        return;
    }
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-zones");
    let key = key_file(&dir, "psk", b'k');
    let names = ["h", "1", "2", "3", "4", "5", "6"];
    let ns = Namespaces::new("mz", &names);
    let hub = &ns.0[0];
    let net = 1 + (std::process::id() % 200) as u8;
    for br in ["bra", "brb"] {
        ip(&["-n", hub, "link", "add", br, "type", "bridge"]);
        ip(&["-n", hub, "link", "set", br, "up"]);
    }
    // The link between the zones, shaped both ways.
    ip(&["-n", hub, "link", "add", "xa", "type", "veth", "peer", "name", "xb"]);
    for (dev, br) in [("xa", "bra"), ("xb", "brb")] {
        ip(&["-n", hub, "link", "set", dev, "master", br]);
        ip(&["-n", hub, "link", "set", dev, "up"]);
        tc(&[
            "-n", hub, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", "400mbit", "burst",
            "256kb", "latency", "20ms",
        ]);
    }
    // The requester's address, on zone a's bridge.
    ip(&["-n", hub, "addr", "add", &format!("10.231.{net}.100/24"), "dev", "bra"]);
    let mut agents = Vec::new();
    let mut targets = Vec::new();
    for (i, agent_ns) in ns.0[1..].iter().enumerate() {
        let zone = if i < 3 { "a" } else { "b" };
        let addr = format!("10.231.{net}.{}", i + 1);
        join_bridge(hub, &format!("br{zone}"), agent_ns, &addr);
        agents.push(agent_in(agent_ns, &addr, &key, &format!("node{}", i + 1), Some(zone)));
        targets.push(format!("{addr}:5201=n{}", i + 1));
    }
    std::thread::sleep(Duration::from_millis(500));
    let db = dir.join("h.db");
    // The zones share one link: pairs one at a time, so each figure is its path's alone.
    let mut args = vec![
        "mesh",
        "--psk-file",
        &key,
        "-t",
        "1",
        "--repeat",
        "2",
        "--seed",
        "5",
        "-J",
        "--serial",
    ];
    args.extend(["--db", db.to_str().expect("path")]);
    args.extend(targets.iter().map(String::as_str));
    let out = run_in(hub, &args);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    assert_eq!(doc["kind"], "linerate.mesh");
    let s = &doc["summary"];
    let cells = s["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 30, "every ordered pair of six agents");
    for c in cells {
        assert_eq!(c["runs"], 2, "{c}");
        assert!(c["bits_per_second"]["ci95"].is_array(), "a 95 % interval per pair: {c}");
    }
    let zones: Vec<&str> = s["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| a["zone"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(zones, ["a", "a", "a", "b", "b", "b"], "each agent names its zone");
    let mean = |label: &str| -> f64 {
        let c = cells.iter().find(|c| c["label"] == label).expect(label);
        c["bits_per_second"]["mean"].as_f64().expect("mean")
    };
    let cross = mean("n1 -> n4");
    assert!(cross < 420e6 && cross > 300e6, "a cross-zone pair runs at the shaped rate: {cross}");
    assert!(mean("n1 -> n2") > 2.0 * cross, "a same-zone pair is not shaped");
    let findings: Vec<&str> =
        s["findings"].as_array().expect("findings").iter().filter_map(Value::as_str).collect();
    let joined = findings.join("\n");
    assert!(
        joined.contains("zone a -> zone b is") && joined.contains("zone b -> zone a is"),
        "{joined}"
    );
    assert!(
        !joined.contains("zone a -> zone a is") && !joined.contains("zone b -> zone b is"),
        "{joined}"
    );
    // Stored as one mesh group of 60 pair runs, each record naming both ends' nodes.
    let store = linerate::store::Store::open(&db).expect("history");
    let runs = store.group_runs(1).expect("runs");
    assert_eq!(runs.len(), 60);
    let (_, meta, record) = &runs[0];
    assert_eq!(meta.kind, linerate::store::RunKind::MeshPair);
    let env = |side: Option<&linerate_proto::SideResults>| {
        side.and_then(|s| s.environment.as_ref()).and_then(|e| e.node.clone())
    };
    assert!(env(record.client.as_ref()).is_some() && env(record.server_results.as_ref()).is_some());
    drop(agents);
    // The stored mesh reads back as a report of its 30 pairs.
    let db = db.to_str().expect("path");
    let report = run(&["report", "n1", "--db", db], Duration::from_secs(60));
    assert_eq!(report.code, Some(0), "{}", report.stderr);
    // Its heading names the mesh, not one agent (issue 46).
    assert!(
        report.stdout.contains("== mesh n1: 6 agents, 30 ordered pairs =="),
        "{}",
        report.stdout
    );
    let rows = report.stdout.lines().filter(|l| l.starts_with('n') && l.contains(" -> n")).count();
    assert_eq!(rows, 30, "{}", report.stdout);
    assert!(report.stdout.contains("Mesh findings:\n  - zone a -> zone b is"), "{}", report.stdout);
    let json = run(&["report", "n1", "--db", db, "-f", "json"], Duration::from_secs(60));
    let doc: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(doc["kind"], "linerate.mesh");
    assert_eq!(doc["summary"]["findings"], s["findings"], "the report finds what the mesh found");
    // The HTML page: the heat map, read in a real browser on a screen and on paper.
    let page = dir.join("n1.html");
    let page_s = page.to_str().expect("path");
    let html = run(
        &["report", "n1", "--db", db, "--format", "html", "-o", page_s],
        Duration::from_secs(60),
    );
    assert_eq!(html.code, Some(0), "{}", html.stderr);
    drop(_g);
    if let Some((problems, kinds)) = crate::chart_layout::check_page(&page) {
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(kinds.iter().any(|k| k == "heat-map"), "{kinds:?}");
    }
}

#[test]
fn an_agent_needs_a_key_and_refuses_every_request_it_cannot_prove() {
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-refusals");
    let key = key_file(&dir, "psk", b'k');
    let other = key_file(&dir, "other", b'q');
    // An agent without a key does not start.
    let out = run(&["server", "-p", "1", "--agent"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--agent") && out.stderr.contains("--psk-file"), "{}", out.stderr);
    let a = Server::start(&["--agent", "--psk-file", &key, "--node-name", "alpha"]);
    let b = Server::start(&["--agent", "--psk-file", &key, "--node-name", "beta"]);
    let plain = Server::start(&["--psk-file", &key]);
    let stranger = Server::start(&["--agent", "--psk-file", &other]);
    let at = |s: &Server, l: &str| format!("127.0.0.1:{}={l}", s.port);
    let mesh = |targets: &[String], k: &str| {
        let mut args = vec!["mesh", "-t", "0.3", "--repeat", "1", "--no-store"];
        if !k.is_empty() {
            args.extend(["--psk-file", k]);
        }
        args.extend(targets.iter().map(String::as_str));
        run(&args, Duration::from_secs(60))
    };
    // No key: refused before anything is sent.
    let out = mesh(&[at(&a, "a"), at(&b, "b")], "");
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("--psk-file"), "{}", out.stderr);
    // The wrong key: found once at pre-flight, naming the key file; no pair is tested and
    // no `--resume` is offered (issue 46).
    let out = mesh(&[at(&a, "a"), at(&b, "b")], &other);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let once = format!("2 of 2 refuse the key in {other} (--psk-file)");
    assert!(out.stderr.contains(&once), "{}", out.stderr);
    assert!(out.stderr.contains("authentication failed"), "{}", out.stderr);
    assert!(!out.stderr.contains("--resume") && !out.stdout.contains("a -> b"), "{}", out.stdout);
    // A server that is not an agent is never asked; an agent will not test it either.
    let out = mesh(&[at(&a, "a"), at(&plain, "plain")], &key);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stdout.contains("a -> plain") && out.stdout.contains("plain -> a"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("not a linerate agent"), "{}", out.stderr);
    assert!(
        a.wait_for_log("not a linerate agent with a key", Duration::from_secs(5)),
        "agent a refused to test the plain server: {}",
        a.log()
    );
    // An agent with another key: it refuses the requester's key at pre-flight.
    let out = mesh(&[at(&a, "a"), at(&stranger, "s")], &key);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("1 of 2 refuse the key in"), "{}", out.stderr);
    // With the key, two agents test each other; given no labels, they are named by their nodes.
    let out = mesh(&[at(&a, "a"), at(&b, "b")], &key);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("a -> b") && out.stdout.contains("b -> a"), "{}", out.stdout);
    let unlabelled = [format!("127.0.0.1:{}", a.port), format!("127.0.0.1:{}", b.port)];
    let out = mesh(&unlabelled, &key);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("alpha -> beta") && out.stdout.contains("beta -> alpha"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_interrupted_mesh_is_resumed_where_it_stopped() {
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-resume");
    let key = key_file(&dir, "psk", b'k');
    let a = Server::start(&["--agent", "--psk-file", &key]);
    let b = Server::start(&["--agent", "--psk-file", &key]);
    let db = dir.join("h.db");
    let db = db.to_str().expect("path");
    let (ta, tb) = (format!("127.0.0.1:{}=a", a.port), format!("127.0.0.1:{}=b", b.port));
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> =
            ["mesh", "-t", "0.3", "--repeat", "3", "--psk-file"].map(String::from).to_vec();
        v.extend([key.clone(), "--db".into(), db.into(), ta.clone(), tb.clone()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run_args = |extra: &[&'static str]| {
        let v = args(extra);
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        run(&refs, Duration::from_secs(60))
    };
    let first = run_args(&["--stop-after", "2"]);
    assert_ne!(first.code, Some(0), "an interrupted mesh is not a success");
    assert!(first.stderr.contains("--resume n1"), "{}", first.stderr);
    let second = run_args(&["--resume"]);
    assert_eq!(second.code, Some(0), "{}\n{}", second.stdout, second.stderr);
    assert!(second.stdout.contains("resuming mesh n1 (2 runs kept)"), "{}", second.stdout);
    crate::util::assert_resumed_whole(std::path::Path::new(db), 1, 6);
    // A finished mesh is not resumed again.
    let third = run_args(&["--resume"]);
    assert_eq!(third.code, Some(2), "{}", third.stderr);
    assert!(third.stderr.contains("no unfinished mesh"), "{}", third.stderr);
}

#[test]
fn meshes_over_two_addresses_of_the_same_nodes_compare_pair_by_pair() {
    // The pod network and the host network of a cluster: the same agents reached at other
    // addresses. Named by their nodes, the pairs are the same pairs.
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-compare");
    let key = key_file(&dir, "psk", b'k');
    let a = Server::start(&["--agent", "--psk-file", &key, "--node-name", "worker-1"]);
    let b = Server::start(&["--agent", "--psk-file", &key, "--node-name", "worker-2"]);
    let db = dir.join("h.db");
    let db = db.to_str().expect("path");
    for ip in ["127.0.0.1", "127.0.0.2"] {
        let (ta, tb) = (format!("{ip}:{}", a.port), format!("{ip}:{}", b.port));
        let args = ["mesh", "-t", "0.3", "--repeat", "2", "--psk-file", &key, "--db", db, &ta, &tb];
        let out = run(&args, Duration::from_secs(60));
        assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    }
    let out = run(&["compare", "n1", "n2", "--db", db], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    for pair in ["worker-1 -> worker-2", "worker-2 -> worker-1"] {
        let row = out.stdout.lines().find(|l| l.starts_with(pair));
        let row = row.unwrap_or_else(|| panic!("no row {pair:?}: {}", out.stdout));
        assert!(row.contains("(n=2)") && !row.contains("n/a"), "both meshes measured it: {row}");
    }
}

/// A mesh over a name that gives one agent (a one-node cluster) waits its window, then says
/// there is no pair and what to run instead: exit 3, not a usage error.
#[test]
fn a_one_node_mesh_says_there_is_no_pair_to_test() {
    let dir = test_dir("mesh-one-node");
    let key = key_file(&dir, "psk", b'k');
    let agent =
        Server::start(&["-B", "127.0.0.1", "--agent", "--psk-file", &key, "--node-name", "node-a"]);
    let target = format!("127.0.0.1:{}", agent.port);
    let args = ["mesh", "--each-address", &target, "--wait-agents", "1s", "--psk-file", &key];
    let out = run(&[&args[..], &["-t", "0.5", "--no-store"]].concat(), Duration::from_secs(30));
    assert_eq!(out.code, Some(3), "{}{}", out.stdout, out.stderr);
    for words in ["1 of 1 agent(s) answer (node-a)", "at least 2 agents", "one-node cluster"] {
        assert!(out.stderr.contains(words), "{words:?} not in: {}", out.stderr);
    }
}

/// 20 agents on one bridge, each node's link shaped to 50 Mbit/s, one of them dead (its
/// namespace drops TCP): with the defaults (rounds of disjoint pairs), every one of the 342
/// live ordered pairs gets its result, the dead agent is found once at the pre-flight and its
/// 38 pairs are stored as failed without being run, and the whole mesh takes at most 150 s
/// (one pair at a time it took 540 s and stopped at the dead agent). Then `--dry-run` plans
/// 1,000 agents without contacting anyone, in well under a second.
#[test]
fn twenty_agents_one_dead_run_in_rounds_and_every_live_pair_is_measured() {
    if !namespaces_available() {
        return;
    }
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-rounds");
    let key = key_file(&dir, "psk", b'r');
    let n = 20;
    let mut names = vec!["h".to_string()];
    names.extend((1..=n).map(|i| format!("a{i}")));
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let ns = Namespaces::new("mr", &refs);
    let hub = &ns.0[0];
    let net = 1 + (std::process::id() % 200) as u8;
    ip(&["-n", hub, "link", "add", "mbr", "type", "bridge"]);
    ip(&["-n", hub, "link", "set", "mbr", "up"]);
    ip(&["-n", hub, "addr", "add", &format!("10.232.{net}.250/24"), "dev", "mbr"]);
    let mut agents = Vec::new();
    let mut targets = Vec::new();
    for (i, agent_ns) in ns.0[1..].iter().enumerate() {
        let addr = format!("10.232.{net}.{}", i + 1);
        let (inner, outer) = join_bridge(hub, "mbr", agent_ns, &addr);
        // Each node's link, both ways: the CPU is not what limits a pair.
        for (netns, dev) in [(agent_ns.as_str(), inner.as_str()), (hub.as_str(), outer.as_str())] {
            tc(&[
                "-n", netns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", "50mbit",
                "burst", "64kb", "latency", "50ms",
            ]);
        }
        agents.push(agent_in(agent_ns, &addr, &key, &format!("node{:02}", i + 1), None));
        targets.push(addr);
    }
    // The last agent's node is dead: its namespace drops every TCP segment.
    let dead_ns = &ns.0[n];
    let rule = std::process::Command::new("ip")
        .args(["netns", "exec", dead_ns, "iptables", "-A", "INPUT", "-p", "tcp", "-j", "DROP"])
        .output()
        .expect("iptables");
    assert!(rule.status.success(), "iptables: {}", String::from_utf8_lossy(&rule.stderr));
    std::thread::sleep(Duration::from_millis(500));
    let db = dir.join("h.db");
    let mut args = vec!["mesh", "--psk-file", &key, "-t", "1", "--repeat", "1", "-J"];
    args.extend(["--connect-timeout", "3", "--db", db.to_str().expect("path")]);
    args.extend(targets.iter().map(String::as_str));
    let out = run_in(hub, &args);
    eprintln!("20 agents, one dead: {:.1} s", out.elapsed.as_secs_f64());
    assert_eq!(
        out.code,
        Some(3),
        "failed pairs end the mesh with 3: {}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(out.elapsed < Duration::from_secs(150), "the mesh took {:?}", out.elapsed);
    let doc: Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 380, "every ordered pair once");
    let cells = doc["summary"]["cells"].as_array().expect("cells");
    let dead_node = "node20";
    let (mut live_ok, mut dead_failed) = (0, 0);
    for r in runs {
        let i = r["cell"].as_u64().expect("cell index") as usize;
        let label = cells[i]["label"].as_str().expect("label").to_string();
        let outcome = &r["record"]["outcome"];
        if label.split(" -> ").any(|end| end == dead_node || end.starts_with(&targets[n - 1])) {
            assert_eq!(outcome["status"], "failed", "a pair of the dead agent: {label}");
            let error = outcome["error"].as_str().unwrap_or_default();
            assert!(error.contains("not reachable at pre-flight"), "{label}: {error}");
            dead_failed += 1;
        } else {
            assert_eq!(outcome["status"], "completed", "a live pair: {label}: {outcome}");
            live_ok += 1;
        }
    }
    assert_eq!((live_ok, dead_failed), (342, 38), "(dead agent {dead_node})");
    let gone = doc["summary"]["agents_gone"].as_array().expect("agents_gone");
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert!(gone[0]["why"].as_str().unwrap_or("").contains("not reachable at pre-flight"));
    // Every node's own link is the bottleneck, the bridge is not: the check stays silent.
    let check = &doc["summary"]["interference"];
    assert_eq!(check["pairs"].as_array().map(Vec::len), Some(8), "{check}");
    let finding = check["finding"].as_str().unwrap_or_default();
    assert!(finding.contains("did not disturb each other"), "{check}");
    drop(agents);

    // The plan of 1,000 agents (999,000 pairs), contacting nobody.
    let file = dir.join("thousand");
    let list: String =
        (0..1000).map(|i| format!("10.233.{}.{}:5201\n", i / 250, 1 + i % 250)).collect();
    std::fs::write(&file, list).expect("targets file");
    let f = file.to_str().expect("path");
    let plan = run(
        &["mesh", "--targets", f, "--psk-file", &key, "-t", "1", "--repeat", "1", "--dry-run"],
        Duration::from_secs(20),
    );
    assert_eq!(plan.code, Some(0), "{}", plan.stderr);
    // Not a speed target (benches/ hold those): a guard against a schedule that grows faster
    // than the pairs, which would take minutes here. About 1 s on this machine, 2.4 s under
    // load.
    assert!(plan.elapsed < Duration::from_secs(10), "planning took {:?}", plan.elapsed);
    assert!(
        plan.stdout.contains(
            "Plan: 1000 agents, 999000 ordered pairs × 1 run in 1998 rounds of disjoint pairs"
        ),
        "{}",
        plan.stdout
    );
}

/// The interference check: four agents, two per zone, every node's link shaped to 200 Mbit/s
/// and the link between the zones to 100 Mbit/s each way. In a round where two pairs cross
/// the zones the same way they share that link (about 50 Mbit/s each, 100 alone): the check,
/// run on every pair, names them and says to rerun with --serial; the same-zone pairs, alone
/// on their node links, are not named.
#[test]
fn the_interference_check_names_pairs_that_shared_a_link_in_their_round() {
    if !namespaces_available() {
        return;
    }
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-interference");
    let key = key_file(&dir, "psk", b'i');
    let ns = Namespaces::new("mi", &["h", "1", "2", "3", "4"]);
    let hub = &ns.0[0];
    let net = 1 + (std::process::id() % 200) as u8;
    for br in ["bra", "brb"] {
        ip(&["-n", hub, "link", "add", br, "type", "bridge"]);
        ip(&["-n", hub, "link", "set", br, "up"]);
    }
    let shape = |netns: &str, dev: &str, rate: &str| {
        tc(&[
            "-n", netns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst",
            "64kb", "latency", "50ms",
        ]);
    };
    ip(&["-n", hub, "link", "add", "xa", "type", "veth", "peer", "name", "xb"]);
    for (dev, br) in [("xa", "bra"), ("xb", "brb")] {
        ip(&["-n", hub, "link", "set", dev, "master", br]);
        ip(&["-n", hub, "link", "set", dev, "up"]);
        shape(hub, dev, "100mbit");
    }
    ip(&["-n", hub, "addr", "add", &format!("10.234.{net}.100/24"), "dev", "bra"]);
    let mut agents = Vec::new();
    let mut targets = Vec::new();
    for (i, agent_ns) in ns.0[1..].iter().enumerate() {
        let zone = if i < 2 { "a" } else { "b" };
        let addr = format!("10.234.{net}.{}", i + 1);
        let (inner, outer) = join_bridge(hub, &format!("br{zone}"), agent_ns, &addr);
        shape(agent_ns, &inner, "200mbit");
        shape(hub, &outer, "200mbit");
        agents.push(agent_in(agent_ns, &addr, &key, &format!("node{}", i + 1), Some(zone)));
        targets.push(addr);
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut args = vec!["mesh", "--psk-file", &key, "-t", "2", "--repeat", "1", "--no-store", "-J"];
    args.extend(["--interference-sample", "12"]);
    args.extend(targets.iter().map(String::as_str));
    let out = run_in(hub, &args);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    let check = &doc["summary"]["interference"];
    let pairs = check["pairs"].as_array().expect("the check's pairs");
    assert_eq!(pairs.len(), 12, "{check}");
    let zone = |node: &str| if node == "node1" || node == "node2" { "a" } else { "b" };
    let crosses = |p: &Value| {
        let label = p["pair"].as_str().expect("pair");
        let (a, b) = label.split_once(" -> ").expect("a -> b");
        zone(a) != zone(b)
    };
    let disturbed: Vec<&Value> = pairs.iter().filter(|p| p["disturbed"] == true).collect();
    assert!(
        !disturbed.is_empty(),
        "no pair named, though two cross-zone pairs shared the link: {check}"
    );
    for p in &disturbed {
        assert!(crosses(p), "a same-zone pair named disturbed: {p}");
        let lost = p["lost_percent"].as_f64().expect("lost");
        assert!(lost > 30.0, "a shared 100 Mbit/s link halves each pair: {p}");
    }
    let finding = check["finding"].as_str().expect("finding");
    assert!(finding.contains("lost") && finding.contains("--serial"), "{finding}");
    assert!(finding.contains("the fabric between the zones is shared"), "{finding}");
}

/// `--sample`: a balanced sample has every agent send and receive once; `--sample zones:1`
/// keeps every pair inside a zone and tests between zones through one agent of each (the
/// zones the agents report; one reporting none is in "unknown"); the dry run plans it from
/// the agents' greetings, and a sample by zone of agents without zones is refused.
#[test]
fn samples_are_balanced_or_by_zone() {
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-sample");
    let key = key_file(&dir, "psk", b'k');
    let zones = [Some("z1"), Some("z1"), Some("z1"), Some("z2"), Some("z2"), None];
    let agents: Vec<Server> = zones
        .iter()
        .enumerate()
        .map(|(i, z)| {
            let node = format!("n{i}");
            let mut args = vec!["--agent", "--psk-file", &key, "--node-name", &node];
            args.extend(z.iter().flat_map(|z| ["--zone", z]));
            Server::start(&args)
        })
        .collect();
    let targets: Vec<String> = agents.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
    let mesh = |extra: &[&str]| {
        let mut args = vec!["mesh", "-t", "0.2", "--repeat", "1", "--no-store", "--psk-file", &key];
        args.extend(["--interference-sample", "0"]);
        args.extend_from_slice(extra);
        args.extend(targets.iter().map(String::as_str));
        run(&args, Duration::from_secs(90))
    };
    // Inside z1 6 pairs, inside z2 2, between the three zones' one representative each 6.
    let out = mesh(&["--sample", "zones:1", "--dry-run"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("6 agents, 14 ordered pairs"), "{}", out.stdout);
    let out = mesh(&["--sample", "zones:1", "-J"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    let pairs: Vec<(usize, usize)> = doc["summary"]["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .map(|p| (p["from"].as_u64().unwrap() as usize, p["to"].as_u64().unwrap() as usize))
        .collect();
    let zone = |a: usize| zones[a].unwrap_or("unknown");
    assert_eq!(pairs.len(), 14, "{pairs:?}");
    assert_eq!(pairs.iter().filter(|(a, b)| zone(*a) == zone(*b)).count(), 8, "{pairs:?}");
    let between: std::collections::BTreeSet<usize> =
        pairs.iter().filter(|(a, b)| zone(*a) != zone(*b)).flat_map(|(a, b)| [*a, *b]).collect();
    let per_zone: std::collections::BTreeSet<&str> = between.iter().map(|a| zone(*a)).collect();
    assert_eq!((between.len(), per_zone.len()), (3, 3), "one agent of each zone: {between:?}");
    let cells = doc["summary"]["cells"].as_array().expect("cells");
    assert!(cells.iter().all(|c| c["runs"] == 1), "every sampled pair ran once: {cells:?}");
    // A balanced sample of 6: every agent sends once and receives once.
    let out = mesh(&["--sample", "6", "-J"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    let pairs = doc["summary"]["pairs"].as_array().expect("pairs");
    assert_eq!(pairs.len(), 6);
    for end in ["from", "to"] {
        let mut seen: Vec<u64> = pairs.iter().map(|p| p[end].as_u64().unwrap()).collect();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4, 5], "each agent once as {end}: {pairs:?}");
    }
    // Agents that report no zone cannot be sampled by zone (the same agent at two addresses).
    let bare = [targets[5].clone(), format!("127.0.0.2:{}", agents[5].port)];
    let mut args = vec!["mesh", "-t", "0.2", "--no-store", "--psk-file", &key, "--sample", "zones"];
    args.extend(bare.iter().map(String::as_str));
    let out = run(&args, Duration::from_secs(30));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("no agent reported a zone") && out.stderr.contains("--zone"),
        "{}",
        out.stderr
    );
    let out = mesh(&["--sample", "zones:0"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("R must be"), "{}", out.stderr);
}

/// After a mesh of three agents started with `--metrics`, each agent's `/metrics` has
/// series naming each of the other two agents' nodes: tests by outcome, the last rate to it
/// (non-zero), its RTT, when it was tested, and the drop and drift gauges (0 after one run).
#[test]
fn each_agent_exports_what_it_measured_of_every_peer() {
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-metrics");
    let key = key_file(&dir, "psk", b'k');
    let nodes = ["alpha", "beta", "gamma"];
    let agents: Vec<(Server, u16)> = nodes
        .iter()
        .map(|n| {
            crate::metrics::metrics_server(&[
                "--agent",
                "--psk-file",
                &key,
                "--node-name",
                n,
                "--zone",
                "z1",
            ])
        })
        .collect();
    let mut args = vec!["mesh", "-t", "0.3", "--repeat", "1", "--no-store", "--psk-file", &key];
    let targets: Vec<String> =
        agents.iter().map(|(s, _)| format!("127.0.0.1:{}", s.port)).collect();
    args.extend(targets.iter().map(String::as_str));
    let out = run(&args, Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    for (i, (_, mport)) in agents.iter().enumerate() {
        let (status, text) = crate::metrics::get(*mport, "/metrics");
        assert_eq!(status, 200);
        for (j, peer) in nodes.iter().enumerate() {
            let named = format!("{{node=\"{}\",peer=\"{peer}\",peer_zone=\"z1\"", nodes[i]);
            if i == j {
                assert!(!text.contains(&named), "no series of itself: {text}");
                continue;
            }
            let series = |name: &str, rest: &str| format!("{name}{named}{rest}}}");
            let tests = series("linerate_pair_tests_total", ",outcome=\"completed\"");
            assert_eq!(crate::metrics::sample(&text, &tests), Some(1.0), "{tests}:\n{text}");
            let rate = series("linerate_pair_bits_per_second", ",direction=\"to_peer\"");
            let rate = crate::metrics::sample(&text, &rate);
            assert!(rate.is_some_and(|r| r > 1e6), "{} -> {peer}: {rate:?}\n{text}", nodes[i]);
            let rtt = series("linerate_pair_rtt_seconds", ",direction=\"to_peer\"");
            assert!(crate::metrics::sample(&text, &rtt).is_some_and(|r| r > 0.0), "{rtt}:\n{text}");
            let when = series("linerate_pair_last_test_timestamp_seconds", "");
            assert!(crate::metrics::sample(&text, &when).is_some_and(|t| t > 1.7e9), "{when}");
            for signal in ["linerate_pair_drop_ratio", "linerate_pair_drift_ratio_per_run"] {
                assert_eq!(
                    crate::metrics::sample(&text, &series(signal, "")),
                    Some(0.0),
                    "{signal}"
                );
            }
        }
    }
}

/// A mesh on a schedule (`--every 0 --count N`: back to back) sets each pair against the
/// meshes before it: 12 meshes over a link at 200 Mbit/s each way, then 2 at 120, and the
/// last names both pairs' fresh drop of about 40 %. `--slip` longer than `--every` is
/// refused.
#[test]
fn scheduled_meshes_name_a_pair_that_dropped() {
    let _g = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let dir = test_dir("mesh-watch");
    let key = key_file(&dir, "psk", b'k');
    let link = crate::netns::ShapedLink::new("mw", "200mbit");
    let addr_a = format!("{}1", link.addr_b.trim_end_matches('2'));
    let _a = agent_in(&link.a, &addr_a, &key, "node-a", None);
    let _b = agent_in(&link.b, &link.addr_b, &key, "node-b", None);
    std::thread::sleep(Duration::from_millis(500));
    let db = dir.join("h.db");
    let db = db.to_str().expect("path");
    let meshes = |count: &str| {
        let args = [
            "mesh",
            "-t",
            "0.5",
            "--repeat",
            "1",
            "--psk-file",
            &key,
            "--db",
            db,
            "--every",
            "0",
            "--count",
            count,
            &addr_a,
            &link.addr_b,
        ];
        let out = run_in(&link.a, &args);
        assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
        out
    };
    let first = meshes("12");
    assert!(first.stderr.contains("--every: 12 runs, 0 failed"), "{}", first.stderr);
    assert!(
        first.stdout.contains("Against the 11 meshes before: no pair dropped"),
        "{}",
        first.stdout
    );
    for side_a in [true, false] {
        link.shape(side_a, Some(["120mbit", "256kb", "20ms"]));
    }
    let out = meshes("2");
    let last = out.stdout.rsplit("Plan:").next().expect("the last mesh");
    eprintln!("{last}");
    assert!(last.contains("Against the 13 meshes before: 2 pair(s) dropped or drifted"), "{last}");
    for pair in ["node-a -> node-b", "node-b -> node-a"] {
        let watch = last.split("Against the 13 meshes before").nth(1).expect("the watch");
        let line = watch
            .lines()
            .find(|l| l.trim_start().starts_with(pair))
            .unwrap_or_else(|| panic!("{pair}: {last}"));
        let line = line.trim_start();
        let said = ": fresh drop: the last 2 meshes after a stable 12: -";
        assert!(line.contains(said), "{line}");
        let pct: f64 = line
            .split(": -")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|p| p.parse().ok())
            .expect("a drop");
        assert!((pct - 40.0).abs() < 5.0, "{line}");
    }
    let refused = run_in(
        &link.a,
        &[
            "mesh",
            "--psk-file",
            &key,
            "--every",
            "10",
            "--count",
            "2",
            "--slip",
            "10",
            &addr_a,
            &link.addr_b,
        ],
    );
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("--slip must be shorter than --every"), "{}", refused.stderr);
}

/// Two nodes, each with an agent on a "host" network and one on a "pod" network (two veth
/// links between the nodes' namespaces, the pod one shaped to half the host one's rate, as an
/// overlay would cost): one mesh over all four tests each network's pairs only, never two
/// tests of a node at once, names the agents `node/network`, and says what the pod network
/// costs on each node pair.
#[test]
fn two_networks_on_the_same_nodes_are_tested_apart_and_set_side_by_side() {
    if !namespaces_available() {
        return;
    }
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-networks");
    let key = key_file(&dir, "psk", b'n');
    let ns = Namespaces::new("mn", &["a", "b"]);
    let (a, b) = (&ns.0[0], &ns.0[1]);
    let net = 1 + (std::process::id() % 200) as u8;
    let mut agents = Vec::new();
    let mut targets = Vec::new();
    for (network, subnet, rate) in [("host", 237, "400mbit"), ("pod", 238, "200mbit")] {
        let (da, db) = (format!("{network}a"), format!("{network}b"));
        ip(&["link", "add", &da, "type", "veth", "peer", "name", &db]);
        for (dev, side, host) in [(&da, a, 1), (&db, b, 2)] {
            ip(&["link", "set", dev, "netns", side]);
            let addr = format!("10.{subnet}.{net}.{host}");
            ip(&["-n", side, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", side, "link", "set", dev, "up"]);
            tc(&[
                "-n", side, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst",
                "64kb", "latency", "50ms",
            ]);
            let node = if host == 1 { "node-a" } else { "node-b" };
            let args = [
                "server",
                "-B",
                &addr,
                "--agent",
                "--psk-file",
                &key,
                "--node-name",
                node,
                "--network",
                network,
            ];
            agents.push(KillOnDrop(spawn_in(side, &args)));
            targets.push(addr);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut args = vec!["mesh", "--psk-file", &key, "-t", "1", "--repeat", "3", "--no-store", "-J"];
    args.extend(targets.iter().map(String::as_str));
    let out = run_in(a, &args);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    let summary = &doc["summary"];
    let labels: Vec<&str> = summary["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| c["label"].as_str().expect("label"))
        .collect();
    let mut sorted = labels.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "node-a/host -> node-b/host",
            "node-a/pod -> node-b/pod",
            "node-b/host -> node-a/host",
            "node-b/pod -> node-a/pod"
        ],
        "pairs stay inside a network"
    );
    // A node's tests never overlap: every pair test started after the one before it ended.
    let mut starts: Vec<i64> = doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["record"]["started_unix_ms"].as_i64().expect("start"))
        .collect();
    assert_eq!(starts.len(), 12);
    starts.sort_unstable();
    for w in starts.windows(2) {
        assert!(w[1] - w[0] >= 1000, "two pair tests of one node ran at once: {starts:?}");
    }
    let costs = summary["networks"].as_array().expect("the networks set side by side");
    assert_eq!(costs.len(), 2, "{costs:?}");
    for c in costs {
        assert_eq!((c["network"].as_str(), c["reference"].as_str()), (Some("pod"), Some("host")));
        let change = c["change_percent"].as_f64().expect("change");
        assert!((-60.0..=-40.0).contains(&change), "half the rate on the pod network: {c}");
        assert_eq!(c["beyond_noise"], true, "{c}");
    }
    let findings: Vec<&str> = summary["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        findings[0].starts_with("pod-to-pod is")
            && findings[0].contains("below on node-a -> node-b")
            && findings[0].contains("against host-to-host on the same node pairs"),
        "{findings:?}"
    );
    // The interference check has nothing to do: no round holds two pairs.
    assert!(summary.get("interference").is_none(), "{summary}");
}

/// An agent that does not answer its first greeting is greeted again a second later before
/// it is called unreachable: here the first greeting meets a listener that says nothing (as a
/// path that loses the exchange), the second the agent itself, and every pair runs.
#[test]
fn an_agent_silent_at_the_first_greeting_is_greeted_again() {
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-regreet");
    let key = key_file(&dir, "psk", b'r');
    let a = Server::start(&["-B", "127.0.0.1", "--agent", "--psk-file", &key, "--node-name", "a"]);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let (ta, tb) = (format!("127.0.0.1:{}", a.port), format!("127.0.0.1:{port}"));
    let args = ["mesh", "-t", "0.3", "--repeat", "1", "--psk-file", &key, "--no-store", &ta, &tb];
    let mesh = std::thread::spawn({
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&args, Duration::from_secs(60))
        }
    });
    // The first greeting: taken, never answered; then the agent on that port.
    silent.set_nonblocking(false).expect("blocking");
    let (held, _) = silent.accept().expect("the first greeting");
    drop(silent);
    let b = Server::start_raw(&[
        "server",
        "-p",
        &port.to_string(),
        "-B",
        "127.0.0.1",
        "--agent",
        "--psk-file",
        &key,
        "--node-name",
        "b",
    ]);
    let out = mesh.join().expect("mesh");
    drop(held);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    for pair in ["a -> b", "b -> a"] {
        assert!(out.stdout.contains(pair), "{pair}: {}", out.stdout);
    }
    assert!(!out.stdout.contains("not reachable"), "{}", out.stdout);
    drop(b);
}

/// Issue 47: an agent tests only targets a requester may name. In a namespace of the test's
/// own, agent A listens on a private address (a veth's inside the namespace) and agent B on loopback: by
/// default each refuses the other as a target (another kind of network) before contacting
/// it; with `--pair-allow` naming the other's network, both pairs run.
#[test]
fn an_agent_refuses_targets_off_its_own_kind_of_network_unless_allowed() {
    if !namespaces_available() {
        return;
    }
    let _g = crate::util::exclusive();
    let dir = test_dir("mesh-pair-allow");
    let key = key_file(&dir, "psk", b'p');
    let ns = Namespaces::new("pa", &["x"]);
    let x = &ns.0[0];
    let net = 1 + (std::process::id() % 200) as u8;
    // This kernel has no dummy interfaces: a veth pair with both ends inside.
    ip(&["-n", x, "link", "add", "d0", "type", "veth", "peer", "name", "d1"]);
    ip(&["-n", x, "addr", "add", &format!("10.240.{net}.1/24"), "dev", "d0"]);
    ip(&["-n", x, "link", "set", "d0", "up"]);
    ip(&["-n", x, "link", "set", "d1", "up"]);
    let (a, b) = (format!("10.240.{net}.1"), "127.0.0.1".to_string());
    let agents = |allow: [Option<String>; 2]| -> Vec<KillOnDrop> {
        [(&a, "node-a", &allow[0]), (&b, "node-b", &allow[1])]
            .into_iter()
            .map(|(addr, node, allow)| {
                let mut args = vec!["server", "-B", addr, "--agent", "--psk-file", &key];
                args.extend(["--node-name", node]);
                if let Some(list) = allow {
                    args.extend(["--pair-allow", list]);
                }
                KillOnDrop(spawn_in(x, &args))
            })
            .collect()
    };
    let mesh = || {
        std::thread::sleep(Duration::from_millis(500));
        let args = ["mesh", "-t", "0.3", "--repeat", "1", "--psk-file", &key, "--no-store"];
        run_in(x, &[&args[..], &[a.as_str(), b.as_str()]].concat())
    };
    let running = agents([None, None]);
    let out = mesh();
    assert_eq!(out.code, Some(3), "both pairs refused: {}\n{}", out.stdout, out.stderr);
    let refused =
        |l: &&str| l.starts_with('[') && l.contains("not on this agent's kind of network");
    assert_eq!(out.stderr.lines().filter(refused).count(), 2, "{}", out.stderr);
    drop(running);
    let running = agents([Some("127.0.0.0/8".into()), Some(format!("10.240.{net}.0/24"))]);
    let out = mesh();
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    for pair in ["node-a -> node-b", "node-b -> node-a"] {
        assert!(out.stdout.contains(pair), "{pair}: {}", out.stdout);
    }
    drop(running);
}
