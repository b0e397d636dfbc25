//! Associating UDP data streams with a test, on the same port number as the control
//! connection (firewalls usually open one port, and iperf3 users expect 5201 for both).
//!
//! The client opens one UDP socket per stream, connected to the server's port, and sends the
//! stream's 28-byte data hello (the same bytes a TCP data connection starts with: magic, test
//! cookie, stream id) until the server echoes it, up to [`HELLO_TRIES`] times. The server's
//! [`UdpAcceptor`] (one unconnected socket on the port, with SO_REUSEADDR) reads hellos and
//! hands them, by cookie, to the session that owns the test; the session binds a new socket to
//! the same local address and port, `connect`s it to the client's address — the kernel then
//! delivers that client's datagrams to it, not to the acceptor — and echoes the hello from it.
//! iperf3 associates UDP streams the same way.
//!
//! The sockets themselves (binding, buffers, the shared port) are made by `traffic::socket`.
//! Must not count or pace traffic (that is `traffic::udp`).

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use linerate_proto::iperf3::{UDP_CONNECT, UDP_CONNECT_LEGACY, UDP_REPLY, UDP_REPLY_LEGACY};
use linerate_proto::wire::{DATA_HELLO_LEN, DataHello};

use crate::traffic::socket::{self, Bind, SocketOptions, UdpData};

/// How often the client sends a stream's hello before giving up.
pub const HELLO_TRIES: u32 = 3;
/// How long the client waits for each echo.
pub const HELLO_WAIT: Duration = Duration::from_secs(1);

/// How a client opens one UDP stream: what it sends, what answers count, how often it tries.
#[derive(Debug, Clone, Copy)]
pub struct Handshake<'a> {
    /// The datagram that opens the stream.
    pub hello: &'a [u8],
    /// Answers that mean "attached".
    pub replies: &'a [&'a [u8]],
    /// Sends before giving up.
    pub tries: u32,
    /// Wait for an answer after each send.
    pub wait: Duration,
}

impl<'a> Handshake<'a> {
    /// linerate's: the data hello, echoed; resent up to [`HELLO_TRIES`] times.
    pub fn native(hello: &'a [u8], echo: &'a [&'a [u8]]) -> Self {
        Self { hello, replies: echo, tries: HELLO_TRIES, wait: HELLO_WAIT }
    }

    /// iperf3's: "9876", answered by "6789" (or the pre-3.12 value). Sent once: a repeat
    /// would reach an iperf3 server's stream socket as a malformed data datagram.
    pub fn iperf3() -> Self {
        Self {
            hello: &UDP_CONNECT,
            replies: &[&UDP_REPLY, &UDP_REPLY_LEGACY],
            tries: 1,
            wait: Duration::from_secs(5),
        }
    }
}

/// Opens the client's socket for one UDP stream (`traffic::socket::udp_connect`) and completes
/// the handshake.
pub fn connect_stream(
    server: SocketAddr,
    bind: Bind,
    opts: &SocketOptions,
    hs: Handshake<'_>,
) -> Result<UdpData> {
    let data = socket::udp_connect(server, bind, opts)?;
    let sock = &data.socket;
    sock.set_read_timeout(Some(hs.wait)).context("cannot set a UDP socket timeout")?;
    let mut answer = [0u8; 64];
    for _ in 0..hs.tries {
        sock.send(hs.hello).context("cannot send the UDP stream hello")?;
        let deadline = Instant::now() + hs.wait;
        // Skip stale or foreign datagrams until an answer, an error (ICMP port unreachable,
        // timeout) or the end of the wait.
        while Instant::now() < deadline {
            match sock.recv(&mut answer) {
                Ok(n) if hs.replies.iter().any(|r| answer[..n] == **r) => return Ok(data),
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    bail!(
        "no answer to the UDP stream hello from {server} after {} tries: is UDP port {} \
         blocked by a firewall, or is the server's UDP port taken by another program?",
        hs.tries,
        server.port()
    )
}

/// The server side of one stream: a socket on `local` connected to the client at `peer`
/// (`traffic::socket::udp_accepted`), which echoes `hello` so the client knows the stream is
/// attached.
pub fn accept_stream(
    local: SocketAddr,
    peer: SocketAddr,
    hello: &[u8],
    opts: &SocketOptions,
) -> Result<UdpData> {
    let data = socket::udp_accepted(local, peer, opts)?;
    data.socket.send(hello).context("cannot answer the UDP stream hello")?;
    Ok(data)
}

/// The server's unconnected UDP socket on its port: reads stream hellos.
#[derive(Debug)]
pub struct UdpAcceptor {
    sock: UdpSocket,
}

impl UdpAcceptor {
    /// Binds `addr` (dual-stack when `dual`), sharing the port with stream sockets.
    pub fn bind(addr: SocketAddr, dual: bool) -> Result<Self> {
        let sock = socket::udp_port(addr, dual)?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .context("cannot set the UDP accept timeout")?;
        Ok(Self { sock })
    }

    /// Reads datagrams until `stop`, handing each to `route` with the sender's address;
    /// `route` decides what is a hello (linerate's or iperf3's) and ignores the rest (a stale
    /// data datagram, a scan).
    pub fn spawn(
        self,
        stop: Arc<AtomicBool>,
        route: impl Fn(&[u8], SocketAddr) + Send + 'static,
    ) -> Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("lr-udp-accept".into())
            .spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((n, from)) = self.sock.recv_from(&mut buf) {
                        route(&buf[..n], from);
                    }
                }
            })
            .context("cannot start the UDP accept thread")
    }
}

