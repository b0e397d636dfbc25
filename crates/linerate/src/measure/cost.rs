//! What a test costs one end: CPU (process, stream threads, whole machine, busiest core),
//! CPU used by other processes meanwhile, memory, and cycles — over the test window and per
//! interval.
//!
//! A [`CostMeter`] takes a snapshot when the test starts, one at every interval tick, and one
//! at the end; it reports raw deltas only (rates and verdicts are `stats`' job). Figures the OS
//! does not give are None, with the reason in `HostCost::unavailable`.

use std::collections::HashMap;
use std::time::Instant;

use linerate_proto::samples::SampleLog;
use linerate_proto::{
    CostSample, CpuTimes, CycleSource, HostCost, MemoryUse, ProcessCpu, SystemCpu,
};

use crate::measure::counters::{self, CycleCounter};
use crate::measure::procfs::{self, ProcStat};

/// Processes with this command name are linerate (this process, or a peer on the same host)
/// and are not counted as foreign load; a test against an iperf3 peer adds "iperf3".
const OWN_NAME: &str = "linerate";
/// How many of the busiest foreign processes to name.
const FOREIGN_TOP: usize = 3;

/// Snapshots CPU figures over one test.
#[derive(Debug)]
pub struct CostMeter {
    started: Instant,
    stat0: Option<ProcStat>,
    process0: Option<ProcessCpu>,
    foreign0: HashMap<u32, u64>,
    last_us: u64,
    last_stat: Option<ProcStat>,
    last_process: Option<ProcessCpu>,
    intervals: SampleLog<CostSample>,
    cycles: Result<CycleCounter, String>,
    /// Process names that belong to the test (this tool and its peer program).
    own: Vec<String>,
}

impl CostMeter {
    /// The slow half of starting a meter (then [`PreparedMeter::start`]): the scan of every
    /// process's CPU time (tens of milliseconds on a loaded machine), done ahead of a start that
    /// must be quick (a fleet's held start). Foreign load is then counted from here, a little
    /// before the window. `peer_program` names the peer's process (e.g. "iperf3") so that, on
    /// one machine, its work is not counted as foreign load.
    pub fn prepare(peer_program: Option<&str>) -> PreparedMeter {
        let own: Vec<String> =
            [Some(OWN_NAME), peer_program].into_iter().flatten().map(String::from).collect();
        let foreign0 = foreign_cpu(&own).into_iter().map(|(pid, _, us)| (pid, us)).collect();
        PreparedMeter { own, foreign0 }
    }
}

/// A cost meter whose slow /proc scan is done: [`PreparedMeter::start`] takes only the cheap
/// snapshots.
#[derive(Debug)]
pub struct PreparedMeter {
    own: Vec<String>,
    foreign0: HashMap<u32, u64>,
}

impl PreparedMeter {
    /// Starts measuring now. Call it on the thread that then starts the stream threads, so a
    /// hardware cycle counter (where there is one) covers them.
    pub fn start(self, now: Instant) -> CostMeter {
        let PreparedMeter { own, foreign0 } = self;
        // The cheap snapshots last, so the CPU deltas cover the same span as the window.
        let cycles = CycleCounter::open().map_err(|e| e.to_string());
        let process0 = counters::process_cpu();
        let stat0 = procfs::proc_stat();
        CostMeter {
            started: now,
            foreign0,
            own,
            last_us: 0,
            last_stat: stat0.clone(),
            last_process: process0,
            stat0,
            process0,
            intervals: SampleLog::default(),
            cycles,
        }
    }
}

impl CostMeter {
    /// The same snapshots, with the window starting at `at` (the streams' start, taken just
    /// after the snapshots so that taking them does not delay the streams).
    pub fn restarted_at(mut self, at: Instant) -> Self {
        self.started = at;
        self
    }

    /// End of the last interval sample, microseconds since the start.
    pub fn last_sample_us(&self) -> u64 {
        self.last_us
    }

    /// Interval samples kept.
    pub fn samples(&self) -> usize {
        self.intervals.len()
    }

    /// Merges the interval samples pairwise (the stream set bounds its memory this way).
    pub fn halve_samples(&mut self) {
        self.intervals.halve();
    }

    /// Records one interval ending now.
    pub fn sample(&mut self, now: Instant) {
        let end_us = now.saturating_duration_since(self.started).as_micros() as u64;
        if end_us <= self.last_us {
            return;
        }
        let stat = procfs::proc_stat();
        let process = counters::process_cpu();
        self.intervals.push(CostSample {
            start_us: self.last_us,
            end_us,
            process: process_delta(self.last_process, process),
            system: system_delta(self.last_stat.as_ref(), stat.as_ref()),
        });
        self.last_us = end_us;
        self.last_stat = stat;
        self.last_process = process;
    }

