//! Test harness: a server process on an ephemeral port, and bounded client runs.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Serializes tests whose assertions depend on CPU time or timing (pacing, verdicts, the
/// foreign-load detector, shaped links, heavy runs): the test harness runs tests on parallel
/// threads, and another test saturating the cores would change what these measure.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_linerate")
}

/// The iperf3 the interop and fidelity tests run: `iperf3` on the PATH (Debian's 3.12 in CI),
/// or the binary `LINERATE_IPERF3` names, e.g. a 3.21 built from its release tag
/// (docs/PERFORMANCE.md, "Reproducing") for the documented local run.
pub fn iperf3_bin() -> String {
    std::env::var("LINERATE_IPERF3").unwrap_or_else(|_| "iperf3".to_string())
}

/// The `--json-format` whose keys are those of [`iperf3_bin`]'s own `-J` documents: iperf3's
/// schema is its client's version (docs/IPERF3.md, "Export").
pub fn iperf3_json_format() -> &'static str {
    static FORMAT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    FORMAT.get_or_init(|| {
        let out = Command::new(iperf3_bin()).arg("--version").output();
        let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        if text.starts_with("iperf 3.12") { "iperf3-3.12" } else { "iperf3-3.21" }
    })
}

/// Where runs started by tests keep their history (XDG_DATA_HOME), so tests never write to
/// the user's real one; one directory per test process.
pub fn data_home() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("linerate-tests-{}", std::process::id()))
}

