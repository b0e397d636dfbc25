//! Parsing campaign files: defaults, order, units, and errors that point at the line.

use super::*;
use crate::plan::matrix::Cell;

fn ok(text: &str) -> CampaignPlan {
    parse(text, "plan.toml", "plan").unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    parse(text, "plan.toml", "plan").expect_err("must be refused").to_string()
}

/// An axis of sizes as byte counts.
fn bytes(axis: &[Option<Size>]) -> Vec<Option<u64>> {
    axis.iter().map(|s| s.map(Size::bytes)).collect()
}

const TWO_TIERS: &str = r#"name = "dc"

[defaults]
parallel = [1, 2, 4, 8]
window = ["default", "800k"]
time = 60
repeat = 3

[tiers.zeta]
host = "127.0.0.1"

[tiers.alpha]
host = "vm2.example"
port = 5202
link_speed = "10G"
mtu = 9000
parallel = [4]
time = "250ms"
"#;

#[test]
fn tiers_keep_file_order_and_take_defaults_unless_they_override() {
    let p = ok(TWO_TIERS);
    assert_eq!(p.name, "dc");
    let names: Vec<&str> = p.tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["zeta", "alpha"]);
    let (z, a) = (&p.tiers[0], &p.tiers[1]);
    assert_eq!(z.target.port, 5201);
    assert_eq!(z.target.link, None);
    assert_eq!(z.matrix.parallel, [1, 2, 4, 8]);
    assert_eq!(bytes(&z.matrix.window_bytes), [None, Some(800_000)]);
    assert_eq!((z.matrix.time_ms, z.matrix.repeat), (60_000, 3));
    assert_eq!(a.target.port, 5202);
    assert_eq!(
        a.target.link,
        Some(LinkAssumption { bits_per_second: 10_000_000_000, mtu_bytes: 9000 })
    );
    assert_eq!(a.matrix.parallel, [4]);
    assert_eq!(a.matrix.time_ms, 250);
    assert_eq!(z.matrix_plan(1).cells().len(), 8);
    assert_eq!(p.planned_runs(), 8 * 3 + 2 * 3);
}

#[test]
fn cells_carry_the_tier_settings_into_the_client_plan() {
    let p = ok(TWO_TIERS);
    let t = &p.tiers[1];
    let m = t.matrix_plan(9);
    let base = t.client_plan(OutputFormat::Json, StorePlan::default());
    assert_eq!((base.host.as_str(), base.port), ("vm2.example", 5202));
    assert!(base.link.is_some());
    let cells = m.cells();
    let spec = m.cell_plan(&base, &cells[1]).spec;
    assert_eq!((spec.streams, spec.window_bytes), (4, Some(800_000)));
    assert_eq!(spec.end, EndCondition::Duration { duration_ms: 250 });
}

