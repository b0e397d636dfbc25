//! `linerate campaign FILE.toml` end to end on loopback: errors that point at the line, two
//! tiers against two servers into one history group, and resuming an interrupted campaign.

use std::time::Duration;

use linerate::store::{RunKind, Store};
use serde_json::Value;

use crate::util::{Output, Server, completed, free_port, run, test_dir as dir};

fn write(dir: &std::path::Path, text: &str) -> String {
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).expect("write plan");
    p.to_string_lossy().into_owned()
}

fn campaign(args: &[&str]) -> Output {
    let mut all = vec!["campaign"];
    all.extend_from_slice(args);
    run(&all, Duration::from_secs(120))
}

fn two_tiers(a: u16, b: u16) -> String {
    format!(
        "name = \"loopback-pair\"\n\n[defaults]\nparallel = [1, 2]\nrepeat = 2\ntime = 0.3\n\n\
         [tiers.first]\nhost = \"127.0.0.1\"\nport = {a}\n\n\
         [tiers.second]\nhost = \"127.0.0.1\"\nport = {b}\nlink_speed = \"100G\"\n"
    )
}

#[test]
fn campaign_file_errors_name_the_line_column_and_fix() {
    let d = dir("errors");
    for (text, expected) in [
        (
            "[tiers.localhost]\nhost = \"127.0.0.1\"\nparalel = [1, 2]\n",
            ":3:1: unknown key \"paralel\" in [tiers.localhost]; did you mean \"parallel\"?",
        ),
        (
            "[tiers.a]\nhost = \"127.0.0.1\"\nwindow = \"80xk\"\n",
            ":3:10: window: invalid size \"80xk\"",
        ),
        ("[defaults]\ntime = 1\n\n[tiers.dc]\nport = 5201\n", ":4:1: tier \"dc\" has no host"),
        (
            "[tiers.u]\nhost = \"127.0.0.1\"\nprotocol = \"udp\"\nlength = 8\n",
            ":1:1: tier \"u\", cell \"l=8 udp\": ",
        ),
    ] {
        let file = write(&d, text);
        let out = campaign(&[&file, "--no-store"]);
        assert_eq!(out.code, Some(2), "{text}: {}", out.stderr);
        assert!(out.stderr.contains(&format!("{file}{expected}")), "{text}:\n{}", out.stderr);
        assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
    }
}

