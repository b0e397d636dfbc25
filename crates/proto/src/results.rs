//! The figures each end reports about its own streams, exchanged at the end of a test.
//!
//! Raw counters only: bytes, microseconds, interval samples, socket facts. Rates, sums and
//! verdicts are derived by the application's `stats` module, so results can be recomputed
//! from what was stored. Unknown fields are ignored on decode, so later versions can add
//! measurements without breaking older peers.

use serde::{Deserialize, Serialize};

use crate::spec::Flow;

/// Whether this end wrote or read the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamRole {
    /// This end wrote the stream's bytes.
    Sender,
    /// This end read the stream's bytes.
    Receiver,
}

/// One sampling interval of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// Start, microseconds since the test's start.
    pub start_us: u64,
    /// End, microseconds since the test's start.
    pub end_us: u64,
    /// Bytes moved during the interval.
    pub bytes: u64,
    /// True if the interval lies in the omitted warm-up.
    pub omitted: bool,
    /// TCP's view of the connection at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInternals>,
    /// UDP datagram counts and jitter of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<crate::udp::UdpIntervalSample>,
    /// Transactions and their latency in the interval (request/response tests, requester).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<crate::latency::RrIntervalSample>,
}

/// Socket options as requested and as the kernel granted them on this end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketReport {
    /// SO_SNDBUF read back after setup (Linux reports double the requested value).
    pub send_buffer_bytes: Option<u64>,
    /// SO_RCVBUF read back after setup.
    pub recv_buffer_bytes: Option<u64>,
    /// TCP_MAXSEG read back.
    pub mss_bytes: Option<u32>,
    /// TCP_CONGESTION read back.
    pub congestion: Option<String>,
    /// TCP_NODELAY read back.
    #[serde(default)]
    pub no_delay: Option<bool>,
    /// This end's address of the data connection.
    #[serde(default)]
    pub local_address: Option<String>,
    /// The other end's address of the data connection.
    #[serde(default)]
    pub peer_address: Option<String>,
    /// The type-of-service byte read back (`IP_TOS`, or `IPV6_TCLASS` on IPv6) when the test
    /// set one (`-S`, `--dscp`); TCP keeps the two ECN bits for itself, so they read 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// The fair-queue pacing cap read back (`SO_MAX_PACING_RATE` × 8), bits per second, when
    /// the test set one (`--fq-rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pacing_rate_bps: Option<u64>,
    /// Whether the kernel holds the socket to "don't fragment" (`IP_MTU_DISCOVER` reads
    /// `IP_PMTUDISC_DO`), when the test asked for it (`--dont-fragment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dont_fragment: Option<bool>,
}

/// TCP's own view of a connection (Linux `TCP_INFO`), at one moment. Fields the kernel does
/// not report are None.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInternals {
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    /// Round-trip time variation, microseconds.
    pub rttvar_us: u32,
    /// Lowest round-trip time seen, microseconds.
    pub min_rtt_us: Option<u32>,
    /// Congestion window, segments.
    pub cwnd_segments: u32,
    /// Slow-start threshold, segments (very large = not yet set).
    pub ssthresh_segments: u32,
    /// Maximum segment size for sending, bytes.
    pub snd_mss_bytes: u32,
    /// Maximum segment size seen from the peer, bytes.
    pub rcv_mss_bytes: u32,
    /// Retransmitted segments over the connection's life.
    pub total_retrans: u32,
    /// The kernel's pacing rate, bits per second.
    pub pacing_rate_bits_per_second: Option<u64>,
    /// The most recent delivery-rate sample, bits per second.
    pub delivery_rate_bits_per_second: Option<u64>,
    /// Whether that sample was taken while the sender was application-limited (it had too
    /// little data to fill the path: a paced or idle stream), so it says what the application
    /// offered, not what the path can carry (`tcpi_delivery_rate_app_limited`, Linux 4.9+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_app_limited: Option<bool>,
    /// Time the connection had data in flight ("busy"), microseconds.
    pub busy_us: Option<u64>,
    /// Time the sender was limited by the receiver's advertised window, microseconds.
    pub rwnd_limited_us: Option<u64>,
    /// Time the sender was limited by its own send buffer, microseconds.
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: Option<u64>,
    /// Bytes retransmitted.
    pub bytes_retrans: Option<u64>,
    /// The peer's advertised receive window, bytes.
    pub snd_wnd_bytes: Option<u32>,
    /// Reordering events the sender has seen over the connection's life
    /// (`tcpi_reord_seen`, Linux 4.19+): iperf3 3.20+ reports it as `reorder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reord_seen: Option<u32>,
    /// The path MTU the connection uses, bytes (`tcpi_pmtu`): iperf3's `pmtu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmtu_bytes: Option<u32>,
}

