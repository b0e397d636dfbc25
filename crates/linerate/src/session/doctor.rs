//! The doctor driver: this host's environment, and with a HOST, the server's environment over
//! the native control protocol, the control connection's round trip (TCP_INFO), and the path
//! MTU found by UDP probes with don't-fragment set that the server echoes.
//!
//! Probes are bounded: at most [`MAX_PROBES`] datagrams, each retried [`TRIES`] times before
//! it counts as too big (one lost datagram must not shrink the answer), each waiting 200 ms
//! plus twice the round trip. A probe refused locally (EMSGSIZE: above the interface MTU) or
//! answered by an ICMP "fragmentation needed" counts as too big at once. Probes go only to
//! the server the control connection reached.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use linerate_proto::doctor::{DoctorConn, DoctorEvent};
use linerate_proto::wire::{Cookie, decode_echo, encode_probe};
use linerate_proto::{Environment, Fact};

use crate::measure::host::{Scope, snapshot};
use crate::plan::DoctorPlan;
use crate::plan::host::format_host_port;
use crate::plan::pmtu::MtuSearch;
use crate::session::iperf3_peer::looks_like_iperf3;
use crate::session::pump::{self, FirstBytes};
use crate::session::{Clock, ControlChannel, SOFTWARE};
use crate::stats::doctor::{RemoteFacts, test_interface};
use crate::sys;

/// Most probe datagrams one search sends.
pub const MAX_PROBES: u32 = 64;
/// Sends of one size before it counts as too big.
pub const TRIES: u32 = 3;

/// This host's environment, with every interface that is up; `local` marks the test's.
pub fn local_environment(local: Option<IpAddr>) -> Environment {
    snapshot(Scope::AllUp(local))
}

/// Connects to the plan's HOST and gathers the remote facts. The local environment is
/// returned too, taken with the control connection's local address marking the test
/// interface. Errors are for the caller to show as n/a.
pub fn examine(plan: &DoctorPlan, host: &str) -> (Environment, RemoteFacts) {
    let server = format_host_port(host, plan.port);
    let mut facts = RemoteFacts {
        server: server.clone(),
        software: Fact::na("not connected"),
        environment: Fact::na("not connected"),
        rtt_us: Fact::na("not connected"),
        path_mtu_bytes: Fact::na("not connected"),
        searched_up_to_bytes: 0,
    };
    let conn = connect(plan, host);
    let (stream, addr) = match conn {
        Ok(c) => c,
        Err(e) => {
            let why = format!("{e:#}");
            facts.software = Fact::na(why.clone());
            facts.environment = Fact::na(why.clone());
            facts.rtt_us = Fact::na(why.clone());
            facts.path_mtu_bytes = Fact::na(why);
            return (local_environment(plan.bind), facts);
        }
    };
    let local_ip = stream.local_addr().ok().map(|a| a.ip());
    let local = local_environment(local_ip);
    if let Err(e) = converse(stream, addr, plan.psk.as_ref(), &local, &mut facts) {
        let why = format!("{e:#}");
        if facts.software.value().is_none() {
            facts.software = Fact::na(why.clone());
        }
        if facts.environment.value().is_none() {
            facts.environment = Fact::na(why.clone());
        }
        if facts.rtt_us.value().is_none() {
            facts.rtt_us = Fact::na(why.clone());
        }
        if facts.path_mtu_bytes.value().is_none() {
            facts.path_mtu_bytes = Fact::na(why);
        }
    }
    (local, facts)
}

fn connect(plan: &DoctorPlan, host: &str) -> Result<(TcpStream, SocketAddr)> {
    let addrs: Vec<SocketAddr> = (host, plan.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host:?}; check the name or use an IP address"))?
        .filter(|a| plan.family.allows(&a.ip()))
        .collect();
    let mut last = anyhow!("{host:?} has no address of the requested family (-4/-6)");
    for a in addrs {
        match TcpStream::connect_timeout(&a, plan.connect_timeout) {
            Ok(s) => return Ok((s, a)),
            Err(e) => {
                last = anyhow!("cannot connect to {a}: {e}; is `linerate server` running there?")
            }
        }
    }
    Err(last)
}

/// A linerate server's environment alone (its node and zone among it), without the path
/// checks: what a mesh names its agents by.
pub fn environment_of(plan: &DoctorPlan, host: &str) -> Result<Environment> {
    let (stream, _) = connect(plan, host)?;
    let mut ctrl = ControlChannel::new(stream)?;
    let clock = Clock::new();
    let (_, _, environment) = ask_environment(&mut ctrl, plan.psk.as_ref(), &clock)?;
    Ok(environment)
}

/// Greets, proves the key if there is one, and takes the server's environment: the machine
/// (for more questions), the server's software and its environment.
fn ask_environment(
    ctrl: &mut ControlChannel,
    psk: Option<&linerate_proto::auth::Psk>,
    clock: &Clock,
) -> Result<(DoctorConn, String, Environment)> {
    let mut conn = DoctorConn::new(SOFTWARE, clock.now());
    if let Some(key) = psk {
        conn = conn.with_psk(key.clone(), crate::session::random_nonce()?);
    }
    let Some(DoctorEvent::Environment { server_software, environment }) =
        pump(ctrl, &mut conn, clock)?
    else {
        bail!("the server sent no environment");
    };
    Ok((conn, server_software, *environment))
}