/// A linerate UDP stream hello, if `datagram` is one.
pub fn native_hello(datagram: &[u8]) -> Option<DataHello> {
    <&[u8; DATA_HELLO_LEN]>::try_from(datagram).ok().and_then(DataHello::decode)
}

/// True if `datagram` is an iperf3 client's UDP stream connect (3.12+ or older).
pub fn is_iperf3_connect(datagram: &[u8]) -> bool {
    datagram == UDP_CONNECT || datagram == UDP_CONNECT_LEGACY
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::wire::Cookie;

    #[test]
    fn hello_exchange_attaches_a_connected_stream_on_the_shared_port() {
        let acceptor =
            UdpAcceptor::bind("127.0.0.1:0".parse().expect("addr"), false).expect("bind");
        let server = acceptor.sock.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let t = acceptor
            .spawn(stop.clone(), move |d, from| {
                let Some(h) = native_hello(d) else { return };
                let opts = SocketOptions::default();
                let s = accept_stream(server, from, &h.encode(), &opts).expect("accept").socket;
                tx.send((h, s)).expect("send");
            })
            .expect("spawn");
        let hello = DataHello { cookie: Cookie([9; 16]), stream_id: 3 }.encode();
        let echo = [hello.as_slice()];
        let hs = Handshake::native(&hello, &echo);
        let client = connect_stream(server, Bind::default(), &SocketOptions::default(), hs)
            .expect("c")
            .socket;
        let (h, srv_sock) = rx.recv_timeout(Duration::from_secs(5)).expect("routed");
        assert_eq!(h.stream_id, 3);
        client.send(b"data").expect("send");
        let mut buf = [0u8; 16];
        srv_sock.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
        assert_eq!(srv_sock.recv(&mut buf).expect("the connected socket gets the data"), 4);
        stop.store(true, Ordering::SeqCst);
        t.join().expect("join");
    }

    #[test]
    fn a_silent_port_fails_with_a_firewall_hint() {
        // A bound socket that never answers.
        let silent = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = silent.local_addr().expect("addr");
        let hello = [0u8; DATA_HELLO_LEN];
        let echo = [hello.as_slice()];
        let hs = Handshake::native(&hello, &echo);
        let err = connect_stream(addr, Bind::default(), &SocketOptions::default(), hs).unwrap_err();
        assert!(format!("{err:#}").contains("firewall"), "{err:#}");
    }
}