#[test]
fn single_values_units_and_names_are_read_like_the_flags() {
    let p = ok(r#"
[tiers.l]
host = "::1"
parallel = 2
length = ["8K", 1000, "default"]
protocol = "udp"
direction = ["send", "recv", "bidir"]
bitrate = "100M"
until_ci = "5%"
max_repeat = 6
omit = 0.5
"#);
    let m = &p.tiers[0].matrix;
    assert_eq!(p.name, "plan");
    assert_eq!(m.parallel, [2]);
    assert_eq!(bytes(&m.length_bytes), [Some(8192), Some(1000), None]);
    assert_eq!(m.protocol, [Protocol::Udp]);
    assert_eq!(m.direction, [Direction::Upload, Direction::Download, Direction::Bidirectional]);
    assert_eq!(m.bitrate_bits_per_second, Some(100_000_000));
    assert_eq!(m.until_ci_fraction, Some(0.05));
    assert_eq!((m.max_repeat, m.omit_ms), (6, 500));
}

#[test]
fn sizes_label_their_cells_in_the_files_words_and_are_stored_as_bytes() {
    let p = ok(r#"
[tiers.w]
host = "127.0.0.1"
window = ["256k", "default", 65536, "1.5M"]
length = ["128K", 1000]
"#);
    let labels: Vec<String> = p.tiers[0].matrix_plan(0).cells().iter().map(Cell::label).collect();
    assert_eq!(labels[0], "w=256k l=128K", "not w=250K: the file's words");
    assert_eq!(labels[3], "w=default l=1000");
    assert_eq!(labels[5], "w=65536 l=1000", "a bare number keeps its digits, not 64K");
    assert_eq!(labels[6], "w=1.5M l=128K");
    let spec = p.tiers[0].matrix_plan(0).cells()[0].spec(&TestSpec::default_tcp());
    assert_eq!((spec.window_bytes, spec.block_bytes), (Some(256_000), 128 * 1024));
    // The stored plan (what --resume compares) holds bytes, as before.
    let stored = serde_json::to_value(&p).expect("json");
    assert_eq!(
        stored["tiers"][0]["matrix"]["window_bytes"],
        serde_json::json!([256000, null, 65536, 1572864])
    );
}

#[test]
fn a_tier_host_is_read_as_the_client_reads_its_host() {
    let p = ok(r#"
[tiers.a]
host = "127.0.0.1:5301"
[tiers.b]
host = "[::1]:7000"
[tiers.c]
host = "fd00::2"
port = 6000
"#);
    let at: Vec<(&str, u16)> =
        p.tiers.iter().map(|t| (t.target.host.as_str(), t.target.port)).collect();
    assert_eq!(at, [("127.0.0.1", 5301), ("::1", 7000), ("fd00::2", 6000)]);
    let e = err("[tiers.a]\nhost = \"127.0.0.1:5301\"\nport = 5302\n");
    assert!(e.contains("tier \"a\"") && e.contains("given twice") && e.contains("port ="), "{e}");
    let e = err("[tiers.a]\nhost = \"127.0.0.1:http\"\n");
    assert!(e.contains("not a port"), "{e}");
}

#[test]
fn an_unknown_key_names_the_table_and_the_likely_key() {
    let e = err("[tiers.localhost]\nhost = \"127.0.0.1\"\nparalel = [1, 2]\n");
    assert_eq!(
        e,
        "plan.toml:3:1: unknown key \"paralel\" in [tiers.localhost]; did you mean \"parallel\"?"
    );
    let e = err("[tier.localhost]\nhost = \"127.0.0.1\"\n");
    assert!(e.starts_with("plan.toml:1:"), "{e}");
    assert!(e.contains("unknown key \"tier\" at the top level; did you mean \"tiers\"?"), "{e}");
    let e = err("[defaults]\nzzzzzz = 1\n[tiers.a]\nhost = \"h\"\n");
    assert!(
        e.starts_with(
            "plan.toml:2:1: unknown key \"zzzzzz\" in [defaults]; the keys are: host, port"
        ),
        "{e}"
    );
}

#[test]
fn a_bad_value_points_at_the_value_and_says_the_fix() {
    let e = err("[tiers.a]\nhost = \"h\"\nwindow = [\"default\", \"80xk\"]\n");
    assert!(e.starts_with("plan.toml:3:22: window: invalid size \"80xk\""), "{e}");
    let e = err("[tiers.a]\nhost = \"h\"\ntime = -1\n");
    assert!(e.starts_with("plan.toml:3:8: time: "), "{e}");
    let e = err("[tiers.a]\nhost = \"h\"\nprotocol = [\"tcp\", \"sctp\"]\n");
    assert!(e.starts_with("plan.toml:3:20:") && e.contains("\"sctp\""), "{e}");
    let e = err("[tiers.a]\nhost = \"h\"\nparallel = []\n");
    assert!(e.contains("empty list"), "{e}");
}

#[test]
fn a_tier_without_a_host_or_with_an_invalid_cell_is_refused_at_its_header() {
    let e = err("[defaults]\ntime = 1\n\n\n[tiers.dc]\nport = 5201\n");
    assert!(e.starts_with("plan.toml:5:1: tier \"dc\" has no host"), "{e}");
    let e = err("[tiers.u]\nhost = \"h\"\nprotocol = \"udp\"\nlength = [8, 1400]\n");
    assert!(e.starts_with("plan.toml:1:1: tier \"u\", cell \"l=8 udp\""), "{e}");
    let e = err("name = \"x\"\n");
    assert!(e.starts_with("plan.toml:1:1: no tiers"), "{e}");
    let e = err("[tiers.a]\nhost = \"h\"\nrepeat = 0\n");
    assert!(e.contains("repeat = 0"), "{e}");
}

#[test]
fn toml_syntax_errors_have_a_position_too() {
    let e = err("[tiers.a]\nhost = \"h\nport = 1\n");
    assert!(e.starts_with("plan.toml:2:"), "{e}");
}

#[test]
fn the_example_campaigns_stay_valid() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
    for (file, tiers, cells) in [("dc-interconnect.toml", 4, 8), ("vmware-sweep.toml", 2, 0)] {
        let text = std::fs::read_to_string(format!("{root}{file}")).expect("example exists");
        let p = parse(&text, file, file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.tiers.len(), tiers, "{file}");
        if cells > 0 {
            assert!(p.tiers.iter().all(|t| t.matrix_plan(0).cells().len() == cells), "{file}");
        }
        assert!(p.tiers.iter().all(|t| t.matrix.repeat == 3), "{file}");
    }
    let sweep = std::fs::read_to_string(format!("{root}vmware-sweep.toml")).expect("example");
    let p = parse(&sweep, "vmware-sweep.toml", "x").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.tiers[0].matrix_plan(0).cells().len(), 6 * 4 * 2);
    assert_eq!(bytes(&p.tiers[0].matrix.window_bytes).first(), Some(&Some(8192)));
    assert_eq!(p.tiers[1].target.link.map(|l| l.mtu_bytes), Some(9000));
}

#[test]
fn edit_distance_counts_single_edits() {
    assert_eq!(edit_distance("paralel", "parallel"), 1);
    assert_eq!(edit_distance("", "abc"), 3);
    assert_eq!(edit_distance("windwo", "window"), 2);
    assert_eq!(nearest("prt", &["port", "protocol"]), Some("port"));
    assert_eq!(nearest("zzzz", &["port", "protocol"]), None);
}

#[test]
fn every_example_campaign_parses() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let read = |name: &str| std::fs::read(root.join(name)).map_err(|e| e.to_string());
    let mut seen = 0;
    for entry in std::fs::read_dir(&root).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).expect("read example");
        let p = parse_with(&text, &name, "x", &read).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.tiers.is_empty(), "{name}");
        seen += 1;
    }
    assert!(seen >= 3, "the examples were found: {seen}");
}

