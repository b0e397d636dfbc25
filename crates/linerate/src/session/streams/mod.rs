//! The local half of a test's data streams: one thread per stream or a pool of workers
//! (`traffic::pool`, chosen by `plan::threads`), interval sampling (including the omitted
//! warm-up) and the final per-stream results. Sockets come set up by
//! `traffic::socket` (options applied, grants read back); this module only adds the short
//! timeouts the stream loops rely on.
//!
//! Both the client and the server driver own one `StreamSet`. It must not speak the control
//! protocol or print; it hands interval rows to the driver, which passes them to an observer.
//! `spawn.rs` starts the data threads and pool workers, `report.rs` builds the final results.

use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use linerate_proto::{
    EndCondition, Flow, IntervalSample, Protocol, SocketReport, StreamLayout, StreamRole, TestSpec,
};

use crate::measure::cost::{CostMeter, PreparedMeter};
use crate::plan::server::Place;
use crate::plan::threads::{self, Threads};
use crate::record::End;

use crate::session::rr_stream;
use crate::session::udp_stream::{self, UdpStreamSetup, UdpTrack};
use crate::sys::{self, ZeroCopySource};
use crate::traffic::pool::{Inbox, PoolStream, WorkerFigures};
use crate::traffic::rr::RrRecorder;
use crate::traffic::socket::{self, SocketOptions, TcpData, UdpData};
use crate::traffic::unsent::{UnsentLimit, UnsentPolicy};
use crate::traffic::{ByteBudget, LoopError, StartGate, StreamCounters, TrafficControl};
use linerate_proto::latency::RrSpec;
use linerate_proto::limits::Progress;
use linerate_proto::samples::{SampleLog, samples_per_stream};
use linerate_proto::udp::{DatagramFormat, SeqWidth};

mod report;
mod spawn;
use report::socket_report;

/// Which stream errors are not failures: given this end's role on the stream and its error.
pub type Forgiven = fn(StreamRole, &LoopError) -> bool;

/// Socket timeout that lets blocked stream threads notice stop/abort.
const POLL_TIMEOUT: Duration = Duration::from_millis(250);
/// Stack for stream threads: they hold no deep recursion, and -P 1024 must stay cheap.
const STREAM_STACK: usize = 256 * 1024;
// The per-test memory budget counts this much per stream (`--max-test-memory`).
const _: () = assert!(STREAM_STACK as u64 <= linerate_proto::limits::STREAM_OVERHEAD_BYTES);
// Thousands of flows: the buffer cap and the relaxed dead-peer limit start at the same count.
const _: () = assert!(
    crate::plan::buffers::CAP_ABOVE_CONNECTIONS as usize
        == crate::measure::liveness::LOADED_ABOVE_STREAMS
);

/// One interval of one stream, for live output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalRow {
    /// Stream id.
    pub id: u32,
    /// Stream flow.
    pub flow: Flow,
    /// This end's role.
    pub role: StreamRole,
    /// The sample.
    pub sample: IntervalSample,
}

/// A second handle on a stream's socket, for reading socket facts while the thread runs.
enum Probe {
    /// The stream's own socket, shared with its thread or worker (no second descriptor).
    Tcp(Arc<TcpStream>),
    /// UDP sockets have no TCP_INFO; their facts are read once when the stream is added.
    Udp,
}

impl Probe {
    fn tcp_internals(&self) -> Option<linerate_proto::TcpInternals> {
        match self {
            Probe::Tcp(s) => sys::tcp_internals(s),
            Probe::Udp => None,
        }
    }
}

struct LocalStream {
    id: u32,
    flow: Flow,
    role: StreamRole,
    counters: Arc<StreamCounters>,
    probe: Probe,
    /// UDP streams: live counters and final figures.
    udp: Option<UdpTrack>,
    /// Request/response streams of the requesting end: transactions and latencies.
    rr: Option<Arc<RrRecorder>>,
    /// `--crr` streams of the answering end: where their transaction connections go.
    transactions: Option<std::sync::mpsc::SyncSender<TcpStream>>,
    socket: SocketReport,
    /// Its own thread; None when a pool worker serves it.
    thread: Option<JoinHandle<()>>,
    intervals: SampleLog<IntervalSample>,
    last_us: u64,
    last_bytes: u64,
    omitted: Option<(u64, u64)>,
}

