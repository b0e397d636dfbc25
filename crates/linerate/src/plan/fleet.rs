//! The typed plan of `linerate fleet`: one test run against many `linerate server`s at once.
//!
//! Targets are written `HOST[:PORT][=LABEL]` (IPv6 literals in brackets: `[fd00::2]:5201`),
//! on the command line or one per line in a file (`#` starts a comment). A target without a
//! port uses the test's `-p`; without a label it is called by what the user wrote. The same
//! server named twice would be measured twice against itself, so duplicates (the same host
//! and port, or the same label) are refused, naming both lines.
//!
//! Pure: parsing and checking only. Names are resolved when the fleet runs.

use std::time::Duration;

use crate::plan::ClientPlan;

/// The longest the coordinator waits for every host to be ready, counted from the start of
/// setup; kept below the servers' own wait for `go` ([`linerate_proto::HELD_TIMEOUT`]), so a
/// server never gives up on a fleet that is still gathering.
pub const SETUP_LIMIT: Duration = Duration::from_secs(9);

/// The most targets one fleet takes: each costs a control connection, a thread and `-P`
/// data connections (file descriptors are the real bound, checked when the fleet starts).
pub const MAX_TARGETS: usize = 4096;

/// One server of a fleet (stored in a campaign's plan when a tier is a fleet).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Server port.
    pub port: u16,
    /// What reports call it.
    pub label: String,
}

/// How long a fleet or mesh waits for the agents its names resolve to, and how many it
/// expects (`--wait-agents`, `--expect`, with `--each-address`; `session::agents`). The
/// default waits for nothing: the names are resolved once, when it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentWait {
    /// `--wait-agents`: the longest wait (zero: resolve once, take what answers).
    pub wait: std::time::Duration,
    /// `--expect N`: go once N agents answer (without: once the set has settled).
    pub expect: Option<usize>,
}

impl AgentWait {
    /// Whether the agents are awaited (and greeted) before the start.
    pub fn awaits(&self) -> bool {
        !self.wait.is_zero() || self.expect.is_some()
    }
}

/// `linerate fleet`: the same test against every target, started together.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetPlan {
    /// The servers, in the order given (`--scale` takes the first k).
    pub targets: Vec<Target>,
    /// The test every target gets (its host and port are replaced per target).
    pub base: ClientPlan,
    /// `--scale`: host counts to run the fleet with (the first k targets each); empty: one
    /// run with every target.
    pub scale: Vec<usize>,
    /// `--repeat`: runs per host count.
    pub repeat: u32,
    /// The seed of the run order.
    pub seed: u64,
    /// `--each-address`: a target name that resolves to several addresses (a Kubernetes
    /// headless service, round-robin DNS) becomes one target per address.
    pub each_address: bool,
    /// `--wait-agents`, `--expect`.
    pub agent_wait: AgentWait,
    /// `--until-ci`: with `--scale`, repeat each host count until the 95 % interval of its
    /// total is within this fraction of its mean (0.05 for 5 %), up to `max_repeat` runs.
    pub until_ci: Option<f64>,
    /// With `until_ci`: the most whole fleet runs per host count.
    pub max_repeat: u32,
    /// `--resume` (Some), naming a group (Some(Some)): continue an unfinished scaling curve.
    pub resume: Option<Option<i64>>,
    /// Hidden `--stop-after N`: stop after N fleet runs as if interrupted (tests of `--resume`).
    pub stop_after: Option<usize>,
    /// Where the key came from (`--psk-file`), for messages about it.
    pub key_file: Option<std::path::PathBuf>,
}

/// What identifies a fleet in the history (a group's plan, `store::GroupParams`): everything
/// that shapes its runs but the order seed. Keys older releases did not store read as their
/// defaults.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FleetIdentity {
    /// The servers, in order.
    #[serde(default)]
    pub targets: Vec<Target>,
    /// The test every target got.
    #[serde(default)]
    pub spec: Option<linerate_proto::TestSpec>,
    /// `--scale`: the host counts of a curve; empty: a single fleet.
    #[serde(default)]
    pub scale: Vec<usize>,
    /// `--repeat`, `--until-ci`, `--max-repeat`.
    #[serde(flatten)]
    pub rounds: super::StoredRounds,
}