const FLEET: &str = r#"[defaults]
fleet = ["vm1", "vm2:6000=two", "[fd00::3]:7000=three"]
parallel = 5
time = 2
repeat = 2
port = 5300

[tiers.curve]
direction = "recv"
scale = "1..3"

[tiers.listed]
scale = [1, 3]

[tiers.all]
fleet = ["a", "b"]

[tiers.single]
host = "127.0.0.1"
parallel = [1, 2]
"#;

#[test]
fn fleet_tiers_take_the_fleet_commands_targets_and_scales() {
    let p = ok(FLEET);
    let names: Vec<&str> = p.tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["curve", "listed", "all", "single"]);
    let curve = p.tiers[0].fleet.as_ref().expect("a fleet");
    let labels: Vec<(&str, u16, &str)> =
        curve.targets.iter().map(|t| (t.host.as_str(), t.port, t.label.as_str())).collect();
    assert_eq!(labels, [("vm1", 5300, "vm1"), ("vm2", 6000, "two"), ("fd00::3", 7000, "three")]);
    assert_eq!(curve.scale, [1, 2, 3]);
    assert_eq!(p.tiers[1].fleet.as_ref().expect("fleet").scale, [1, 3]);
    let all = p.tiers[2].fleet.as_ref().expect("its own fleet");
    assert_eq!((all.targets.len(), all.counts()), (2, vec![2]));
    // A tier's own host outranks the default fleet: a single-server matrix tier.
    assert!(p.tiers[3].fleet.is_none());
    assert_eq!(p.tiers[3].matrix_plan(0).cells().len(), 2);
    // A fleet run is one run, whatever its hosts: counts × repeat.
    let runs: Vec<usize> = p.tiers.iter().map(Tier::planned_runs).collect();
    assert_eq!(runs, [6, 4, 2, 4]);
    assert_eq!(p.planned_runs(), 16);
    let f = p.tiers[0].fleet_plan(7, OutputFormat::Text, StorePlan::default()).expect("plan");
    assert_eq!((f.base.spec.streams, f.base.spec.direction), (5, Direction::Download));
    assert_eq!((f.scale.clone(), f.repeat, f.targets.len()), (vec![1, 2, 3], 2, 3));
    assert!(p.tiers[3].fleet_plan(7, OutputFormat::Text, StorePlan::default()).is_none());
    // The plan line: a fleet run takes one run's time; done fleet runs drop out.
    let s = crate::plan::schedule::Schedule::of_campaign(&p, &[6, 1]);
    let runs: Vec<usize> = s.batches.iter().map(|b| b.runs).collect();
    assert_eq!(runs, [3, 2, 4], "curve done; 3 of listed, all and single left");
}

