//! Waiting for the agents (`--wait-agents DURATION`, `--expect N`, with `--each-address`):
//! before a fleet or a mesh starts, the names are resolved again and again, and every address
//! they give is greeted (the doctor's hello, with the key when there is one), until the
//! agents are all there or the wait is over.
//!
//! Why: in Kubernetes the requester is a Job that starts beside the agents' DaemonSet. What
//! the headless Service names at that instant is whatever agents happen to exist: on a real
//! two-node cluster the fleet Job tested 1 node of 2 three times out of three and called it a
//! success, and the mesh Job failed its first attempts ("cannot resolve", "a mesh needs at
//! least 2 agents") and leant on the Job's back-off. A requester that waits does neither.
//!
//! When are the agents "all there"? The requester holds no cluster credentials (no pod gets
//! a service-account token), so it cannot read the DaemonSet's desired count. It decides:
//! - with `--expect N`: once N agents answer (more are welcome);
//! - without: once every address the names give answers, at least the command's minimum
//!   (one for a fleet, two for a mesh), and no address has come or gone for [`SETTLE`], or
//!   for [`SETTLE_ROLLOUT`] while an agent it heard has been serving for less than [`YOUNG`]
//!   (or does not say how long: older servers).
//!   The Service publishes agents that are not ready yet (`publishNotReadyAddresses`), so a
//!   pod is named as soon as it has an address, long before its server listens: the settle
//!   window covers the seconds between the DaemonSet's pods getting their addresses and the
//!   cluster's DNS naming them. Why two windows: on a real two-node cluster started seconds
//!   before (the e2e's first phase), node-a's agent ran 1 s after node-b's, yet the name gave
//!   only node-b's address for more than 10 s; the fleet Job settled on 1 agent of 2. The
//!   agents' own age tells a rollout (young agents: more may be coming, wait 30 s) from a
//!   DaemonSet that has stood for a while (a scheduled mesh: 10 s is plenty), without
//!   cluster credentials. A pod whose image is still being pulled already has its address,
//!   so it is named and awaited (it does not answer yet); where the DNS may name pods later
//!   than 30 s (a large cluster's endpoint updates), give `--expect N` (the node count).
//!
//! Past the wait, the error names the agents that answered (by node), those that did not and
//! why (the last error of each), and what was expected. Nothing here prints: the caller is
//! told each new status line ([`Watch::status`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::plan::fleet::{AgentWait, Target};
use crate::units::peer_text::escape;

/// How long the set of addresses must stay the same, all answering, before a requester
/// without `--expect` takes it as every agent.
pub const SETTLE: Duration = Duration::from_secs(10);

/// The settle window while an agent heard is young (see the module's doc).
pub const SETTLE_ROLLOUT: Duration = Duration::from_secs(30);

/// An agent serving for less than this may be part of a rollout still under way.
pub const YOUNG: Duration = Duration::from_secs(60);

/// Why the agents could not be had: what to tell the user, and whether the names resolved to
/// fewer agents than the command needs (a mesh on a one-node cluster says more about that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// One message: what answered, what did not, what to do.
    pub why: String,
    /// Fewer agents than the command's minimum.
    pub too_few: bool,
}

impl NotReady {
    /// A reason that is not about how many agents there are.
    pub fn other(why: String) -> NotReady {
        NotReady { why, too_few: false }
    }
}

/// Between two looks at the names.
const POLL: Duration = Duration::from_millis(1000);

/// The most greetings in flight at once.
const GREET_AT_ONCE: usize = 64;

/// Why an agent did not answer a greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unheard {
    /// In words (the peer's words escaped where shown).
    pub why: String,
    /// It answered and turned us down (another key, not a linerate agent, an incompatible
    /// version): waiting will not change that, so the wait ends at once.
    pub refused: bool,
}

impl Unheard {
    /// Not there yet (nothing listens, no route, no answer in time).
    pub fn absent(why: impl Into<String>) -> Self {
        Unheard { why: why.into(), refused: false }
    }
}

