//! What a test cost each end, in the units people reason with: % of one core, cores busy,
//! the busiest core, CPU-seconds per GB (netperf's service demand idea) and cycles per bit.
//!
//! Pure functions over `HostCost` raw deltas. None means "not measured"; the reason is in
//! `unavailable`.

use serde::Serialize;

use linerate_proto::{CpuTimes, DataPlane, HostCost, SideResults};

use crate::record::End;
use crate::units::ByteCount;

/// Foreign load above this share of one core earns a warning (shared machines: an unseen hog
/// cut a result 3x in the project's baseline study).
pub const FOREIGN_WARN_PERCENT: f64 = 10.0;

/// Shares of CPU time by kind, in % of the time accounted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuBreakdown {
    /// Busy: user + nice + system + irq + softirq.
    pub busy_percent: f64,
    /// User (and nice).
    pub user_percent: f64,
    /// Kernel mode.
    pub system_percent: f64,
    /// Software interrupts (network receive work).
    pub softirq_percent: f64,
    /// Hardware interrupts.
    pub irq_percent: f64,
    /// Stolen by the hypervisor.
    pub steal_percent: f64,
    /// Idle and iowait.
    pub idle_percent: f64,
}

impl CpuBreakdown {
    fn of(t: &CpuTimes) -> Option<Self> {
        let total = t.total_us() as f64;
        if total <= 0.0 {
            return None;
        }
        let p = |us: u64| us as f64 * 100.0 / total;
        Some(Self {
            busy_percent: p(t.busy_us()),
            user_percent: p(t.user_us + t.nice_us),
            system_percent: p(t.system_us),
            softirq_percent: p(t.softirq_us),
            irq_percent: p(t.irq_us),
            steal_percent: p(t.steal_us),
            idle_percent: p(t.idle_us + t.iowait_us),
        })
    }
}

/// One end's cost figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostSummary {
    /// Whose cost it is.
    pub end: End,
    /// The measurement window, seconds.
    pub window_seconds: f64,
    /// Process CPU in % of one core, and its user and system parts.
    pub process_percent_of_core: Option<f64>,
    /// User part of the process CPU, % of one core.
    pub process_user_percent_of_core: Option<f64>,
    /// System part of the process CPU, % of one core.
    pub process_system_percent_of_core: Option<f64>,
    /// This test's stream threads, % of one core.
    pub stream_threads_percent_of_core: Option<f64>,
    /// CPUs in the machine.
    pub cpus: Option<u32>,
    /// Whole machine: busy time divided by the window (2.0 = two cores fully busy).
    pub cores_busy: Option<f64>,
    /// Whole machine, by kind, % of all CPUs' time.
    pub machine: Option<CpuBreakdown>,
    /// The busiest CPU's number.
    pub busiest_cpu: Option<u32>,
    /// The busiest CPU, by kind, % of its time.
    pub busiest: Option<CpuBreakdown>,
    /// Other processes' CPU during the test, % of one core.
    pub foreign_percent_of_core: Option<f64>,
    /// The busiest of them.
    pub foreign_top: Vec<String>,
    /// Peak resident memory of the process, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Whole-machine busy CPU-seconds per 10^9 bytes this end moved.
    pub cpu_seconds_per_gb: Option<f64>,
    /// Process CPU-seconds per 10^9 bytes this end moved.
    pub process_cpu_seconds_per_gb: Option<f64>,
    /// Cycles per bit this end moved.
    pub cycles_per_bit: Option<f64>,
    /// How the cycles were obtained.
    pub cycles_method: Option<String>,
    /// Other tests the server ran during this one.
    pub concurrent_tests: u32,
    /// Figures that are missing, and why.
    pub unavailable: Vec<String>,
    /// How the end served its streams, in words, when it was not a thread per stream with
    /// the kernel's buffers ([`data_plane_phrase`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_plane: Option<String>,
}

impl CostSummary {
    /// The bytes an end's machine time paid for, as a rate: its busy cores over its CPU-s per
    /// GB (None when either is unknown).
    pub fn machine_rate(&self) -> Option<f64> {
        match (self.cores_busy, self.cpu_seconds_per_gb) {
            (Some(busy), Some(per_gb)) if per_gb > 0.0 => Some(busy / per_gb * 8e9),
            _ => None,
        }
    }
}