impl LocalStream {
    fn new(
        id: u32,
        flow: Flow,
        role: StreamRole,
        counters: Arc<StreamCounters>,
        probe: Probe,
        socket: SocketReport,
        thread: Option<JoinHandle<()>>,
    ) -> Self {
        Self {
            id,
            flow,
            role,
            counters,
            probe,
            udp: None,
            rr: None,
            transactions: None,
            socket,
            thread,
            intervals: SampleLog::default(),
            last_us: 0,
            last_bytes: 0,
            omitted: None,
        }
    }
}

/// The local streams of one test.
pub struct StreamSet {
    spec: TestSpec,
    /// The socket options `spec` asks for, with buffers capped for many flows.
    options: SocketOptions,
    /// The cap on buffers this end set for many flows (`plan::buffers`), if any.
    buffer_cap: Option<linerate_proto::BufferCap>,
    /// The TCP senders' unsent-queue limit (`traffic::unsent`), and what they set.
    unsent: Arc<UnsentLimit>,
    end: End,
    ctl: Arc<TrafficControl>,
    gate: Arc<StartGate>,
    budget: Option<Arc<ByteBudget>>,
    zerocopy: Option<Arc<ZeroCopySource>>,
    streams: Vec<LocalStream>,
    next_tick: Option<Duration>,
    omit: Duration,
    cost: Option<CostMeter>,
    /// The cost meter's slow half, done ahead of the start ([`StreamSet::prepare`]).
    prepared: Option<PreparedMeter>,
    peer_program: Option<&'static str>,
    /// Which streams' errors the results leave out, as not failures ([`StreamSet::forgive`]).
    forgiven: Option<Forgiven>,
    /// Time base of UDP datagram timestamps.
    epoch: Instant,
    /// How long UDP receivers keep listening after the end, for datagrams still in flight.
    udp_quiet: Duration,
    /// Layout of UDP datagram headers: the native one with the test's secret (set by the
    /// native sessions once the cookie is known), or iperf3's.
    datagrams: DatagramFormat,
    /// This end's environment, taken before traffic starts (see `record_environment`).
    environment: Option<Box<linerate_proto::Environment>>,
    /// Thread per stream or a pool (`--threads`).
    layout: StreamLayout,
    /// The pool's workers, once the first TCP stream made the choice for a pool.
    pool: Option<Vec<PoolWorker>>,
    /// CPUs the data threads are bound to in turn (`-A`); empty = not pinned.
    cpus: Vec<u32>,
    /// Data threads the kernel would not bind (they ran unpinned).
    unpinned: Arc<std::sync::atomic::AtomicU32>,
    /// Loopback pairing (`spec.pair_cpus`, `plan/affinity.rs`): TCP stream `id`'s thread
    /// runs on `pair_cpus[(id - 1) % len]`; empty = not paired.
    pair_cpus: Vec<u32>,
    /// `spec.pair_split`: the client's end of stream `id` runs on the list's next CPU.
    pair_split: bool,
    /// Stream threads placed by the pairing.
    paired: u32,
    /// The slice paired TCP receivers ask for (`plan::affinity::receiver_slice`).
    receiver_slice: Option<std::time::Duration>,
    /// Paired receivers whose slice request the kernel accepted.
    sliced: Arc<std::sync::atomic::AtomicU32>,
    /// `--crr` on the client: how a transaction connects, and the test's cookie for hellos.
    crr_connect: Option<(crate::traffic::rr_crr::Connector, linerate_proto::wire::Cookie)>,
    /// The channel of the `--crr` stream being added on the server, for its `LocalStream`.
    pending_transactions: Option<std::sync::mpsc::SyncSender<TcpStream>>,
}

/// The most `--crr` transaction connections that may wait for one stream's thread: the
/// client runs one transaction at a time per stream, so the one being answered and the next
/// are all a stream ever needs, and the server's descriptor budget counts that many
/// (`linerate_proto::limits::TRANSACTION_FDS_PER_STREAM`; issue 35: 16 per stream let one
/// `-P 128` test hold 2,237 descriptors).
const TRANSACTION_QUEUE: usize = linerate_proto::limits::TRANSACTION_FDS_PER_STREAM as usize - 1;

/// Where a `--crr` test's transaction connections go on the server ([`StreamSet::transaction_routes`]).
pub struct TransactionRoutes {
    routes: Vec<(u32, std::sync::mpsc::SyncSender<TcpStream>)>,
    options: SocketOptions,
}

