//! The environment snapshot recorded with every run, and `linerate compare` listing what
//! changed between two runs' environments. The change is made inside a network namespace
//! this test creates (per-namespace settings: `net.ipv4.tcp_rmem` and the loopback MTU), so
//! the host's own configuration is never touched. Needs root; see `netns.rs`.

use std::process::Command;
use std::time::Duration;

use crate::netns::{KillOnDrop, ip, namespaces_available, run_in, spawn_in};

/// Namespaces this test created; removed on drop, also when the test fails.
pub(crate) struct Namespaces(pub(crate) Vec<String>);

impl Namespaces {
    /// `lr<pid><tag><suffix>` for each suffix, created now.
    pub(crate) fn new(tag: &str, suffixes: &[&str]) -> Namespaces {
        let id = format!("lr{}{tag}", std::process::id() % 100_000);
        let ns = Namespaces(suffixes.iter().map(|s| format!("{id}{s}")).collect());
        for n in &ns.0 {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ns
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Sets a sysctl inside `ns` (per-namespace ones only).
pub(crate) fn sysctl_in(ns: &str, key: &str, value: &str) {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", &format!("echo '{value}' > {path}")])
        .output()
        .expect("ip netns exec");
    assert!(out.status.success(), "{key}={value}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn compare_lists_what_changed_in_both_environments() {
    let _serial = crate::util::exclusive();
    if !namespaces_available() {
        return;
    }
    let ns = Namespaces::new("e", &["n"]);
    let n = &ns.0[0];
    let db = crate::util::data_home().join(format!("env-{n}.sqlite"));
    let _ = std::fs::remove_file(&db);
    let db = db.to_string_lossy().into_owned();
    let mut ids = Vec::new();
    for (rmem, mtu) in [("4096 131072 6291456", "65536"), ("4096 65536 1048576", "9000")] {
        sysctl_in(n, "net.ipv4.tcp_rmem", rmem);
        ip(&["-n", n, "link", "set", "lo", "mtu", mtu]);
        let _server = KillOnDrop(spawn_in(n, &["server", "-p", "5201", "-B", "127.0.0.1"]));
        std::thread::sleep(Duration::from_millis(300));
        let out = run_in(n, &["client", "127.0.0.1", "-t", "0.3", "-i", "0", "--db", &db, "-J"]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
        for end in ["client", "server_results"] {
            let env = &doc["record"][end]["environment"];
            assert_eq!(env["sysctls"]["net.ipv4.tcp_rmem"]["value"], rmem, "{end}: {env}");
            assert_eq!(env["interfaces"][0]["name"], "lo", "{end}: {env}");
            assert_eq!(env["interfaces"][0]["mtu_bytes"]["value"].to_string(), mtu, "{end}");
        }
        ids.push(history_last_id(&db));
    }
    let out =
        crate::util::run(&["compare", &ids[0], &ids[1], "--db", &db], Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for end in ["client", "server"] {
        let line = out.stdout.lines().find(|l| l.trim_start().starts_with(end));
        let line = line.unwrap_or_else(|| panic!("no {end} line in {}", out.stdout));
        assert!(line.contains("lo MTU 65536 → 9000"), "{line}");
        assert!(
            line.contains("net.ipv4.tcp_rmem 4096 131072 6291456 → 4096 65536 1048576"),
            "{line}"
        );
        assert!(!line.contains("kernel"), "nothing else changed: {line}");
    }
    let json = crate::util::run(
        &["compare", &ids[0], &ids[1], "--db", &db, "-J"],
        Duration::from_secs(20),
    );
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(doc[0]["environment"][1]["end"], "server", "{doc}");
    let shown = crate::util::run(&["show", &ids[1], "--db", &db], Duration::from_secs(20)).stdout;
    assert!(
        shown.contains("Environment (server):") && shown.contains("interface lo (test): MTU 9000"),
        "{shown}"
    );
}

fn history_last_id(db: &str) -> String {
    let out = crate::util::run(&["history", "--db", db, "-J"], Duration::from_secs(20));
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).expect("history json");
    rows[0]["id"].as_i64().expect("id").to_string()
}
