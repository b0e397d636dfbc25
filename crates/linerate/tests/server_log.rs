//! The server's log: one line per test (JSON with `--log-format json`) saying who, what, how
//! much and how it ended, and never the pre-shared key.

use std::time::Duration;

use serde_json::Value;

use crate::util::{Server, client_json, data_home, run};

fn json_lines(srv: &Server) -> Vec<Value> {
    srv.log().lines().map(|l| serde_json::from_str(l).expect("every line is JSON")).collect()
}

#[test]
fn json_log_has_one_summary_line_per_test_and_no_secrets() {
    let dir = data_home();
    std::fs::create_dir_all(&dir).expect("dir");
    let key = dir.join("log-psk");
    std::fs::write(&key, "a secret that must stay secret\n").expect("key");
    let key = key.to_str().expect("utf-8");
    let srv = Server::start(&["--log-format", "json", "--psk-file", key, "--max-streams", "2"]);
    client_json(srv.port, &["-t", "0.3", "-P", "2", "--psk-file", key]);
    let port = srv.port.to_string();
    let refused = run(
        &["client", "127.0.0.1", "-p", &port, "-P", "3", "--psk-file", key],
        Duration::from_secs(10),
    );
    assert_eq!(refused.code, Some(3));
    let wrong = dir.join("log-wrong");
    std::fs::write(&wrong, "not the server's key at all\n").expect("key");
    let _ = run(
        &["client", "127.0.0.1", "-p", &port, "--psk-file", wrong.to_str().expect("utf-8")],
        Duration::from_secs(10),
    );
    assert!(srv.wait_for_log("authentication failed", Duration::from_secs(3)), "{}", srv.log());
    let lines = json_lines(&srv);
    let ended: Vec<&Value> = lines.iter().filter(|l| l["event"] == "test_ended").collect();
    assert_eq!(ended.len(), 1, "one line per test that ran: {}", srv.log());
    let s = &ended[0]["summary"];
    assert_eq!(s["outcome"], "completed");
    assert!(s["software"].as_str().expect("software").starts_with("linerate"));
    assert_eq!(s["spec"]["streams"], 2);
    assert!(s["bytes_client_to_server"].as_u64().expect("bytes") > 0, "{s}");
    assert_eq!(s["bytes_server_to_client"], 0);
    assert!(s["seconds"].as_f64().expect("seconds") > 0.2);
    // Brief by default (issue 46: a whole record a line ran to 10 KB for one second): the
    // summary, without both ends' full results (`--log-results full` adds them; the interop
    // tests read them so).
    assert!(ended[0].get("server").is_none() && ended[0].get("client").is_none(), "{}", ended[0]);
    let line = srv.log().lines().find(|l| l.contains("\"test_ended\"")).expect("line").len();
    assert!(line < 2048, "a test_ended line of {line} bytes");
    let rejected: Vec<&Value> = lines.iter().filter(|l| l["event"] == "rejected").collect();
    assert!(rejected.iter().any(|l| l["reason"].to_string().contains("--max-streams")));
    assert!(!srv.log().contains("secret"), "the key never reaches the log:\n{}", srv.log());
}

/// Issue 46: an agent's log says it is an agent, and where it runs, right after it listens —
/// in text and in JSON — so that one pod's log of many says which agent it is. A plain server
/// says nothing more.
#[test]
fn an_agents_log_names_it_an_agent_with_its_node_and_zone() {
    let dir = data_home();
    std::fs::create_dir_all(&dir).expect("dir");
    let key = dir.join("agent-log-psk");
    std::fs::write(&key, "an agent's key, long enough\n").expect("key");
    let key = key.to_str().expect("utf-8");
    let place = ["--node-name", "node-a", "--zone", "zone-a", "--network", "pod"];
    let srv = Server::start(&[&["--agent", "--psk-file", key], &place[..]].concat());
    assert!(srv.wait_for_log("Agent of meshes", Duration::from_secs(5)), "{}", srv.log());
    let second = srv.log().lines().nth(1).unwrap_or_default().to_string();
    assert_eq!(second, "Agent of meshes (--agent) on node node-a, zone zone-a, network pod");
    let srv = Server::start(
        &[&["--agent", "--psk-file", key, "--log-format", "json"], &place[..]].concat(),
    );
    assert!(srv.wait_for_log("serving", Duration::from_secs(5)), "{}", srv.log());
    let lines = json_lines(&srv);
    let serving = lines.iter().find(|l| l["event"] == "serving").expect("a serving line");
    assert_eq!(serving["agent"], true, "{serving}");
    assert_eq!(
        (serving["node"].as_str(), serving["zone"].as_str()),
        (Some("node-a"), Some("zone-a"))
    );
    let plain = Server::start(&[]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(plain.log().lines().count(), 1, "{}", plain.log());
}