/// One stream as seen by one end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamResult {
    /// Stream id (1-based).
    pub id: u32,
    /// Which way the stream flows.
    pub flow: Flow,
    /// Whether this end sent or received it.
    pub role: StreamRole,
    /// All bytes moved, warm-up included.
    pub bytes: u64,
    /// Bytes moved during the omitted warm-up.
    pub omitted_bytes: u64,
    /// From the test start until this end finished the stream (sent the last byte, or read
    /// end-of-stream), microseconds.
    pub duration_us: u64,
    /// Length of the omitted warm-up actually applied, microseconds.
    pub omitted_us: u64,
    /// Interval samples in time order (may be empty when intervals are off).
    #[serde(default)]
    pub intervals: Vec<IntervalSample>,
    /// Socket facts.
    pub socket: SocketReport,
    /// Retransmitted segments (senders only, where the OS reports them).
    pub retransmits: Option<u64>,
    /// TCP's view of the connection at the end of the test (where the OS reports it).
    #[serde(default)]
    pub tcp: Option<TcpInternals>,
    /// CPU the stream's own thread used while it moved data (where the OS reports it).
    #[serde(default)]
    pub thread_cpu: Option<ProcessCpu>,
    /// How long the stream's thread was runnable but waited for a CPU while it moved data,
    /// microseconds (Linux schedstat run delay; None where the OS does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_wait_us: Option<u64>,
    /// UDP sender figures (UDP streams this end sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_sender: Option<crate::udp::UdpSenderResult>,
    /// UDP receiver figures (UDP streams this end received).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_receiver: Option<crate::udp::UdpReceiverResult>,
    /// Request/response tests: the transactions and latencies this end measured (the
    /// requesting end, the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Box<crate::latency::LatencyResult>>,
    /// Why the stream ended early, if it did.
    pub error: Option<String>,
}

impl StreamResult {
    /// Bytes counted in the summary: everything after the omitted warm-up.
    pub fn measured_bytes(&self) -> u64 {
        self.bytes.saturating_sub(self.omitted_bytes)
    }

    /// Duration counted in the summary, microseconds.
    pub fn measured_us(&self) -> u64 {
        self.duration_us.saturating_sub(self.omitted_us)
    }
}

/// Everything one end reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideResults {
    /// Name and version of the reporting implementation.
    pub software: String,
    /// Per-stream figures, ordered by id.
    pub streams: Vec<StreamResult>,
    /// True if per-interval samples were dropped to fit the frame cap.
    #[serde(default)]
    pub intervals_dropped: bool,
    /// Sampling intervals (`spec.interval_ms`) each interval sample covers: above 1 when this
    /// end merged adjacent samples pairwise to keep them within its memory bound (see
    /// [`crate::samples`]) or within the frame cap. Absent or 1: not merged.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub intervals_per_sample: u32,
    /// What the test cost this end (CPU, memory), over the test window.
    #[serde(default)]
    pub cost: Option<Box<HostCost>>,
    /// The environment this end ran in (kernel, CPU, sysctls, interfaces), collected once
    /// before traffic started. Absent from older peers and records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Box<crate::environment::Environment>>,
}

/// CPU time by kind, microseconds, as the kernel accounts it (`/proc/stat` on Linux). Guest
/// time is part of `user`, as the kernel reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// User mode.
    pub user_us: u64,
    /// User mode at low priority.
    pub nice_us: u64,
    /// Kernel mode (system calls, kernel threads).
    pub system_us: u64,
    /// Idle.
    pub idle_us: u64,
    /// Idle while waiting for I/O.
    pub iowait_us: u64,
    /// Hardware interrupts.
    pub irq_us: u64,
    /// Software interrupts: most of the kernel's network receive work.
    pub softirq_us: u64,
    /// Stolen by the hypervisor for other guests.
    pub steal_us: u64,
}