/// Where the watch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every agent is there: go.
    Ready,
    /// Not yet: look again.
    Waiting,
    /// The wait is over without them: why, in words.
    GiveUp(String),
}

/// The state of a wait: what the names gave, who answered, since when nothing changed.
#[derive(Debug)]
pub struct Watch {
    want: AgentWait,
    /// The fewest agents the command can use (a mesh: two).
    at_least: usize,
    started: Instant,
    changed: Instant,
    targets: Vec<Target>,
    /// By address: the node the agent named (or its address when it named none), and how
    /// long it had been serving when it answered (None: it did not say), at which instant.
    answered: HashMap<(String, u16), (String, Option<Duration>, Instant)>,
    /// By address: the last reason it did not answer.
    errors: HashMap<(String, u16), String>,
    /// Why the names did not resolve at the last look.
    unresolved: Option<String>,
    /// An agent that turned the requester down, and why.
    refused: Option<String>,
}

fn key(t: &Target) -> (String, u16) {
    (t.host.clone(), t.port)
}

impl Watch {
    /// A watch starting `now`.
    pub fn new(want: AgentWait, at_least: usize, now: Instant) -> Self {
        Watch {
            want,
            at_least,
            started: now,
            changed: now,
            targets: Vec::new(),
            answered: HashMap::new(),
            errors: HashMap::new(),
            unresolved: None,
            refused: None,
        }
    }

    /// What the names resolved to at `now` (or why they did not). A lookup that fails after
    /// one that gave agents changes nothing: cluster DNS fails now and then for a moment (seen
    /// on a real cluster: a headless name answered, then "temporary failure in name
    /// resolution", then answered again), and an agent that really went away fails its test.
    pub fn saw(&mut self, now: Instant, resolved: Result<Vec<Target>, String>) {
        let targets = match resolved {
            Ok(t) => {
                self.unresolved = None;
                t
            }
            Err(e) if !self.targets.is_empty() => {
                self.unresolved = Some(e);
                return;
            }
            Err(e) => {
                self.unresolved = Some(e);
                Vec::new()
            }
        };
        let mut old: Vec<_> = self.targets.iter().map(key).collect();
        let mut new: Vec<_> = targets.iter().map(key).collect();
        old.sort();
        new.sort();
        if old != new {
            self.changed = now;
            // An address that went away and came back is greeted again.
            self.answered.retain(|k, _| new.contains(k));
        }
        self.targets = targets;
    }

    /// The targets not heard from yet.
    pub fn unanswered(&self) -> Vec<Target> {
        self.targets.iter().filter(|t| !self.answered.contains_key(&key(t))).cloned().collect()
    }

    /// A greeting's outcome at `now`: the node the agent named (None: it named none) and its
    /// age, or the error.
    pub fn heard(&mut self, now: Instant, t: &Target, result: Result<Heard, Unheard>) {
        match result {
            Ok(heard) => {
                let name = heard.node.unwrap_or_else(|| t.label.clone());
                self.answered.insert(key(t), (name, heard.serving, now));
                self.errors.remove(&key(t));
            }
            Err(e) => {
                if e.refused && self.refused.is_none() {
                    self.refused = Some(format!("agent {} refuses: {}", t.label, escape(&e.why)));
                }
                self.errors.insert(key(t), e.why);
            }
        }
    }

    /// The agents, as resolved at the last look.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// Whether to go, wait or give up, at `now`.
    pub fn verdict(&self, now: Instant) -> Verdict {
        if let Some(why) = &self.refused {
            return Verdict::GiveUp(format!(
                "{why}; no test was started (every agent is greeted before the first)"
            ));
        }
        let n = self.targets.len();
        let all = n > 0 && self.answered.len() == n;
        let enough = match self.want.expect {
            Some(e) => n >= e.max(self.at_least),
            None => {
                n >= self.at_least
                    && now.saturating_duration_since(self.changed) >= self.settle(now)
            }
        };
        if all && enough {
            return Verdict::Ready;
        }
        if now.saturating_duration_since(self.started) >= self.want.wait {
            return Verdict::GiveUp(self.why_not(now));
        }
        Verdict::Waiting
    }