impl TransactionRoutes {
    /// Applies the test's options to a transaction connection of stream `id` (its hello
    /// read) and hands it to the stream's thread; an error names what went wrong.
    pub fn deliver(&self, id: u32, sock: TcpStream) -> Result<()> {
        let to = self
            .routes
            .iter()
            .find(|(s, _)| *s == id)
            .map(|(_, to)| to)
            .with_context(|| format!("no stream {id} takes transaction connections"))?;
        let data = socket::accepted(sock, &self.options)
            .with_context(|| format!("a transaction of stream {id}"))?;
        to.try_send(data.stream).map_err(|e| match e {
            std::sync::mpsc::TrySendError::Full(_) => anyhow::anyhow!(
                "stream {id} has {TRANSACTION_QUEUE} transaction connections waiting; closed"
            ),
            std::sync::mpsc::TrySendError::Disconnected(_) => {
                anyhow::anyhow!("stream {id} has ended")
            }
        })
    }
}

impl std::fmt::Debug for TransactionRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionRoutes").field("streams", &self.routes.len()).finish()
    }
}

/// One pool worker: the streams handed to it, its thread, and what it measured of itself.
struct PoolWorker {
    inbox: Arc<Inbox>,
    thread: Option<JoinHandle<()>>,
    figures: Arc<Mutex<Option<WorkerFigures>>>,
}

/// Shortest wait for UDP datagrams still in flight at the end (plus twice the RTT).
pub const UDP_QUIET_MIN: Duration = Duration::from_millis(250);

impl std::fmt::Debug for StreamSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSet")
            .field("end", &self.end)
            .field("streams", &self.streams.len())
            .finish()
    }
}

impl StreamSet {
    /// Prepares the shared state for `spec` as seen from `end`.
    pub fn new(spec: &TestSpec, end: End) -> Result<Self> {
        let senders = end.streams_in(spec, StreamRole::Sender);
        let sends = senders > 0;
        let zerocopy = if spec.zerocopy && sends {
            // The file repeats the pattern whole; sends take `block` bytes from its start.
            let len = (spec.block_bytes as usize).div_ceil(crate::traffic::PATTERN.len())
                * crate::traffic::PATTERN.len();
            let src = ZeroCopySource::new(len, crate::traffic::PATTERN)
                .context("zero-copy (-Z) needs a memory-backed file (memfd) for sendfile")?;
            Some(Arc::new(src))
        } else {
            None
        };
        let budget = match spec.end {
            EndCondition::Bytes { bytes } if sends => Some(Arc::new(ByteBudget::new(bytes))),
            _ => None,
        };
        let mut options = SocketOptions::of(spec);
        let buffer_cap = crate::plan::buffers::buffer_cap(
            spec.connection_count(),
            spec.window_bytes,
            spec.protocol == Protocol::Tcp,
            crate::sys::tcp_memory_pressure_bytes,
        );
        if let Some(cap) = buffer_cap {
            options.window_bytes = Some(cap.bytes);
        }
        Ok(Self {
            spec: spec.clone(),
            options,
            buffer_cap,
            unsent: Arc::new(UnsentLimit::new(UnsentPolicy::of(spec.notsent_lowat), senders)),
            end,
            ctl: Arc::default(),
            gate: Arc::default(),
            budget,
            zerocopy,
            streams: Vec::new(),
            next_tick: None,
            omit: Duration::from_millis(spec.omit_ms),
            cost: None,
            prepared: None,
            peer_program: None,
            forgiven: None,
            epoch: Instant::now(),
            udp_quiet: UDP_QUIET_MIN,
            datagrams: DatagramFormat::iperf3(SeqWidth::Bits64),
            environment: None,
            layout: Threads::Auto.layout(threads::cores()),
            pool: None,
            cpus: Vec::new(),
            unpinned: Arc::default(),
            pair_cpus: spec.pair_cpus.clone(),
            pair_split: spec.pair_split,
            paired: 0,
            receiver_slice: crate::plan::affinity::receiver_slice(
                &spec.pair_cpus,
                spec.stream_plan().len(),
                spec.window_bytes.is_some(),
            ),
            sliced: Arc::default(),
            crr_connect: None,
            pending_transactions: None,
        })
    }

