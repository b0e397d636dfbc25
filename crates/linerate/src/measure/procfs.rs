//! Parsers for the kernel's text interfaces (`/proc/stat`, `/proc/<pid>/stat`,
//! `/proc/self/status`, `schedstat`, cpufreq, `/proc/cpuinfo`) and the Linux readers that feed them.
//!
//! Parsers are pure functions over text, tested with recorded fixtures; readers are the only
//! code here that touches the file system, and return None where the OS has no such file.
//! Nothing here decides what a figure means; `measure::cost` does that.

use linerate_proto::CpuTimes;

/// Per-CPU and total CPU times from `/proc/stat`, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// The `cpu` line: all CPUs together.
    pub all: CpuTimes,
    /// The `cpuN` lines, indexed by N.
    pub per_cpu: Vec<CpuTimes>,
}

/// Parses `/proc/stat`. `ticks_per_second` is `sysconf(_SC_CLK_TCK)` (USER_HZ).
pub fn parse_proc_stat(text: &str, ticks_per_second: u64) -> Option<ProcStat> {
    let mut all = None;
    let mut per_cpu = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(rest) = name.strip_prefix("cpu") else { continue };
        let times = parse_cpu_fields(fields, ticks_per_second)?;
        if rest.is_empty() {
            all = Some(times);
        } else {
            let idx: usize = rest.parse().ok()?;
            if per_cpu.len() <= idx {
                per_cpu.resize(idx + 1, CpuTimes::default());
            }
            per_cpu[idx] = times;
        }
    }
    Some(ProcStat { all: all?, per_cpu })
}

fn parse_cpu_fields<'a>(fields: impl Iterator<Item = &'a str>, hz: u64) -> Option<CpuTimes> {
    let v: Vec<u64> = fields.take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 4 || hz == 0 {
        return None;
    }
    let us = |i: usize| v.get(i).copied().unwrap_or(0).saturating_mul(1_000_000) / hz;
    Some(CpuTimes {
        user_us: us(0),
        nice_us: us(1),
        system_us: us(2),
        idle_us: us(3),
        iowait_us: us(4),
        irq_us: us(5),
        softirq_us: us(6),
        steal_us: us(7),
    })
}

/// The run delay (time runnable but waiting on a run queue) of a `schedstat` line
/// (`run_ns wait_ns timeslices`), in microseconds.
pub fn parse_schedstat_wait_us(text: &str) -> Option<u64> {
    let mut fields = text.split_ascii_whitespace();
    let _run_ns: u64 = fields.next()?.parse().ok()?;
    let wait_ns: u64 = fields.next()?.parse().ok()?;
    Some(wait_ns / 1000)
}

/// One process from `/proc/<pid>/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidStat {
    /// Process id.
    pub pid: u32,
    /// Command name (without the parentheses).
    pub comm: String,
    /// True for kernel threads (PF_KTHREAD).
    pub kernel_thread: bool,
    /// User plus system CPU, microseconds.
    pub cpu_us: u64,
}

/// PF_KTHREAD in the `flags` field of `/proc/<pid>/stat`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// Parses one `/proc/<pid>/stat` line. The command name may contain spaces and parentheses,
/// so fields are counted from the last `)`.
pub fn parse_pid_stat(text: &str, ticks_per_second: u64) -> Option<PidStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text.get(..open)?.trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_string();
    // After ")": state(3) ppid(4) pgrp(5) session(6) tty(7) tpgid(8) flags(9) minflt(10)
    // cminflt(11) majflt(12) cmajflt(13) utime(14) stime(15).
    let rest: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let flags = field(9)?;
    let ticks = field(14)?.saturating_add(field(15)?);
    if ticks_per_second == 0 {
        return None;
    }
    Some(PidStat {
        pid,
        comm,
        kernel_thread: flags & PF_KTHREAD != 0,
        cpu_us: ticks.saturating_mul(1_000_000) / ticks_per_second,
    })
}

/// `VmHWM` and `VmRSS` from `/proc/self/status`, bytes.
pub fn parse_status_memory(text: &str) -> Option<(u64, u64)> {
    let kib = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|k| k * 1024)
    };
    Some((kib("VmHWM:")?, kib("VmRSS:")?))
}

/// The first `cpu MHz` of `/proc/cpuinfo`, in Hz.
pub fn parse_cpuinfo_hz(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "cpu MHz").then(|| value.trim().parse::<f64>().ok()).flatten()
        })
        .filter(|mhz| *mhz > 0.0)
        .map(|mhz| (mhz * 1e6) as u64)
}

/// A cpufreq `scaling_cur_freq` value (kHz) in Hz.
pub fn parse_cpufreq_khz(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|k| *k > 0).map(|k| k * 1000)
}

#[cfg(target_os = "linux")]
mod read {
    use super::*;

    #[test]
    fn schedstat_run_delay() {
        assert_eq!(parse_schedstat_wait_us("5000000 2500000 17\n"), Some(2500));
        assert_eq!(parse_schedstat_wait_us("garbage"), None);
    }

    /// USER_HZ, the unit of `/proc` CPU times.
    pub fn ticks_per_second() -> u64 {
        // SAFETY: sysconf has no preconditions.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        u64::try_from(t).ok().filter(|t| *t > 0).unwrap_or(100)
    }