impl CpuTimes {
    /// Time this machine spent working: user, nice, system, irq, softirq.
    pub fn busy_us(&self) -> u64 {
        self.user_us + self.nice_us + self.system_us + self.irq_us + self.softirq_us
    }

    /// All accounted time: busy, idle, iowait and steal.
    pub fn total_us(&self) -> u64 {
        self.busy_us() + self.idle_us + self.iowait_us + self.steal_us
    }

    /// The element-wise difference `self - earlier` (counters never run backwards; a counter
    /// that did is treated as unchanged).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        CpuTimes {
            user_us: d(self.user_us, earlier.user_us),
            nice_us: d(self.nice_us, earlier.nice_us),
            system_us: d(self.system_us, earlier.system_us),
            idle_us: d(self.idle_us, earlier.idle_us),
            iowait_us: d(self.iowait_us, earlier.iowait_us),
            irq_us: d(self.irq_us, earlier.irq_us),
            softirq_us: d(self.softirq_us, earlier.softirq_us),
            steal_us: d(self.steal_us, earlier.steal_us),
        }
    }
}

/// User and system CPU time of a process or thread, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCpu {
    /// User mode.
    pub user_us: u64,
    /// Kernel mode (for a network tool: mostly the TCP stack working for its system calls).
    pub system_us: u64,
}

/// Whole-machine CPU over a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemCpu {
    /// CPUs (cores or hardware threads) the kernel accounts.
    pub cpus: u32,
    /// Sum over all CPUs.
    pub all: CpuTimes,
    /// The CPU with the most busy time, and its times.
    pub busiest_cpu: u32,
    /// The busiest CPU's times.
    pub busiest: CpuTimes,
}

/// One interval of cost figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostSample {
    /// Start, microseconds since the test's start.
    pub start_us: u64,
    /// End, microseconds since the test's start.
    pub end_us: u64,
    /// This process's CPU during the interval.
    pub process: Option<ProcessCpu>,
    /// The machine's CPU during the interval.
    pub system: Option<SystemCpu>,
}

/// Memory of the reporting process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// Peak resident set size of the process (VmHWM), bytes.
    pub peak_rss_bytes: u64,
    /// Resident set size at the end of the test (VmRSS), bytes.
    pub final_rss_bytes: u64,
}

/// How a CPU clock rate or cycle count was obtained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleSource {
    /// `hardware_counter` (perf_event cycles), `cpufreq` (sysfs current frequency × CPU time)
    /// or `cpuinfo` (/proc/cpuinfo MHz × CPU time).
    pub method: String,
    /// Cycles the process used during the window (measured, or CPU time × clock).
    pub cycles: u64,
    /// The clock used for an estimate, Hz (None for a hardware count).
    pub clock_hz: Option<u64>,
}

/// How an end moved its streams' bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPlane {
    /// `per-stream` (one thread per stream) or `pool` (workers multiplexing sockets).
    pub mode: String,
    /// Who chose it: `auto` (by the number of streams) or `--threads`.
    pub chosen_by: String,
    /// The pool's workers, in order (empty for `per-stream`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerReport>,
    /// Set when this end capped its TCP sockets' buffers because thousands of flows would
    /// exhaust its kernel's TCP memory (no `-w` was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_cap: Option<BufferCap>,
    /// `SO_RCVBUF` (bytes asked; Linux grants twice) each TCP bulk receiver of this end set
    /// because the test ran on loopback without `-w` ("short receive queues"). Set only by
    /// builds before 2026-11-27, which dropped the rule when re-measured (docs/PERFORMANCE.md,
    /// "Loopback-only rules, re-measured"); kept so their stored records read back as run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback_rcvbuf: Option<u64>,
    /// CPUs this end's data threads were bound to in turn (`-A`); empty = not pinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u32>,
    /// Data threads whose binding the kernel refused (they ran unpinned).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpinned: u32,
    /// Loopback pairing (`spec.pair_cpus`): the CPUs this end's TCP stream threads ran on,
    /// stream `id` on `paired_cpus[(id - 1) % len]` at both ends; empty = not paired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paired_cpus: Vec<u32>,
    /// With `paired_cpus`: the test's ends were split (`spec.pair_split`), the client's end of
    /// stream `id` on `paired_cpus[id % len]`, the server's where pairing puts it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pair_split: bool,
    /// The scheduler slice, µs, this end's paired TCP receivers asked for (several pairs per
    /// CPU with the user's buffers, `plan/affinity.rs`); absent = not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_slice_us: Option<u64>,
    /// The unsent-queue limit (`TCP_NOTSENT_LOWAT`) this end's TCP senders used; absent
    /// where the end sent no TCP bulk data, or is older than the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<NotsentLowat>,
}

