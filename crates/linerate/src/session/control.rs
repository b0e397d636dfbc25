//! A blocking control connection with bounded waits, and kernel-level dead-peer detection
//! (keepalive + `TCP_USER_TIMEOUT`, see `measure::liveness`) so a peer whose link vanished
//! ends the session within seconds rather than at the test's own deadline.
//!
//! A write never waits for the peer without reading from it: both ends may send a large
//! message at once (each end's results for 10,000 streams are megabytes), and two ends that
//! each wait for the other to read before reading themselves would hold each other until the
//! write timeout. So [`ControlChannel::send`] keeps what arrives meanwhile and the next
//! [`ControlChannel::recv`] hands it over first.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::measure::liveness;
use crate::record::{Failure, FailureKind};

/// What one bounded read produced.
#[derive(Debug)]
pub enum Recv<'a> {
    /// Bytes arrived.
    Data(&'a [u8]),
    /// The peer closed its side.
    Eof,
    /// Nothing arrived within the wait.
    Idle,
}

/// The control TCP connection.
#[derive(Debug)]
pub struct ControlChannel {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes that arrived while a send waited for room; handed over before new reads.
    early: Vec<u8>,
    /// The peer closed its side while a send waited.
    early_eof: bool,
    /// Most bytes kept in `early`: past it a send waits only for room to write.
    early_max: usize,
    /// How long the peer may be silent before the kernel declares it dead.
    dead_after: std::cell::Cell<Duration>,
}

/// Most bytes a client keeps from its server while a send waits: more means the peer is not a
/// linerate or iperf3 end (none sends that much unasked).
const EARLY_MAX: usize = 256 << 20;

/// Writes to the control connection may block at most this long (the peer must keep reading).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

