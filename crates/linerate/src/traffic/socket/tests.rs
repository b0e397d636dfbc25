//! `traffic::socket` over loopback: options land before connect on the client and on accept
//! on the server, grants are read back, and the kernel behaviour the design rests on (module
//! docs) still holds — if a kernel changes it, these say so.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use super::*;
use crate::sys;

const TIMEOUT: Duration = Duration::from_secs(5);
const KIB_16: u64 = 16 * 1024;

fn sysctl(path: &str) -> u64 {
    std::fs::read_to_string(path).expect("read sysctl").trim().parse().expect("a number")
}

fn loopback_listener() -> (TcpListener, SocketAddr) {
    let l = listen("127.0.0.1:0".parse().expect("addr"), false).expect("listen");
    let addr = l.local_addr().expect("addr");
    (l, addr)
}

fn accept(l: &TcpListener) -> TcpStream {
    // The client connected already, so the listener's 100 ms accept timeout cannot expire;
    // the accepted socket inherits that timeout, which these tests do not want.
    let (s, _) = l.accept().expect("accept");
    s.set_read_timeout(None).expect("no timeout");
    s
}

fn options(window: Option<u64>, mss: Option<u32>) -> SocketOptions {
    SocketOptions { window_bytes: window, mss_bytes: mss, ..SocketOptions::default() }
}

/// Sends `bytes` from `from` to `to` and reads them all.
fn transfer(from: &mut TcpStream, to: TcpStream, bytes: usize) {
    let reader = std::thread::spawn(move || {
        let mut to = to;
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        while got < bytes {
            match to.read(&mut buf).expect("read") {
                0 => break,
                n => got += n,
            }
        }
        got
    });
    from.write_all(&vec![7u8; bytes]).expect("write");
    assert_eq!(reader.join().expect("reader"), bytes);
}

#[test]
fn client_options_are_set_before_connect_and_read_back() {
    let (l, addr) = loopback_listener();
    let opts = SocketOptions {
        window_bytes: Some(KIB_16),
        mss_bytes: Some(1000),
        congestion: Some("reno".into()),
        no_delay: true,
        ..SocketOptions::default()
    };
    let data = connect_data(addr, Bind::default(), &opts, TIMEOUT).expect("connect");
    let _server = accept(&l);
    let g = &data.granted;
    assert_eq!((g.send_buffer_bytes, g.recv_buffer_bytes), (Some(2 * KIB_16), Some(2 * KIB_16)));
    assert!(g.mss_bytes.is_some_and(|m| m <= 1000), "{g:?}");
    assert_eq!((g.congestion.as_deref(), g.no_delay), (Some("reno"), Some(true)));
    // Set before the SYN, the small buffer chose a smaller window scale than autotuning does:
    // the proof that it shaped the handshake.
    let plain =
        connect_data(addr, Bind::default(), &SocketOptions::default(), TIMEOUT).expect("connect");
    let _server2 = accept(&l);
    let scale = |d: &TcpData| sys::window_scales(&d.stream).expect("scales").receive;
    if sysctl("/proc/sys/net/ipv4/tcp_window_scaling") == 1 {
        assert!(scale(&data) < scale(&plain), "{} vs {}", scale(&data), scale(&plain));
    }
    assert_eq!(plain.granted.no_delay, Some(false));
}

#[test]
fn the_listener_keeps_autotuning_so_any_grantable_window_fits_its_scale() {
    let (l, addr) = loopback_listener();
    let _client = connect(addr, Bind::default(), &SocketOptions::default(), TIMEOUT).expect("c");
    let server = accept(&l);
    let scale = sys::window_scales(&server).expect("scales").receive;
    if sysctl("/proc/sys/net/ipv4/tcp_window_scaling") == 1 {
        // SO_RCVBUF grants at most twice rmem_max; the scale must let the window reach it.
        let largest = 2 * sysctl("/proc/sys/net/core/rmem_max");
        assert!(65_535u64 << scale >= largest, "scale {scale} cannot reach {largest} bytes");
    }
    // Why the listener gets no buffer: its connections would inherit a scale of 0 (64 KiB
    // windows for every test) — the kernel behaviour the design avoids.
    let small =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sys::set_buffers(&small, KIB_16).expect("buffers");
    small.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("bind");
    small.listen(1).expect("listen");
    let small_addr = small.local_addr().expect("addr").as_socket().expect("inet");
    let _c = connect(small_addr, Bind::default(), &SocketOptions::default(), TIMEOUT).expect("c");
    let (inherited, _) = small.accept().expect("accept");
    assert_eq!(sys::window_scales(&inherited).expect("scales").receive, 0);
}

