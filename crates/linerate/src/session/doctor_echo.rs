//! The server's half of the doctor's path-MTU check: a UDP socket that echoes probes.
//!
//! Reflection-safe by construction: the socket is connected to the address that completed
//! this control handshake and the port the doctor named, so the kernel delivers nothing from
//! anyone else and the echo can go nowhere else; an echo (28 bytes) is never larger than the
//! probe; only probes carrying this session's random cookie are answered; and the socket
//! closes after [`linerate_proto::server::DOCTOR_TIMEOUT`], after [`MAX_ECHOES`] echoes, or
//! when the control connection ends, whichever comes first.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use linerate_proto::server::DOCTOR_TIMEOUT;
use linerate_proto::wire::{Cookie, echo_for};

/// Most echoes one doctor session gets (a search needs about 20, with retries 60).
pub const MAX_ECHOES: u32 = 256;

/// A running echo; stops and joins its thread when dropped.
#[derive(Debug)]
pub(crate) struct Echo {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    /// Binds a UDP socket on `local_ip`, connects it to `peer`, and echoes probes carrying
    /// `cookie` on a thread. Returns the echo and the port the doctor must probe.
    pub(crate) fn start(local_ip: IpAddr, peer: SocketAddr, cookie: Cookie) -> Result<(Self, u16)> {
        let sock = UdpSocket::bind(SocketAddr::new(local_ip, 0))
            .with_context(|| format!("cannot bind a UDP echo socket on {local_ip}"))?;
        sock.connect(peer).with_context(|| format!("cannot connect the echo socket to {peer}"))?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .context("cannot set the echo socket's timeout")?;
        let port = sock.local_addr().context("echo socket address")?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lr-echo".into())
            .spawn(move || serve(&sock, &cookie, &flag))
            .context("cannot start the echo thread")?;
        Ok((Self { stop, thread: Some(thread) }, port))
    }
}

fn serve(sock: &UdpSocket, cookie: &Cookie, stop: &AtomicBool) {
    let started = Instant::now();
    let mut buf = vec![0u8; 65536];
    let mut echoed = 0;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < DOCTOR_TIMEOUT && echoed < MAX_ECHOES
    {
        // Errors (timeouts, ICMP port unreachable once the doctor is gone) just loop.
        let Ok(n) = sock.recv(&mut buf) else { continue };
        if let Some(echo) = echo_for(&buf[..n], cookie) {
            echoed += 1;
            let _ = sock.send(&echo);
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