/// An empty directory for one test's files, under [`data_home`].
pub fn test_dir(name: &str) -> std::path::PathBuf {
    let d = data_home().join("test-dirs").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

/// The (cell, repetition) of every completed run of a stored group, in the order stored.
pub fn completed(store: &linerate::store::Store, group: i64) -> Vec<(String, u32)> {
    store
        .group_runs(group)
        .expect("runs")
        .into_iter()
        .filter(|(_, _, r)| r.outcome == linerate::record::Outcome::Completed)
        .map(|(_, m, _)| (m.cell.expect("cell"), m.repetition.expect("rep")))
        .collect()
}

/// After a resume: the history at `db` holds one group, `group`, finished, with `runs`
/// completed runs and no (cell, repetition) twice.
pub fn assert_resumed_whole(db: &std::path::Path, group: i64, runs: usize) {
    let store = linerate::store::Store::open(db).expect("history");
    assert!(store.group(group).expect("read").expect("group").finished);
    let mut done = completed(&store, group);
    assert_eq!(done.len(), runs, "{done:?}");
    done.sort();
    done.dedup();
    assert_eq!(done.len(), runs, "no (cell, repetition) stored twice: {done:?}");
    let groups = store.groups(10).expect("groups");
    // The loopback placement's calibrations are groups too (`-A auto`), kept beside it.
    let experiments = groups.iter().filter(|g| g.kind.as_str() != "placement").count();
    assert_eq!(experiments, 1, "no new group on resume");
}

/// A loopback port nothing listens on (bound to learn a free one, then released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A `linerate server` child process, killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `linerate server -p 0 <extra>` and waits for its "listening" line.
    pub fn start(extra: &[&str]) -> Server {
        Self::spawn(&[&["server", "-p", "0"], extra].concat())
    }

    /// Starts `linerate server -p PORT` on a port chosen before (a host that was down comes
    /// back) and waits for its "listening" line.
    pub fn start_on(port: u16) -> Server {
        Self::spawn(&["server", "-p", &port.to_string()])
    }

    /// Starts `linerate <args>` as written (e.g. iperf's `-s -p 0 ...`) and waits for its
    /// "listening" line.
    pub fn start_raw(args: &[&str]) -> Server {
        Self::spawn(args)
    }

    /// Starts `linerate server -p 0 <extra>` with these environment variables set, and waits
    /// for its "listening" line.
    pub fn start_env(env: &[(&str, &str)], extra: &[&str]) -> Server {
        Self::spawn_env(env, &[&["server", "-p", "0"], extra].concat())
    }

    fn spawn(args: &[&str]) -> Server {
        Self::spawn_env(&[], args)
    }

    fn spawn_env(env: &[(&str, &str)], args: &[&str]) -> Server {
        Self::try_spawn_env(env, args).unwrap_or_else(|why| panic!("{why}"))
    }

    /// Starts `linerate <args(port)>` on a port chosen here (`free_port`), choosing again when
    /// the server could not bind it: between `free_port` releasing a port and the server
    /// binding it, a client connection elsewhere in the suite may take it as its own port.
    /// For servers whose arguments must name their own port (an allow-list); up to 5 tries.
    pub fn start_on_free_port(args: impl Fn(u16) -> Vec<String>) -> Server {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let args = args(port);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            match Self::try_spawn_env(&[], &args) {
                Ok(srv) => return srv,
                Err(why) if why.contains("in use") => last = why,
                Err(why) => panic!("{why}"),
            }
        }
        panic!("5 free ports were taken before the server bound them; the last: {last}")
    }

    /// The metrics endpoint's port, from the server's "Metrics at http://ADDR/metrics" line.
    pub fn metrics_port(&self) -> u16 {
        assert!(self.wait_for_log("Metrics at http://", Duration::from_secs(5)), "{}", self.log());
        let log = self.log();
        let line = log.lines().find_map(|l| l.strip_prefix("Metrics at http://")).expect("line");
        let addr = line.trim_end_matches("/metrics");
        addr.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port")
    }

    /// As `spawn_env`, or why the server printed no listening line: its output and, if it
    /// exited, its standard error.
    fn try_spawn_env(env: &[(&str, &str)], args: &[&str]) -> Result<Server, String> {
        let mut child = Command::new(bin())
            .envs(env.iter().copied())
            .env("XDG_DATA_HOME", data_home())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start server");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // Text mode prints "Server listening on ADDR"; JSON mode a "listening" event.
                let addr =
                    line.strip_prefix("Server listening on ").map(str::to_string).or_else(|| {
                        let v: Value = serde_json::from_str(&line).ok()?;
                        (v["event"] == "listening").then(|| v["addr"].as_str().map(String::from))?
                    });
                if let Some(addr) = addr {
                    let port = addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok());
                    let _ = tx.send(port);
                }
                sink.lock().expect("lock").push(line);
            }
        });
        // Construct the guard before any assertion, so a failing start still kills the child.
        let mut srv = Server { child, port: 0, lines };
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Some(port)) => {
                srv.port = port;
                Ok(srv)
            }
            other => {
                // Its stdout closed: it is exiting, and its stderr says why (read only then,
                // so a server that hangs cannot hang the test here).
                let mut why = String::new();
                let exited = (0..40).any(|_| {
                    std::thread::sleep(Duration::from_millis(50));
                    srv.child.try_wait().ok().flatten().is_some()
                });
                if exited && let Some(mut e) = srv.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut why);
                }
                Err(format!(
                    "server printed no listening line with a port ({other:?}): {}\n{why}",
                    srv.log()
                ))
            }
        }
    }

    pub fn log(&self) -> String {
        self.lines.lock().expect("lock").join("\n")
    }

    /// Waits up to `limit` for a log line containing `needle`.
    pub fn wait_for_log(&self, needle: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if self.log().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a finished process produced.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }
}

/// Runs `linerate <args>`, killing it after `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    run_under(&[], args, limit)
}

/// Runs `<wrapper> linerate <args>` (e.g. `taskset -c 0`), killing it after `limit`.
pub fn run_under(wrapper: &[&str], args: &[&str], limit: Duration) -> Output {
    let start = Instant::now();
    let mut command = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(bin());
            c
        }
        None => Command::new(bin()),
    };
    let mut child = command
        .env("XDG_DATA_HOME", data_home())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn linerate");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("linerate {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        code,
        stdout: t_out.join().expect("stdout thread"),
        stderr: t_err.join().expect("stderr thread"),
        elapsed: start.elapsed(),
    }
}