/// The unsent-queue limit an end's TCP senders used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotsentLowat {
    /// `auto` (follows each sender's rate), `fixed` (`--notsent-lowat BYTES`) or `off` (the
    /// kernel's default, no limit: `--notsent-lowat 0`).
    pub mode: String,
    /// The largest limit any sender set, bytes (0 when `off`).
    pub max_bytes: u64,
    /// Senders whose kernel refused the option (they ran without a limit).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Socket buffers an end set on its own for many flows, and what it derived them from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferCap {
    /// `SO_SNDBUF` and `SO_RCVBUF` asked for on each TCP data socket, bytes (the kernel
    /// grants twice this).
    pub bytes: u64,
    /// The kernel's TCP memory pressure mark (`net.ipv4.tcp_mem`, second value), bytes.
    pub tcp_mem_pressure_bytes: u64,
}

/// One data-plane worker: its streams and what its thread measured of itself. Its streams
/// share its thread, so they have no CPU or scheduler wait figure of their own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Streams it served.
    pub streams: u32,
    /// Its thread's CPU while streams ran.
    #[serde(default)]
    pub cpu: Option<ProcessCpu>,
    /// Time its thread waited for a CPU while streams ran, microseconds.
    #[serde(default)]
    pub wait_us: Option<u64>,
    /// From the start to its last stream's end, microseconds.
    pub wall_us: u64,
}

/// What a test cost one end. Every field is optional: a figure the OS does not provide is
/// None, and `unavailable` says why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCost {
    /// Length of the measurement window (the test), microseconds.
    pub window_us: u64,
    /// This process's CPU over the window (all its threads; on a server running several
    /// tests at once this includes the others: see `concurrent_tests`).
    pub process: Option<ProcessCpu>,
    /// CPU of this test's own stream threads over the window (with a pooled data plane, its
    /// workers').
    pub stream_threads: Option<ProcessCpu>,
    /// How this end moved its streams' bytes: a thread per stream, or a pool of workers each
    /// serving many sockets. Absent from older peers and records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_plane: Option<DataPlane>,
    /// The machine's CPU over the window.
    pub system: Option<SystemCpu>,
    /// CPU used during the window by processes other than linerate (kernel threads excluded:
    /// their network work is the test's own and appears as softirq/system above).
    pub foreign_us: Option<u64>,
    /// The busiest foreign processes, as `name (pid): microseconds`, most first.
    #[serde(default)]
    pub foreign_top: Vec<String>,
    /// Other tests this server ran during the window (0 on clients).
    #[serde(default)]
    pub concurrent_tests: u32,
    /// An identifier of the running kernel (Linux boot id): equal on both ends when they ran
    /// on one machine, network namespaces included.
    #[serde(default)]
    pub host_id: Option<String>,
    /// The reporting process's id (with `host_id`, tells when both ends were one process).
    #[serde(default)]
    pub process_id: Option<u32>,
    /// Process memory.
    pub memory: Option<MemoryUse>,
    /// Cycles this process used, and how they were counted.
    pub cycles: Option<CycleSource>,
    /// Per-interval samples, aligned with the stream intervals.
    #[serde(default)]
    pub intervals: Vec<CostSample>,
    /// Why some figures are missing, e.g. "hardware cycle counters: not supported (no PMU)".
    #[serde(default)]
    pub unavailable: Vec<String>,
}

