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
//! Must not count or pace traffic (that is `traffic::udp`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use linerate_proto::wire::{DATA_HELLO_LEN, DataHello};
use socket2::{Domain, Protocol, Socket, Type};

/// How often the client sends a stream's hello before giving up.
pub const HELLO_TRIES: u32 = 3;
/// How long the client waits for each echo.
pub const HELLO_WAIT: Duration = Duration::from_secs(1);

/// Opens the client's socket for one UDP stream and completes the hello exchange.
pub fn connect_stream(
    server: SocketAddr,
    bind_ip: Option<IpAddr>,
    port: Option<u16>,
    hello: &[u8],
) -> Result<UdpSocket> {
    let local = SocketAddr::new(bind_ip.unwrap_or_else(|| unspecified(server)), port.unwrap_or(0));
    let sock =
        UdpSocket::bind(local).with_context(|| format!("cannot bind a UDP socket to {local}"))?;
    sock.connect(server).with_context(|| format!("cannot address UDP to {server}"))?;
    sock.set_read_timeout(Some(HELLO_WAIT)).context("cannot set a UDP socket timeout")?;
    let mut echo = [0u8; 64];
    for _ in 0..HELLO_TRIES {
        sock.send(hello).context("cannot send the UDP stream hello")?;
        match sock.recv(&mut echo) {
            Ok(n) if echo[..n] == *hello => return Ok(sock),
            // A stale or foreign datagram, or ICMP port unreachable: try again.
            Ok(_) | Err(_) => {}
        }
    }
    bail!(
        "no answer to the UDP stream hello from {server} after {HELLO_TRIES} tries: is UDP port {} \
         blocked by a firewall, or is the server's UDP port taken by another program?",
        server.port()
    )
}

/// The server side of one stream: a socket on `local` connected to the client at `peer`,
/// which echoes `hello` so the client knows the stream is attached.
pub fn accept_stream(local: SocketAddr, peer: SocketAddr, hello: &[u8]) -> Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .context("cannot create a UDP socket")?;
    sock.set_reuse_address(true).context("cannot set SO_REUSEADDR on a UDP socket")?;
    sock.bind(&local.into())
        .with_context(|| format!("cannot bind a UDP stream socket to {local}"))?;
    let peer = match (local, peer) {
        // A dual-stack acceptor reports IPv4 clients as ::ffff:a.b.c.d.
        (SocketAddr::V4(_), SocketAddr::V6(v6)) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => peer,
        },
        _ => peer,
    };
    sock.connect(&peer.into()).with_context(|| format!("cannot connect a UDP stream to {peer}"))?;
    let sock: UdpSocket = sock.into();
    sock.send(hello).context("cannot answer the UDP stream hello")?;
    Ok(sock)
}

fn unspecified(like: SocketAddr) -> IpAddr {
    match like {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// The server's unconnected UDP socket on its port: reads stream hellos.
#[derive(Debug)]
pub struct UdpAcceptor {
    sock: UdpSocket,
}

impl UdpAcceptor {
    /// Binds `addr` (dual-stack when `dual`), sharing the port with stream sockets.
    pub fn bind(addr: SocketAddr, dual: bool) -> Result<Self> {
        let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
            .context("cannot create the UDP socket")?;
        if addr.is_ipv6() {
            sock.set_only_v6(!dual).context("cannot configure IPV6_V6ONLY")?;
        }
        sock.set_reuse_address(true).context("cannot set SO_REUSEADDR")?;
        sock.bind(&addr.into()).with_context(|| format!("cannot bind UDP {addr}"))?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .context("cannot set the UDP accept timeout")?;
        Ok(Self { sock: sock.into() })
    }

    /// Reads hellos until `stop`, handing each valid one to `route` with the sender's address.
    /// Anything else on the port is ignored (a stale data datagram, a scan).
    pub fn spawn(
        self,
        stop: Arc<AtomicBool>,
        route: impl Fn(DataHello, SocketAddr) + Send + 'static,
    ) -> Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("lr-udp-accept".into())
            .spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::SeqCst) {
                    let Ok((n, from)) = self.sock.recv_from(&mut buf) else { continue };
                    let hello = <&[u8; DATA_HELLO_LEN]>::try_from(&buf[..n]).ok();
                    if let Some(h) = hello.and_then(DataHello::decode) {
                        route(h, from);
                    }
                }
            })
            .context("cannot start the UDP accept thread")
    }
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
            .spawn(stop.clone(), move |h, from| {
                let s = accept_stream(server, from, &h.encode()).expect("accept");
                tx.send((h, s)).expect("send");
            })
            .expect("spawn");
        let hello = DataHello { cookie: Cookie([9; 16]), stream_id: 3 }.encode();
        let client = connect_stream(server, None, None, &hello).expect("connect");
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
        let err = connect_stream(addr, None, None, &[0u8; DATA_HELLO_LEN]).unwrap_err();
        assert!(format!("{err:#}").contains("firewall"), "{err:#}");
    }
}
