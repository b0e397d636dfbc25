//! Where every data socket of a test is made, on both ends: the options a test asks for
//! (`-w` buffers, `-M` maximum segment size, `-C` congestion control, `-N` no delay, `-S`/`--dscp`
//! type of service, `--fq-rate` pacing cap, `--dont-fragment` on UDP), the local
//! binding (`-B`, `--cport`), and the server's shared listening sockets (dual-stack TCP and UDP
//! on one port) are set here and nowhere else, and what the kernel granted is read back here.
//! (The receive loop's adaptive `SO_RCVLOWAT` is no test option: it lives with the loop, in
//! `tcp.rs`. The control connection's own settings are the session's.)
//!
//! # Before connect, after accept
//!
//! tcp(7): the receive buffer must be set before `connect()` or `listen()` to shape the
//! handshake (the window scale is chosen from it when the SYN goes out), and `TCP_MAXSEG`
//! before `connect()` to be announced in the SYN. The client does just that: [`connect`] sets
//! every option on the new socket, then connects.
//!
//! The server cannot: one listener serves every test (linerate and iperf3 clients on one
//! port), accepted sockets inherit its settings, and which test a connection belongs to is
//! known only from its first bytes. Measured on Linux 6.18 over loopback (`tcp_rmem` max
//! 32 MiB, `rmem_max` 4 MiB; window scales from `TCP_INFO`, as `ss -tmi` shows them):
//!
//! * a listener left to autotuning hands out connections with receive window scale 10: windows
//!   up to 65535 << 10 = 64 MiB, more than any buffer `SO_RCVBUF` can grant (twice `rmem_max`).
//!   The kernel picks the scale from the larger of `tcp_rmem[2]` and `rmem_max`.
//! * a listener with `SO_RCVBUF` 16 KiB hands out scale 0, so every later test would be held to
//!   64 KiB windows; and a set buffer is locked, so tests without `-w` would lose autotuning.
//! * `SO_RCVBUF` 16 KiB set on the accepted socket still bounds the window: the sender saw a
//!   32 KiB window (the doubled buffer) and was receive-window-limited 98 % of its busy time.
//! * `TCP_MAXSEG` 1000 set on the accepted socket changes nothing (the server kept sending
//!   65483-byte segments: the MSS is settled in the handshake), but the client's `TCP_MAXSEG`
//!   before connect bounds both directions: it caps what the client sends, and the MSS its SYN
//!   announces caps what the server sends (988 bytes of payload for `-M 1000`).
//!
//! Hence the design: the listener keeps autotuning, so its scale fits any window; [`accepted`]
//! applies a test's options when its data connection is handed to the test, before any test
//! data flows; `-M` reaches the server through the client's SYN, and [`accepted`] reads back
//! the MSS that gave (it does not set `TCP_MAXSEG`, which would be a no-op). One difference
//! remains, also measured with `-w 16K` (32 KiB granted): the client's window, its buffer set
//! before connect, stayed at 16 KiB on loopback and 17–27 KiB with smaller segments (`-M 1000`,
//! or a veth link's 1448 bytes), while the server's, set after accept, reached the whole
//! 32 KiB. Either way the granted buffer bounds the window (tests/window.rs shows the effect
//! on throughput), and the record shows both the granted buffer and the advertised window.
//! Until the first data, the window the server announced in its handshake stands (Linux never
//! shrinks an announced window), 64 KiB here: at most one round trip's worth.
//!
//! UDP sockets get their buffers before connect too (nothing to shape there, but one place
//! sets them), forced past `rmem_max`/`wmem_max` where privileged (see
//! `sys::udp::set_udp_buffers`), 4 MiB when `-w` does not say.
//!
//! Must not: print, speak the control protocol, or decide how failures are shown; a
//! [`SetupError`] says which step failed and keeps the operating system's answer.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use linerate_proto::TestSpec;
use socket2::{Domain, Protocol, Socket, Type};

use crate::sys::{self, SocketFacts};

/// UDP socket buffers when `-w` does not say: large enough that a receiver on a fast path is
/// not the first thing to drop (a 1 Gbit/s burst of 4 ms), small enough for many streams.
pub const UDP_DEFAULT_BUFFER: u64 = 4 << 20;