    /// Takes this end's environment snapshot now, before any traffic, recording the interface
    /// that holds `local` (the control connection's local address) and the node and zone its
    /// operator named (a server's `--node-name`, `--zone`); the results carry it.
    pub fn record_environment(&mut self, local: Option<std::net::IpAddr>, place: &Place) {
        let scope = crate::measure::host::Scope::Test(local);
        let mut environment = crate::measure::host::snapshot(scope);
        place.stamp(&mut environment);
        self.environment = Some(Box::new(environment));
    }

    /// Sets how long UDP receivers wait for stragglers after the end: [`UDP_QUIET_MIN`] plus
    /// twice the round trip (from the control connection), so a long path loses nothing.
    pub fn set_rtt(&mut self, rtt: Option<Duration>) {
        self.udp_quiet = UDP_QUIET_MIN + rtt.unwrap_or_default() * 2;
    }

    /// Sets the UDP datagram layout before any UDP stream is added: native sessions pass
    /// `DatagramFormat::native(cookie)`, iperf3 peers their sequence width (32 bits unless
    /// asked otherwise).
    pub fn set_datagram_format(&mut self, format: DatagramFormat) {
        self.datagrams = format;
    }

    /// Sets how TCP streams are served (`--threads`, or a server's layout); before the first
    /// stream is added.
    pub fn set_layout(&mut self, layout: StreamLayout) {
        self.layout = layout;
    }

    /// Binds this end's data threads to `cpus` in turn (`-A`; see `plan/affinity.rs`), before
    /// the first stream is added. Refuses CPUs outside this process's affinity mask, naming
    /// them and the ones it has.
    pub fn set_cpus(&mut self, cpus: &[u32]) -> std::result::Result<(), String> {
        let allowed = crate::sys::allowed_cpus();
        if let Some(e) = crate::plan::affinity::missing_cpus(cpus, allowed.as_deref(), self.end) {
            return Err(e);
        }
        self.cpus = cpus.to_vec();
        Ok(())
    }

    /// `--crr` on the client: how each transaction connects to the server, and the test's
    /// cookie for its hellos; before the first stream is added.
    pub fn set_crr_connector(
        &mut self,
        connect: crate::traffic::rr_crr::Connector,
        cookie: linerate_proto::wire::Cookie,
    ) {
        self.crr_connect = Some((connect, cookie));
    }

    /// `--crr` on the server, once every stream is attached: where each stream's transaction
    /// connections go, and the options they get (`session::native` hands them over from its
    /// own thread, so a transaction never waits for the control connection's pump).
    pub fn transaction_routes(&self) -> Option<TransactionRoutes> {
        let routes: Vec<(u32, std::sync::mpsc::SyncSender<TcpStream>)> =
            self.streams.iter().filter_map(|s| Some((s.id, s.transactions.clone()?))).collect();
        (!routes.is_empty()).then(|| TransactionRoutes { routes, options: self.options.clone() })
    }

    /// The socket options the test asks for, for `traffic::socket` to apply.
    pub fn socket_options(&self) -> &SocketOptions {
        &self.options
    }

    /// Takes `data` (set up by `traffic::socket`) as UDP stream `id` and spawns its thread
    /// (which waits for the start).
    pub fn add_udp(&mut self, id: u32, data: UdpData) -> Result<()> {
        let flow =
            self.spec.flow_of(id).with_context(|| format!("stream {id} is not in the test"))?;
        let role = self.end.role(flow);
        let UdpData { socket: sock, granted } = data;
        sock.set_read_timeout(Some(Duration::from_millis(20))).context("cannot set a timeout")?;
        sock.set_write_timeout(Some(Duration::from_millis(20))).context("cannot set a timeout")?;
        let probe = sock.try_clone().context("cannot duplicate a UDP socket handle")?;
        let counters = Arc::new(StreamCounters::default());
        if let Some(rr) = self.spec.rr {
            return self.add_udp_rr(id, flow, role, rr, sock, probe, granted, counters);
        }
        let (body, track) = udp_stream::prepare(UdpStreamSetup {
            role,
            sock,
            ctl: self.ctl.clone(),
            gate: self.gate.clone(),
            counters: counters.clone(),
            budget: self.budget.clone(),
            datagram_bytes: self.spec.block_bytes,
            bits_per_second: self.spec.bits_per_second,
            burst: self.spec.burst_blocks(),
            epoch: self.epoch,
            quiet: self.udp_quiet,
            format: self.datagrams,
            gro: !self.spec.no_gro,
        });
        let name = format!("lr-u{}-{id}", if role == StreamRole::Sender { "tx" } else { "rx" });
        let thread = self.spawn_thread(name, body)?;
        let socket = socket_report(probe.local_addr(), probe.peer_addr(), granted);
        let thread = Some(thread);
        self.streams.push(LocalStream::new(id, flow, role, counters, Probe::Udp, socket, thread));
        if let Some(s) = self.streams.last_mut() {
            s.udp = Some(track);
        }
        Ok(())
    }