impl ControlChannel {
    /// Wraps a connected stream (sets TCP_NODELAY, a write timeout and dead-peer detection).
    pub fn new(stream: TcpStream) -> Result<Self> {
        stream.set_nodelay(true).context("cannot set TCP_NODELAY on the control connection")?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT)).context("cannot set a write timeout")?;
        liveness::watch_control(&stream)
            .context("cannot set keepalive on the control connection")?;
        Ok(Self {
            stream,
            buf: vec![0u8; 64 * 1024],
            early: Vec::new(),
            early_eof: false,
            early_max: EARLY_MAX,
            dead_after: std::cell::Cell::new(liveness::CONTROL_DEAD_AFTER),
        })
    }

    /// A server's side: while a send waits, at most `max` bytes from the peer are kept, then
    /// the send waits only for room to write (the peer's TCP window holds the rest). A client
    /// keeps reading what its server sends, so the two never wait for each other; and what a
    /// peer sends while the server sends stays within the memory the server gives it (its
    /// large frames wait for the frame budget, `frame_budget.rs`).
    pub fn keep_early_at_most(mut self, max: usize) -> Self {
        self.early_max = max;
        self
    }

    /// The test's `streams` streams are running: with more than
    /// [`liveness::LOADED_ABOVE_STREAMS`], dead-peer detection relaxes to
    /// [`liveness::LOADED_DEAD_AFTER`] (why: there). Best effort, once.
    pub fn streams_running(&self, streams: usize) {
        let loaded = liveness::LOADED_DEAD_AFTER;
        if streams > liveness::LOADED_ABOVE_STREAMS
            && self.dead_after.get() != loaded
            && liveness::loaded(&self.stream).is_ok()
        {
            self.dead_after.set(loaded);
        }
    }

    /// The underlying stream.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Writes all of `bytes`, reading what the peer sends meanwhile (see the module docs).
    /// Fails when no byte could be written for [`WRITE_TIMEOUT`].
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        let what = "cannot write to the control connection";
        // The common case, a message that fits the socket buffer, is one call. It must not
        // block: a blocking write waits for the peer to read all that does not fit.
        self.stream.set_nonblocking(true).context(what)?;
        let first = (&self.stream).write(bytes);
        self.stream.set_nonblocking(false).context(what)?;
        let mut at = match first {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => 0,
            Err(e) => return Err(e).context(what),
        };
        let mut progress = std::time::Instant::now();
        while at < bytes.len() {
            if progress.elapsed() > WRITE_TIMEOUT {
                return Err(std::io::Error::from(ErrorKind::TimedOut)).context(what);
            }
            let nap = Duration::from_millis(100);
            let (readable, writable) = if self.early.len() >= self.early_max {
                (false, crate::sys::wait_writable(&self.stream, nap).context(what)?)
            } else {
                crate::sys::wait_readable_or_writable(&self.stream, nap).context(what)?
            };
            if readable && !self.early_eof {
                self.stream.set_nonblocking(true).context(what)?;
                let got = (&self.stream).read(&mut self.buf);
                self.stream.set_nonblocking(false).context(what)?;
                match got {
                    Ok(0) => self.early_eof = true,
                    Ok(n) if self.early.len() + n <= EARLY_MAX => {
                        self.early.extend_from_slice(&self.buf[..n]);
                        progress = std::time::Instant::now();
                    }
                    Ok(_) => bail_garbage("the peer sent more than 256 MiB while we were sending")?,
                    Err(e)
                        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                    Err(_) => self.early_eof = true,
                }
            }
            if writable {
                self.stream.set_nonblocking(true).context(what)?;
                let put = (&self.stream).write(&bytes[at..]);
                self.stream.set_nonblocking(false).context(what)?;
                match put {
                    Ok(n) => {
                        at += n;
                        progress = std::time::Instant::now();
                    }
                    Err(e)
                        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                    Err(e) => return Err(e).context(what),
                }
            }
        }
        Ok(())
    }

    /// What arrived while a send waited, if anything: handed over before new reads.
    fn early(&mut self) -> Option<Recv<'_>> {
        if !self.early.is_empty() {
            let n = self.early.len();
            if self.buf.len() < n {
                self.buf.resize(n, 0);
            }
            self.buf[..n].copy_from_slice(&self.early);
            self.early.clear();
            return Some(Recv::Data(&self.buf[..n]));
        }
        self.early_eof.then_some(Recv::Eof)
    }

    /// Waits up to `wait` for bytes.
    pub fn recv(&mut self, wait: Duration) -> Result<Recv<'_>> {
        if self.early_eof || !self.early.is_empty() {
            return Ok(self.early().unwrap_or(Recv::Idle));
        }
        // poll keeps the caller's deadline to the millisecond; a read timeout alone would
        // wake up to two scheduler ticks late (8 ms at HZ=250), and the end of a timed test
        // (TEST_END, the stop) with it.
        if !crate::sys::wait_readable(&self.stream, wait).context("cannot wait for the peer")? {
            return Ok(Recv::Idle);
        }
        self.stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .context("cannot set a read timeout")?;
        let got = self.stream.read(&mut self.buf);
        self.received(got)
    }

    /// Bytes that are already there, without waiting (Idle when there are none).
    pub fn recv_ready(&mut self) -> Result<Recv<'_>> {
        if self.early_eof || !self.early.is_empty() {
            return Ok(self.early().unwrap_or(Recv::Idle));
        }
        self.stream.set_nonblocking(true).context("cannot poll the control connection")?;
        let got = self.stream.read(&mut self.buf);
        self.stream.set_nonblocking(false).context("cannot poll the control connection")?;
        self.received(got)
    }

    /// What one read of the control connection means.
    fn received(&self, got: std::io::Result<usize>) -> Result<Recv<'_>> {
        match got {
            Ok(0) => Ok(Recv::Eof),
            Ok(n) => Ok(Recv::Data(&self.buf[..n])),
            Err(e) if liveness::is_peer_dead(&e) => Err(Failure::new(
                FailureKind::TimedOut,
                format!(
                    "the peer stopped answering on the control connection for {} s \
                     (its host or link went away)",
                    self.dead_after.get().as_secs()
                ),
            )
            .into()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Ok(Recv::Idle)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(Recv::Idle),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => Ok(Recv::Eof),
            Err(e) => Err(e).context("cannot read from the control connection"),
        }
    }
}

fn bail_garbage(why: &str) -> Result<()> {
    Err(Failure::new(FailureKind::Garbage, why).into())
}
