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

/// Two tiers on loopback; the first names its port as the CLI takes it (`HOST:PORT`), the
/// second with `port =`.
fn two_tiers(a: u16, b: u16) -> String {
    format!(
        "name = \"loopback-pair\"\n\n[defaults]\nparallel = [1, 2]\nrepeat = 2\ntime = 0.3\n\n\
         [tiers.first]\nhost = \"127.0.0.1:{a}\"\n\n\
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
        assert_refused(&d, text, expected);
    }
}

/// `text` as a campaign file is refused with exit status 2 and `FILE` + `expected` on
/// stderr, before anything runs.
fn assert_refused(d: &std::path::Path, text: &str, expected: &str) {
    let file = write(d, text);
    let out = campaign(&[&file, "--no-store"]);
    assert_eq!(out.code, Some(2), "{text}: {}", out.stderr);
    assert!(out.stderr.contains(&format!("{file}{expected}")), "{text}:\n{}", out.stderr);
    assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
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
    assert_eq!(g.params.plan_json()["name"], "loopback-pair");
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
    // A list, a server a line, and one short error line after it (it was one long line).
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.iter().filter(|l| l.starts_with("pre-flight: tier ")).count(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l.chars().count() < 400), "{lines:?}");
    let last = lines.last().expect("the error line");
    assert!(
        last.contains("pre-flight: 3 servers were not reached (listed above); no run was made"),
        "{last}"
    );
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

/// Bad fleet tiers are refused before anything runs, at the tier's line, saying what to write.
#[test]
fn fleet_tier_errors_name_the_tier_and_the_fix() {
    let d = dir("fleet-errors");
    for (text, expected) in [
        (
            "[tiers.f]\nfleet = [\"127.0.0.1\", \"127.0.0.1:5201\"]\n",
            ":1:1: tier \"f\": 127.0.0.1:5201 is named twice",
        ),
        ("[tiers.f]\nfleet = []\n", ":1:1: tier \"f\" is a fleet with no servers"),
        (
            "[tiers.f]\nfleet = [\"a\", \"b\"]\nparallel = [1, 5]\n",
            ":1:1: tier \"f\" is a fleet, which runs one test on every host",
        ),
        (
            "[tiers.f]\nfleet = [\"a\"]\niperf3 = true\n",
            ":3:1: unknown key \"iperf3\" in [tiers.f]",
        ),
        (
            "[tiers.f]\nfleet = [\"a\"]\nscale = \"1..2\"\n",
            ":1:1: tier \"f\": scale 1..2: \"2\" is not a host count from 1 to 1",
        ),
        (
            "[tiers.f]\ntargets = \"missing.txt\"\n",
            ":1:1: tier \"f\": targets = \"missing.txt\": cannot read ",
        ),
    ] {
        assert_refused(&d, text, expected);
    }
}

