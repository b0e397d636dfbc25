//! A campaign's pre-flight: before the first run, every tier's host is resolved and its server
//! greeted, so that a name that does not resolve, a port where nothing listens or a program
//! that is no test server stops the campaign before an hour of work, not in the middle of it.
//!
//! The greeting is the doctor's (`linerate_proto::doctor`): both hellos, then the server's
//! environment. A linerate server ends such a session cleanly when the client closes, so the
//! check leaves no failed test in its log. A server that answers with iperf3's first bytes
//! counts as reached: a campaign's runs fall back to iperf3's protocol (`session::client`).
//! The tiers are checked at the same time, each bounded by its connect timeout and the
//! handshake's (`linerate_proto::HANDSHAKE_TIMEOUT`, then the doctor's answer timeout).
//!
//! Must not print: the caller words the answer.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::Duration;

use linerate_proto::doctor::{DoctorConn, DoctorEvent};

use crate::plan::ClientPlan;
use crate::plan::host::format_host_port;
use crate::record::FailureKind;
use crate::session::client::{connect_first, resolve};
use crate::session::iperf3_peer::{PeerIsIperf3, refuse_iperf3};
use crate::session::pump::{self, FirstBytes};
use crate::session::{Clock, ControlChannel, SOFTWARE, random_nonce};

/// How long a single-threaded iperf3 server is given to drop the greeting's session before
/// the campaign's first run connects.
const IPERF3_RETRY_PAUSE: Duration = Duration::from_millis(300);

/// Which server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reached {
    /// A linerate server, with its software string.
    Linerate(String),
    /// An iperf3 server (the runs will speak iperf3's protocol).
    Iperf3,
}

/// Why a tier's server was not reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreached {
    /// The host name does not resolve (or not to an address of the requested family).
    Unresolved,
    /// The host refused the connection: nothing listens on the port.
    Refused,
    /// No answer in time: to the connection, or to the hello.
    TimedOut,
    /// No route, or another network error.
    Unreachable,
    /// Something answered that speaks neither linerate's protocol nor iperf3's.
    WrongProgram,
    /// A linerate server answered but turned the session down (a key it requires, a version
    /// it does not speak, or it closed).
    Rejected,
}

impl Unreached {
    /// The failure kind a campaign stopped by this reports (and its exit status).
    pub fn kind(self) -> FailureKind {
        match self {
            Unreached::Unresolved | Unreached::Unreachable => FailureKind::Network,
            Unreached::Refused | Unreached::Rejected => FailureKind::Refused,
            Unreached::TimedOut => FailureKind::TimedOut,
            Unreached::WrongProgram => FailureKind::Garbage,
        }
    }
}

/// One server's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// `host:port` as the plan names it.
    pub server: String,
    /// Who answered, or why no one did and the error's own words.
    pub result: Result<Reached, (Unreached, String)>,
}

/// Checks every plan's server, all at the same time; the checks in the plans' order.
pub fn check_all(plans: &[&ClientPlan]) -> Vec<Check> {
    std::thread::scope(|s| {
        let running: Vec<_> = plans.iter().map(|p| (p, s.spawn(|| check(p)))).collect();
        running
            .into_iter()
            .map(|(p, h)| {
                h.join().unwrap_or_else(|_| Check {
                    server: format_host_port(&p.host, p.port),
                    result: Err((Unreached::Rejected, "the check itself failed".into())),
                })
            })
            .collect()
    })
}

/// Resolves the plan's host, connects and says hello.
pub fn check(plan: &ClientPlan) -> Check {
    let result = resolve(&plan.host, plan.port, plan)
        .map_err(|e| (Unreached::Unresolved, format!("{e:#}")))
        .and_then(|addrs| {
            connect_first(&addrs, plan).map_err(|(kind, e)| {
                let why = match kind {
                    Some(ErrorKind::ConnectionRefused) => Unreached::Refused,
                    Some(ErrorKind::TimedOut | ErrorKind::WouldBlock) => Unreached::TimedOut,
                    _ => Unreached::Unreachable,
                };
                (why, format!("{e:#}"))
            })
        })
        .and_then(|(stream, _)| hello(stream, plan));
    Check { server: format_host_port(&plan.host, plan.port), result }
}

/// The doctor's greeting on a connected control stream: who answered.
fn hello(stream: TcpStream, plan: &ClientPlan) -> Result<Reached, (Unreached, String)> {
    match greet(stream, plan) {
        Ok(Some(DoctorEvent::Environment { server_software, .. })) => {
            Ok(Reached::Linerate(server_software))
        }
        Ok(_) => Err((Unreached::Rejected, "the server closed the connection unanswered".into())),
        Err(e) if e.downcast_ref::<PeerIsIperf3>().is_some() => {
            // Give a single-threaded iperf3 server a moment to drop this session.
            std::thread::sleep(IPERF3_RETRY_PAUSE);
            Ok(Reached::Iperf3)
        }
        Err(e) => {
            let why = match FailureKind::of(&e) {
                FailureKind::Garbage | FailureKind::Violation => Unreached::WrongProgram,
                FailureKind::TimedOut => Unreached::TimedOut,
                _ => Unreached::Rejected,
            };
            Err((why, format!("{e:#}")))
        }
    }
}

/// Hellos and the environment request; the server's first answer.
fn greet(stream: TcpStream, plan: &ClientPlan) -> anyhow::Result<Option<DoctorEvent>> {
    let mut ctrl = ControlChannel::new(stream)?;
    let clock = Clock::new();
    let mut conn = DoctorConn::new(SOFTWARE, clock.now());
    if let Some(key) = &plan.psk {
        conn = conn.with_psk(key.clone(), random_nonce()?);
    }
    let mut first = FirstBytes::new(refuse_iperf3);
    pump::next_event(&mut ctrl, &clock, &mut conn, Duration::from_millis(50), Some(&mut first))
}