    /// A UDP request/response stream (`--rr -u`): the request loop on the client, the answer
    /// loop on the server, on the stream's connected socket.
    #[allow(clippy::too_many_arguments)]
    fn add_udp_rr(
        &mut self,
        id: u32,
        flow: Flow,
        role: StreamRole,
        rr: RrSpec,
        sock: std::net::UdpSocket,
        probe: std::net::UdpSocket,
        granted: sys::SocketFacts,
        counters: Arc<StreamCounters>,
    ) -> Result<()> {
        let recorder = (role == StreamRole::Sender).then(|| Arc::new(RrRecorder::new(&rr)));
        let framing = rr_stream::UdpFraming {
            format: self.datagrams,
            epoch: self.epoch,
            quiet: self.udp_quiet,
        };
        let setup = self.rr_setup(rr, counters.clone(), recorder.clone());
        let name = format!("lr-u{}-{id}", if role == StreamRole::Sender { "rq" } else { "rs" });
        let cpu = self.stream_cpu(id);
        let thread = self.spawn_thread_on(name, cpu, rr_stream::udp_body(setup, sock, framing))?;
        let socket = socket_report(probe.local_addr(), probe.peer_addr(), granted);
        let mut stream =
            LocalStream::new(id, flow, role, counters, Probe::Udp, socket, Some(thread));
        stream.rr = recorder;
        self.streams.push(stream);
        Ok(())
    }

    /// The control connection signalled the end (the client's stop, or the peer's results):
    /// senders stop; UDP receivers keep listening for stragglers, then end. TCP receivers are
    /// left to see the sender's end-of-stream.
    pub fn end_signalled(&self) {
        if self.spec.protocol == Protocol::Udp {
            self.finish();
        } else {
            self.stop_senders();
        }
    }

    /// A server's TCP data connection for stream `id`, accepted on the shared listener: the
    /// test's options are applied to it (`traffic::socket::accepted`), then [`Self::add`].
    pub fn add_accepted(&mut self, id: u32, sock: TcpStream) -> Result<()> {
        let data =
            socket::accepted(sock, &self.options).with_context(|| format!("data stream {id}"))?;
        self.add(id, data)
    }

    /// Takes `data` (set up by `traffic::socket`) as TCP stream `id` and spawns its thread or
    /// hands it to a pool worker (either waits for the start).
    pub fn add(&mut self, id: u32, data: TcpData) -> Result<()> {
        let flow =
            self.spec.flow_of(id).with_context(|| format!("stream {id} is not in the test"))?;
        let role = self.end.role(flow);
        let TcpData { stream: sock, granted } = data;
        let socket = socket_report(sock.local_addr(), sock.peer_addr(), granted);
        let sock = Arc::new(sock);
        let counters = Arc::new(StreamCounters::default());
        let recorder = self
            .spec
            .rr
            .filter(|_| role == StreamRole::Sender)
            .map(|rr| Arc::new(RrRecorder::new(&rr)));
        let unsent = self.unsent.clone();
        let thread = match self.pool_worker()? {
            Some(w) => {
                if role == StreamRole::Sender {
                    unsent.apply_fixed(&*sock);
                }
                w.inbox.push(PoolStream { sock: sock.clone(), role, counters: counters.clone() });
                None
            }
            None => {
                sock.set_read_timeout(Some(POLL_TIMEOUT)).context("cannot set a socket timeout")?;
                sock.set_write_timeout(Some(POLL_TIMEOUT))
                    .context("cannot set a socket timeout")?;
                Some(self.spawn(id, role, sock.clone(), counters.clone(), recorder.clone())?)
            }
        };
        let probe = Probe::Tcp(sock);
        let mut stream = LocalStream::new(id, flow, role, counters, probe, socket, thread);
        stream.rr = recorder;
        stream.transactions = self.pending_transactions.take();
        self.streams.push(stream);
        Ok(())
    }

    /// Names the peer's program (e.g. "iperf3"), so its CPU on a shared machine is not counted
    /// as foreign load.
    pub fn set_peer_program(&mut self, name: &'static str) {
        self.peer_program = Some(name);
    }