/// Issue 30: a fleet tier's curve is a grid like a matrix tier, so `until_ci` reaches it.
#[test]
fn a_fleet_tiers_curve_takes_the_tiers_until_ci_and_max_repeat() {
    let text =
        FLEET.replace("[tiers.curve]\n", "[tiers.curve]\nuntil_ci = \"5%\"\nmax_repeat = 6\n");
    let p = ok(&text);
    let f = p.tiers[0].fleet_plan(7, OutputFormat::Text, StorePlan::default()).expect("plan");
    assert_eq!((f.until_ci, f.max_repeat), (Some(0.05), 6));
    let plain = p.tiers[1].fleet_plan(7, OutputFormat::Text, StorePlan::default()).expect("plan");
    assert_eq!(plain.until_ci, None, "a tier without until_ci runs its first round only");
}

#[test]
fn a_fleet_tier_reads_a_targets_file_through_the_callers_reader() {
    let text = "[tiers.f]\ntargets = \"vms.txt\"\nfleet = [\"vm0\"]\nscale = \"2..3\"\n";
    let read = |name: &str| match name {
        "vms.txt" => Ok(b"# the VMs\nvm1\nvm2:5202=second\n".to_vec()),
        other => Err(format!("no file {other}")),
    };
    let p = parse_with(text, "plan.toml", "plan", &read).unwrap_or_else(|e| panic!("{e}"));
    let labels: Vec<&str> =
        p.tiers[0].fleet.as_ref().expect("fleet").targets.iter().map(|t| &*t.label).collect();
    assert_eq!(labels, ["vm0", "vm1", "second"]);
    let e = err(text);
    assert!(e.contains("targets = \"vms.txt\"") && e.contains("read by"), "{e}");
    let bad = |name: &str| Ok(format!("vm1\n{name}:x\n").into_bytes());
    let e = parse_with(text, "plan.toml", "plan", &bad).expect_err("bad line").to_string();
    assert!(e.contains("targets file vms.txt, line 2:") && e.contains("1 to 65535"), "{e}");
}

#[test]
fn bad_fleet_tiers_are_refused_with_what_to_write_instead() {
    for (text, says) in [
        ("[tiers.f]\nfleet = [\"a\", \"b\"]\nparallel = [1, 5]\n", "its parallel has 2 values"),
        (
            "[tiers.f]\nfleet = [\"a\"]\ndirection = [\"send\", \"recv\"]\n",
            "one fleet tier per value",
        ),
        ("[tiers.f]\nfleet = []\n", "a fleet with no servers"),
        ("[tiers.f]\nfleet = [\"a:5201\", \"a\"]\n", "named twice"),
        ("[tiers.f]\nfleet = [\"a=x\", \"b=x\"]\n", "the label \"x\" is given to two targets"),
        ("[tiers.f]\nfleet = [\"a:http\"]\n", "1 to 65535"),
        ("[tiers.f]\nhost = \"h\"\nfleet = [\"a\"]\n", "sets both host and a fleet"),
        ("[tiers.f]\nhost = \"h\"\nscale = \"1..2\"\n", "scale is for fleet tiers"),
        (
            "[tiers.f]\nfleet = [\"a\", \"b\"]\nscale = \"1..3\"\n",
            "\"3\" is not a host count from 1 to 2",
        ),
        ("[tiers.f]\nfleet = [\"a\", \"b\"]\nscale = []\n", "empty list"),
        ("[tiers.f]\nfleet = [\"a\"]\niperf3 = true\n", "unknown key \"iperf3\" in [tiers.f]"),
        ("[tiers.f]\nfleet = [\"a\"]\nfind_max = true\n", "unknown key \"find_max\""),
        ("[tiers.f]\nfleet = [\"a\"]\nscales = \"1..1\"\n", "did you mean \"scale\"?"),
    ] {
        let e = err(text);
        assert!(e.starts_with("plan.toml:"), "{e}");
        assert!(e.contains(says), "{text}: {e}");
    }
    assert!(err("[tiers.f]\nfleet = [\"a\", \"a\"]\n").starts_with("plan.toml:1:1: tier \"f\": "));
}
