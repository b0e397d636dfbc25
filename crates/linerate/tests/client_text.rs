//! The client's text output as an iperf3 user reads it: interval lines with the sender's
//! retransmits and congestion window, and the answer (rates, verdict) as the last lines.

use std::time::Duration;

use crate::util::{Server, run};

/// The Retr and Cwnd columns of an interval line (`… Gbit/s  RETR  CWND UNIT  sender`).
fn retr_cwnd(line: &str) -> Option<(u64, f64)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let role = words.iter().position(|w| *w == "sender" || *w == "receiver")?;
    let retr = words.get(role.checked_sub(3)?)?.parse().ok()?;
    let cwnd = words.get(role - 2)?.parse().ok()?;
    ["KiB", "MiB", "B"].contains(words.get(role - 1)?).then_some((retr, cwnd))
}

#[test]
fn interval_lines_carry_the_senders_retransmits_and_cwnd() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "1", "-i", "0.25", "-P", "2", "--no-store"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.contains(" sec ")).collect();
    assert!(lines.len() >= 6, "streams and SUM lines: {}", out.stdout);
    for l in &lines {
        let (_, cwnd) = retr_cwnd(l).unwrap_or_else(|| panic!("no Retr/Cwnd numbers: {l}"));
        assert!(cwnd > 0.0, "{l}");
    }
    // -R: the server sent; its per-interval figures come back with its results.
    let out = run(
        &["client", "127.0.0.1", "-p", &port, "-t", "1", "-i", "0.25", "-R", "--no-store"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let text = &out.stdout;
    assert!(text.contains("receiver") && text.contains("n/a        n/a  receiver"), "{text}");
    assert!(text.contains("(Retr and Cwnd are the sender's"), "the n/a is explained: {text}");
    let table = text.split("Sender (server) per interval, S->C:").nth(1).expect(text);
    let rows: Vec<&str> = table.lines().skip(2).take_while(|l| l.contains(" sec ")).collect();
    assert!(rows.len() >= 3, "{text}");
    for r in rows {
        let w: Vec<&str> = r.split_whitespace().collect();
        assert!(w[2].parse::<u64>().is_ok() && w[3].parse::<f64>().is_ok_and(|c| c > 0.0), "{r}");
    }
}

#[test]
fn the_answer_is_the_last_thing_printed() {
    let srv = Server::start(&[]);
    let port = srv.port.to_string();
    for extra in [&[][..], &["--bidir"][..]] {
        let args = [&["client", "127.0.0.1", "-p", &port, "-t", "0.5", "--no-store"][..], extra];
        let out = run(&args.concat(), Duration::from_secs(30));
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let lines: Vec<&str> = out.stdout.lines().collect();
        let first_answer = lines.iter().position(|l| *l == "Client -> server:").expect(&out.stdout);
        let tail = &lines[first_answer..];
        // Only rates, verdicts and the outcome after the first direction's header.
        for l in tail {
            let answer = l.ends_with("-> server:")
                || l.ends_with("-> client:")
                || l.starts_with("  sender ")
                || l.starts_with("  receiver ")
                || l.starts_with("Both directions received: ")
                || l.starts_with("Verdict ")
                || *l == "Test complete.";
            assert!(answer, "{l:?} after the answer began:\n{}", out.stdout);
        }
        assert_eq!(tail.last(), Some(&"Test complete."));
        assert!(tail[tail.len() - 2].starts_with("Verdict "), "{}", out.stdout);
        for detail in ["CPU and memory", "granted:", "TCP C->S (sender's view)"] {
            let at = lines.iter().position(|l| l.contains(detail)).expect(detail);
            assert!(at < first_answer, "{detail} comes before the answer:\n{}", out.stdout);
        }
    }
}