/// A campaign with a single-server tier, a fleet tier with a scaling curve and a plain fleet
/// tier (its targets from a file beside the campaign), against three loopback servers: every
/// host run stored in the campaign's group, the fleet figures in the live JSON, and the same
/// figures rebuilt from the history by `report cN` in JSON, text and Markdown.
#[test]
fn a_campaign_with_fleet_tiers_stores_every_host_run_and_reports_the_fleets_figures() {
    let _serial = crate::util::exclusive();
    let s = [Server::start(&[]), Server::start(&[]), Server::start(&[])];
    let d = dir("fleet-tiers");
    let fleet: Vec<String> =
        ["a", "b", "c"].iter().zip(&s).map(|(l, s)| format!("127.0.0.1:{}={l}", s.port)).collect();
    std::fs::write(d.join("hosts.txt"), format!("# the servers\n{}\n", fleet.join("\n")))
        .expect("targets file");
    let quoted: Vec<String> = fleet.iter().map(|t| format!("{t:?}")).collect();
    let file = write(
        &d,
        &format!(
            "name = \"loopback-fleet\"\n\n[defaults]\ntime = 0.5\nrepeat = 1\nparallel = 2\n\n\
             [tiers.one]\nhost = \"127.0.0.1\"\nport = {}\n\n\
             [tiers.curve]\nfleet = [{}]\nscale = [1, 3]\nrepeat = 2\n\n\
             [tiers.all]\ntargets = \"hosts.txt\"\ndirection = \"recv\"\nlink_speed = \"100G\"\n",
            s[0].port,
            quoted.join(", ")
        ),
    );
    let db = d.join("h.sqlite");
    let db_s = db.to_string_lossy().into_owned();
    let out = campaign(&[&file, "--db", &db_s, "-J"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    // One progress line per fleet run, named by its host count.
    assert!(out.stderr.contains("tier 2/3 curve: k=3 (run 2): "), "{}", out.stderr);
    let doc = out.json();
    assert_eq!(doc["finished"], true);
    let tiers = doc["tiers"].as_array().expect("tiers");
    assert!(tiers[0].get("fleet").is_none(), "a single-server tier has no fleet figures");
    assert_eq!(tiers[1]["server"], "3 hosts (a … c)");
    let curve = &tiers[1]["fleet"]["curve"]["directions"][0];
    assert_eq!(curve["flow"], "client_to_server", "{curve}");
    let points: Vec<(u64, usize)> = curve["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| (p["hosts"].as_u64().expect("k"), p["totals"].as_array().map_or(0, Vec::len)))
        .collect();
    assert_eq!(points, [(1, 2), (3, 2)], "every host count, every repetition: {curve}");
    assert_eq!(tiers[1]["runs"].as_array().expect("runs").len(), 2 + 6, "every host run");
    let all = &tiers[2]["fleet"]["runs"][0]["summary"];
    assert_eq!((all["hosts_planned"].as_u64(), all["hosts_measured"].as_u64()), (Some(3), Some(3)));
    let down = &all["directions"][0];
    assert_eq!(down["flow"], "server_to_client", "recv: the hosts send");
    let labels: Vec<&str> = down["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter_map(|h| h["label"].as_str())
        .collect();
    assert_eq!(labels, ["a", "b", "c"]);
    let total = down["total_bits_per_second"].as_f64().expect("total");
    let host_sum: f64 = down["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter_map(|h| h["bits_per_second"].as_f64())
        .sum();
    assert!(total > 1e8 && (total - host_sum).abs() < 1.0, "{total} vs {host_sum}");
    assert!(down["across_hosts"]["jain"].as_f64().is_some_and(|j| j > 0.0 && j <= 1.0), "{down}");
    assert!(down["across_flows"]["n"] == 6, "3 hosts × 2 flows: {down}");
    assert_eq!(tiers[2]["best_bits_per_second"].as_f64(), Some(total));
    assert!(tiers[2]["share_of_link_goodput"].as_f64().is_some_and(|x| x > 0.0));

    // The history holds every host run under TIER/k=K, each with its place in the fleet.
    let store = Store::open(&db).expect("history");
    let group = doc["group"].as_i64().expect("group");
    let runs = store.group_runs(group).expect("runs");
    assert_eq!(runs.len(), 1 + 8 + 3);
    let mut cells: Vec<String> = runs.iter().filter_map(|(_, m, _)| m.cell.clone()).collect();
    cells.sort();
    cells.dedup();
    assert_eq!(cells, ["all/k=3", "curve/k=1", "curve/k=3", "one/P=2"]);
    let placed = runs.iter().filter(|(_, m, r)| {
        m.cell.as_deref().is_some_and(|c| c.contains("k=")) && r.fleet.is_some()
    });
    assert_eq!(placed.count(), 11);
    drop(store);

    // `report cN` rebuilds the same figures from the history alone.
    let cn = format!("c{group}");
    let again = run(&["report", &cn, "--db", &db_s, "--format", "json"], Duration::from_secs(20));
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    let again: Value = serde_json::from_str(&again.stdout).expect("report json");
    for t in 1..3 {
        assert_eq!(again["tiers"][t]["fleet"], tiers[t]["fleet"], "tier {t} from the history");
    }
    let text = run(&["report", &cn, "--db", &db_s], Duration::from_secs(20));
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    for needle in [
        "== Tier curve: 3 hosts (a … c) ==",
        "Scaling curve over the first 1, 3 of 3 targets, 4 fleet runs:",
        "Scaling, data to the hosts (upload):",
        "Fleet run 1 (3 hosts):",
        "across hosts (n=3)",
        "Fleet total from the hosts (download, -R): ",
        "data from the hosts at 3 hosts: total ",
        "Findings:\n  - data to the hosts",
    ] {
        assert!(text.stdout.contains(needle), "{needle}:\n{}", text.stdout);
    }
    let md = run(&["report", &cn, "--db", &db_s, "--format", "md"], Duration::from_secs(20));
    assert_eq!(md.code, Some(0), "{}", md.stderr);
    assert!(md.stdout.contains("```text\nFleet run 1 (3 hosts):"), "{}", md.stdout);
    let csv = ["report", &cn, "--db", &db_s, "-f", "csv", "--csv-kind", "intervals"];
    let csv = run(&csv, Duration::from_secs(20));
    assert!(csv.stdout.contains(",curve,k=3,2,"), "a fleet run's rows name its host count");
    // The saved document reads back with the same figures, recomputed from its records.
    let saved = d.join("campaign.json");
    std::fs::write(&saved, &out.stdout).expect("save the document");
    let saved = saved.to_string_lossy().into_owned();
    let from_file = run(&["report", &saved, "-f", "json"], Duration::from_secs(20));
    assert_eq!(from_file.code, Some(0), "{}", from_file.stderr);
    let from_file: Value = serde_json::from_str(&from_file.stdout).expect("report json");
    assert_eq!(from_file["tiers"][2]["fleet"], tiers[2]["fleet"], "from the saved document");
}

/// A fleet tier's servers are each greeted before the first run; one that refuses stops the
/// campaign, named with its tier, before anything runs or is stored.
#[test]
fn the_preflight_greets_every_server_of_a_fleet_tier() {
    let srv = Server::start(&[]);
    let closed = free_port();
    let d = dir("fleet-preflight");
    let file = write(
        &d,
        &format!(
            "[tiers.f]\nfleet = [\"127.0.0.1:{}=up\", \"127.0.0.1:{closed}=down\"]\ntime = 0.2\n",
            srv.port
        ),
    );
    let db = d.join("h.sqlite");
    let out = campaign(&[&file, "--db", &db.to_string_lossy()]);
    assert_eq!(out.code, Some(3), "{}\n{}", out.stderr, out.stdout);
    let named = format!("tier 1/1 \"f\" at 127.0.0.1:{closed} refused the connection (");
    assert!(out.stderr.contains(&named), "{}", out.stderr);
    assert!(!out.stderr.contains(&format!(":{} ", srv.port)), "up answered: {}", out.stderr);
    assert!(Store::open(&db).expect("history").groups(10).expect("groups").is_empty());
}

/// An interrupted campaign with a fleet tier resumes where it stopped: the fleet runs that
/// measured every host are kept, the others run, and each (host count, repetition) ends with
/// exactly one run per host.
#[test]
fn a_fleet_tier_resumes_only_its_missing_fleet_runs() {
    let _serial = crate::util::exclusive();
    let (a, b) = (Server::start(&[]), Server::start(&[]));
    let d = dir("fleet-resume");
    let file = write(
        &d,
        &format!(
            "[tiers.f]\nfleet = [\"127.0.0.1:{}=a\", \"127.0.0.1:{}=b\"]\nscale = \"1..2\"\n\
             repeat = 2\ntime = 0.3\n",
            a.port, b.port
        ),
    );
    let db = d.join("h.sqlite");
    let db_s = db.to_string_lossy().into_owned();
    let first = campaign(&[&file, "--db", &db_s, "--stop-after", "1"]);
    assert_eq!(first.code, Some(130), "{}\n{}", first.stderr, first.stdout);
    let store = Store::open(&db).expect("history");
    let g = store.groups(10).expect("groups").remove(0);
    let before = store.group_runs(g.id).expect("runs").len();
    assert!((1..=2).contains(&before), "one fleet run stored: {before}");
    drop(store);
    let out = campaign(&[&file, "--db", &db_s, "--resume"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
    assert!(out.stdout.contains("Resuming campaign group"), "{}", out.stdout);
    let store = Store::open(&db).expect("history");
    assert!(store.group(g.id).expect("read").expect("group").finished);
    let mut cells: Vec<(String, u32)> = store
        .group_runs(g.id)
        .expect("runs")
        .into_iter()
        .map(|(_, m, _)| (m.cell.expect("cell"), m.repetition.expect("repetition")))
        .collect();
    cells.sort();
    let want: Vec<(String, u32)> = [("f/k=1", 1), ("f/k=1", 2), ("f/k=2", 1), ("f/k=2", 1)]
        .into_iter()
        .chain([("f/k=2", 2), ("f/k=2", 2)])
        .map(|(c, r)| (c.to_string(), r))
        .collect();
    assert_eq!(cells, want, "no fleet run ran twice");
}

/// A fleet tier the open-files limit cannot hold is refused before any greeting or run, as
/// `linerate fleet` refuses it.
#[test]
fn a_fleet_tier_beyond_the_open_files_limit_is_refused_before_it_starts() {
    let d = dir("fleet-fds");
    let file = write(
        &d,
        "[tiers.f]\nfleet = [\"127.0.0.1:9=a\", \"127.0.0.1:10=b\", \"127.0.0.1:11=c\"]\n\
         parallel = 5\n",
    );
    let limited = ["prlimit", "--nofile=64:64"];
    let out = crate::util::run_under(
        &limited,
        &["campaign", &file, "--no-store"],
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(3), "{}\n{}", out.stderr, out.stdout);
    assert!(
        out.stderr.contains("open files") && out.stderr.contains("ulimit -n"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("Pre-flight"), "{}", out.stdout);
}
