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
        let (inner, outer) = (format!("{agent_ns}i"), format!("{agent_ns}o"));
        ip(&["link", "add", &inner, "type", "veth", "peer", "name", &outer]);
        ip(&["link", "set", &inner, "netns", agent_ns]);
        ip(&["link", "set", &outer, "netns", hub]);
        ip(&["-n", hub, "link", "set", &outer, "master", &format!("br{zone}")]);
        ip(&["-n", hub, "link", "set", &outer, "up"]);
        let addr = format!("10.231.{net}.{}", i + 1);
        ip(&["-n", agent_ns, "addr", "add", &format!("{addr}/24"), "dev", &inner]);
        ip(&["-n", agent_ns, "link", "set", &inner, "up"]);
        let node = format!("node{}", i + 1);
        agents.push(KillOnDrop(spawn_in(
            agent_ns,
            &[
                "server",
                "-B",
                &addr,
                "--agent",
                "--psk-file",
                &key,
                "--node-name",
                &node,
                "--zone",
                zone,
            ],
        )));
        targets.push(format!("{addr}:5201=n{}", i + 1));
    }
    std::thread::sleep(Duration::from_millis(500));
    let db = dir.join("h.db");
    let mut args =
        vec!["mesh", "--psk-file", &key, "-t", "1", "--repeat", "2", "--seed", "5", "-J"];
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
    assert!(report.stdout.contains("mesh n1"), "{}", report.stdout);
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
    // The wrong key: each agent refuses the requester.
    let out = mesh(&[at(&a, "a"), at(&b, "b")], &other);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("authentication failed"), "{}", out.stderr);
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
    // An agent with another key: agent a's test is refused by it.
    let out = mesh(&[at(&a, "a"), at(&stranger, "s")], &key);
    assert_ne!(out.code, Some(0));
    assert!(a.wait_for_log("pair test for", Duration::from_secs(5)), "{}", a.log());
    assert!(a.log().contains("authentication failed"), "{}", a.log());
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