impl FleetIdentity {
    /// The identity of `plan`.
    pub fn of(plan: &FleetPlan) -> Self {
        FleetIdentity {
            targets: plan.targets.clone(),
            spec: Some(plan.base.spec.clone()),
            scale: plan.scale.clone(),
            rounds: super::StoredRounds::of(plan.repeat, plan.until_ci, plan.max_repeat),
        }
    }
}

impl FleetPlan {
    /// The fleet of the first `k` targets.
    pub fn first(&self, k: usize) -> FleetPlan {
        FleetPlan { targets: self.targets[..k.min(self.targets.len())].to_vec(), ..self.clone() }
    }

    /// The host counts it runs: a curve's `--scale`, or every target at once (a single fleet:
    /// a grid of one cell).
    pub fn counts(&self) -> Vec<usize> {
        if self.scale.is_empty() { vec![self.targets.len()] } else { self.scale.clone() }
    }

    /// Fleet runs in the first round of a scaling curve: every host count `repeat` times (the
    /// order is the grid's, `session::grid`).
    pub fn first_round_runs(&self) -> usize {
        self.scale.len() * self.repeat as usize
    }

    /// The client plan for one target.
    pub fn plan_for(&self, t: &Target) -> ClientPlan {
        let mut p = self.base.clone();
        p.host = t.host.clone();
        p.port = t.port;
        p
    }
}

/// Parses one target; `default_port` applies when it names none.
pub fn parse_target(text: &str, default_port: u16) -> Result<Target, String> {
    let text = text.trim();
    let (addr, label) = match text.split_once('=') {
        Some((a, l)) => (a.trim(), Some(l.trim())),
        None => (text, None),
    };
    if addr.is_empty() {
        return Err(format!("fleet target {text:?} names no host; write HOST[:PORT][=LABEL]"));
    }
    let (host, port) =
        crate::plan::host::split_host_port(addr).map_err(|e| format!("fleet target {e}"))?;
    let label = match label {
        Some("") => {
            return Err(format!("fleet target {text:?} has an empty label after '='"));
        }
        Some(l) if l.chars().any(|c| c.is_control()) => {
            return Err(format!("fleet target {text:?}: the label holds control characters"));
        }
        Some(l) => l.to_string(),
        None => addr.to_string(),
    };
    Ok(Target { host, port: port.unwrap_or(default_port), label })
}