    pub fn proc_stat() -> Option<ProcStat> {
        parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?, ticks_per_second())
    }

    pub fn all_pids() -> Vec<PidStat> {
        let hz = ticks_per_second();
        let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
        dir.filter_map(Result::ok)
            .filter(|e| {
                e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            })
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter_map(|t| parse_pid_stat(&t, hz))
            .collect()
    }

    pub fn self_memory() -> Option<(u64, u64)> {
        parse_status_memory(&std::fs::read_to_string("/proc/self/status").ok()?)
    }

    pub fn boot_id() -> Option<String> {
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Some(id.trim().to_string()).filter(|s| !s.is_empty())
    }

    pub fn clock_hz() -> Option<(u64, &'static str)> {
        let cpufreq = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq";
        if let Some(hz) = std::fs::read_to_string(cpufreq).ok().and_then(|t| parse_cpufreq_khz(&t))
        {
            return Some((hz, "cpufreq"));
        }
        let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        parse_cpuinfo_hz(&info).map(|hz| (hz, "cpuinfo"))
    }
}

#[cfg(not(target_os = "linux"))]
mod read {
    use super::*;

    pub fn proc_stat() -> Option<ProcStat> {
        None
    }

    pub fn all_pids() -> Vec<PidStat> {
        Vec::new()
    }

    pub fn self_memory() -> Option<(u64, u64)> {
        None
    }

    pub fn clock_hz() -> Option<(u64, &'static str)> {
        None
    }

    pub fn boot_id() -> Option<String> {
        None
    }
}

pub use read::{all_pids, boot_id, clock_hz, proc_stat, self_memory};

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded on a 2-vCPU test VM (kernel 6.18), trimmed after the cpu lines.
    const PROC_STAT: &str = "\
cpu  4705 0 141383 280544 217 0 48011 412 0 0
cpu0 2322 0 70950 141052 109 0 27204 200 0 0
cpu1 2383 0 70433 139492 108 0 20807 212 0 0
intr 12345 0 0
ctxt 99999
btime 1795318000
";

    #[test]
    fn proc_stat_fixture() {
        let s = parse_proc_stat(PROC_STAT, 100).expect("parses");
        assert_eq!(s.per_cpu.len(), 2);
        assert_eq!(s.all.user_us, 47_050_000);
        assert_eq!(s.all.softirq_us, 480_110_000);
        assert_eq!(s.all.steal_us, 4_120_000);
        assert_eq!(s.per_cpu[1].system_us, 704_330_000);
        assert_eq!(s.per_cpu[0].idle_us, 1_410_520_000);
    }

    #[test]
    fn proc_stat_tolerates_old_kernels_and_rejects_garbage() {
        // Kernels before 2.6.11 had 4-7 fields; missing ones read as 0.
        let s = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\n", 100).expect("parses");
        assert_eq!(s.all.steal_us, 0);
        assert_eq!(parse_proc_stat("cpu a b c d\n", 100), None);
        assert_eq!(parse_proc_stat("intr 1\n", 100), None, "no cpu line");
        assert_eq!(parse_proc_stat(PROC_STAT, 0), None);
    }

    #[test]
    fn pid_stat_fixture_with_awkward_name() {
        let line = "4242 (my (weird) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 125 0 0 20 0 3 0 1000 0 0";
        let p = parse_pid_stat(line, 100).expect("parses");
        assert_eq!(p.pid, 4242);
        assert_eq!(p.comm, "my (weird) prog");
        assert!(!p.kernel_thread);
        assert_eq!(p.cpu_us, 3_750_000);
        let kthread = "15 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 7 93 0 0 20 0 1 0 3 0 0";
        let k = parse_pid_stat(kthread, 100).expect("parses");
        assert!(k.kernel_thread);
        assert_eq!(k.cpu_us, 1_000_000);
        assert_eq!(parse_pid_stat("garbage", 100), None);
        assert_eq!(parse_pid_stat("1 (x) S 1", 100), None, "truncated");
    }

    #[test]
    fn status_memory_fixture() {
        let text = "Name:\tlinerate\nVmPeak:\t  100 kB\nVmHWM:\t    7788 kB\nVmRSS:\t    6512 kB\n";
        assert_eq!(parse_status_memory(text), Some((7788 * 1024, 6512 * 1024)));
        assert_eq!(parse_status_memory("Name: x\n"), None);
    }

    #[test]
    fn clock_fixtures() {
        let info = "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2445.406\n";
        assert_eq!(parse_cpuinfo_hz(info), Some(2_445_406_000));
        assert_eq!(parse_cpuinfo_hz("cpu MHz : 0\n"), None);
        assert_eq!(parse_cpufreq_khz("2400000\n"), Some(2_400_000_000));
        assert_eq!(parse_cpufreq_khz("n/a"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn readers_work_on_this_host() {
        let s = proc_stat().expect("/proc/stat");
        assert!(!s.per_cpu.is_empty() && s.all.total_us() > 0);
        let me =
            all_pids().into_iter().find(|p| p.pid == std::process::id()).expect("self in /proc");
        assert!(!me.kernel_thread);
        let (peak, rss) = self_memory().expect("status");
        assert!(peak >= rss && rss > 0);
    }
}
