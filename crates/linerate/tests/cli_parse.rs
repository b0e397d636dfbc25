//! Command lines as a user types them, parsed by the binary's own entry (`cli::parse`, no
//! test run): iperf habits (`-s` with server flags, iperf2's flags, `-t -1`), flags whose
//! requirement another flag rules out, and the messages of values out of range.

use linerate::cli::{command, parse};
use linerate::plan::Plan;

fn error(args: &[&str]) -> String {
    match parse(args.iter().copied()) {
        Ok(plan) => panic!("{args:?} parsed: {plan:?}"),
        Err(e) => e.to_string(),
    }
}

/// `-s` is documented as `linerate server`: every server flag works after it, because it
/// is read as that subcommand (`--max-streams`, `--exclusive` and `--log-format` were
/// "unexpected argument").
#[test]
fn every_server_flag_works_after_s() {
    let server = command().find_subcommand("server").cloned().expect("server");
    let mut flags: Vec<String> =
        server.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}")).collect();
    flags.sort();
    assert!(flags.len() > 30, "{flags:?}");
    for flag in &flags {
        // The plan, or the kind of error (a value is missing): the same both ways.
        let read = |args: [&str; 3]| parse(args).map(|p| format!("{p:?}")).map_err(|e| e.kind());
        let long = read(["linerate", "server", flag.as_str()]);
        let short = read(["linerate", "-s", flag.as_str()]);
        assert_eq!(short, long, "-s {flag} reads otherwise than server {flag}");
    }
    let plan = |args: &[&str]| format!("{:?}", parse(args.iter().copied()).expect("parses"));
    let given = ["--max-streams", "8", "--exclusive", "--log-format", "json", "-1"];
    assert_eq!(
        plan(&[&["linerate", "-s"][..], &given].concat()),
        plan(&[&["linerate", "server"][..], &given].concat())
    );
    assert!(
        matches!(parse(["linerate", "-s1", "-p", "5300"]), Ok(Plan::Server(s)) if s.one_off && s.port == 5300)
    );
    assert!(
        matches!(parse(["linerate", "-p", "5300", "--server"]), Ok(Plan::Server(s)) if s.port == 5300)
    );
    let port = |args: &[&str]| match parse(args.iter().copied()) {
        Ok(Plan::Server(s)) => Some(s.port),
        _ => None,
    };
    assert_eq!(port(&["linerate", "-sp5300"]), Some(5300), "a cluster, as getopt reads it");
    // In `-Ts` the `s` is a client's title, not the switch.
    assert!(matches!(parse(["linerate", "-c", "h", "-Ts"]), Ok(Plan::Client(_))));
    // A subcommand's own `--server` is not the switch.
    assert!(matches!(parse(["linerate", "history", "--server", "h:1"]), Ok(Plan::History(_))));
}

#[test]
fn a_clients_flag_after_s_is_named() {
    for (flag, needle) in [("-P", "-P/--parallel"), ("--no-store", "--no-store"), ("-V", "-V")] {
        let err = error(&["linerate", "-s", flag]);
        assert!(err.contains(needle) && err.contains("-c HOST"), "{flag}: {err}");
    }
}

/// clap waives a requirement whose flag conflicts with another given: the dependent flag
/// was ignored. Each is refused, naming it, what it needs and what rules that out.
#[test]
fn a_flag_whose_requirement_is_ruled_out_is_refused() {
    for (args, needles) in [
        (&["--rr", "--probe-rate", "5"][..], ["--probe-rate", "--under-load", "--rr"]),
        (&["--crr", "--idle-time", "2"], ["--idle-time", "--under-load", "--crr"]),
        (&["-u", "--rr", "--loss", "1"], ["--loss", "--find-max", "--rr"]),
        (&["-u", "--iperf3", "--trial", "2"], ["--trial", "--find-max", "--iperf3"]),
    ] {
        let err = error(&[&["linerate", "client", "h"][..], args].concat());
        for n in needles {
            assert!(err.contains(n), "{args:?} must name {n}: {err}");
        }
    }
    let err = error(&["linerate", "-c", "h", "-1"]);
    assert!(err.contains("--one-off") && err.contains("--server"), "{err}");
    // What the flag needs, given, still parses.
    assert!(parse(["linerate", "client", "h", "--under-load", "--probe-rate", "5"]).is_ok());
    assert!(parse(["linerate", "client", "h", "--rr", "--rr-rate", "5"]).is_ok());
}

