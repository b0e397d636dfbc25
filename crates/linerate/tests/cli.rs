//! The command line as a user meets it: the newcomer's first command, usage errors, docs.

use std::time::Duration;

use crate::util::run;

#[test]
fn no_arguments_runs_the_default_methodology_on_loopback() {
    let out = run(&[], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("embedded server on 127.0.0.1"), "{}", out.stdout);
    assert!(out.stdout.contains("Matrix: 2 cell(s) x 3 run(s)"), "{}", out.stdout);
    for cell in ["\nP=1 ", "\nP=2 "] {
        assert!(out.stdout.contains(cell), "{cell}: {}", out.stdout);
    }
    assert!(out.stdout.contains("Findings:\n  - best: P="), "{}", out.stdout);
    assert!(out.stdout.contains("Stored as matrix m"), "{}", out.stdout);
}

#[test]
fn selftest_runs_one_test_with_the_full_report() {
    let out = run(&["selftest", "-t", "1"], Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("linerate selftest: embedded server on 127.0.0.1"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("receiver (server)") && out.stdout.contains("Test complete."),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("ran in one process (selftest)"), "{}", out.stdout);
}

#[test]
fn selftest_json_is_a_valid_document() {
    let out = run(&["selftest", "-J", "-t", "0.5"], Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc = out.json();
    assert_eq!(doc["kind"], "linerate.run");
    assert!(
        doc["summary"]["directions"][0]["receiver"]["bits_per_second"].as_f64().expect("rate")
            > 0.0
    );
}

#[test]
fn usage_errors_exit_2_and_name_the_problem() {
    for (args, needle) in [
        (vec!["client"], "HOST"),
        (vec!["client", "h", "-P", "0"], "--parallel"),
        (vec!["client", "h", "-b", "10GB/s"], "bits"),
        (vec!["client", "h", "-t", "-3"], "-3"),
        (vec!["--frobnicate"], "--frobnicate"),
        (vec!["client", "h", "-P", "4096", "-l", "1M", "--threads", "stream"], "1 GiB"),
    ] {
        let out = run(&args, Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
    // A pool of workers holds buffers per worker, not per stream: the same test is no usage
    // error (it fails later, on the host name, which resolves nowhere).
    let out = run(&["client", "h.invalid", "-P", "4096", "-l", "1M"], Duration::from_secs(10));
    assert_ne!(out.code, Some(2), "{}", out.stderr);
    assert!(!out.stderr.contains("1 GiB"), "{}", out.stderr);
}

#[test]
fn help_documents_units_and_iperf_flags() {
    let out = run(&["client", "--help"], Duration::from_secs(10));
    assert_eq!(out.code, Some(0));
    for needle in ["--parallel", "--window", "--reverse", "--bidir", "--zerocopy", "--omit"] {
        assert!(out.stdout.contains(needle), "{needle}");
    }
    let out = run(&["--help"], Duration::from_secs(10));
    assert!(
        out.stdout.contains("K = 1024") && out.stdout.contains("10G = 10^10"),
        "{}",
        out.stdout
    );
}

#[test]
fn man_page_and_completions_are_generated() {
    let out = run(&["generate", "man"], Duration::from_secs(10));
    assert_eq!(out.code, Some(0));
    assert!(out.stdout.contains(".TH linerate"), "{}", &out.stdout[..200.min(out.stdout.len())]);
    let out = run(&["generate", "bash"], Duration::from_secs(10));
    assert!(out.stdout.contains("linerate") && out.stdout.contains("--parallel"));
}

/// `generate man --dir` writes what the package installs: linerate(1) with the sections a
/// reader looks for, and one page per subcommand, named as `linerate(1)` refers to them.
#[test]
fn man_pages_are_written_one_per_subcommand() {
    let dir = crate::util::test_dir("man-pages");
    let out =
        run(&["generate", "man", "--dir", dir.to_str().expect("path")], Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let main = std::fs::read_to_string(dir.join("linerate.1")).expect("linerate.1");
    for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH FILES", ".SH \"SEE ALSO\""] {
        assert!(main.contains(section), "{section} missing from linerate.1");
    }
    for text in ["130  interrupted", "XDG_DATA_HOME", "/etc/linerate/server.toml", "history.sqlite"]
    {
        assert!(main.contains(text), "{text} missing from linerate.1");
    }
    let subs: Vec<String> = linerate::cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| format!("linerate-{}.1", s.get_name()))
        .collect();
    assert!(subs.len() >= 10, "{subs:?}");
    let mut written: Vec<String> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut expected = subs.clone();
    expected.push("linerate.1".into());
    expected.sort();
    assert_eq!(written, expected);
    let server = std::fs::read_to_string(dir.join("linerate-server.1")).expect("server page");
    assert!(server.contains("\\-\\-max\\-streams") && server.contains(".SH FILES"), "{server}");
    // Issue 46: the report page names every reference it takes.
    let report = std::fs::read_to_string(dir.join("linerate-report.1")).expect("report page");
    for r in ["mN", "cN", "fN", "nN"] {
        assert!(report.contains(r), "linerate-report.1 does not name {r}");
    }
    let out = run(&["generate", "bash", "--dir", "x"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "completions go to stdout: {}", out.stderr);
}

/// `--version` names the commit the binary was built from (build.rs): "0.1.0" alone is every
/// commit since the last release.
#[test]
fn version_names_the_commit() {
    let head = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    let commit = match head {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unknown commit".to_string(),
    };
    let out = run(&["--version"], Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let expected = format!("linerate {} ({commit}", env!("CARGO_PKG_VERSION"));
    assert!(out.stdout.starts_with(&expected), "{:?} does not start {expected:?}", out.stdout);
}

#[test]
fn hosts_are_accepted_as_iperf_and_url_users_write_them() {
    let srv = crate::util::Server::start(&[]);
    let port = srv.port.to_string();
    let v4 = format!("127.0.0.1:{port}");
    let v6 = format!("[::1]:{port}");
    for args in [
        vec!["client", &v4, "-t", "0.2", "--no-store"],
        vec!["client", &v6, "-t", "0.2", "--no-store"],
        vec!["client", "[::1]", "-p", &port, "-t", "0.2", "--no-store"],
    ] {
        let out = run(&args, Duration::from_secs(20));
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert!(out.stdout.contains("Test complete."), "{args:?}: {}", out.stdout);
    }
    let out = run(&["client", &v4, "-p", "5201"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("{port} in")) && out.stderr.contains("5201 with -p"),
        "names both ports: {}",
        out.stderr
    );
}

#[test]
fn iperf_style_client_takes_the_store_flags() {
    let srv = crate::util::Server::start(&[]);
    let port = srv.port.to_string();
    let out =
        run(&["-c", "127.0.0.1", "-p", &port, "-t", "0.2", "--no-store"], Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Test complete."), "{}", out.stdout);
    assert!(!out.stdout.contains("Stored as"), "--no-store keeps it out: {}", out.stdout);
    let out = run(&["-s", "--no-store"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("-c HOST"), "{}", out.stderr);
}

#[test]
fn matrix_takes_iperf_short_flags_for_its_axes() {
    let srv = crate::util::Server::start(&[]);
    let port = srv.port.to_string();
    let args = [
        "matrix",
        "127.0.0.1",
        "-p",
        &port,
        "-P",
        "1,2",
        "-w",
        "64K,1M",
        "--repeat",
        "1",
        "-t",
        "0.2",
    ];
    let out = run(&[&args[..], &["--no-store"]].concat(), Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for cell in ["P=1 w=64K", "P=2 w=64K", "P=1 w=1M", "P=2 w=1M"] {
        assert!(out.stdout.contains(cell), "{cell}: {}", out.stdout);
    }
}

#[test]
fn readme_and_help_speak_to_a_newcomer() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let help = run(&["--help"], Duration::from_secs(10)).stdout;
    for (what, text) in [("README.md", &readme), ("--help", &help)] {
        assert!(!text.to_lowercase().contains("seeds"), "{what} speaks of the seeds");
        // Verdict ids are for JSON and CSV; people read words.
        for id in ["cpu(client)", "cpu(server)", "foreign_load(", "receive_window"] {
            assert!(!text.contains(id), "{what} shows the internal id {id}");
        }
    }
    // Every file the README points at is in the repository.
    for word in readme.split(|c: char| c.is_whitespace() || "`()[],;:".contains(c)) {
        let file = word.trim_end_matches('.');
        let pointer = ["docs/", "examples/", "benches/", ".ci/", ".cargo/"]
            .iter()
            .any(|p| file.starts_with(p))
            && !file.ends_with('/');
        if pointer && !file.contains('*') {
            assert!(root.join(file).exists(), "README points at {file}, which is not here");
        }
    }
    // The bare command is the default methodology (a matrix), not a single self-test.
    let line = help.lines().find(|l| l.trim_start().starts_with("linerate  ")).expect(&help);
    assert!(line.contains("default methodology"), "{line}");
}

/// `linerate -s` is `linerate server` with every server flag (`--max-streams`, `--exclusive`
/// and `--log-format` were "unexpected argument"): a limit given after `-s` holds.
#[test]
fn iperf_style_server_takes_the_server_flags() {
    let srv = crate::util::Server::start_raw(&[
        "-s",
        "-p",
        "0",
        "-B",
        "127.0.0.1",
        "--max-streams",
        "1",
        "--exclusive",
        "--log-format",
        "json",
    ]);
    let port = srv.port.to_string();
    let client = |streams: &str| {
        let args = ["client", "127.0.0.1", "-p", &port, "-P", streams, "-t", "0.3", "--no-store"];
        run(&args, Duration::from_secs(20))
    };
    let refused = client("2");
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(refused.stderr.contains("--max-streams"), "{}", refused.stderr);
    let one = client("1");
    assert_eq!(one.code, Some(0), "{}", one.stderr);
    assert!(srv.log().lines().any(|l| l.starts_with('{')), "JSON log lines: {}", srv.log());
}
