//! Starting a stream set's data threads: a thread per stream (bulk, request/response), or the
//! pool's workers, each bound to its CPU when `-A` gave the end CPUs.

use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result};
use linerate_proto::StreamRole;
use linerate_proto::latency::RrSpec;

use super::{PoolWorker, STREAM_STACK, StreamSet, TRANSACTION_QUEUE};
use crate::record::End;
use crate::session::rr_stream;
use crate::session::thread_clock::ThreadClock;
use crate::traffic::pool::{self, Inbox, PoolOptions, WorkerFigures};
use crate::traffic::rr::RrRecorder;
use crate::traffic::{SendOptions, StreamCounters, receive_loop, send_loop};

impl StreamSet {
    /// The worker the next TCP stream goes to, round robin; None for a thread per stream. The
    /// first call decides, from the test's stream count, and starts the workers. Request/
    /// response streams always have a thread each (their loops time every transaction).
    pub(super) fn pool_worker(&mut self) -> Result<Option<&PoolWorker>> {
        if self.spec.rr.is_some() {
            return Ok(None);
        }
        if self.pool.is_none() {
            let conns = self.spec.connection_count();
            let Some(n) = self.layout.workers_for(conns, self.spec.protocol) else {
                return Ok(None);
            };
            let workers = (0..n).map(|i| self.spawn_worker(i)).collect::<Result<Vec<_>>>()?;
            self.pool = Some(workers);
        }
        let Some(workers) = self.pool.as_ref().filter(|w| !w.is_empty()) else { return Ok(None) };
        Ok(workers.get(self.streams.len() % workers.len()))
    }

    /// Starts pool worker `index`: it waits for the start, then serves its inbox.
    pub(super) fn spawn_worker(&self, index: u32) -> Result<PoolWorker> {
        let (ctl, gate) = (self.ctl.clone(), self.gate.clone());
        // Pooled streams (more than 16) each carry a small share of the rate: they write in
        // blocks, where a large call only slows a slow flow (`traffic::tcp::WriteSizer`).
        let block = self.spec.block_bytes as usize;
        let read = self.spec.read_size() as usize;
        let opts = PoolOptions {
            block,
            bits_per_second: self.spec.bits_per_second,
            burst: self.spec.burst_blocks(),
            budget: self.budget.clone(),
            zerocopy: self.zerocopy.clone(),
        };
        let sends =
            self.budget.is_some() || self.end.streams_in(&self.spec, StreamRole::Sender) > 0;
        let inbox = Arc::new(Inbox::default());
        let figures = Arc::new(Mutex::new(None));
        let (in2, fig2) = (inbox.clone(), figures.clone());
        let body = move || {
            let send = if sends && opts.zerocopy.is_none() {
                crate::traffic::pattern(block)
            } else {
                Vec::new()
            };
            let mut recv = vec![0u8; read];
            let clock = ThreadClock::now();
            let Some(start) = gate.wait() else { return };
            let streams = pool::worker_loop(&in2, start, &ctl, &opts, &send, &mut recv);
            let f = WorkerFigures {
                streams,
                cpu: clock.cpu(),
                wait_us: clock.wait_us(),
                wall_us: start.elapsed().as_micros() as u64,
            };
            if let Ok(mut slot) = fig2.lock() {
                *slot = Some(f);
            }
        };
        let thread = std::thread::Builder::new()
            .name(format!("lr-pool-{index}"))
            .stack_size(STREAM_STACK)
            .spawn(self.pinned(crate::plan::affinity::cpu_for(&self.cpus, index as usize), body))
            .context("cannot start a data-plane worker thread")?;
        Ok(PoolWorker { inbox, thread: Some(thread), figures })
    }