#[test]
fn accepted_applies_the_window_and_it_bounds_what_the_peer_may_send() {
    let (l, addr) = loopback_listener();
    let window_of = |opts: &SocketOptions| {
        let mut client =
            connect(addr, Bind::default(), &SocketOptions::default(), TIMEOUT).expect("connect");
        let data = accepted(accept(&l), opts).expect("accepted");
        transfer(&mut client, data.stream, 4 << 20);
        let seen = sys::tcp_internals(&client).and_then(|t| t.snd_wnd_bytes).expect("snd_wnd");
        (data.granted, u64::from(seen))
    };
    let (granted, window) = window_of(&options(Some(KIB_16), None));
    assert_eq!(granted.recv_buffer_bytes, Some(2 * KIB_16));
    assert!(window <= 2 * KIB_16, "the sender saw a {window}-byte window");
    let (_, autotuned) = window_of(&SocketOptions::default());
    assert!(autotuned > 2 * KIB_16, "without -w the window grows: {autotuned}");
}

#[test]
fn the_clients_mss_reaches_the_server_through_its_syn() {
    let (l, addr) = loopback_listener();
    // -M on the client: the server's segments are capped too, and it reads that back.
    let mut client =
        connect(addr, Bind::default(), &options(None, Some(1000)), TIMEOUT).expect("connect");
    let mut server = accept(&l);
    server.write_all(&[1u8; 64 * 1024]).expect("write");
    client.read_exact(&mut [0u8; 64 * 1024]).expect("read");
    let data = accepted(server, &options(None, Some(1000))).expect("accepted");
    assert!(data.granted.mss_bytes.is_some_and(|m| m <= 1000), "{:?}", data.granted);
    let sent = sys::tcp_internals(&data.stream).expect("tcp_info").snd_mss_bytes;
    assert!(sent <= 1000, "server segments of {sent} bytes");
    // Why the server does not set TCP_MAXSEG itself: after the handshake the kernel ignores it.
    let mut client =
        connect(addr, Bind::default(), &SocketOptions::default(), TIMEOUT).expect("connect");
    let mut server = accept(&l);
    sys::set_mss(&server, 1000).expect("the kernel accepts the call");
    server.write_all(&[1u8; 256 * 1024]).expect("write");
    client.read_exact(&mut [0u8; 256 * 1024]).expect("read");
    let sent = sys::tcp_internals(&server).expect("tcp_info").snd_mss_bytes;
    assert!(sent > 1000, "TCP_MAXSEG after accept now works ({sent}): set it in `accepted`");
}

#[test]
fn udp_sockets_get_binding_and_buffers_on_both_ends() {
    let port = udp_port("127.0.0.1:0".parse().expect("addr"), false).expect("port");
    let server = port.local_addr().expect("addr");
    let want = 256 * 1024;
    let opts = options(Some(want), None);
    let bind = Bind { ip: Some("127.0.0.1".parse().expect("ip")), port: None };
    let client = udp_connect(server, bind, &opts).expect("client");
    let local = client.socket.local_addr().expect("addr");
    let accepted = udp_accepted(server, local, &opts).expect("server");
    assert_eq!(accepted.socket.local_addr().expect("addr"), server, "shares the port");
    if sysctl("/proc/sys/net/core/rmem_max") >= want
        && sysctl("/proc/sys/net/core/wmem_max") >= want
    {
        for g in [&client.granted, &accepted.granted] {
            assert_eq!(
                (g.send_buffer_bytes, g.recv_buffer_bytes),
                (Some(2 * want), Some(2 * want))
            );
        }
    }
    client.socket.send(b"hello").expect("send");
    accepted.socket.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    assert_eq!(accepted.socket.recv(&mut [0u8; 16]).expect("the connected socket gets it"), 5);
}

#[test]
fn setup_errors_name_the_step_and_keep_the_os_answer() {
    let (_l, addr) = loopback_listener();
    // An address of TEST-NET-1 is on no host: binding it fails before anything is sent.
    let bind = Bind { ip: Some("192.0.2.1".parse().expect("ip")), port: None };
    let e = connect(addr, bind, &SocketOptions::default(), TIMEOUT).expect_err("not local");
    assert_eq!(e.step, Step::Bind);
    assert!(e.to_string().contains("-B/--cport"), "{e}");
    let opts = SocketOptions { congestion: Some("no-such-algo".into()), ..Default::default() };
    let e = connect(addr, Bind::default(), &opts, TIMEOUT).expect_err("unknown algorithm");
    assert_eq!(e.step, Step::SetOption);
    assert!(e.to_string().contains("no-such-algo") && e.to_string().contains("available"), "{e}");
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let e = connect(closed, Bind::default(), &SocketOptions::default(), TIMEOUT).expect_err("x");
    assert_eq!((e.step, e.io().kind()), (Step::Connect, std::io::ErrorKind::ConnectionRefused));
    let chained = format!("{:#}", anyhow::Error::from(e));
    assert!(chained.starts_with(&format!("cannot connect to {closed}: ")), "{chained}");
}