    /// The figures for the whole window, ending now.
    pub fn finish(
        self,
        now: Instant,
        stream_threads: Option<ProcessCpu>,
        concurrent_tests: u32,
    ) -> HostCost {
        // Cheap snapshots first, right at the end of the window; the slow scan afterwards.
        let stat1 = procfs::proc_stat();
        let process1 = counters::process_cpu();
        let window_us =
            Instant::now().max(now).saturating_duration_since(self.started).as_micros() as u64;
        let mut unavailable = Vec::new();
        let system = system_delta(self.stat0.as_ref(), stat1.as_ref());
        if system.is_none() {
            unavailable.push("whole-system CPU: /proc/stat not available on this OS".to_string());
        }
        let process = process_delta(self.process0, process1);
        if process.is_none() {
            unavailable.push("process CPU: getrusage failed".to_string());
        }
        let (foreign_us, foreign_top) = foreign_since(&self.foreign0, &self.own);
        if foreign_us.is_none() {
            unavailable.push("foreign load: /proc not available on this OS".to_string());
        }
        let memory = procfs::self_memory()
            .map(|(peak_rss_bytes, final_rss_bytes)| MemoryUse { peak_rss_bytes, final_rss_bytes });
        let cycles = cycle_source(&self.cycles, system.as_ref(), &mut unavailable);
        HostCost {
            window_us,
            process,
            stream_threads,
            data_plane: None,
            system,
            foreign_us,
            foreign_top,
            concurrent_tests,
            host_id: procfs::boot_id(),
            process_id: Some(std::process::id()),
            memory,
            cycles,
            intervals: self.intervals.into_vec(),
            unavailable,
        }
    }
}

fn process_delta(a: Option<ProcessCpu>, b: Option<ProcessCpu>) -> Option<ProcessCpu> {
    let (a, b) = (a?, b?);
    Some(ProcessCpu {
        user_us: b.user_us.saturating_sub(a.user_us),
        system_us: b.system_us.saturating_sub(a.system_us),
    })
}

/// Whole-machine deltas and the busiest CPU over the window.
///
/// The busiest CPU is the one busy for the largest share of its own time (busy / total, ties
/// to the lower number). Per-CPU totals differ slightly (tickless idle is accounted late), so
/// the CPU with the most busy microseconds can show a lower share than the machine average;
/// by share, the busiest is never below the average (a ratio of sums never exceeds the
/// largest ratio), which is what "busiest" promises a reader.
pub fn system_delta(a: Option<&ProcStat>, b: Option<&ProcStat>) -> Option<SystemCpu> {
    let (a, b) = (a?, b?);
    let per_cpu: Vec<CpuTimes> =
        b.per_cpu.iter().zip(&a.per_cpu).map(|(n, o)| n.since(o)).collect();
    let share = |t: &CpuTimes| (t.busy_us() as u128, t.total_us().max(1) as u128);
    let (busiest_cpu, busiest) = per_cpu
        .iter()
        .enumerate()
        .rev()
        .max_by(|(_, x), (_, y)| {
            let ((bx, tx), (by, ty)) = (share(x), share(y));
            (bx * ty).cmp(&(by * tx))
        })
        .map(|(i, t)| (i as u32, *t))
        .unwrap_or_default();
    Some(SystemCpu { cpus: per_cpu.len() as u32, all: b.all.since(&a.all), busiest_cpu, busiest })
}

/// CPU microseconds of every user-space process not named in `own`: (pid, name, cpu).
fn foreign_cpu(own: &[String]) -> Vec<(u32, String, u64)> {
    procfs::all_pids()
        .into_iter()
        .filter(|p| !p.kernel_thread && !own.contains(&p.comm))
        .map(|p| (p.pid, p.comm, p.cpu_us))
        .collect()
}

/// Foreign CPU since the baseline; processes started meanwhile count from zero. Processes
/// that exited meanwhile are missed (their time is gone from /proc), so this is a lower bound.
fn foreign_since(base: &HashMap<u32, u64>, own: &[String]) -> (Option<u64>, Vec<String>) {
    let now = foreign_cpu(own);
    if now.is_empty() {
        return (None, Vec::new());
    }
    let mut used: Vec<(u64, String)> = now
        .into_iter()
        .map(|(pid, name, us)| {
            (us.saturating_sub(base.get(&pid).copied().unwrap_or(0)), format!("{name} ({pid})"))
        })
        .filter(|(us, _)| *us > 0)
        .collect();
    used.sort_by_key(|(us, _)| std::cmp::Reverse(*us));
    let total = used.iter().map(|(us, _)| us).sum();
    let top =
        used.into_iter().take(FOREIGN_TOP).map(|(us, who)| format!("{who}: {us} us")).collect();
    (Some(total), top)
}

