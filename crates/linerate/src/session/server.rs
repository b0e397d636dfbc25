//! The server driver: one listener, many concurrent tests.
//!
//! Every accepted connection waits at the front door (`front.rs`: one thread, one epoll set)
//! until it has proved it is part of a test: its first bytes tell a control connection from a
//! data connection, and linerate from iperf3 (linerate connections start with a binary magic,
//! first byte 0x89; iperf3 connections with a 37-byte printable cookie). A data connection is
//! handed, by its cookie, to the session that owns it; an iperf3 cookie that no running test
//! owns starts a new iperf3 control connection (iperf3 data and control connections look
//! alike; only the cookie tells them apart). A control connection's greeting runs on the door
//! too, and only a test admitted (or queued) gets a thread of its own. Sessions share nothing
//! but the cookie registries and the totals, so tests from different clients are isolated:
//! own streams, own counters, own results — and unlike iperf3, several iperf3 clients are
//! served at once.
//!
//! Admission happens in layers, cheapest first, so an abuser spends his resources before the
//! server spends its own: per-client and total caps on unidentified connections
//! (`admission.rs`, `front.rs`; a client is an address cut to a prefix), one overall deadline
//! for the first bytes, the protocol's handshake deadline, then the operator's limits, the
//! client's share of tests, slots, the server's totals of memory, threads and descriptors
//! ([`Budgets`]) and the exclusive queue ([`Shared::admit`]) before anything is allocated for a
//! test. A full server may take a slot back from a test that has held it 1 s without
//! starting, or from a test running at the floor rate for a newcomer from a network holding
//! fewer such slots (`slots.rs`). Doctor sessions are admitted the same way
//! ([`Shared::admit_doctor`]): they take a test token, a share and a slot, and at most a
//! quarter of the slots, so a doctor flood cannot keep tests out. The native session is in
//! `native.rs`, the iperf3 one in
//! `iperf3/server.rs`.
//!
//! On SIGINT/SIGTERM the accept loop stops, every running session sends `abort` with reason
//! `server_shutdown` to its client, and the server exits within [`SHUTDOWN_GRACE`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::plan::{Family, ServerPlan};
use crate::session::Interrupt;
use crate::session::exporter::Exporter;
use crate::session::front::FrontDoor;
use crate::session::server_note::{Notes, ServerNote};
use crate::session::shared::Shared;
use crate::session::udp::UdpAcceptor;
use crate::sys;
use crate::traffic::socket;

/// How long the server waits for sessions to wind down after a shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    /// The UDP socket on the same port, or why there is none (UDP tests are then refused).
    udp: std::result::Result<UdpAcceptor, String>,
    /// The metrics endpoint's listener (`--metrics`).
    metrics: Option<TcpListener>,
    plan: ServerPlan,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.listener.local_addr().ok()).finish()
    }
}

impl Server {
    /// Binds the listening socket (dual-stack unless -4/-6/-B say otherwise).
    pub fn bind(plan: &ServerPlan) -> Result<Self> {
        sys::raise_fd_limit();
        let listener = listen(plan)?;
        let addr = listener.local_addr().context("cannot read the listening address")?;
        let dual = plan.bind.is_none() && plan.family == Family::Any && addr.is_ipv6();
        let udp = UdpAcceptor::bind(addr, dual).map_err(|e| format!("{e:#}"));
        let metrics = match plan.metrics {
            Some(at) => Some(
                socket::listen(at, false)
                    .with_context(|| format!("cannot serve metrics on {at} (--metrics)"))?,
            ),
            None => None,
        };
        Ok(Self { listener, udp, metrics, plan: plan.clone() })
    }

    /// The address actually bound (port 0 resolves to the chosen port).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr().context("cannot read the listening address")
    }

    /// Serves until `interrupt` fires (or, with `-1`, until the first test ends).
    pub fn run(self, interrupt: &Interrupt, notes: Notes) -> Result<()> {
        let udp_unavailable = self.udp.as_ref().err().cloned();
        let shared =
            Arc::new(Shared::new(&self.plan, udp_unavailable, self.local_addr()?.port(), notes));
        (shared.notes)(&ServerNote::Listening { addr: self.local_addr()? });
        let place = &shared.place;
        if shared.agent || place.node.is_some() || place.zone.is_some() || place.network.is_some() {
            (shared.notes)(&ServerNote::Serving {
                agent: shared.agent,
                node: place.node.clone(),
                zone: place.zone.clone(),
                network: place.network.clone(),
            });
        }
        let udp_stop = Arc::new(AtomicBool::new(false));
        let udp_thread = match self.udp {
            Ok(acceptor) => {
                let routes = shared.clone();
                Some(acceptor.spawn(udp_stop.clone(), move |d, from| routes.route_udp(d, from))?)
            }
            Err(_) => None,
        };
        let exporter_stop = Arc::new(AtomicBool::new(false));
        let exporter = match self.metrics {
            Some(listener) => {
                let addr = listener.local_addr().context("cannot read the metrics address")?;
                let exporter = Exporter::new(shared.clone(), listener, self.plan.probe.clone())
                    .and_then(|e| e.spawn(exporter_stop.clone()))
                    .context("cannot start the metrics endpoint")?;
                (shared.notes)(&ServerNote::Metrics { addr });
                Some(exporter)
            }
            None => None,
        };
        let mut door = FrontDoor::new(shared.clone(), self.listener, shared.budgets.connections)
            .context("cannot start the server's front door")?;
        while interrupt.count() == 0 {
            if self.plan.one_off && door.done.load(Ordering::SeqCst) > 0 {
                break;
            }
            door.turn();
        }
        let handles = std::mem::take(&mut door.sessions);
        drop(door);
        // Read once: the log line and the sessions' shutdown reason name the same signal.
        let signal = (interrupt.count() > 0).then(|| interrupt.last_name());
        if let Some(signal) = signal {
            let running = handles.iter().filter(|h| !h.is_finished()).count();
            (shared.notes)(&ServerNote::ShuttingDown { signal, running });
        }
        shared.shut_down(signal);
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while handles.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        udp_stop.store(true, Ordering::SeqCst);
        if let Some(t) = udp_thread {
            let _ = t.join();
        }
        exporter_stop.store(true, Ordering::SeqCst);
        if let Some(t) = exporter {
            let _ = t.join();
        }
        Ok(())
    }
}

fn listen(plan: &ServerPlan) -> Result<TcpListener> {
    let (addr, dual) = match (plan.bind, plan.family) {
        (Some(ip), _) => (SocketAddr::new(ip, plan.port), false),
        (None, Family::V4) => {
            (SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), plan.port), false)
        }
        (None, Family::V6) => {
            (SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), plan.port), false)
        }
        (None, Family::Any) => {
            (SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), plan.port), true)
        }
    };
    match listen_on(addr, dual) {
        Ok(l) => Ok(l),
        // Hosts without IPv6 still get a server on all IPv4 addresses.
        Err(_) if dual => {
            listen_on(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), plan.port), false)
        }
        Err(e) => Err(e),
    }
}

/// The shared listener: no per-test options can be set on it (`traffic::socket` says why and
/// applies them on accept).
fn listen_on(addr: SocketAddr, dual: bool) -> Result<TcpListener> {
    Ok(socket::listen(addr, dual)?)
}