/// What a test asks of its data sockets. UDP sockets use the buffer size, the type of service
/// and the pacing cap (the other options are TCP's; plans refuse them for UDP tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketOptions {
    /// `-w`: send and receive buffer size, bytes; None leaves the kernel's autotuning.
    pub window_bytes: Option<u64>,
    /// `-M`: maximum segment size, bytes.
    pub mss_bytes: Option<u32>,
    /// `-C`: congestion control algorithm.
    pub congestion: Option<String>,
    /// `-N`: disable Nagle's algorithm.
    pub no_delay: bool,
    /// `-S`/`--dscp`: the type-of-service byte.
    pub tos: Option<u8>,
    /// `--fq-rate`: `SO_MAX_PACING_RATE`, bits per second.
    pub fq_rate_bps: Option<u64>,
    /// `--dont-fragment` (UDP): never fragment, the don't-fragment bit set.
    pub dont_fragment: bool,
}

impl SocketOptions {
    /// The options `spec` asks for.
    pub fn of(spec: &TestSpec) -> Self {
        Self {
            window_bytes: spec.window_bytes,
            mss_bytes: spec.mss_bytes,
            congestion: spec.congestion.clone(),
            // Request/response needs each small write on the wire at once (netperf's TCP_RR
            // sets it too), whatever the spec says: a campaign's or matrix's cells have no -N.
            no_delay: spec.no_delay || spec.rr.is_some(),
            tos: spec.tos.map(std::num::NonZeroU8::get),
            fq_rate_bps: spec.fq_rate_bps.map(std::num::NonZeroU64::get),
            dont_fragment: spec.dont_fragment,
        }
    }
}

/// Where a client's socket binds before it connects: `-B` and `--cport`. Both None: the
/// kernel picks (no bind call).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bind {
    /// Local address.
    pub ip: Option<IpAddr>,
    /// Local port.
    pub port: Option<u16>,
}

impl Bind {
    /// The local address to bind for reaching `remote`, if any part was asked for.
    fn local_for(self, remote: SocketAddr) -> Option<SocketAddr> {
        (self.ip.is_some() || self.port.is_some()).then(|| {
            SocketAddr::new(self.ip.unwrap_or(unspecified(remote)), self.port.unwrap_or(0))
        })
    }
}

/// A TCP data connection set up here, and what the kernel granted it right after.
#[derive(Debug)]
pub struct TcpData {
    /// The connection.
    pub stream: TcpStream,
    /// Buffers, MSS, congestion control and no-delay as read back.
    pub granted: SocketFacts,
}

/// A UDP data socket (bound and connected to its peer) set up here, and what the kernel
/// granted it.
#[derive(Debug)]
pub struct UdpData {
    /// The socket.
    pub socket: UdpSocket,
    /// The buffers as read back.
    pub granted: SocketFacts,
}

/// The step of a socket's set-up that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Creating the socket.
    Create,
    /// Binding the local address (`-B`, `--cport`, the server's port).
    Bind,
    /// Setting an option.
    SetOption,
    /// Connecting, or listening.
    Connect,
}

/// Why a socket could not be set up: the step, what was being attempted, and the operating
/// system's answer (as [`std::error::Error::source`], unless the answer says it all).
#[derive(Debug)]
pub struct SetupError {
    /// Which step failed.
    pub step: Step,
    what: String,
    source: io::Error,
}

impl SetupError {
    fn new(step: Step, what: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        move |source| Self { step, what: what.into(), source }
    }

    /// The operating system's answer.
    pub fn io(&self) -> &io::Error {
        &self.source
    }
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.what.is_empty() { self.source.fmt(f) } else { f.write_str(&self.what) }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (!self.what.is_empty()).then_some(&self.source as _)
    }
}

/// A TCP connection to `remote` from `bind`, with every option in `opts` set before
/// `connect()` (see the module docs), within `timeout`. The control connection passes no
/// options.
pub fn connect(
    remote: SocketAddr,
    bind: Bind,
    opts: &SocketOptions,
    timeout: Duration,
) -> Result<TcpStream, SetupError> {
    let sock = open(remote, Protocol::TCP)?;
    if let Some(local) = bind.local_for(remote) {
        let why = format!(
            "cannot bind the local address {local} (-B/--cport); is it in use or not on this host?"
        );
        bind_to(&sock, local, Share::Address, why)?;
    }
    if let Some(mss) = opts.mss_bytes {
        sys::set_mss(&sock, mss).map_err(SetupError::new(
            Step::SetOption,
            format!("cannot set the MSS (-M) to {mss}"),
        ))?;
    }
    apply_after_handshake(&sock, opts)?;
    sock.connect_timeout(&remote.into(), timeout)
        .map_err(SetupError::new(Step::Connect, format!("cannot connect to {remote}")))?;
    Ok(sock.into())
}