impl SideResults {
    /// Makes the encoded results fit `max_bytes`, so results of very long or very wide tests
    /// still fit in one frame: first by merging adjacent interval samples pairwise (halving
    /// their resolution, as often as needed), and only when that cannot help by dropping them.
    /// Totals are always kept.
    pub fn fit_to(&mut self, max_bytes: usize) {
        let size = |r: &Self| serde_json::to_vec(r).map_or(usize::MAX, |v| v.len());
        while size(self) > max_bytes {
            let mut merged = false;
            for s in &mut self.streams {
                merged |= crate::samples::halve(&mut s.intervals);
            }
            if let Some(c) = &mut self.cost {
                merged |= crate::samples::halve(&mut c.intervals);
            }
            if !merged {
                for s in &mut self.streams {
                    s.intervals = Vec::new();
                }
                if let Some(c) = &mut self.cost {
                    c.intervals = Vec::new();
                }
                self.intervals_dropped = true;
                return;
            }
            self.intervals_per_sample = self.intervals_per_sample.max(1).saturating_mul(2);
        }
    }
}

fn one() -> u32 {
    1
}

fn is_one(per_sample: &u32) -> bool {
    *per_sample == 1
}

impl Default for SideResults {
    fn default() -> Self {
        Self {
            software: String::new(),
            streams: Vec::new(),
            intervals_dropped: false,
            intervals_per_sample: 1,
            cost: None,
            environment: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(intervals: usize) -> StreamResult {
        StreamResult {
            id: 1,
            flow: Flow::ClientToServer,
            role: StreamRole::Sender,
            bytes: 1000,
            omitted_bytes: 100,
            duration_us: 2_000_000,
            omitted_us: 500_000,
            intervals: (0..intervals as u64)
                .map(|i| IntervalSample {
                    start_us: i,
                    end_us: i + 1,
                    bytes: i,
                    omitted: false,
                    tcp: None,
                    udp: None,
                    rr: None,
                })
                .collect(),
            socket: SocketReport::default(),
            retransmits: None,
            tcp: None,
            thread_cpu: None,
            thread_wait_us: None,
            udp_sender: None,
            udp_receiver: None,
            error: None,
            latency: None,
        }
    }

    #[test]
    fn cpu_times_busy_total_and_since() {
        let a = CpuTimes {
            user_us: 10,
            system_us: 20,
            idle_us: 70,
            softirq_us: 5,
            steal_us: 1,
            ..Default::default()
        };
        assert_eq!(a.busy_us(), 35);
        assert_eq!(a.total_us(), 106);
        let b = CpuTimes { user_us: 15, system_us: 19, idle_us: 100, ..a };
        let d = b.since(&a);
        assert_eq!((d.user_us, d.system_us, d.idle_us, d.softirq_us), (5, 0, 30, 0));
    }

    #[test]
    fn measured_figures_exclude_warmup() {
        let s = stream(0);
        assert_eq!(s.measured_bytes(), 900);
        assert_eq!(s.measured_us(), 1_500_000);
    }

    #[test]
    fn fit_to_merges_intervals_then_drops_them_only_when_that_cannot_help() {
        let mut r =
            SideResults { software: "t".into(), streams: vec![stream(1000)], ..Default::default() };
        r.fit_to(1 << 20);
        assert!(!r.intervals_dropped);
        assert_eq!((r.streams[0].intervals.len(), r.intervals_per_sample), (1000, 1));
        let full = serde_json::to_vec(&r).expect("encodes").len();
        r.fit_to(full / 3);
        assert!(!r.intervals_dropped);
        assert_eq!((r.streams[0].intervals.len(), r.intervals_per_sample), (250, 4));
        let bytes: u64 = r.streams[0].intervals.iter().map(|i| i.bytes).sum();
        assert_eq!(bytes, 999 * 1000 / 2, "merged samples keep every byte");
        let json = serde_json::to_string(&r).expect("encodes");
        assert!(json.contains(r#""intervals_per_sample":4"#), "{json:.200}");
        r.fit_to(100);
        assert!(r.intervals_dropped, "even one sample does not fit 100 bytes");
        assert!(r.streams[0].intervals.is_empty());
        assert_eq!(r.streams[0].bytes, 1000);
        let plain = SideResults::default();
        let json = serde_json::to_string(&plain).expect("encodes");
        assert!(!json.contains("intervals_per_sample"), "absent unless merged: {json}");
    }
}
