//! A blocking control connection with bounded waits, and kernel-level dead-peer detection
//! (keepalive + `TCP_USER_TIMEOUT`, see `measure::liveness`) so a peer whose link vanished
//! ends the session within seconds rather than at the test's own deadline.

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
}

/// Writes to the control connection may block at most this long (the peer must keep reading).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

impl ControlChannel {
    /// Wraps a connected stream (sets TCP_NODELAY, a write timeout and dead-peer detection).
    pub fn new(stream: TcpStream) -> Result<Self> {
        stream.set_nodelay(true).context("cannot set TCP_NODELAY on the control connection")?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT)).context("cannot set a write timeout")?;
        liveness::watch_control(&stream)
            .context("cannot set keepalive on the control connection")?;
        Ok(Self { stream, buf: vec![0u8; 64 * 1024] })
    }

    /// The underlying stream.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Writes all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).context("cannot write to the control connection")
    }

    /// Waits up to `wait` for bytes.
    pub fn recv(&mut self, wait: Duration) -> Result<Recv<'_>> {
        self.stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .context("cannot set a read timeout")?;
        let got = self.stream.read(&mut self.buf);
        self.received(got)
    }

    /// Bytes that are already there, without waiting (Idle when there are none).
    pub fn recv_ready(&mut self) -> Result<Recv<'_>> {
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
                    liveness::CONTROL_DEAD_AFTER.as_secs()
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