/// The control conversation: environment, round trip, then the path-MTU search.
fn converse(
    stream: TcpStream,
    server: SocketAddr,
    psk: Option<&linerate_proto::auth::Psk>,
    local: &Environment,
    facts: &mut RemoteFacts,
) -> Result<()> {
    let mut ctrl = ControlChannel::new(stream)?;
    let clock = Clock::new();
    let (mut conn, server_software, environment) = ask_environment(&mut ctrl, psk, &clock)?;
    facts.software = Fact::Value(server_software);
    facts.environment = Fact::Value(environment);
    facts.rtt_us = Fact::from_option(
        sys::tcp_internals(ctrl.stream()).map(|t| t.min_rtt_us.unwrap_or(t.rtt_us)),
        || "TCP_INFO is not available on this OS".into(),
    );
    if !conn.server_echoes() {
        facts.path_mtu_bytes = Fact::na("the server does not echo probes (older linerate)");
        return Ok(());
    }
    let local_mtu = test_interface(local).and_then(|i| i.mtu_bytes.value().copied());
    let search = MtuSearch::new(local_mtu);
    facts.searched_up_to_bytes = search.top();
    let local_ip = ctrl.stream().local_addr().context("control connection address")?.ip();
    let udp =
        UdpSocket::bind(SocketAddr::new(local_ip, 0)).context("cannot bind a UDP probe socket")?;
    sys::set_pmtu_probe(&udp, server.is_ipv6())?;
    conn.request_echo(udp.local_addr()?.port(), clock.now())?;
    let Some(DoctorEvent::EchoReady { port, cookie }) = pump(&mut ctrl, &mut conn, &clock)? else {
        bail!("the server did not open its echo");
    };
    udp.connect(SocketAddr::new(server.ip(), port)).context("cannot address the echo port")?;
    let rtt = Duration::from_micros(facts.rtt_us.value().copied().unwrap_or(0).into());
    let header = if server.is_ipv6() { 48 } else { 28 };
    facts.path_mtu_bytes = match run_search(&udp, &cookie, search, rtt, header)? {
        Some(mtu) => Fact::Value(mtu),
        None => Fact::na(format!(
            "no probe echoed, not even 576 bytes: UDP port {port} may be blocked by a firewall"
        )),
    };
    Ok(())
}

/// Runs the control connection until the machine emits an event (None: the server closed).
fn pump(
    ctrl: &mut ControlChannel,
    conn: &mut DoctorConn,
    clock: &Clock,
) -> Result<Option<DoctorEvent>> {
    let mut first = FirstBytes::new(refuse_iperf3);
    pump::next_event(ctrl, clock, conn, Duration::from_millis(50), Some(&mut first))
}

fn refuse_iperf3(first: &[u8]) -> Result<()> {
    if looks_like_iperf3(first) {
        bail!("the server speaks iperf3's protocol, which reports no environment");
    }
    Ok(())
}

/// The binary search over probe sizes. `header` is the IP + UDP header length.
fn run_search(
    udp: &UdpSocket,
    cookie: &Cookie,
    mut search: MtuSearch,
    rtt: Duration,
    header: u32,
) -> Result<Option<u32>> {
    let wait = Duration::from_millis(200) + rtt * 2;
    let mut seq = 0u32;
    while let Some(size) = search.next_size() {
        let mut echoed = false;
        for _ in 0..TRIES {
            seq += 1;
            if seq > MAX_PROBES {
                return Ok(search.result());
            }
            match probe(udp, cookie, seq, (size - header) as usize, wait)? {
                Probe::Echoed => echoed = true,
                Probe::TooBig => break,
                Probe::Lost => continue,
            }
            break;
        }
        search.record(size, echoed);
    }
    Ok(search.result())
}

enum Probe {
    Echoed,
    TooBig,
    Lost,
}

fn probe(
    udp: &UdpSocket,
    cookie: &Cookie,
    seq: u32,
    payload: usize,
    wait: Duration,
) -> Result<Probe> {
    if let Err(e) = udp.send(&encode_probe(cookie, seq, payload)) {
        if crate::sys::too_big(&e) {
            return Ok(Probe::TooBig);
        }
        return Err(e).context("cannot send a probe");
    }
    let end = Instant::now() + wait;
    let mut buf = [0u8; 64];
    while let Some(left) = end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        udp.set_read_timeout(Some(left))?;
        match udp.recv(&mut buf) {
            Ok(n) if decode_echo(&buf[..n], cookie).is_some_and(|(s, _)| s == seq) => {
                return Ok(Probe::Echoed);
            }
            Ok(_) => {}
            Err(e) if crate::sys::too_big(&e) => return Ok(Probe::TooBig),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                bail!("the server's echo port refused the probes (it closed)")
            }
            Err(_) => {}
        }
    }
    Ok(Probe::Lost)
}