/// The data plane in words when it is not the classic one (a thread per stream, autotuned
/// buffers, the automatic unsent-queue limit): the pool, its busiest worker's share of a
/// core, a loopback pairing, loopback or capped buffers with their reason, and an
/// unsent-queue limit the user chose or the kernel refused.
pub fn data_plane_phrase(d: &DataPlane) -> Option<String> {
    let mut parts = Vec::new();
    if !d.workers.is_empty() {
        let why = if d.chosen_by == "auto" {
            format!("auto: more than {} streams", crate::plan::threads::POOL_ABOVE)
        } else {
            d.chosen_by.clone()
        };
        let lo = d.workers.iter().map(|w| w.streams).min().unwrap_or(0);
        let hi = d.workers.iter().map(|w| w.streams).max().unwrap_or(0);
        let each = if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") };
        let busiest = d
            .workers
            .iter()
            .filter_map(|w| {
                let cpu = w.cpu?;
                (w.wall_us > 0)
                    .then(|| (cpu.user_us + cpu.system_us) as f64 * 100.0 / w.wall_us as f64)
            })
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        let busiest = busiest.map_or("n/a".into(), |b| format!("{b:.0}% of a core"));
        parts.push(format!(
            "a pool of {} workers ({why}), {each} streams each, busiest worker {busiest}",
            d.workers.len()
        ));
    }
    if !d.cpus.is_empty() {
        let unpinned = if d.unpinned > 0 {
            format!(" ({} threads could not be bound and ran unpinned)", d.unpinned)
        } else {
            String::new()
        };
        parts.push(format!(
            "data threads bound to CPU {} in turn (-A){unpinned}",
            crate::plan::affinity::join(&d.cpus)
        ));
    }
    if !d.paired_cpus.is_empty() && d.pair_split {
        parts.push(format!(
            "each stream's two ends on two CPUs (loopback placement split, the server's ends on \
             CPUs {} in turn, the client's on the next)",
            crate::plan::affinity::join(&d.paired_cpus)
        ));
    } else if !d.paired_cpus.is_empty() {
        parts.push(format!(
            "each stream's two ends on one CPU (loopback placement pair, CPUs {} in turn)",
            crate::plan::affinity::join(&d.paired_cpus)
        ));
    }
    if let Some(us) = d.receiver_slice_us {
        parts.push(format!(
            "paired receivers asked for {us} µs scheduler slices (several pairs per CPU with \
             the user's buffers: a receiver runs as soon as its bytes are ready, while they \
             are cached)"
        ));
    }
    if let Some(b) = d.loopback_rcvbuf {
        parts.push(format!(
            "receive buffers set to {} each, not autotuned: on loopback short queues keep the \
             bytes in cache; -w overrides",
            ByteCount(b).iec()
        ));
    }
    if let Some(cap) = d.buffer_cap {
        parts.push(format!(
            "socket buffers set to {} each, not autotuned: so many flows would exhaust the \
             kernel's TCP memory (net.ipv4.tcp_mem pressure {}); -w overrides",
            ByteCount(cap.bytes).iec(),
            ByteCount(cap.tcp_mem_pressure_bytes).iec()
        ));
    }
    if let Some(u) = &d.notsent_lowat {
        match u.mode.as_str() {
            "fixed" => parts.push(format!(
                "senders' unsent queue limited to {} (--notsent-lowat)",
                ByteCount(u.max_bytes).iec()
            )),
            "off" => parts
                .push("senders' unsent queue left to the system (--notsent-lowat 0)".to_string()),
            _ => {}
        }
        if u.refused > 0 {
            parts.push(format!(
                "{} senders' kernels refused the unsent-queue limit and ran without it",
                u.refused
            ));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The cost summary of one end, if it reported cost at all.
pub fn cost_summary(end: End, side: &SideResults) -> Option<CostSummary> {
    let c: &HostCost = side.cost.as_ref()?;
    let window = c.window_us as f64;
    let of_core = |us: u64| (window > 0.0).then(|| us as f64 * 100.0 / window);
    let bytes: u64 = side.streams.iter().map(|s| s.bytes).sum();
    let per_gb = |us: u64| (bytes > 0).then(|| us as f64 / 1e6 / (bytes as f64 / 1e9));
    let busy = c.system.as_ref().map(|s| s.all.busy_us());
    Some(CostSummary {
        end,
        window_seconds: window / 1e6,
        process_percent_of_core: c.process.and_then(|p| of_core(p.user_us + p.system_us)),
        process_user_percent_of_core: c.process.and_then(|p| of_core(p.user_us)),
        process_system_percent_of_core: c.process.and_then(|p| of_core(p.system_us)),
        stream_threads_percent_of_core: c
            .stream_threads
            .and_then(|p| of_core(p.user_us + p.system_us)),
        cpus: c.system.as_ref().map(|s| s.cpus),
        cores_busy: busy.and_then(|b| (window > 0.0).then(|| b as f64 / window)),
        machine: c.system.as_ref().and_then(|s| CpuBreakdown::of(&s.all)),
        busiest_cpu: c.system.as_ref().map(|s| s.busiest_cpu),
        busiest: c.system.as_ref().and_then(|s| CpuBreakdown::of(&s.busiest)),
        foreign_percent_of_core: c.foreign_us.and_then(of_core),
        foreign_top: c.foreign_top.clone(),
        peak_rss_bytes: c.memory.map(|m| m.peak_rss_bytes),
        cpu_seconds_per_gb: busy.and_then(per_gb),
        process_cpu_seconds_per_gb: c.process.and_then(|p| per_gb(p.user_us + p.system_us)),
        cycles_per_bit: c
            .cycles
            .as_ref()
            .and_then(|cy| (bytes > 0).then(|| cy.cycles as f64 / (bytes as f64 * 8.0))),
        cycles_method: c.cycles.as_ref().map(|cy| cy.method.clone()),
        concurrent_tests: c.concurrent_tests,
        unavailable: c.unavailable.clone(),
        data_plane: c.data_plane.as_ref().and_then(data_plane_phrase),
    })
}

/// Warnings the cost figures call for, in plain words. `same_host`: both ends ran on one
/// machine (then a server's foreign load is the client's, named in the client's warning).
pub fn cost_warnings(s: &CostSummary, same_host: bool) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(f) = s.foreign_percent_of_core.filter(|f| *f >= FOREIGN_WARN_PERCENT) {
        // A server names them only in its operator's log: a client learns the share alone.
        let who = match (s.foreign_top.is_empty(), s.end) {
            (false, _) => format!(" ({})", s.foreign_top.join(", ")),
            (true, End::Server) if same_host => " (the same machine as the client)".into(),
            (true, End::Server) => " (the server's log names them)".to_string(),
            (true, _) => String::new(),
        };
        w.push(format!(
            "{}: other processes used {f:.0}% of a core on the {} host during the test{who}; \
             throughput and CPU figures may be distorted — rerun on a quiet machine",
            s.end, s.end
        ));
    }
    if s.concurrent_tests > 0 {
        w.push(format!(
            "{}: {} other test(s) ran on this server at the same time; its process and machine \
             CPU figures include them (stream-thread CPU does not)",
            s.end, s.concurrent_tests
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunRecord;
    use linerate_proto::{CycleSource, ProcessCpu, StreamRole, SystemCpu};

    fn side(cost: HostCost) -> SideResults {
        SideResults {
            software: "t".into(),
            streams: vec![RunRecord::test_stream(StreamRole::Sender, 2_000_000_000)],
            intervals_dropped: false,
            intervals_per_sample: 1,
            cost: Some(Box::new(cost)),
            environment: None,
        }
    }

    fn times(user: u64, system: u64, softirq: u64, idle: u64) -> CpuTimes {
        CpuTimes {
            user_us: user,
            system_us: system,
            softirq_us: softirq,
            idle_us: idle,
            ..Default::default()
        }
    }

    #[test]
    fn figures_from_a_known_window() {
        let cost = HostCost {
            window_us: 2_000_000,
            process: Some(ProcessCpu { user_us: 100_000, system_us: 1_900_000 }),
            system: Some(SystemCpu {
                cpus: 2,
                all: times(200_000, 2_000_000, 800_000, 1_000_000),
                busiest_cpu: 1,
                busiest: times(0, 1_200_000, 700_000, 100_000),
            }),
            foreign_us: Some(400_000),
            foreign_top: vec!["hog (7): 400000 us".into()],
            cycles: Some(CycleSource {
                method: "cpuinfo".into(),
                cycles: 8_000_000_000,
                clock_hz: Some(2_000_000_000),
            }),
            ..Default::default()
        };
        let s = cost_summary(End::Client, &side(cost)).expect("summary");
        assert_eq!(s.process_percent_of_core, Some(100.0));
        assert_eq!(s.process_system_percent_of_core, Some(95.0));
        assert_eq!(s.cores_busy, Some(1.5));
        let m = s.machine.expect("machine");
        assert_eq!((m.busy_percent, m.softirq_percent, m.idle_percent), (75.0, 20.0, 25.0));
        assert_eq!(s.busiest_cpu, Some(1));
        assert_eq!(s.busiest.expect("busiest").busy_percent, 95.0);
        assert_eq!(s.foreign_percent_of_core, Some(20.0));
        // 3 s of busy CPU for 2 GB = 1.5 CPU-s/GB; 8e9 cycles for 16e9 bits = 0.5 cycles/bit.
        assert_eq!(s.cpu_seconds_per_gb, Some(1.5));
        assert_eq!(s.process_cpu_seconds_per_gb, Some(1.0));
        assert_eq!(s.cycles_per_bit, Some(0.5));
        let w = cost_warnings(&s, false);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("20% of a core") && w[0].contains("hog (7)"), "{}", w[0]);
        // A server sends no names (they stay in its log): the share, and where to look.
        let server = CostSummary { end: End::Server, foreign_top: vec![], ..s };
        let w = cost_warnings(&server, false);
        assert!(w[0].contains("20% of a core on the server host"), "{}", w[0]);
        assert!(w[0].contains("the server's log names them"), "{}", w[0]);
        assert!(cost_warnings(&server, true)[0].contains("the same machine as the client"));
    }

    #[test]
    fn missing_figures_stay_missing() {
        let s = cost_summary(
            End::Server,
            &side(HostCost { concurrent_tests: 2, ..Default::default() }),
        )
        .expect("summary");
        assert_eq!(s.process_percent_of_core, None);
        assert_eq!(s.cores_busy, None);
        assert_eq!(s.cycles_per_bit, None);
        assert!(cost_warnings(&s, false)[0].contains("2 other test(s)"));
        assert!(cost_summary(End::Client, &SideResults::default()).is_none());
    }
}