/// A client's data connection: [`connect`], then what the kernel granted.
pub fn connect_data(
    remote: SocketAddr,
    bind: Bind,
    opts: &SocketOptions,
    timeout: Duration,
) -> Result<TcpData, SetupError> {
    let stream = connect(remote, bind, opts, timeout)?;
    let granted = granted(&stream, opts);
    Ok(TcpData { stream, granted })
}

/// A server's data connection, accepted on the shared listener and now known to belong to a
/// test asking for `opts`: applies them (all but the MSS, which the client's SYN settled; see
/// the module docs) and reads back what the kernel granted.
pub fn accepted(stream: TcpStream, opts: &SocketOptions) -> Result<TcpData, SetupError> {
    apply_after_handshake(&stream, opts)?;
    let granted = granted(&stream, opts);
    Ok(TcpData { stream, granted })
}

/// What the kernel granted `sock`: its facts, with the type of service and the pacing cap
/// read back where the test set them (so a test without them reports neither).
fn granted(sock: &impl std::os::fd::AsFd, opts: &SocketOptions) -> SocketFacts {
    let mut facts = sys::socket_facts(sock);
    if opts.tos.is_some() {
        facts.tos = sys::qos::tos(sock);
    }
    if opts.fq_rate_bps.is_some() {
        facts.max_pacing_rate_bps = sys::qos::max_pacing_rate(sock);
    }
    if opts.dont_fragment {
        facts.dont_fragment = sys::qos::dont_fragment(sock);
    }
    facts
}

/// The options every data socket takes, TCP or UDP: type of service and pacing cap.
fn apply_qos(sock: &impl std::os::fd::AsFd, opts: &SocketOptions) -> Result<(), SetupError> {
    if let Some(tos) = opts.tos {
        sys::qos::set_tos(sock, tos).map_err(SetupError::new(
            Step::SetOption,
            format!("cannot set the type of service (-S/--dscp) to {tos:#04x}"),
        ))?;
    }
    if let Some(bps) = opts.fq_rate_bps {
        sys::qos::set_max_pacing_rate(sock, bps).map_err(SetupError::new(
            Step::SetOption,
            format!("cannot set the pacing cap (--fq-rate) to {bps} bit/s"),
        ))?;
    }
    Ok(())
}

/// The options that can still be set on a connected socket: buffers, congestion control,
/// no-delay, type of service, pacing cap. A client sets them before connecting all the same.
fn apply_after_handshake(
    sock: &impl std::os::fd::AsFd,
    opts: &SocketOptions,
) -> Result<(), SetupError> {
    apply_qos(sock, opts)?;
    if let Some(w) = opts.window_bytes {
        sys::set_buffers(sock, w).map_err(SetupError::new(
            Step::SetOption,
            format!("cannot set the window (-w) to {w} bytes"),
        ))?;
    }
    if let Some(cc) = &opts.congestion {
        // The wrapper's message names the algorithm and what this host offers.
        sys::set_congestion(sock, cc).map_err(SetupError::new(Step::SetOption, ""))?;
    }
    socket2::SockRef::from(sock)
        .set_nodelay(opts.no_delay)
        .map_err(SetupError::new(Step::SetOption, "cannot set TCP_NODELAY (-N)"))
}

/// The server's listening socket on `addr` (dual-stack when `dual`, for an IPv6 `addr`),
/// shared by every test: no buffer or MSS options, so accepted connections get the window
/// scale autotuning allows (see the module docs). `accept()` returns every 100 ms, so the
/// accept loop can notice signals without polling.
pub fn listen(addr: SocketAddr, dual: bool) -> Result<TcpListener, SetupError> {
    let sock = shared_port(addr, dual, Protocol::TCP)?;
    sock.listen(1024)
        .map_err(SetupError::new(Step::Connect, format!("cannot listen on {addr}")))?;
    // accept() honours SO_RCVTIMEO on Linux.
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(SetupError::new(Step::SetOption, "cannot set the accept timeout"))?;
    Ok(sock.into())
}

/// The server's unconnected UDP socket on its port (dual-stack when `dual`), shared with the
/// streams' connected sockets ([`udp_accepted`]).
pub fn udp_port(addr: SocketAddr, dual: bool) -> Result<UdpSocket, SetupError> {
    shared_port(addr, dual, Protocol::UDP).map(Into::into)
}