    /// From now on the results leave out each stream error `forgiven` says is not a failure
    /// (an iperf3 peer's reset once the test ended: `session::iperf3`). Decided on the typed
    /// error, at the moment the result is written.
    pub fn forgive(&mut self, forgiven: Forgiven) {
        self.forgiven = Some(forgiven);
    }

    /// Number of streams added so far.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// True when no stream was added.
    #[cfg_attr(linerate_private, allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Starts the cost meter, then every stream, and returns the test's start instant. The
    /// meter's snapshots come first so they do not eat into the streams' time; except for a
    /// fleet's host (a held start), whose streams start first so that the hosts start as close
    /// together as they can (see [`StreamSet::held_started`]).
    pub fn start(&mut self) -> Instant {
        let gate = self.hold();
        if self.spec.held_start {
            let at = Instant::now();
            gate.open(at);
            self.held_started();
            return at;
        }
        let meter = self.start_meter();
        let at = Instant::now();
        self.cost = Some(meter.restarted_at(at));
        gate.open(at);
        at
    }

    /// The cost meter, started now (its slow half taken from [`StreamSet::prepare`] if done).
    fn start_meter(&mut self) -> CostMeter {
        let prepared = self.prepared.take();
        prepared.unwrap_or_else(|| CostMeter::prepare(self.peer_program)).start(Instant::now())
    }

    /// A held start (a fleet): the gate every stream waits at, for the fleet's coordinator to
    /// open at the instant it opens every host's. Then [`StreamSet::held_started`].
    pub fn hold(&mut self) -> Arc<StartGate> {
        self.next_tick = self.first_tick();
        self.gate.clone()
    }

    /// After a held start's gate opened: starts the cost meter. Its snapshots are taken now,
    /// a moment after the streams started (the coordinator opens every host's gate first, so
    /// no host waits for another's snapshots), and its window begins here: the CPU figures are
    /// rates over a window a few milliseconds shorter than the streams', not diluted.
    pub fn held_started(&mut self) {
        self.cost = Some(self.start_meter());
    }

    /// Does the slow part of starting (the cost meter's scan of every process) now, so that
    /// [`StreamSet::start`] is quick: for a held start, and once every stream is attached.
    pub fn prepare(&mut self) {
        if self.prepared.is_none() && self.gate.started().is_none() {
            self.prepared = Some(CostMeter::prepare(self.peer_program));
        }
    }

    /// When the test started, if it has.
    pub fn started(&self) -> Option<Instant> {
        self.gate.started()
    }

    /// When the first byte of any stream moved on this end (written or read), if one has.
    pub fn first_byte(&self) -> Option<Instant> {
        self.streams.iter().filter_map(|s| s.counters.first_byte()).min()
    }

    /// Tells local senders to finish (normal end of a timed test or an interrupt).
    pub fn stop_senders(&self) {
        self.ctl.request_stop(Instant::now());
    }

    /// The control connection ended the test (iperf3): senders stop, receivers end once
    /// their socket is quiet, without counting that as an error.
    pub fn finish(&self) {
        self.stop_senders();
        let _ = self.ctl.finish_at.set(Instant::now());
    }

    /// Stops everything at once and releases threads still waiting for the start.
    pub fn abort(&self) {
        self.ctl.abort.store(true, std::sync::atomic::Ordering::Relaxed);
        self.gate.release();
    }

    /// True once every local stream has finished.
    pub fn all_done(&self) -> bool {
        self.started().is_some() && self.streams.iter().all(|s| s.counters.end().is_some())
    }

    /// Waits up to `limit` for every local stream to finish (after an end signal); true if
    /// they all did.
    pub fn wait_done(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.all_done() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.all_done()
    }