/// Parses `--scale`: host counts as `1,2,4,8,16`, a range `1..16`, or both (`1,2..4,8`);
/// sorted, duplicates dropped; each from 1 to `targets`.
pub fn parse_scale(text: &str, targets: usize) -> Result<Vec<usize>, String> {
    let count = |s: &str| {
        s.trim().parse::<usize>().ok().filter(|k| (1..=targets).contains(k)).ok_or_else(|| {
            format!(
                "--scale {text}: {s:?} is not a host count from 1 to {targets} (the targets given)"
            )
        })
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once("..") {
            Some((a, b)) => {
                let (a, b) = (count(a)?, count(b)?);
                if a > b {
                    return Err(format!("--scale {text}: the range {part} runs backwards"));
                }
                out.extend(a..=b);
            }
            None => out.push(count(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parses a targets file: one target per line, blank lines and `#` comments skipped. Every
/// bad line is named with its number (the first ten, then how many more), a line that is not
/// UTF-8 text too: a file is fixed in one pass, not one error at a time.
pub fn parse_targets_file(bytes: &[u8], default_port: u16) -> Result<Vec<Target>, String> {
    const SHOWN: usize = 10;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = match std::str::from_utf8(line) {
            Ok(line) => line,
            Err(e) => {
                errors.push(format!(
                    "line {}: byte {} is not UTF-8 text (save the file as UTF-8)",
                    n + 1,
                    e.valid_up_to() + 1
                ));
                continue;
            }
        };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        match parse_target(line, default_port) {
            Ok(t) => out.push(t),
            Err(e) => errors.push(format!("line {}: {e}", n + 1)),
        }
    }
    if errors.is_empty() {
        return Ok(out);
    }
    let more = errors.len().saturating_sub(SHOWN);
    errors.truncate(SHOWN);
    if more > 0 {
        errors.push(format!("and {more} more bad line(s)"));
    }
    Err(errors.join("; "))
}

/// Every target whose host resolves (`resolve`) to several addresses, as one target per
/// address, labelled `LABEL/ADDRESS`; addresses given as such, and names with one address,
/// stay as they are. The result is checked again for duplicates (two names for one server).
pub fn expand_targets(
    targets: &[Target],
    resolve: impl Fn(&str, u16) -> Result<Vec<std::net::IpAddr>, String>,
) -> Result<Vec<Target>, String> {
    let mut out = Vec::new();
    for t in targets {
        if t.host.parse::<std::net::IpAddr>().is_ok() {
            out.push(t.clone());
            continue;
        }
        let mut addrs = resolve(&t.host, t.port)?;
        addrs.sort();
        addrs.dedup();
        match addrs.as_slice() {
            [] => return Err(format!("{} resolves to no address", t.host)),
            // Pinned to its address, keeping the name as the label: the agent greeted while
            // waiting (`session::agents`) is the one tested, even when the name resolves to
            // another address later (a headless Service naming one pod, then another).
            [one] => out.push(Target { host: one.to_string(), ..t.clone() }),
            many => out.extend(many.iter().map(|a| Target {
                host: a.to_string(),
                port: t.port,
                label: format!("{}/{a}", t.label),
            })),
        }
    }
    check_targets(&out)?;
    Ok(out)
}

/// Refuses an empty fleet, too many targets and duplicates.
pub fn check_targets(targets: &[Target]) -> Result<(), String> {
    if targets.is_empty() {
        return Err(
            "a fleet needs at least one target: linerate fleet HOST[:PORT][=LABEL]...".into()
        );
    }
    if targets.len() > MAX_TARGETS {
        return Err(format!("{} targets: a fleet takes at most {MAX_TARGETS}", targets.len()));
    }
    for (i, t) in targets.iter().enumerate() {
        for u in &targets[..i] {
            if u.host.eq_ignore_ascii_case(&t.host) && u.port == t.port {
                return Err(format!(
                    "{}:{} is named twice ({:?} and {:?}): one server would be measured \
                     against itself; drop one",
                    t.host, t.port, u.label, t.label
                ));
            }
            if u.label == t.label {
                return Err(format!(
                    "the label {:?} is given to two targets; give each its own (HOST=LABEL)",
                    t.label
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: u16, label: &str) -> Target {
        Target { host: host.into(), port, label: label.into() }
    }

    #[test]
    fn every_written_form_parses() {
        assert_eq!(parse_target("10.0.0.2", 5201), Ok(t("10.0.0.2", 5201, "10.0.0.2")));
        assert_eq!(parse_target("vm7:6000", 5201), Ok(t("vm7", 6000, "vm7:6000")));
        assert_eq!(parse_target("vm7:6000=seven", 5201), Ok(t("vm7", 6000, "seven")));
        assert_eq!(parse_target("[fd00::2]:7000=v6", 5201), Ok(t("fd00::2", 7000, "v6")));
        assert_eq!(parse_target("[::1]", 5201), Ok(t("::1", 5201, "[::1]")));
        assert_eq!(parse_target("fd00::2", 5201), Ok(t("fd00::2", 5201, "fd00::2")));
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        for (bad, says) in [
            ("", "names no host"),
            ("=x", "names no host"),
            ("h=", "empty label"),
            ("h:0", "1 to 65535"),
            ("h:http", "1 to 65535"),
            (":5201", "no host before"),
            ("[::1", "closing"),
            ("[::1]5201", "':PORT'"),
        ] {
            let e = parse_target(bad, 5201).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn files_skip_comments_and_name_the_line() {
        let ok = parse_targets_file(b"# fleet\nvm1\n\n vm2:7000=b # second\r\n", 5201);
        assert_eq!(ok, Ok(vec![t("vm1", 5201, "vm1"), t("vm2", 7000, "b")]));
        let e = parse_targets_file(b"vm1\nvm2:x\n", 5201).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        // Every bad line, each with its number; a byte that is not UTF-8 too.
        let e = parse_targets_file(b"vm1\nvm2:x\nvm3\nv\xffm4\n=x\n", 5201).unwrap_err();
        for says in ["line 2:", "line 4: byte 2 is not UTF-8", "line 5:"] {
            assert!(e.contains(says), "{says}: {e}");
        }
        let many: Vec<u8> = "h:x\n".repeat(13).into_bytes();
        let e = parse_targets_file(&many, 5201).unwrap_err();
        assert!(e.contains("line 10:") && !e.contains("line 11:"), "{e}");
        assert!(e.ends_with("and 3 more bad line(s)"), "{e}");
    }

    #[test]
    fn scales_read_as_lists_ranges_or_both_within_the_targets() {
        assert_eq!(parse_scale("1,2,4,8,16", 16), Ok(vec![1, 2, 4, 8, 16]));
        assert_eq!(parse_scale("1..4", 16), Ok(vec![1, 2, 3, 4]));
        assert_eq!(parse_scale("8,1..2,2", 16), Ok(vec![1, 2, 8]));
        assert!(parse_scale("1..17", 16).unwrap_err().contains("1 to 16"));
        assert!(parse_scale("0,1", 4).unwrap_err().contains("\"0\""));
        assert!(parse_scale("4..2", 4).unwrap_err().contains("backwards"));
        assert!(parse_scale("x", 4).is_err());
    }

    #[test]
    fn names_with_many_addresses_become_one_target_each_and_are_checked_again() {
        let dns = |name: &str, _port: u16| -> Result<Vec<std::net::IpAddr>, String> {
            match name {
                "svc" => Ok(vec!["10.0.0.3".parse().unwrap(), "10.0.0.2".parse().unwrap()]),
                "one" => Ok(vec!["10.0.0.9".parse().unwrap()]),
                "alias" => Ok(vec!["10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap()]),
                other => Err(format!("cannot resolve {other}")),
            }
        };
        let got = expand_targets(&[t("svc", 5201, "svc"), t("one", 5201, "one")], dns);
        assert_eq!(
            got,
            Ok(vec![
                t("10.0.0.2", 5201, "svc/10.0.0.2"),
                t("10.0.0.3", 5201, "svc/10.0.0.3"),
                t("10.0.0.9", 5201, "one"),
            ])
        );
        let twice = expand_targets(&[t("svc", 5201, "svc"), t("alias", 5201, "alias")], dns);
        assert!(twice.unwrap_err().contains("named twice"));
        assert!(expand_targets(&[t("nope", 1, "n")], dns).unwrap_err().contains("nope"));
        let literal = expand_targets(&[t("10.1.1.1", 1, "x")], dns);
        assert_eq!(literal, Ok(vec![t("10.1.1.1", 1, "x")]));
    }

    #[test]
    fn duplicates_and_empty_fleets_are_refused() {
        assert!(check_targets(&[]).unwrap_err().contains("at least one"));
        let twice = [t("VM1", 5201, "a"), t("vm1", 5201, "b")];
        assert!(check_targets(&twice).unwrap_err().contains("named twice"));
        let labels = [t("vm1", 5201, "a"), t("vm2", 5201, "a")];
        assert!(check_targets(&labels).unwrap_err().contains("label"));
        assert_eq!(check_targets(&[t("vm1", 5201, "a"), t("vm1", 5202, "b")]), Ok(()));
    }
}