/// Another local user must not be able to bind the server's UDP port (and so read hellos and
/// their cookies): it is shared with SO_REUSEPORT, which Linux grants to the same user only.
/// The attempt runs on a thread that drops to user `nobody` (a raw setresuid changes only the
/// calling thread's credentials).
#[test]
fn another_user_cannot_bind_the_servers_udp_port() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root and must run this");
        eprintln!("skipping: switching to another user needs root");
        return;
    }
    let port = udp_port("127.0.0.1:0".parse().expect("addr"), false).expect("port");
    let addr = port.local_addr().expect("addr");
    let outcome = std::thread::spawn(move || {
        // SAFETY: a plain system call on this thread's own credentials.
        let r = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!(r, 0, "setresuid to nobody");
        let mut results = Vec::new();
        for reuse_port in [false, true] {
            let s = socket2::Socket::new(
                socket2::Domain::IPV4,
                socket2::Type::DGRAM,
                Some(socket2::Protocol::UDP),
            )
            .expect("socket");
            s.set_reuse_address(true).expect("SO_REUSEADDR");
            if reuse_port {
                s.set_reuse_port(true).expect("SO_REUSEPORT");
            }
            results.push(s.bind(&addr.into()).map_err(|e| e.kind()));
        }
        results
    })
    .join()
    .expect("thread");
    for r in outcome {
        assert_eq!(r, Err(std::io::ErrorKind::AddrInUse), "another user bound {addr}");
    }
    // The server's own stream sockets still share it.
    let bind = Bind { ip: Some("127.0.0.1".parse().expect("ip")), port: None };
    let client = udp_connect(addr, bind, &options(None, None)).expect("client");
    let local = client.socket.local_addr().expect("local");
    udp_accepted(addr, local, &options(None, None)).expect("same user shares the port");
}

/// `-S`/`--dscp` and `--fq-rate` land on both ends' data sockets, TCP and UDP, and are read
/// back; a dual-stack server's accepted socket for an IPv4 client reads `IP_TOS`, which is
/// what its packets carry. A test without them reports neither.
#[test]
fn type_of_service_and_pacing_cap_reach_both_ends_and_are_read_back() {
    let opts = SocketOptions {
        tos: Some(0xb8),
        fq_rate_bps: Some(40_000_000),
        ..SocketOptions::default()
    };
    let dual = listen("[::]:0".parse().expect("addr"), true);
    let (l, addr) = match dual {
        Ok(l) => {
            let port = l.local_addr().expect("addr").port();
            (l, SocketAddr::from(([127, 0, 0, 1], port)))
        }
        Err(_) => loopback_listener(),
    };
    let client = connect_data(addr, Bind::default(), &opts, TIMEOUT).expect("connect");
    let server = accepted(accept(&l), &opts).expect("accepted");
    for (end, g) in [("client", &client.granted), ("server", &server.granted)] {
        assert_eq!((g.tos, g.max_pacing_rate_bps), (Some(0xb8), Some(40_000_000)), "{end}");
    }
    // An IPv6 client of the same listener: both ends read IPV6_TCLASS.
    let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()));
    if addr.ip().is_ipv4() && l.local_addr().is_ok_and(|a| a.is_ipv6()) {
        if let Ok(client) = connect_data(v6, Bind::default(), &opts, TIMEOUT) {
            let server = accepted(accept(&l), &opts).expect("accepted");
            assert_eq!((client.granted.tos, server.granted.tos), (Some(0xb8), Some(0xb8)));
        }
    }
    let plain =
        connect_data(addr, Bind::default(), &SocketOptions::default(), TIMEOUT).expect("connect");
    let _server = accept(&l);
    assert_eq!((plain.granted.tos, plain.granted.max_pacing_rate_bps), (None, None));
    let port = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    let local = port.local_addr().expect("addr");
    let udp = udp_connect(local, Bind::default(), &opts).expect("udp");
    assert_eq!((udp.granted.tos, udp.granted.max_pacing_rate_bps), (Some(0xb8), Some(40_000_000)));
}