    /// How long the set must stay unchanged at `now`: [`SETTLE_ROLLOUT`] while an agent heard
    /// is younger than [`YOUNG`] or did not say its age, else [`SETTLE`].
    fn settle(&self, now: Instant) -> Duration {
        let young = self.answered.values().any(|(_, serving, at)| {
            serving.is_none_or(|s| s + now.saturating_duration_since(*at) < YOUNG)
        });
        if young { SETTLE_ROLLOUT } else { SETTLE }
    }

    /// The agents that answered, by node, sorted.
    fn nodes(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.answered.values().map(|(n, _, _)| n.as_str()).collect();
        v.sort_unstable();
        v
    }

    /// One line: how many answered, who, and what is still awaited.
    pub fn status(&self) -> String {
        let nodes = self.nodes();
        let mut s = format!(
            "{} of {} agent(s) answer{}",
            nodes.len(),
            self.targets.len(),
            if nodes.is_empty() {
                String::new()
            } else {
                format!(" ({})", escape(&nodes.join(", ")))
            }
        );
        if let Some(e) = self.want.expect {
            s.push_str(&format!("; {e} expected (--expect)"));
        }
        if let Some(u) = &self.unresolved {
            s.push_str(&format!("; {}", escape(u)));
        }
        s
    }

    fn why_not(&self, now: Instant) -> String {
        let waited = now.saturating_duration_since(self.started).as_secs();
        let mut why = format!("waited {waited} s for the agents: {}", self.status());
        let mut silent: Vec<String> = self
            .unanswered()
            .iter()
            .map(|t| {
                let e = self.errors.get(&key(t)).map_or("no answer yet", String::as_str);
                format!("{} ({})", t.label, escape(e))
            })
            .collect();
        silent.sort();
        if !silent.is_empty() {
            why.push_str(&format!("; not answering: {}", silent.join(", ")));
        }
        let n = self.targets.len();
        if n < self.at_least {
            why.push_str(&format!("; this needs at least {} agents", self.at_least));
        }
        why.push_str(
            ". Check that every agent runs (on Kubernetes: kubectl get pods -o wide), or wait \
             longer (--wait-agents)",
        );
        why
    }
}

