//! One UDP sender thread into one receiver thread over 127.0.0.1, with the real data-path
//! loops (`traffic::udp_send_loop` / `udp_receive_loop`): a quick datagrams-per-second and
//! loss measurement, not a committed benchmark (see docs/PERFORMANCE.md for methodology).
//!
//! ```text
//! cargo run --release -p linerate --example udp_loopback -- [-l BYTES] [-b BITS_PER_S] [-t SECS] [--gso] [--gro]
//! ```
//!
//! Defaults: `-l 1472 -b 0 -t 2 -w 4194304` (`-w`: receive and send buffer request, with
//! `SO_*BUFFORCE` as root; `-w 0` keeps the kernel defaults, as iperf3 does without `-w`). Traffic goes to 127.0.0.1 only; the run is bounded to at
//! most 10 s. Note that GSO into a GRO receiver over loopback delivers super-datagrams
//! unsegmented, so that combination measures no per-packet receive work.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use linerate::sys::udp as udp_sys;
use linerate::traffic::{
    StreamCounters, TrafficControl, UdpReceiveOptions, UdpSendOptions, UdpShared, udp_receive_loop,
    udp_send_loop,
};
use linerate_proto::udp::DatagramFormat;

struct Args {
    size: usize,
    rate: u64,
    secs: f64,
    gso: bool,
    gro: bool,
    window: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { size: 1472, rate: 0, secs: 2.0, gso: false, gro: false, window: 4 << 20 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "-l" => a.size = value()?.parse().map_err(|e| format!("-l: {e}"))?,
            "-b" => a.rate = value()?.parse().map_err(|e| format!("-b: {e}"))?,
            "-t" => a.secs = value()?.parse().map_err(|e| format!("-t: {e}"))?,
            "-w" => a.window = value()?.parse().map_err(|e| format!("-w: {e}"))?,
            "--gso" => a.gso = true,
            "--gro" => a.gro = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    a.secs = a.secs.clamp(0.1, 10.0);
    Ok(a)
}

fn main() -> Result<(), String> {
    let a = parse()?;
    let e = |what: &'static str| move |err: std::io::Error| format!("{what}: {err}");
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(e("bind"))?;
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(e("bind"))?;
    tx.connect(rx.local_addr().map_err(e("addr"))?).map_err(e("connect"))?;
    rx.connect(tx.local_addr().map_err(e("addr"))?).map_err(e("connect"))?;
    let rcvbuf = match a.window {
        0 => linerate::sys::socket_facts(&rx).recv_buffer_bytes.unwrap_or(0),
        w => udp_sys::set_udp_buffers(&rx, w).map_err(e("buffers"))?.1,
    };
    let ctl = TrafficControl::default();
    let (sc, rc) = (StreamCounters::default(), StreamCounters::default());
    let (ss, rs) = (UdpShared::default(), UdpShared::default());
    let epoch = Instant::now();
    let send = UdpSendOptions {
        datagram_bytes: a.size,
        bits_per_second: a.rate,
        burst: 1,
        budget: None,
        format: DatagramFormat::native(&[7; 16]),
        epoch,
        gso: a.gso,
    };
    let recv = UdpReceiveOptions {
        datagram_bytes: a.size,
        format: DatagramFormat::native(&[7; 16]),
        epoch,
        quiet: Duration::from_millis(200),
        gro: a.gro,
        nap: a.rate == 0,
    };
    let run = Duration::from_secs_f64(a.secs);
    let (start, sent, got) = std::thread::scope(|s| {
        let r = s.spawn(|| udp_receive_loop(&rx, &ctl, &rc, &rs, recv));
        std::thread::sleep(Duration::from_millis(50));
        let start = Instant::now();
        let stopper = s.spawn(|| {
            std::thread::sleep(run);
            ctl.request_stop(Instant::now());
        });
        let sent = udp_send_loop(&tx, start, &ctl, &sc, &ss, send);
        let _ = stopper.join();
        let _ = ctl.finish_at.set(Instant::now());
        (start, sent, r.join())
    });
    let sent = sent.map_err(|e| e.to_string())?;
    let got = got.map_err(|_| "receiver panicked".to_string())?.map_err(|e| e.to_string())?;
    let secs = ctl.stopped_at().unwrap_or(start + run).duration_since(start).as_secs_f64();
    let c = got.counts;
    let lost = sent.datagrams.saturating_sub(c.received);
    println!(
        "size {} rate {} gso {} gro {} rcvbuf {}: sent {} ({:.0}/s) received {} ({:.0}/s) \
         lost {} ({:.3} %) kernel drops {:?} ooo {} dup {} skipped {} burstiness {:?} \
         gap cv {:.2} jitter {:.1} us",
        a.size,
        a.rate,
        sent.gso,
        got.gro,
        rcvbuf,
        sent.datagrams,
        sent.datagrams as f64 / secs,
        c.received,
        c.received as f64 / secs,
        lost,
        100.0 * lost as f64 / sent.datagrams.max(1) as f64,
        got.kernel_drops,
        c.out_of_order,
        c.duplicates,
        sent.skipped,
        sent.burst.burstiness(a.rate, a.size as u32),
        sent.burst.gap_cv.unwrap_or(0.0),
        got.jitter.jitter_seconds * 1e6,
    );
    Ok(())
}