fn shared_port(addr: SocketAddr, dual: bool, proto: Protocol) -> Result<Socket, SetupError> {
    let sock = open(addr, proto)?;
    if addr.is_ipv6() {
        sock.set_only_v6(!dual)
            .map_err(SetupError::new(Step::SetOption, "cannot configure IPV6_V6ONLY"))?;
    }
    let why = if proto == Protocol::UDP {
        format!("cannot bind UDP {addr}")
    } else {
        format!("cannot listen on {addr}: is another server using the port? pick another with -p")
    };
    // UDP shares its port between the acceptor and each stream's connected socket. It shares
    // it with SO_REUSEPORT, which Linux grants only to sockets of the same user: with
    // SO_REUSEADDR any local user could bind the port too and take the hellos (and the
    // cookies in them). A TCP listener's SO_REUSEADDR only lets it rebind over TIME_WAIT.
    let share = if proto == Protocol::UDP { Share::SameUser } else { Share::Address };
    bind_to(&sock, addr, share, why)?;
    Ok(sock)
}

/// A new TCP or UDP socket of `like`'s address family.
fn open(like: SocketAddr, proto: Protocol) -> Result<Socket, SetupError> {
    let (kind, name) =
        if proto == Protocol::UDP { (Type::DGRAM, "UDP") } else { (Type::STREAM, "TCP") };
    Socket::new(Domain::for_address(like), kind, Some(proto))
        .map_err(SetupError::new(Step::Create, format!("cannot create a {name} socket")))
}

/// How a bound address may be shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Share {
    /// Not at all.
    No,
    /// `SO_REUSEADDR`: TCP may bind over connections in TIME_WAIT.
    Address,
    /// `SO_REUSEPORT`: other sockets of this same user may bind it too (Linux checks the
    /// effective user id), no one else.
    SameUser,
}

/// Binds `sock` to `local`, shared as `share` says; `why` is the error's text.
fn bind_to(sock: &Socket, local: SocketAddr, share: Share, why: String) -> Result<(), SetupError> {
    match share {
        Share::No => {}
        Share::Address => sock
            .set_reuse_address(true)
            .map_err(SetupError::new(Step::Bind, "cannot set SO_REUSEADDR"))?,
        Share::SameUser => sock
            .set_reuse_port(true)
            .map_err(SetupError::new(Step::Bind, "cannot set SO_REUSEPORT"))?,
    }
    sock.bind(&local.into()).map_err(SetupError::new(Step::Bind, why))
}

/// A client's UDP data socket: bound per `bind`, buffers per `opts`, connected to `remote`.
pub fn udp_connect(
    remote: SocketAddr,
    bind: Bind,
    opts: &SocketOptions,
) -> Result<UdpData, SetupError> {
    let local = bind.local_for(remote).unwrap_or(SocketAddr::new(unspecified(remote), 0));
    udp_data(local, remote, opts, false)
}

/// A server's UDP data socket for one stream: bound to the server's `local` address and port
/// (shared with [`udp_port`]), connected to the client at `peer` (so the kernel delivers that
/// client's datagrams to it), buffers per `opts`.
pub fn udp_accepted(
    local: SocketAddr,
    peer: SocketAddr,
    opts: &SocketOptions,
) -> Result<UdpData, SetupError> {
    let peer = match (local, peer) {
        // A dual-stack port socket reports IPv4 clients as ::ffff:a.b.c.d.
        (SocketAddr::V4(_), SocketAddr::V6(v6)) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => peer,
        },
        _ => peer,
    };
    udp_data(local, peer, opts, true)
}

fn udp_data(
    local: SocketAddr,
    remote: SocketAddr,
    opts: &SocketOptions,
    shared: bool,
) -> Result<UdpData, SetupError> {
    let sock = open(local, Protocol::UDP)?;
    let share = if shared { Share::SameUser } else { Share::No };
    bind_to(&sock, local, share, format!("cannot bind a UDP socket to {local}"))?;
    // Best effort: a smaller buffer only makes a receiver drop sooner, which is reported.
    let _ = sys::udp::set_udp_buffers(&sock, opts.window_bytes.unwrap_or(UDP_DEFAULT_BUFFER));
    sock.connect(&remote.into())
        .map_err(SetupError::new(Step::Connect, format!("cannot address UDP to {remote}")))?;
    // After connect: an IPv6 socket knows then whether its peer is IPv4-mapped (sys::qos).
    apply_qos(&sock, opts)?;
    if opts.dont_fragment {
        sys::qos::set_dont_fragment(&sock).map_err(SetupError::new(
            Step::SetOption,
            "cannot set don't-fragment (--dont-fragment)",
        ))?;
    }
    let granted = granted(&sock, opts);
    Ok(UdpData { socket: sock.into(), granted })
}

fn unspecified(like: SocketAddr) -> IpAddr {
    match like {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
