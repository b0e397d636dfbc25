//! A real Prometheus (Debian's `prometheus`, installed by `.ci/run`) scrapes a running
//! `linerate server --metrics` and a probe job (`/probe` with a `target` parameter, as
//! blackbox exporters are scraped); the test reads back through Prometheus's query API the
//! test a client ran, the refusals by reason and the probe's figures, then runs every PromQL
//! expression of the shipped Grafana dashboard (`packaging/grafana/linerate.json`): each must
//! parse and return data. Loopback only; Prometheus is this test's own instance (temporary
//! config and storage), never the distribution's service. Bounded waits throughout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::abuse::figure;
use crate::metrics::probing_server;
use crate::util::{Server, free_port, run, test_dir};

/// The prometheus binary, or None outside CI when there is none (CI fails instead).
fn prometheus_bin() -> Option<String> {
    let found = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    match found {
        Some(p) => Some(p.to_string()),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "prometheus is not installed: .ci/run installs Debian's `prometheus` package \
             (apt-get install prometheus); this test needs it under CI"
        ),
        None => {
            eprintln!("SKIPPED: no prometheus binary (apt-get install prometheus); CI runs it");
            None
        }
    }
}

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` from 127.0.0.1:`port` (HTTP/1.0, so the answer is not chunked): the body.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

/// A query parameter, percent-encoded.
fn encoded(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs an instant query: its result vector, or the error Prometheus gave.
fn query(port: u16, promql: &str) -> Result<Vec<Value>, String> {
    let body = get(port, &format!("/api/v1/query?query={}", encoded(promql)))
        .ok_or_else(|| "no answer from Prometheus".to_string())?;
    let doc: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if doc["status"] != "success" {
        return Err(format!("{promql}: {body}"));
    }
    Ok(doc["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// The value of the first series `promql` returns.
fn value(port: u16, promql: &str) -> Option<f64> {
    let result = query(port, promql).ok()?;
    result.first()?["value"][1].as_str()?.parse().ok()
}

/// Waits (at most `limit`) until `promql` has a first value for which `ok` holds.
fn wait_value(port: u16, promql: &str, limit: Duration, ok: impl Fn(f64) -> bool) -> Option<f64> {
    let end = Instant::now() + limit;
    loop {
        let v = value(port, promql);
        if v.is_some_and(&ok) || Instant::now() >= end {
            return v.filter(|v| ok(*v));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn prometheus_scrapes_tests_refusals_and_probes_and_the_dashboard_queries_run() {
    let Some(bin) = prometheus_bin() else { return };
    let dir = test_dir("prometheus");
    let key = dir.join("psk");
    std::fs::write(&key, "a key for the prometheus test\n").expect("key");
    let wrong = dir.join("wrong");
    std::fs::write(&wrong, "not the key of the server here\n").expect("key");
    // The probe's target is a second server, so the scraped server's counts are the client's.
    // The server runs one probe at a time and answers "busy" meanwhile: the closed port's job
    // scrapes every 3 s against the other's 5 s, so its scrapes cannot all land on a running
    // probe (at one interval each a fixed phase could, and the run would see no failed probe).
    let target = Server::start(&[]);
    let closed = free_port();
    let allow = format!("127.0.0.1:{},127.0.0.1:{closed}", target.port);
    let key_arg = format!("--psk-file={}", key.display());
    // Probes every 5 s of a 1 s probe: half the time, past the default budget of 10 %.
    let (srv, mport) = probing_server(false, &allow, &[&key_arg, "--probe-share", "50"]);
    let port = srv.port;
    // Two agents that test each other once (a mesh), scraped for their per-pair series.
    let agent = |node: &str| {
        let args = ["--agent", key_arg.as_str(), "--node-name", node, "--zone", "z1"];
        crate::metrics::metrics_server(&args)
    };
    let ((alpha, alpha_m), (beta, beta_m)) = (agent("alpha"), agent("beta"));
    let rules = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../packaging/prometheus/linerate-rules.yml");
    let pport = free_port();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n- '{}'\n\
         scrape_configs:\n\
         - job_name: linerate_agents\n  static_configs:\n  - targets: ['127.0.0.1:{alpha_m}', '127.0.0.1:{beta_m}']\n\
         - job_name: linerate\n  static_configs:\n  - targets: ['127.0.0.1:{mport}']\n\
         - job_name: linerate_probe\n  metrics_path: /probe\n  scrape_interval: 5s\n  \
         scrape_timeout: 4s\n  params:\n    target: ['127.0.0.1:{}']\n  static_configs:\n  \
         - targets: ['127.0.0.1:{mport}']\n\
         - job_name: linerate_probe_down\n  metrics_path: /probe\n  scrape_interval: 3s\n  \
         scrape_timeout: 2s\n  params:\n    target: ['127.0.0.1:{closed}']\n  static_configs:\n  \
         - targets: ['127.0.0.1:{mport}']\n",
        rules.display(),
        target.port
    );
    let config_file = dir.join("prometheus.yml");
    std::fs::write(&config_file, config).expect("config");
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("log");
    let prom = Command::new(&bin)
        .arg(format!("--config.file={}", config_file.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{pport}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let _prom = Killed(prom);
    let prom_log = || std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    let ready_by = Instant::now() + Duration::from_secs(30);
    while get(pport, "/-/ready").is_none_or(|b| !b.contains("Ready")) {
        assert!(Instant::now() < ready_by, "Prometheus not ready in 30 s:\n{}", prom_log());
        std::thread::sleep(Duration::from_millis(200));
    }

    // A real test, a wrong key and a request over a limit.
    let p = port.to_string();
    let psk = format!("--psk-file={}", key.display());
    let out = run(&["client", "127.0.0.1", "-p", &p, "-t", "1", "-J", &psk], LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let sent = crate::util::bytes(&out.json(), "client", "sender") as f64;
    let bad = format!("--psk-file={}", wrong.display());
    assert_ne!(run(&["client", "127.0.0.1", "-p", &p, "-t", "1", &bad], LIMIT).code, Some(0));
    let over = ["client", "127.0.0.1", "-p", &p, "-t", "1", "-P", "500", &psk];
    assert_ne!(run(&over, LIMIT).code, Some(0));
    // Paced: this test is not exclusive, and unpaced loopback pairs would take both cores
    // from the timing-sensitive tests running beside it.
    let mesh = ["mesh", "-t", "0.3", "-b", "100M", "--repeat", "1", "--no-store", &psk];
    let (ta, tb) = (format!("127.0.0.1:{}", alpha.port), format!("127.0.0.1:{}", beta.port));
    let out = run(&[&mesh[..], &[ta.as_str(), tb.as_str()]].concat(), LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // And a connection that is neither protocol, dropped at its first bytes.
    let mut junk = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    junk.write_all(b"\x00\x01\x02\x03\x04\x05\x06\x07").expect("write");
    let _ = junk.read(&mut [0u8; 16]);

    let wait = Duration::from_secs(40);
    let completed = r#"linerate_tests_total{job="linerate",outcome="completed"}"#;
    let got = wait_value(pport, completed, wait, |v| v >= 1.0);
    assert_eq!(got, Some(1.0), "the client's test, through Prometheus\n{}", srv.log());
    for reason in ["auth", "streams"] {
        let q = format!(r#"linerate_tests_refused_total{{job="linerate",reason="{reason}"}}"#);
        assert_eq!(wait_value(pport, &q, wait, |v| v >= 1.0), Some(1.0), "refused: {reason}");
    }
    let dropped = r#"linerate_connections_dropped_total{job="linerate",reason="first_bytes"}"#;
    assert_eq!(wait_value(pport, dropped, wait, |v| v >= 1.0), Some(1.0), "a dropped connection");
    let received = r#"linerate_test_bytes_total{job="linerate",direction="received"}"#;
    assert_eq!(value(pport, received), Some(sent), "the bytes the client sent, as received");
    let ok = r#"linerate_probe_success{job="linerate_probe"}"#;
    assert_eq!(wait_value(pport, ok, wait, |v| v == 1.0), Some(1.0), "{}", srv.log());
    for dir in ["to_target", "from_target"] {
        let q =
            format!(r#"linerate_probe_bits_per_second{{job="linerate_probe",direction="{dir}"}}"#);
        let rate = value(pport, &q).expect("a probe rate");
        assert!(rate > 1e6, "{dir}: {rate}");
        figure(&format!("prometheus_probe_{dir}_bits_per_second"), format!("{rate:.3e}"));
        let q = format!(r#"linerate_probe_rtt_seconds{{job="linerate_probe",direction="{dir}"}}"#);
        assert!(value(pport, &q).is_some_and(|r| r > 0.0), "{dir}: RTT");
    }
    let down = r#"linerate_probe_success{job="linerate_probe_down"}"#;
    assert_eq!(wait_value(pport, down, wait, |v| v == 0.0), Some(0.0), "a failed probe");
    let missing =
        r#"linerate_probe_figure_missing{job="linerate_probe_down",reason="test_failed"}"#;
    assert!(value(pport, missing).is_some(), "its figures are missing, with the reason");

    // Every expression of the dashboard parses and returns data. A rate needs two samples
    // of its counter after the series appeared: each expression is asked again until it has
    // data, for at most 40 s in all.
    let dashboard: Value =
        serde_json::from_str(include_str!("../../../packaging/grafana/linerate.json"))
            .expect("the dashboard is JSON");
    let exprs: Vec<(String, String)> = dashboard_panels(&dashboard)
        .into_iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap_or_default().to_string();
            let targets = p["targets"].as_array().cloned().unwrap_or_default();
            targets
                .into_iter()
                .map(move |t| (title.clone(), t["expr"].as_str().unwrap_or_default().to_string()))
        })
        .collect();
    let until = Instant::now() + wait;
    let mut empty: Vec<&str> = exprs.iter().map(|(_, e)| e.as_str()).collect();
    while !empty.is_empty() && Instant::now() < until {
        let mut still = Vec::new();
        for (title, expr) in &exprs {
            if !empty.contains(&expr.as_str()) {
                continue;
            }
            match query(pport, expr) {
                Ok(r) if r.is_empty() => still.push(expr.as_str()),
                Ok(_) => {}
                Err(e) => panic!("panel {title:?}: {e}"),
            }
        }
        empty = still;
        if !empty.is_empty() {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    // The per-pair series, each agent's of the other, and the alerting rules loaded and
    // evaluated by this Prometheus (their syntax is also `promtool check rules`'s in CI).
    for (node, peer) in [("alpha", "beta"), ("beta", "alpha")] {
        let q = format!(
            r#"linerate_pair_bits_per_second{{job="linerate_agents",node="{node}",peer="{peer}",direction="to_peer"}}"#
        );
        assert!(wait_value(pport, &q, wait, |v| v > 1e6).is_some(), "{q}");
    }
    let body = get(pport, "/api/v1/rules").expect("rules");
    let doc: Value = serde_json::from_str(&body).expect("rules JSON");
    let loaded: usize = doc["data"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["rules"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(loaded, 4, "the four alerting rules: {body}");
    assert!(!body.contains("\"health\":\"err\""), "a rule failed to evaluate: {body}");
    figure("prometheus_alerting_rules_loaded", loaded);
    drop((alpha, beta));
    let exprs = exprs.len() - empty.len();
    figure("dashboard_expressions_with_data", exprs);
    assert!(empty.is_empty(), "dashboard expressions without data: {empty:?}");
    let up = value(pport, r#"sum(up{job=~"linerate.*"})"#);
    figure("prometheus_scrape_jobs_up", format!("{up:?}"));
}

const LIMIT: Duration = Duration::from_secs(30);

/// The dashboard's panels, its structure checked on the way: unique ids, a title and a
/// known type each, a place inside the 24-column grid, and targets with an expression and a
/// reference id each.
fn dashboard_panels(d: &Value) -> Vec<&Value> {
    assert!(d["title"].is_string() && d["uid"].is_string(), "a title and a uid");
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 30), "a current schemaVersion");
    let vars = d["templating"]["list"].as_array().expect("templating");
    assert!(vars.iter().any(|v| v["type"] == "datasource" && v["query"] == "prometheus"));
    let panels: Vec<&Value> = d["panels"].as_array().expect("panels").iter().collect();
    assert!(panels.len() >= 10, "{} panels", panels.len());
    let mut ids = std::collections::BTreeSet::new();
    for p in &panels {
        let title = p["title"].as_str().expect("a panel title");
        assert!(ids.insert(p["id"].as_u64().expect("an id")), "{title}: duplicate id");
        let kind = p["type"].as_str().unwrap_or_default();
        let kinds = ["timeseries", "stat", "table", "gauge", "status-history"];
        assert!(kinds.contains(&kind), "{title}: {kind}");
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().expect("x"), g["w"].as_u64().expect("w"));
        assert!(x + w <= 24 && g["h"].as_u64().is_some_and(|h| h > 0), "{title}: {g}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert!(t["expr"].is_string() && t["refId"].is_string(), "{title}: {t}");
        }
    }
    panels
}