#[test]
fn campaign_of_two_tiers_runs_each_matrix_into_one_finished_group() {
    let _serial = crate::util::exclusive();
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    let d = dir("two-tiers");
    let (file, db) = (write(&d, &two_tiers(a.port, b.port)), d.join("h.sqlite"));
    let db_s = db.to_string_lossy().into_owned();
    let out = campaign(&[&file, "--db", &db_s, "-J"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    let doc = out.json();
    assert_eq!(doc["kind"], "linerate.campaign");
    assert_eq!(doc["finished"], true);
    let tiers = doc["tiers"].as_array().expect("tiers");
    let names: Vec<&str> = tiers.iter().map(|t| t["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["first", "second"]);
    for (t, port) in tiers.iter().zip([a.port, b.port]) {
        assert_eq!(t["server"], format!("127.0.0.1:{port}"));
        let cells = t["summary"]["cells"].as_array().expect("cells");
        assert_eq!(cells.len(), 2, "{t}");
        assert!(cells.iter().all(|c| c["runs"] == 2), "{t}");
        assert_eq!(t["runs"].as_array().expect("runs").len(), 4);
        assert!(t["best_bits_per_second"].as_f64().expect("best") > 1e8, "{t}");
    }
    assert!(tiers[0]["share_of_link_goodput"].is_null());
    assert!(tiers[1]["share_of_link_goodput"].as_f64().expect("share") > 0.0);
    let store = Store::open(&db).expect("history");
    let g = store.group(doc["group"].as_i64().expect("group")).expect("read").expect("group");
    assert_eq!((g.kind.as_str(), g.finished), ("campaign", true));
    assert_eq!(g.params["plan"]["name"], "loopback-pair");
    let runs = store.group_runs(g.id).expect("runs");
    assert_eq!(runs.len(), 8);
    for (_, meta, _) in &runs {
        assert_eq!(meta.kind, RunKind::CampaignCell);
        let cell = meta.cell.as_deref().expect("cell");
        assert!(cell.starts_with("first/P=") || cell.starts_with("second/P="), "{cell}");
        assert!(matches!(meta.repetition, Some(1 | 2)), "{meta:?}");
    }
    // The text report has each tier's table and the summary across tiers.
    let text = campaign(&[&file, "--no-store"]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    for needle in ["== Tier first: ", "== Tier second: ", "== Campaign summary", "Findings:"] {
        assert!(text.stdout.contains(needle), "{needle}:\n{}", text.stdout);
    }
}

/// (cell, repetition) of every completed run of the group.

#[test]
fn campaign_resume_runs_only_what_an_interrupted_campaign_left() {
    let _serial = crate::util::exclusive();
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    let d = dir("resume");
    let (file, db) = (write(&d, &two_tiers(a.port, b.port)), d.join("h.sqlite"));
    let db_s = db.to_string_lossy().into_owned();
    let first = campaign(&[&file, "--db", &db_s, "--stop-after", "3"]);
    assert_eq!(first.code, Some(130), "{}\n{}", first.stderr, first.stdout);
    assert!(first.stderr.contains("--resume"), "says how to resume: {}", first.stderr);
    let store = Store::open(&db).expect("history");
    let g = store.groups(10).expect("groups").remove(0);
    assert_eq!((g.kind.as_str(), g.finished), ("campaign", false));
    assert_eq!(completed(&store, g.id).len(), 3);
    drop(store);

    // Another file is another campaign: refused, naming the group.
    let other = d.join("other.toml");
    std::fs::write(&other, two_tiers(a.port, b.port).replace("repeat = 2", "repeat = 3"))
        .expect("write");
    let other = other.to_string_lossy().into_owned();
    let refused = campaign(&[&other, "--db", &db_s, "--resume"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("changed"), "{}", refused.stderr);

    let out = campaign(&[&file, "--db", &db_s, "--resume", "-J"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    let doc: Value = out.json();
    assert_eq!(doc["group"], g.id);
    assert_eq!(doc["finished"], true);
    for t in doc["tiers"].as_array().expect("tiers") {
        assert_eq!(t["runs"].as_array().expect("runs").len(), 4, "{t}");
    }
    crate::util::assert_resumed_whole(&db, g.id, 8);
}

/// A loopback port where something that is no test server answers: an HTTP server's "400"
/// to whatever arrives, for one connection (the pre-flight's).
fn wrong_program() -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let serve = std::thread::spawn(move || {
        if let Ok((mut c, _)) = listener.accept() {
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = c.read(&mut [0u8; 256]);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (port, serve)
}

#[test]
fn campaign_preflight_stops_before_any_run_naming_each_unreachable_tier_and_why() {
    let srv = Server::start(&[]);
    let (web, serving) = wrong_program();
    let closed = free_port();
    let d = dir("preflight");
    let file = write(
        &d,
        &format!(
            "[defaults]\ntime = 0.2\nrepeat = 1\n\n[tiers.first]\nhost = \"127.0.0.1\"\nport = {}\n\n\
             [tiers.second]\nhost = \"tier2.nowhere.invalid\"\n\n\
             [tiers.third]\nhost = \"127.0.0.1\"\nport = {closed}\n\n\
             [tiers.fourth]\nhost = \"127.0.0.1\"\nport = {web}\n",
            srv.port
        ),
    );
    let db = d.join("h.sqlite");
    let started = std::time::Instant::now();
    let out = campaign(&[&file, "--db", &db.to_string_lossy()]);
    let took = started.elapsed();
    let _ = serving.join();
    assert_eq!(out.code, Some(3), "{}\n{}", out.stderr, out.stdout);
    assert!(took < Duration::from_secs(5), "the pre-flight is quick: {took:?}");
    for expected in [
        "pre-flight: tier 2/4 \"second\" at tier2.nowhere.invalid:5201 does not resolve (",
        &format!("tier 3/4 \"third\" at 127.0.0.1:{closed} refused the connection ("),
        &format!("tier 4/4 \"fourth\" at 127.0.0.1:{web} runs the wrong program"),
        "no run was made",
    ] {
        assert!(out.stderr.contains(expected), "{expected}:\n{}", out.stderr);
    }
    assert!(!out.stderr.contains("\"first\""), "tier 1 answered: {}", out.stderr);
    assert!(!out.stderr.contains("[1/"), "no run: {}", out.stderr);
    // Nothing was stored: not a run, not an empty campaign group.
    let store = Store::open(&db).expect("history");
    assert!(store.groups(10).expect("groups").is_empty());
    // Tier one's server was greeted (the doctor's hello), and ran no test.
    assert!(srv.wait_for_log("Doctor from 127.0.0.1", Duration::from_secs(2)), "{}", srv.log());
    assert!(srv.log().lines().all(|l| !l.contains("[test ")), "no test ran: {}", srv.log());
}

#[test]
fn a_tier_that_fails_mid_campaign_says_why_and_the_summary_names_it() {
    // Tier one's server takes a hello but refuses its tests (two streams, it allows one).
    let (strict, ok) = (Server::start(&["--max-streams", "1"]), Server::start(&[]));
    let d = dir("tier-fails");
    let file = write(
        &d,
        &format!(
            "[defaults]\ntime = 0.2\nrepeat = 3\nwindow = \"256k\"\n\n\
             [tiers.first]\nhost = \"127.0.0.1\"\nport = {}\nparallel = 2\n\n\
             [tiers.second]\nhost = \"127.0.0.1\"\nport = {}\nrepeat = 1\n",
            strict.port, ok.port
        ),
    );
    let out = campaign(&[&file, "--no-store"]);
    assert_eq!(out.code, Some(3), "{}\n{}", out.stderr, out.stdout);
    let warning = "warning: tier 1/2 first stopped early: 3 runs in a row failed (last: ";
    assert!(out.stderr.contains(warning), "{}", out.stderr);
    assert!(out.stderr.contains("the campaign goes on with tier 2/2 second"), "{}", out.stderr);
    assert!(out.stderr.contains("[4/4] tier 2/2 second: w=256k (run 1): "), "{}", out.stderr);
    let summary = "Tiers that did not complete:\n  - first: no run completed (3 failed): 3 runs in a \
                   row failed";
    assert!(out.stdout.contains(summary), "{}", out.stdout);
}
