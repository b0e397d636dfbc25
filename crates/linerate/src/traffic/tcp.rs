//! TCP stream bodies: the send loop and the receive loop.
//!
//! Both loops rely on the socket having short send/receive timeouts (set by the session), so a
//! blocked call returns often enough to notice `stop`/`abort` without a busy wait.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::measure::sys::ZeroCopySource;
use crate::traffic::{ByteBudget, StreamCounters, TrafficControl};

/// How a sender sends.
#[derive(Debug, Clone, Copy)]
pub struct SendOptions<'a> {
    /// Bytes per write call.
    pub block: usize,
    /// Pacing target in bits per second; 0 = as fast as possible.
    pub bits_per_second: u64,
    /// Shared byte budget of this direction (`-n`), if any.
    pub budget: Option<&'a ByteBudget>,
    /// Send with sendfile(2) from this memory file instead of write(2) from `buf`.
    pub zerocopy: Option<&'a ZeroCopySource>,
}

/// Sends until told to stop or the budget is spent. Returns an error text if the stream
/// failed; the caller records it and shuts the write side down.
pub fn send_loop(
    sock: &mut TcpStream,
    start: Instant,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    opts: SendOptions<'_>,
    buf: &[u8],
) -> Result<(), String> {
    let mut sent: u64 = 0;
    while !ctl.stopping() {
        let want = match opts.budget {
            Some(b) => b.claim(opts.block as u64) as usize,
            None => opts.block,
        };
        if want == 0 {
            break;
        }
        pace(start, sent, opts.bits_per_second, ctl);
        let mut left = want;
        while left > 0 {
            let r = match opts.zerocopy {
                Some(z) => z.send(sock, left),
                None => sock.write(&buf[..left.min(buf.len())]),
            };
            match r {
                Ok(0) => return Err("the peer stopped accepting data (write returned 0)".into()),
                Ok(n) => {
                    left -= n;
                    sent += n as u64;
                    counters.set_bytes(sent);
                }
                Err(e) if is_timeout(&e) => {
                    if ctl.aborted() {
                        return Err("aborted".into());
                    }
                    if ctl.stopping() && opts.budget.is_none() {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("send failed: {e}")),
            }
        }
    }
    Ok(())
}

/// Receives until end-of-stream (the peer's sender finished) or abort.
pub fn receive_loop(
    sock: &mut TcpStream,
    ctl: &TrafficControl,
    counters: &StreamCounters,
    buf: &mut [u8],
) -> Result<(), String> {
    let mut got: u64 = 0;
    loop {
        match sock.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                got += n as u64;
                counters.set_bytes(got);
            }
            Err(e) if is_timeout(&e) => {
                if ctl.aborted() {
                    return Err("aborted".into());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("receive failed: {e}")),
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Sleeps until `sent` bytes are due at `bits_per_second` since `start`. Sleeps in slices so a
/// stop is noticed within 50 ms even at very low rates.
fn pace(start: Instant, sent: u64, bits_per_second: u64, ctl: &TrafficControl) {
    if bits_per_second == 0 {
        return;
    }
    let due_secs = sent as f64 * 8.0 / bits_per_second as f64;
    let due = start + Duration::from_secs_f64(due_secs.min(1e9));
    loop {
        let now = Instant::now();
        if now >= due || ctl.stopping() {
            return;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (b, _) = l.accept().expect("accept");
        (a, b)
    }

    #[test]
    fn budget_bound_sender_delivers_exact_bytes_then_eof() {
        let (mut tx, mut rx) = pair();
        let ctl = TrafficControl::default();
        let budget = ByteBudget::new(1_000_001);
        let sc = StreamCounters::default();
        let rc = StreamCounters::default();
        std::thread::scope(|s| {
            let r = s.spawn(|| {
                let mut buf = vec![0u8; 4096];
                receive_loop(&mut rx, &ctl, &rc, &mut buf)
            });
            let opts = SendOptions {
                block: 65536,
                bits_per_second: 0,
                budget: Some(&budget),
                zerocopy: None,
            };
            let buf = vec![7u8; 65536];
            send_loop(&mut tx, Instant::now(), &ctl, &sc, opts, &buf).expect("send");
            tx.shutdown(std::net::Shutdown::Write).expect("shutdown");
            r.join().expect("join").expect("receive");
        });
        assert_eq!(sc.bytes(), 1_000_001);
        assert_eq!(rc.bytes(), 1_000_001);
    }

    #[test]
    fn paced_sender_holds_its_rate() {
        let (mut tx, mut rx) = pair();
        let ctl = TrafficControl::default();
        let sc = StreamCounters::default();
        let rc = StreamCounters::default();
        // 40 Mbit/s for 0.5 s = 2.5 MB; 8 KiB blocks keep the granularity fine.
        let start = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut buf = vec![0u8; 65536];
                let _ = receive_loop(&mut rx, &ctl, &rc, &mut buf);
            });
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(500));
                ctl.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            let opts = SendOptions {
                block: 8192,
                bits_per_second: 40_000_000,
                budget: None,
                zerocopy: None,
            };
            send_loop(&mut tx, start, &ctl, &sc, opts, &[1u8; 8192]).expect("send");
            tx.shutdown(std::net::Shutdown::Write).expect("shutdown");
        });
        let secs = start.elapsed().as_secs_f64();
        let rate = sc.bytes() as f64 * 8.0 / secs;
        assert!((rate - 40e6).abs() / 40e6 < 0.10, "paced at {rate} bit/s over {secs} s");
    }
}