#[test]
fn iperf2_flags_name_linerates() {
    for (args, needle) in [
        (&["linerate", "-c", "h", "-d"][..], "--bidir"),
        (&["linerate", "client", "h", "--dualtest"], "--bidir"),
        (&["linerate", "-c", "h", "-r"], "-R"),
        (&["linerate", "-c", "h", "-y", "C"], "--format csv"),
    ] {
        let err = error(args);
        assert!(err.contains("iperf2") && err.contains(needle), "{args:?}: {err}");
    }
}

/// `-t -1` was read as `-t` without a value and `-1` (`--one-off`).
#[test]
fn a_negative_value_is_refused_by_its_own_parser() {
    for (args, needle) in [
        (&["linerate", "-c", "h", "-t", "-1"][..], "duration cannot be negative"),
        (&["linerate", "client", "h", "-t", "-1"], "duration cannot be negative"),
        (&["linerate", "-t", "-1"], "duration cannot be negative"),
        (&["linerate", "client", "h", "-k", "-1"], "-1 is negative"),
        (&["linerate", "server", "--max-streams", "-1"], "-1 is negative"),
    ] {
        let err = error(args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A flag whose value may be left out keeps a following `-4` a flag.
#[test]
fn an_optional_value_leaves_a_following_flag_alone() {
    let m = parse(["linerate", "matrix", "h", "--resume", "-4", "-t", "1"]);
    assert!(matches!(m, Ok(Plan::Matrix(c, _, _)) if c.family == linerate::plan::Family::V4));
}

/// clap's own integer parser answered `0.5` with "invalid digit found in string".
#[test]
fn a_whole_number_flag_says_what_it_takes() {
    for (args, needle) in [
        (&["linerate", "client", "h", "--rr", "--rr-rate", "0.5"][..], "not a whole number"),
        (&["linerate", "client", "h", "-P", "1.5"], "from 1 to"),
        (&["linerate", "client", "h", "-p", "70000"], "too large"),
        (&["linerate", "client", "h", "--cport", "x"], "not a number"),
    ] {
        let err = error(args);
        assert!(err.contains(needle) && !err.contains("invalid digit"), "{args:?}: {err}");
    }
}

/// `--rr -u --request-size 0` quoted TCP's range.
#[test]
fn a_udp_request_size_out_of_range_quotes_the_udp_range() {
    let err = error(&["linerate", "client", "h", "--rr", "-u", "--request-size", "0"]);
    assert!(err.contains("24..=65507") && !err.contains("1048576"), "{err}");
}

/// The command lines of every repeated experiment, before the flags under test: a matrix and
/// a scaling curve, and with `campaign` a campaign (its rounds are in its file; it takes the
/// resume flags only).
fn experiments(campaign: bool) -> Vec<Vec<&'static str>> {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dc-interconnect.toml");
    let mut lines = vec![
        vec!["linerate", "matrix", "h", "-P", "1,2"],
        vec!["linerate", "fleet", "a", "b", "--scale", "1,2"],
    ];
    if campaign {
        lines.push(vec!["linerate", "campaign", file]);
    }
    lines
}

/// What `line` and `flags` parse into, in words every command shares: the rounds of its plan
/// (`repeat until_ci max_repeat seed`, None for a campaign) and its resume (`resume
/// stop_after`); or its error's first line (the usage line after it names the command).
fn outcome(line: &[&str], flags: &[&str]) -> Result<(Option<String>, String), String> {
    let rounds = |r: u32, u: Option<f64>, m: u32, s: u64| Some(format!("{r} {u:?} {m} {s}"));
    let argv = line.iter().chain(flags).copied();
    match parse(argv) {
        Ok(Plan::Matrix(_, m, r)) => Ok((
            rounds(m.repeat, m.until_ci, m.max_repeat, m.seed),
            format!("{:?} {:?}", r.resume, r.stop_after),
        )),
        Ok(Plan::Fleet(f)) => Ok((
            rounds(f.repeat, f.until_ci, f.max_repeat, f.seed),
            format!("{:?} {:?}", f.resume, f.stop_after),
        )),
        Ok(Plan::Campaign(c)) => Ok((None, format!("{:?} {:?}", c.resume, c.stop_after))),
        Ok(other) => panic!("{flags:?}: {other:?}"),
        Err(e) => Err(e.to_string().lines().next().unwrap_or_default().to_string()),
    }
}

/// `--repeat`, `--until-ci`, `--max-repeat`, `--seed` and `--resume` are one flag group: a
/// matrix and a scaling curve read them into the same rounds and refuse the same values with
/// the same words, and a campaign's `--resume` is theirs.
#[test]
fn every_repeated_experiment_reads_its_rounds_and_resume_alike() {
    // A history path is enough: parsing does not open it.
    let db = ["--db", "/nonexistent/linerate-test/history.sqlite"];
    let rounds: &[&[&str]] = &[
        &["--repeat", "2", "--until-ci", "5%", "--max-repeat", "4", "--seed", "9"],
        &["--repeat", "12", "--until-ci", "5", "--seed", "0"],
        &["--repeat", "0"],
        &["--repeat", "1001"],
        &["--repeat", "1.5"],
        &["--until-ci", "101"],
        &["--until-ci", "x"],
        &["--max-repeat", "4"],
        &["--until-ci", "5", "--max-repeat", "1"],
        &["--seed", "-1"],
    ];
    for flags in rounds {
        let flags = [flags, &db[..]].concat();
        let read: Vec<_> = experiments(false).iter().map(|l| outcome(l, &flags)).collect();
        assert_eq!(read[0], read[1], "{flags:?}: a matrix and a curve read otherwise");
    }
    let resume: &[&[&str]] = &[
        &["--resume"],
        &["--resume", "3", "--stop-after", "2"],
        &["--resume", "x"],
        &["--resume", "0"],
        &["--resume", "--stop-after", "-1"],
    ];
    let with_db = resume.iter().map(|f| [f, &db[..]].concat());
    for flags in with_db.chain([vec!["--resume", "--no-store"], vec!["--resume"]]) {
        let read: Vec<_> = experiments(true)
            .iter()
            .map(|l| outcome(l, &flags).map(|(_, resume)| resume))
            .collect();
        assert!(read.iter().all(|r| *r == read[0]), "{flags:?} read otherwise: {read:?}");
    }
    // What the rounds became, and what the refusals say.
    let matrix = &experiments(false)[0];
    let said = |flags: &[&str]| outcome(matrix, &[flags, &db[..]].concat());
    let first = said(rounds[0]).expect("parses");
    assert_eq!(first, (Some("2 Some(0.05) 4 9".into()), "None None".into()));
    let capped = said(rounds[1]).expect("parses").0.expect("rounds");
    assert_eq!(capped, "12 Some(0.05) 12 0", "--max-repeat is never below --repeat");
    for (flags, words) in [
        (rounds[2], "give a whole number from 1 to 1000"),
        (rounds[7], "the following required arguments were not provided"),
        (resume[2], "m3 (a matrix), c3 (a campaign), f3 (a fleet or scaling curve) or n3 (a mesh)"),
    ] {
        let e = said(flags).expect_err("refused");
        assert!(e.contains(words), "{flags:?}: {e}");
    }
    let e = outcome(matrix, &["--resume", "--no-store"]).expect_err("refused");
    assert!(e.contains("drop --no-store"), "{e}");
    // Each refuses another kind's group, naming its own letter.
    let lines = experiments(true);
    for (line, other, own) in [(0, "f3", "m3"), (1, "m3", "f3"), (2, "m3", "c3")] {
        let e = outcome(&lines[line], &[&["--resume", other][..], &db].concat()).expect_err(other);
        assert!(e.contains(&format!("{other} is not a")) && e.ends_with(own), "{e}");
    }
    // A single fleet has no rounds: they need --scale.
    let e = outcome(&["linerate", "fleet", "a", "b"], &["--repeat", "2"]).expect_err("no --scale");
    assert!(e.contains("required arguments"), "{e}");
}