/// Waits for the agents `targets` name (see the module's doc): the targets to use, or why
/// not. `resolve` gives what the names resolve to now; `greet` asks one agent its node.
/// `status` hears each new status line.
pub fn wait_for(
    want: AgentWait,
    at_least: usize,
    resolve: &dyn Fn() -> Result<Vec<Target>, String>,
    greet: &(dyn Fn(&Target) -> Result<Heard, Unheard> + Sync),
    interrupt: &crate::session::Interrupt,
    status: &mut dyn FnMut(&str),
) -> Result<Vec<Target>, NotReady> {
    let mut watch = Watch::new(want, at_least, Instant::now());
    let mut said = String::new();
    loop {
        watch.saw(Instant::now(), resolve());
        let unanswered = watch.unanswered();
        let heard = greet_all(&unanswered, greet);
        let now = Instant::now();
        for (t, r) in unanswered.iter().zip(heard) {
            watch.heard(now, t, r);
        }
        match watch.verdict(Instant::now()) {
            Verdict::Ready => return Ok(watch.targets().to_vec()),
            Verdict::GiveUp(why) => {
                let too_few = watch.targets().len() < at_least && watch.refused.is_none();
                return Err(NotReady { why, too_few });
            }
            Verdict::Waiting => {}
        }
        let now = watch.status();
        if now != said {
            status(&now);
            said = now;
        }
        if interrupt.count() > 0 {
            return Err(NotReady::other(format!(
                "interrupted by {} while waiting for the agents",
                interrupt.last_name()
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// Why the requester's key will not do, if a greeting says so: the first of `heard` that an
/// agent or server turned down for the key (another key, or none where one is required), in
/// words that name the key file. Found before any test, this stops a mesh or fleet once,
/// rather than failing every pair or host with the same refusal and offering `--resume`.
pub fn key_refusal(
    targets: &[Target],
    heard: &[Result<Heard, Unheard>],
    key_file: Option<&std::path::Path>,
) -> Option<String> {
    fn about_key(h: &Result<Heard, Unheard>) -> Option<&Unheard> {
        h.as_ref().err().filter(|u| u.refused && KEY_REFUSALS.iter().any(|k| u.why.contains(k)))
    }
    let (t, why) = targets.iter().zip(heard).find_map(|(t, h)| Some((t, about_key(h)?)))?;
    let refusing = heard.iter().filter_map(about_key).count();
    let key = match key_file {
        Some(f) => format!("the key in {} (--psk-file)", f.display()),
        None => "no key (--psk-file)".to_string(),
    };
    Some(format!(
        "{refusing} of {} refuse {key}: {} said \"{}\"; no test was started. Give the key \
         their servers were started with (their --psk-file; on Kubernetes the Secret \
         linerate-psk)",
        targets.len(),
        t.label,
        escape(&why.why)
    ))
}

/// What a server's refusal says when it is about the key (`linerate_proto::server`).
const KEY_REFUSALS: [&str; 2] = ["authentication failed", "requires a pre-shared key"];

/// Greets every one of `targets` with `greet`, at most [`GREET_AT_ONCE`] at a time: the
/// outcomes in the targets' order. The wait's looks and a mesh's pre-flight.
pub fn greet_all(
    targets: &[Target],
    greet: &(dyn Fn(&Target) -> Result<Heard, Unheard> + Sync),
) -> Vec<Result<Heard, Unheard>> {
    let mut heard = Vec::with_capacity(targets.len());
    for chunk in targets.chunks(GREET_AT_ONCE) {
        std::thread::scope(|s| {
            let asked: Vec<_> = chunk.iter().map(|t| s.spawn(move || greet(t))).collect();
            heard.extend(
                asked.into_iter().map(|h| {
                    h.join().unwrap_or_else(|_| Err(Unheard::absent("the greeting failed")))
                }),
            );
        });
    }
    heard
}

/// An agent's node and zone, by the doctor's greeting (`--node-name`, `--zone` of `linerate
/// server`), with the plan's key; or why not, and whether it turned us down.
pub fn greet(t: &Target, plan: &crate::plan::ClientPlan) -> Result<Heard, Unheard> {
    use crate::record::FailureKind;
    let doctor = crate::plan::DoctorPlan {
        host: None,
        port: t.port,
        bind: plan.bind,
        family: plan.family,
        json: false,
        link_bits_per_second: None,
        connect_timeout: plan.connect_timeout,
        psk: plan.psk.clone(),
    };
    let env = crate::session::doctor::environment_of(&doctor, &t.host).map_err(|e| {
        let refused = matches!(
            FailureKind::of(&e),
            FailureKind::Refused | FailureKind::Garbage | FailureKind::Incompatible
        );
        Unheard { why: format!("{e:#}"), refused }
    })?;
    let fit = |n: &String| n.len() <= 253 && !n.chars().any(char::is_control);
    Ok(Heard {
        node: env.node.filter(fit),
        zone: env.zone.filter(fit),
        network: env.network.filter(fit),
        serving: env.serving_s.map(Duration::from_secs),
    })
}

/// What an agent said of itself when greeted: its node, zone and network (None: it names none, or a
/// name too long or with control characters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heard {
    /// `server --node-name`.
    pub node: Option<String>,
    /// `server --zone`.
    pub zone: Option<String>,
    /// `server --network`.
    pub network: Option<String>,
    /// How long it had been serving (None: an older server, which does not say).
    pub serving: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str) -> Target {
        Target { host: host.into(), port: 5201, label: format!("svc/{host}") }
    }

    /// An agent on `node`, in no zone, serving for an hour.
    fn on(node: &str) -> Heard {
        Heard { node: Some(node.into()), ..old() }
    }

    /// An agent naming no node, serving for an hour.
    fn old() -> Heard {
        Heard { serving: Some(Duration::from_secs(3600)), ..Heard::default() }
    }

    fn want(wait: u64, expect: Option<usize>) -> AgentWait {
        AgentWait { wait: Duration::from_secs(wait), expect }
    }

    #[test]
    fn without_expect_the_set_must_answer_and_settle() {
        let t0 = Instant::now();
        let mut w = Watch::new(want(300, None), 1, t0);
        w.saw(t0, Err("cannot resolve \"linerate\"".into()));
        assert_eq!(w.verdict(t0), Verdict::Waiting, "nothing resolves yet");
        let at = |s: u64| t0 + Duration::from_secs(s);
        w.saw(at(2), Ok(vec![t("10.0.0.5")]));
        w.heard(t0, &t("10.0.0.5"), Ok(on("node-a")));
        assert_eq!(w.verdict(at(5)), Verdict::Waiting, "one agent, not settled");
        // The second node's agent gets its address 4 s later: the window starts again.
        w.saw(at(6), Ok(vec![t("10.0.0.5"), t("10.0.1.7")]));
        w.heard(t0, &t("10.0.1.7"), Err(Unheard::absent("connection refused")));
        assert_eq!(w.verdict(at(13)), Verdict::Waiting, "the late agent does not answer yet");
        assert!(w.status().contains("1 of 2"), "{}", w.status());
        w.heard(t0, &t("10.0.1.7"), Ok(on("node-b")));
        assert_eq!(w.verdict(at(15)), Verdict::Waiting, "settling since the change at 6 s");
        assert_eq!(w.verdict(at(16)), Verdict::Ready);
        assert_eq!(w.targets().len(), 2);
    }

    #[test]
    fn young_agents_or_ones_of_unknown_age_settle_longer() {
        // The e2e's first phase: node-b's agent answers 1 s after it started, node-a's is not
        // named yet; 10 s later the name still gives one address.
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let young =
            |node: &str, s: u64| Heard { serving: Some(Duration::from_secs(s)), ..on(node) };
        let mut w = Watch::new(want(300, None), 1, t0);
        w.saw(t0, Ok(vec![t("10.0.1.7")]));
        w.heard(t0, &t("10.0.1.7"), Ok(young("node-b", 1)));
        assert_eq!(w.verdict(at(10)), Verdict::Waiting, "a rollout may be under way");
        assert_eq!(w.verdict(at(29)), Verdict::Waiting);
        assert_eq!(w.verdict(at(30)), Verdict::Ready, "{}", w.status());
        // The late agent is named at 12 s: the window starts again, and its age counts.
        let mut w = Watch::new(want(300, None), 1, t0);
        w.saw(t0, Ok(vec![t("10.0.1.7")]));
        w.heard(t0, &t("10.0.1.7"), Ok(young("node-b", 1)));
        w.saw(at(12), Ok(vec![t("10.0.1.7"), t("10.0.0.5")]));
        w.heard(at(12), &t("10.0.0.5"), Ok(young("node-a", 2)));
        assert_eq!(w.verdict(at(41)), Verdict::Waiting);
        assert_eq!(w.verdict(at(42)), Verdict::Ready);
        // Agents past YOUNG settle in SETTLE, counted from when they answered.
        let mut w = Watch::new(want(300, None), 1, t0);
        w.saw(t0, Ok(vec![t("a")]));
        w.heard(t0, &t("a"), Ok(young("node-a", 50)));
        assert_eq!(w.verdict(at(9)), Verdict::Waiting, "50 s + 9 s: still young");
        assert_eq!(w.verdict(at(10)), Verdict::Ready, "60 s old and 10 s unchanged");
        // An older server does not say its age: the longer window.
        let mut w = Watch::new(want(300, None), 1, t0);
        w.saw(t0, Ok(vec![t("a")]));
        w.heard(t0, &t("a"), Ok(Heard::default()));
        assert_eq!(w.verdict(t0 + SETTLE), Verdict::Waiting);
        assert_eq!(w.verdict(t0 + SETTLE_ROLLOUT), Verdict::Ready);
    }

    #[test]
    fn expect_goes_at_once_and_a_mesh_needs_two() {
        let t0 = Instant::now();
        let mut w = Watch::new(want(300, Some(2)), 2, t0);
        w.saw(t0, Ok(vec![t("a"), t("b")]));
        w.heard(t0, &t("a"), Ok(old()));
        assert_eq!(w.verdict(t0), Verdict::Waiting);
        w.heard(t0, &t("b"), Ok(on("node-b")));
        assert_eq!(w.verdict(t0), Verdict::Ready, "no settle window with --expect");
        let mut one = Watch::new(want(20, None), 2, t0);
        one.saw(t0, Ok(vec![t("a")]));
        one.heard(t0, &t("a"), Ok(on("node-a")));
        assert_eq!(one.verdict(t0 + Duration::from_secs(19)), Verdict::Waiting);
        let Verdict::GiveUp(why) = one.verdict(t0 + Duration::from_secs(20)) else {
            panic!("a one-node mesh must give up")
        };
        assert!(why.contains("1 of 1 agent(s) answer (node-a)"), "{why}");
        assert!(why.contains("at least 2 agents"), "{why}");
    }

    #[test]
    fn giving_up_names_who_did_not_answer_and_why() {
        let t0 = Instant::now();
        let mut w = Watch::new(want(60, Some(3)), 1, t0);
        w.saw(t0, Ok(vec![t("a"), t("b")]));
        w.heard(t0, &t("a"), Ok(on("node-a")));
        w.heard(t0, &t("b"), Err(Unheard::absent("connection refused\x1b[2J")));
        let Verdict::GiveUp(why) = w.verdict(t0 + Duration::from_secs(60)) else { panic!() };
        assert!(why.contains("3 expected (--expect)"), "{why}");
        assert!(why.contains("svc/b (connection refused"), "{why}");
        assert!(!why.contains('\x1b'), "peer text is escaped: {why:?}");
    }

    #[test]
    fn an_agent_that_refuses_the_key_ends_the_wait_at_once() {
        let t0 = Instant::now();
        let mut w = Watch::new(want(300, None), 2, t0);
        w.saw(t0, Ok(vec![t("a"), t("b")]));
        w.heard(t0, &t("a"), Ok(on("node-a")));
        let no = "authentication failed: the client's key is not this server's (--psk-file)";
        w.heard(t0, &t("b"), Err(Unheard { why: no.into(), refused: true }));
        let Verdict::GiveUp(why) = w.verdict(t0) else { panic!("a refusal does not go away") };
        assert!(why.starts_with("agent svc/b refuses: authentication failed"), "{why}");
        assert!(why.contains("no test was started"), "{why}");
    }

    #[test]
    fn a_failed_lookup_after_a_good_one_changes_nothing() {
        let t0 = Instant::now();
        let mut w = Watch::new(want(60, None), 1, t0);
        w.saw(t0, Ok(vec![t("a"), t("b")]));
        w.heard(t0, &t("a"), Ok(old()));
        w.heard(t0, &t("b"), Ok(old()));
        w.saw(t0 + Duration::from_secs(5), Err("temporary failure in name resolution".into()));
        assert_eq!(w.targets().len(), 2);
        assert_eq!(w.verdict(t0 + SETTLE), Verdict::Ready, "the settle window was not restarted");
    }

    #[test]
    fn an_address_that_leaves_and_returns_is_greeted_again() {
        let t0 = Instant::now();
        let mut w = Watch::new(want(60, None), 1, t0);
        w.saw(t0, Ok(vec![t("a")]));
        w.heard(t0, &t("a"), Ok(old()));
        assert!(w.unanswered().is_empty());
        w.saw(t0, Ok(vec![]));
        w.saw(t0, Ok(vec![t("a")]));
        assert_eq!(w.unanswered().len(), 1);
    }
}