fn cycle_source(
    counter: &Result<CycleCounter, String>,
    system: Option<&SystemCpu>,
    unavailable: &mut Vec<String>,
) -> Option<CycleSource> {
    match counter.as_ref().map(CycleCounter::read) {
        Ok(Ok(cycles)) => {
            return Some(CycleSource { method: "hardware_counter".into(), cycles, clock_hz: None });
        }
        Ok(Err(e)) => unavailable.push(format!("hardware cycle counter: read failed ({e})")),
        Err(e) => {
            unavailable.push(format!("hardware cycle counter: {e}; cycles estimated from CPU time"))
        }
    }
    let busy_us = system?.all.busy_us();
    let Some((hz, method)) = procfs::clock_hz() else {
        unavailable.push("CPU clock: neither cpufreq nor /proc/cpuinfo says".into());
        return None;
    };
    let cycles = (u128::from(busy_us) * u128::from(hz) / 1_000_000) as u64;
    Some(CycleSource { method: method.into(), cycles, clock_hz: Some(hz) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(per_cpu: &[(u64, u64, u64)]) -> ProcStat {
        let cpu = |&(user, softirq, idle): &(u64, u64, u64)| CpuTimes {
            user_us: user,
            softirq_us: softirq,
            idle_us: idle,
            ..Default::default()
        };
        let per: Vec<CpuTimes> = per_cpu.iter().map(cpu).collect();
        let all = per.iter().fold(CpuTimes::default(), |a, c| CpuTimes {
            user_us: a.user_us + c.user_us,
            softirq_us: a.softirq_us + c.softirq_us,
            idle_us: a.idle_us + c.idle_us,
            ..a
        });
        ProcStat { all, per_cpu: per }
    }

    #[test]
    fn busiest_core_is_found_by_busy_time_delta() {
        let a = stat(&[(100, 0, 900), (500, 0, 500)]);
        let b = stat(&[(200, 700, 1000), (600, 0, 1300)]);
        let s = system_delta(Some(&a), Some(&b)).expect("delta");
        assert_eq!(s.cpus, 2);
        assert_eq!(s.busiest_cpu, 0, "cpu0 gained 800 us busy, cpu1 100 us");
        assert_eq!(s.busiest.softirq_us, 700);
        assert_eq!(s.all.busy_us(), 900);
        assert_eq!(s.all.idle_us, 900);
        assert_eq!(system_delta(None, Some(&b)), None);
        // More busy microseconds but a larger total (idle accounted late): cpu1's share is
        // higher, and the busiest share is never below the machine's.
        let a = stat(&[(0, 0, 0), (0, 0, 0)]);
        let b = stat(&[(970, 0, 30), (950, 0, 10)]);
        let s = system_delta(Some(&a), Some(&b)).expect("delta");
        assert_eq!(s.busiest_cpu, 1, "95/96 busy beats 97/100");
        let share = |t: &CpuTimes| t.busy_us() as f64 / t.total_us() as f64;
        assert!(share(&s.busiest) >= share(&s.all), "{s:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn meter_reports_busy_work_on_this_host() {
        let t0 = Instant::now();
        let mut m = CostMeter::prepare(None).start(t0);
        let mut x = 0u64;
        // Burn 80 ms of this thread's own CPU (not wall time: on a loaded machine the thread
        // may get a fraction of the wall clock), bounded at 10 s of wall time.
        let cpu = || crate::measure::counters::thread_cpu().map_or(0, |c| c.user_us + c.system_us);
        let spent0 = cpu();
        while cpu() - spent0 < 80_000 && t0.elapsed() < std::time::Duration::from_secs(10) {
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        m.sample(Instant::now());
        let c = m.finish(Instant::now(), None, 0);
        let p = c.process.expect("process cpu");
        assert!(p.user_us + p.system_us >= 50_000, "{p:?}");
        let sys = c.system.expect("system cpu");
        assert!(sys.all.busy_us() >= 50_000 && sys.busiest.busy_us() > 0);
        assert_eq!(c.intervals.len(), 1);
        assert!(c.memory.expect("memory").peak_rss_bytes > 0);
        assert!(c.foreign_us.is_some());
        let cyc = c.cycles.expect("cycles measured or estimated");
        assert!(cyc.cycles > 0);
        if cyc.method != "hardware_counter" {
            assert!(
                c.unavailable.iter().any(|u| u.contains("hardware cycle counter")),
                "{:?}",
                c.unavailable
            );
        }
    }
}