    pub(super) fn spawn(
        &mut self,
        id: u32,
        role: StreamRole,
        sock: Arc<TcpStream>,
        counters: Arc<StreamCounters>,
        recorder: Option<Arc<RrRecorder>>,
    ) -> Result<JoinHandle<()>> {
        if let Some(rr) = self.spec.rr {
            return self.spawn_rr(id, role, rr, sock, counters, recorder);
        }
        let (ctl, gate) = (self.ctl.clone(), self.gate.clone());
        let (budget, zerocopy) = (self.budget.clone(), self.zerocopy.clone());
        let unsent = self.unsent.clone();
        let spec = &self.spec;
        let (block, grow_to, bps, burst) = (
            spec.block_bytes as usize,
            spec.write_size() as usize,
            spec.bits_per_second,
            spec.burst_blocks(),
        );
        let read = spec.read_size() as usize;
        let name = format!("lr-{}-{id}", if role == StreamRole::Sender { "tx" } else { "rx" });
        let cpu = self.stream_cpu(id);
        let paired = cpu.is_some() && self.cpus.is_empty();
        let slice = self.receiver_slice.filter(|_| paired && role == StreamRole::Receiver);
        let sliced = self.sliced.clone();
        let body = move || {
            if let Some(s) = slice
                && crate::sys::set_thread_slice(s).is_ok()
            {
                sliced.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            // Everything a stream needs is ready before the gate opens, so streams released
            // together (a fleet's hosts) reach their first byte together.
            let buf = match role {
                StreamRole::Sender if zerocopy.is_none() => {
                    crate::traffic::pattern(block.max(grow_to))
                }
                StreamRole::Sender => Vec::new(),
                StreamRole::Receiver => vec![0u8; read],
            };
            let clock = ThreadClock::now();
            let Some(start) = gate.wait() else { return };
            let mut elapsed = None;
            let result = match role {
                StreamRole::Sender => {
                    let opts = SendOptions {
                        block,
                        grow_to,
                        bits_per_second: bps,
                        burst,
                        budget: budget.as_deref(),
                        zerocopy: zerocopy.as_deref(),
                        unsent: Some(&unsent),
                    };
                    let r = send_loop(&sock, start, &ctl, &counters, opts, &buf);
                    let now = Instant::now();
                    let end = ctl.stopped_at().map_or(now, |s| s.min(now));
                    elapsed = Some(end.saturating_duration_since(start));
                    let _ = sock.shutdown(Shutdown::Write);
                    r
                }
                StreamRole::Receiver => {
                    let mut buf = buf;
                    receive_loop(&sock, &ctl, &counters, &mut buf).map(|last| {
                        elapsed = last.map(|t| t.saturating_duration_since(start));
                    })
                }
            };
            let elapsed = elapsed.unwrap_or_else(|| start.elapsed());
            clock.finish(&counters, elapsed, result.err());
        };
        self.spawn_thread_on(name, cpu, body)
    }

    /// The CPU of stream `id`'s thread (TCP bulk, request/response): `-A`'s next CPU, else
    /// the loopback pairing's CPU for the stream, else none.
    pub(super) fn stream_cpu(&mut self, id: u32) -> Option<u32> {
        if !self.cpus.is_empty() {
            return self.next_cpu();
        }
        // Split: the client's end on the next CPU of the list (`plan/placement.rs`).
        let shift = u32::from(self.pair_split && self.end == End::Client);
        let cpu = crate::plan::affinity::paired_cpu(&self.pair_cpus, id + shift);
        self.paired += u32::from(cpu.is_some());
        cpu
    }

    /// A request/response stream's thread (`session::rr_stream`).
    pub(super) fn spawn_rr(
        &mut self,
        id: u32,
        role: StreamRole,
        rr: RrSpec,
        sock: Arc<TcpStream>,
        counters: Arc<StreamCounters>,
        recorder: Option<Arc<RrRecorder>>,
    ) -> Result<JoinHandle<()>> {
        let mut setup = self.rr_setup(rr, counters, recorder);
        if rr.connect_each {
            setup.crr = Some(match (&self.crr_connect, role) {
                (Some((connect, cookie)), StreamRole::Sender) => {
                    let stream_id = id | linerate_proto::wire::TRANSACTION_FLAG;
                    let hello = linerate_proto::wire::DataHello { cookie: *cookie, stream_id };
                    rr_stream::Crr::Client {
                        hello: hello.encode().to_vec(),
                        connect: connect.clone(),
                    }
                }
                (None, StreamRole::Sender) => {
                    anyhow::bail!("--crr needs a way to connect transactions")
                }
                (_, StreamRole::Receiver) => {
                    // The client runs one transaction at a time per stream: a full queue is a
                    // peer opening connections it does not use, and they are closed.
                    let (tx, rx) = std::sync::mpsc::sync_channel(TRANSACTION_QUEUE);
                    self.pending_transactions = Some(tx);
                    rr_stream::Crr::Server { incoming: rx }
                }
            });
        }
        let body = rr_stream::tcp_body(setup, sock);
        let name = format!("lr-{}-{id}", if role == StreamRole::Sender { "rq" } else { "rs" });
        let cpu = self.stream_cpu(id);
        self.spawn_thread_on(name, cpu, body)
    }

    pub(super) fn rr_setup(
        &self,
        rr: RrSpec,
        counters: Arc<StreamCounters>,
        recorder: Option<Arc<RrRecorder>>,
    ) -> rr_stream::RrSetup {
        rr_stream::RrSetup {
            ctl: self.ctl.clone(),
            gate: self.gate.clone(),
            counters,
            recorder,
            rr,
            omit: self.omit,
            crr: None,
        }
    }

    /// Starts the next data thread, named `name`, bound to its CPU (`-A`).
    pub(super) fn spawn_thread(
        &self,
        name: String,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<JoinHandle<()>> {
        self.spawn_thread_on(name, self.next_cpu(), body)
    }

    /// `-A`'s CPU for the next stream's thread (the CPUs in turn), if this end was given any.
    fn next_cpu(&self) -> Option<u32> {
        crate::plan::affinity::cpu_for(&self.cpus, self.streams.len())
    }

    /// Starts a data thread named `name`, bound to `cpu` if given.
    pub(super) fn spawn_thread_on(
        &self,
        name: String,
        cpu: Option<u32>,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name(name)
            .stack_size(STREAM_STACK)
            .spawn(self.pinned(cpu, body))
            .context("cannot start a stream thread (too many streams for this host?)")
    }

    /// `body` as a data thread runs it: first bound to `cpu` if given (a refusal is counted
    /// in `unpinned`), then the body.
    pub(super) fn pinned<F: FnOnce() + Send + 'static>(
        &self,
        cpu: Option<u32>,
        body: F,
    ) -> impl FnOnce() + Send + 'static + use<F> {
        let unpinned = self.unpinned.clone();
        move || {
            if let Some(c) = cpu
                && crate::sys::pin_current_thread(c).is_err()
            {
                unpinned.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            body();
        }
    }
}