    /// Total bytes moved by all local streams (for progress watchdogs).
    pub fn total_bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.counters.bytes()).sum()
    }

    /// Bytes moved and requests answered by all local streams, for the server's watchdog.
    pub fn progress(&self) -> Progress {
        let transactions = self.streams.iter().map(|s| s.counters.transactions()).sum();
        Progress { bytes: self.total_bytes(), transactions }
    }

    /// When the next interval sample (or the warm-up boundary) is due.
    pub fn next_tick(&self) -> Option<Instant> {
        Some(self.started()? + self.next_tick?)
    }

    fn first_tick(&self) -> Option<Duration> {
        let interval = Duration::from_millis(self.spec.interval_ms);
        let candidates = [
            (!interval.is_zero()).then_some(interval),
            (!self.omit.is_zero()).then_some(self.omit),
        ];
        candidates.into_iter().flatten().min()
    }

    fn following_tick(&self, after: Duration) -> Option<Duration> {
        let interval = Duration::from_millis(self.spec.interval_ms);
        let next_interval = (!interval.is_zero()).then(|| {
            let k = after.as_nanos() / interval.as_nanos() + 1;
            interval * u32::try_from(k).unwrap_or(u32::MAX)
        });
        let omit = (self.omit > after).then_some(self.omit);
        [next_interval, omit].into_iter().flatten().min()
    }

    /// Takes a sample if one is due (or `force`), returning the new interval rows.
    pub fn sample(&mut self, now: Instant, force: bool) -> Vec<IntervalRow> {
        let Some(start) = self.started() else { return Vec::new() };
        let due = self.next_tick().is_some_and(|t| now >= t);
        if !due && !force {
            return Vec::new();
        }
        let t = now.saturating_duration_since(start);
        let t_us = t.as_micros() as u64;
        let intervals_on = self.spec.interval_ms > 0;
        let sliver_us = (self.spec.interval_ms * 1000 / 10).min(50_000);
        let omit_us = self.omit.as_micros() as u64;
        let mut rows = Vec::new();
        for s in &mut self.streams {
            let end_us = s.counters.end().map_or(t_us, |e| (e.as_micros() as u64).min(t_us));
            let bytes = s.counters.bytes();
            if s.omitted.is_none() && omit_us > 0 && t_us >= omit_us {
                s.omitted = Some((bytes, end_us));
                if let Some(u) = s.udp.as_mut() {
                    u.mark_omitted();
                }
            }
            if end_us <= s.last_us {
                continue;
            }
            let omitted = omit_us > 0 && s.omitted.is_none_or(|(_, at)| end_us <= at);
            let sample = IntervalSample {
                start_us: s.last_us,
                end_us,
                bytes: bytes - s.last_bytes,
                omitted,
                tcp: if intervals_on { s.probe.tcp_internals() } else { None },
                udp: s.udp.as_mut().map(|u| u.interval(s.role)),
                rr: s.rr.as_ref().map(|r| r.take_interval()),
            };
            s.last_us = end_us;
            s.last_bytes = bytes;
            if !intervals_on {
                continue;
            }
            // The last sample of a stream often lands a few ms before its final write
            // completes; a sliver that short has no meaningful rate, so it is folded into the
            // previous interval (the record stays exact; it is just not a line of its own).
            let sliver = force && end_us - sample.start_us < sliver_us;
            if !(sliver && s.intervals.fold_into_last(&sample)) {
                s.intervals.push(sample);
                rows.push(IntervalRow { id: s.id, flow: s.flow, role: s.role, sample });
            }
        }
        if intervals_on
            && let Some(cost) = self.cost.as_mut()
            && !(force && t_us < cost.last_sample_us() + sliver_us)
        {
            cost.sample(now);
        }
        self.bound_samples();
        self.next_tick = self.following_tick(t);
        rows
    }

    /// Keeps every log within `samples_per_stream`: once one is over, all of them (and the
    /// cost meter's) merge pairwise together, so they stay aligned sample for sample.
    fn bound_samples(&mut self) {
        let cap = samples_per_stream(self.spec.connection_count());
        let cost_len = self.cost.as_ref().map_or(0, CostMeter::samples);
        if cost_len > cap || self.streams.iter().any(|s| s.intervals.len() > cap) {
            for s in &mut self.streams {
                s.intervals.halve();
            }
            if let Some(c) = self.cost.as_mut() {
                c.halve_samples();
            }
        }
    }
}

impl Drop for StreamSet {
    fn drop(&mut self) {
        self.abort();
    }
}

#[cfg(test)]
mod tests {
    use crate::record::canonical;

    #[test]
    fn mapped_addresses_print_as_ipv4() {
        let mapped: std::net::SocketAddr = "[::ffff:127.0.0.1]:5201".parse().expect("addr");
        assert_eq!(canonical(mapped).to_string(), "127.0.0.1:5201");
        let v6: std::net::SocketAddr = "[::1]:5201".parse().expect("addr");
        assert_eq!(canonical(v6), v6);
    }
}