/// Runs a JSON client test against `port` and returns the document (asserting exit 0).
pub fn client_json(port: u16, extra: &[&str]) -> Value {
    let port = port.to_string();
    let mut args = vec!["client", "127.0.0.1", "-p", &port, "-J"];
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "client {args:?} failed:\n{}\n{}", out.stderr, out.stdout);
    out.json()
}

/// The streams one end reported (`client` or `server_results`).
pub fn streams<'a>(doc: &'a Value, end: &str) -> &'a Vec<Value> {
    doc["record"][end]["streams"].as_array().unwrap_or_else(|| panic!("no {end} streams in {doc}"))
}

/// Sum of `bytes` over one end's streams with the given role.
pub fn bytes(doc: &Value, end: &str, role: &str) -> u64 {
    streams(doc, end)
        .iter()
        .filter(|s| s["role"] == role)
        .map(|s| s["bytes"].as_u64().expect("bytes"))
        .sum()
}

/// The two ends of an iperf3 test of `streams` streams agree within what was in flight at
/// TEST_END: iperf3 stops counting there, linerate counts what still arrives — at most, per
/// stream, the sender's largest TCP send buffer and the receiver's largest receive buffer
/// (`tcp_wmem`, `tcp_rmem`: 4 and 32 MiB here), or a tenth of the bytes when that is more. A
/// share alone failed a `--bidir -P 2` test on a loaded machine: 89.3 % of 484 MB, 52 MB
/// apart, where 72 MB may be in flight.
pub fn assert_agree(a: u64, b: u64, streams: u64, what: &str) {
    let largest = |name: &str| -> u64 {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
            .ok()
            .and_then(|s| s.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
            .unwrap_or(0)
    };
    let in_flight = streams * (largest("tcp_wmem") + largest("tcp_rmem"));
    let (lo, hi) = (a.min(b), a.max(b));
    let allowed = in_flight.max(hi / 10);
    assert!(hi > 0 && hi - lo <= allowed, "{what}: {a} vs {b} (at most {allowed} apart)");
}

/// Asserts the run's first verdict is `expected`, or — when other processes (other builds on a
/// shared machine) kept the busiest core busier than the test — the busy host naming the end
/// whose machine was crowded, or one of `also_when_busy` when either end was crowded; or a
/// starved end (its threads measurably waited for a CPU, `stats/starved.rs`).
/// `what` goes into failure messages.
pub fn assert_verdict_or_busy_host(
    doc: &Value,
    expected: &str,
    also_when_busy: &[&str],
    what: &str,
) {
    let v = &doc["summary"]["verdicts"][0];
    let crowded = |end: &str| {
        let costs = doc["summary"]["cost"].as_array().expect("cost");
        let c = costs.iter().find(|c| c["end"] == end).expect("end's cost");
        let f = |k: &str| c[k].as_f64().unwrap_or(0.0);
        f("foreign_percent_of_core") >= f("process_percent_of_core").max(10.0)
    };
    let busy = crowded("client") || crowded("server");
    match v["limit"].as_str().expect("limit") {
        l if l == expected => {}
        "foreign_load" => assert!(crowded(v["end"].as_str().expect("end")), "{what}: {v}"),
        // An end whose threads waited for a CPU: the verdict cites the measured wait.
        "starved" => {
            let text = v["summary"].as_str().expect("summary");
            assert!(text.contains("% of the time for a CPU"), "{what}: {v}");
        }
        l if busy && also_when_busy.contains(&l) => {}
        other => {
            let machine = if busy { "busy" } else { "quiet" };
            panic!("{what}: {other} on a {machine} machine: {v}")
        }
    }
}
