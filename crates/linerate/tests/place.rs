//! A server's node and zone (`--node-name`, `--zone`, or the LINERATE_NODE_NAME and
//! LINERATE_ZONE variables the Kubernetes DaemonSet sets from the downward API) reach every
//! client: in the run's JSON, in a fleet's host table and JSON, and in `show`. In a pod the
//! host name is the pod's, so without them a fleet over a headless service could not say
//! which node was slow. Loopback only.

use std::time::Duration;

use crate::util::{Server, run};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn every_result_names_the_node_and_zone_its_server_was_given() {
    let a = Server::start(&["-B", "127.0.0.1", "--node-name", "node-a", "--zone", "zone-1"]);
    // As the DaemonSet passes them; a zone label the node does not have expands to "".
    let b = Server::start_env(
        &[("LINERATE_NODE_NAME", "node-b"), ("LINERATE_ZONE", "")],
        &["-B", "127.0.0.1"],
    );
    let plain = Server::start(&["-B", "127.0.0.1"]);

    let one =
        run(&["client", &format!("127.0.0.1:{}", a.port), "-t", "0.3", "-J", "--no-store"], LIMIT);
    assert_eq!(one.code, Some(0), "{}", one.stderr);
    let env = &one.json()["record"]["server_results"]["environment"];
    assert_eq!((env["node"].as_str(), env["zone"].as_str()), (Some("node-a"), Some("zone-1")));

    let targets = [
        format!("127.0.0.1:{}=a", a.port),
        format!("127.0.0.1:{}=b", b.port),
        format!("127.0.0.1:{}=plain", plain.port),
    ];
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["fleet", "-t", "0.5", "--no-store"].map(String::from).to_vec();
        v.extend(targets.iter().cloned());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let json = run(&args(&["-J"]).iter().map(String::as_str).collect::<Vec<_>>(), LIMIT);
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let doc = json.json();
    let hosts = doc["summary"]["directions"][0]["hosts"].as_array().expect("hosts");
    let place = |label: &str| {
        let h = hosts.iter().find(|h| h["label"] == label).expect("host in the fleet");
        (h["node"].as_str().map(String::from), h["zone"].as_str().map(String::from))
    };
    assert_eq!(place("a"), (Some("node-a".into()), Some("zone-1".into())));
    assert_eq!(place("b"), (Some("node-b".into()), None));
    assert_eq!(place("plain"), (None, None), "a server without names sends none");

    let text = run(&args(&[]).iter().map(String::as_str).collect::<Vec<_>>(), LIMIT);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    let row = |label: &str| {
        text.stdout.lines().find(|l| l.starts_with(&format!("{label} "))).unwrap_or("").to_string()
    };
    assert!(row("a").starts_with("a (node node-a, zone zone-1) "), "{}", text.stdout);
    assert!(row("b").starts_with("b (node node-b, zone unknown) "), "{}", text.stdout);
    assert!(!row("plain").contains("node"), "{}", text.stdout);
}

#[test]
fn a_name_no_client_could_show_is_refused_at_start() {
    let bad = run(&["server", "-p", "0", "--node-name", "node\u{1b}[31m"], LIMIT);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("control character"), "{}", bad.stderr);
    let long = "n".repeat(254);
    let bad = run(&["server", "-p", "0", "--zone", &long], LIMIT);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("at most 253"), "{}", bad.stderr);
}
