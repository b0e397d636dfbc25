//! CPU-time and cycle counters from the OS: `getrusage` for the process and for the calling
//! thread, and a hardware cycle counter (`perf_event_open`) where the kernel offers one.
//!
//! Unsupported counters are None or an error, never an invented value. This module does not
//! decide which figure to show; `measure::cost` does.

use std::io;

use linerate_proto::ProcessCpu;

/// CPU time of the whole process since it started.
pub fn process_cpu() -> Option<ProcessCpu> {
    imp::rusage(imp::Who::Process)
}

/// How long the calling thread has been runnable but waiting for a CPU since it started,
/// microseconds: the run delay of `/proc/thread-self/schedstat` (Linux with schedstats);
/// None elsewhere.
pub fn thread_wait_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    super::procfs::parse_schedstat_wait_us(&text)
}

/// CPU time of the calling thread since it started (Linux); None elsewhere.
pub fn thread_cpu() -> Option<ProcessCpu> {
    imp::rusage(imp::Who::Thread)
}

/// A hardware CPU-cycle counter for the calling thread and the threads it starts afterwards.
#[derive(Debug)]
pub struct CycleCounter {
    #[allow(dead_code)] // only read on Linux
    fd: std::os::fd::OwnedFd,
}

impl CycleCounter {
    /// Opens the counter. Fails where the CPU or hypervisor exposes no PMU (as on the
    /// project's Firecracker VMs), or where `perf_event_paranoid` forbids it.
    pub fn open() -> io::Result<Self> {
        imp::open_cycles().map(|fd| Self { fd }).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP) => {
                    "not exposed by this CPU or hypervisor (no PMU)".to_string()
                }
                Some(libc::EACCES | libc::EPERM) => {
                    "not permitted (see /proc/sys/kernel/perf_event_paranoid)".to_string()
                }
                _ => e.to_string(),
            };
            io::Error::new(e.kind(), why)
        })
    }

    /// Cycles counted so far (threads that exited are included; running ones are not yet).
    pub fn read(&self) -> io::Result<u64> {
        imp::read_cycles(&self.fd)
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io::{self, Read};
    use std::os::fd::{FromRawFd, OwnedFd};

    use linerate_proto::ProcessCpu;

    pub enum Who {
        Process,
        Thread,
    }

    pub fn rusage(who: Who) -> Option<ProcessCpu> {
        let which = match who {
            Who::Process => libc::RUSAGE_SELF,
            Who::Thread => libc::RUSAGE_THREAD,
        };
        // SAFETY: rusage is plain integers, so all-zero is valid; getrusage writes into it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, exclusively borrowed rusage.
        if unsafe { libc::getrusage(which, &mut ru) } != 0 {
            return None;
        }
        let us = |tv: libc::timeval| {
            u64::try_from(tv.tv_sec).unwrap_or(0) * 1_000_000
                + u64::try_from(tv.tv_usec).unwrap_or(0)
        };
        Some(ProcessCpu { user_us: us(ru.ru_utime), system_us: us(ru.ru_stime) })
    }

    /// `struct perf_event_attr` up to PERF_ATTR_SIZE_VER5 (112 bytes), as 14 u64 words.
    /// Word 0: type (u32) and size (u32); word 1: config; word 5: the flag bits.
    const ATTR_WORDS: usize = 14;
    const PERF_TYPE_HARDWARE: u64 = 0;
    const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
    /// `inherit` (bit 1) and `exclude_hv` (bit 6).
    const FLAGS: u64 = (1 << 1) | (1 << 6);
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

    pub fn open_cycles() -> io::Result<OwnedFd> {
        if cfg!(target_endian = "big") {
            // The attr bitfield layout differs there and is untested: say so, do not guess.
            return Err(io::Error::new(io::ErrorKind::Unsupported, "cycle counters on big-endian"));
        }
        let mut attr = [0u64; ATTR_WORDS];
        // type in the low 32 bits of word 0, size in the high 32 bits.
        attr[0] = PERF_TYPE_HARDWARE | (((ATTR_WORDS * 8) as u64) << 32);
        attr[1] = PERF_COUNT_HW_CPU_CYCLES;
        attr[5] = FLAGS;
        // SAFETY: `attr` is a zero-initialised perf_event_attr of the size it declares;
        // pid 0 / cpu -1 means "this thread on any CPU"; group_fd -1 means no group.
        let fd = unsafe {
            libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, PERF_FLAG_FD_CLOEXEC)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd =
            i32::try_from(fd).map_err(|_| io::Error::other("perf_event_open fd out of range"))?;
        // SAFETY: the kernel just returned this descriptor and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    pub fn read_cycles(fd: &OwnedFd) -> io::Result<u64> {
        let mut buf = [0u8; 8];
        std::fs::File::from(fd.try_clone()?).read_exact(&mut buf)?;
        Ok(u64::from_ne_bytes(buf))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::os::fd::OwnedFd;

    use linerate_proto::ProcessCpu;

    pub enum Who {
        Process,
        Thread,
    }

    pub fn rusage(_who: Who) -> Option<ProcessCpu> {
        None
    }

    pub fn open_cycles() -> io::Result<OwnedFd> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "no hardware cycle counters on this OS"))
    }

    pub fn read_cycles(_fd: &OwnedFd) -> io::Result<u64> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "no hardware cycle counters on this OS"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn process_and_thread_cpu_advance_with_work() {
        let p0 = process_cpu().expect("getrusage self");
        let t0 = thread_cpu().expect("getrusage thread");
        let spent =
            |a: ProcessCpu, b: ProcessCpu| (b.user_us + b.system_us) - (a.user_us + a.system_us);
        // Work until the thread's own time shows 20 ms, within 10 s of wall time: on a
        // machine shared with other builds a fixed wall-clock loop may get a fraction of a
        // core, so the loop is bounded by CPU time, and a clock that never advances fails.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut t1 = t0;
        while spent(t0, t1) < 20_000 && start.elapsed() < std::time::Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            t1 = thread_cpu().expect("getrusage thread");
        }
        std::hint::black_box(x);
        let p1 = process_cpu().expect("getrusage self");
        assert!(spent(t0, t1) >= 20_000, "thread spent {} us in 10 s", spent(t0, t1));
        // The kernel adjusts process and thread times separately, at scheduler-tick
        // granularity (4 ms at HZ=250): allow one tick either way.
        assert!(spent(p0, p1) + 10_000 >= spent(t0, t1), "{p0:?} {p1:?} {t0:?} {t1:?}");
    }

    #[test]
    fn cycle_counter_opens_or_fails_cleanly() {
        match CycleCounter::open() {
            Ok(c) => {
                let a = c.read().expect("read");
                let mut x = 0u64;
                for i in 0..1_000_000u64 {
                    x = x.wrapping_add(i * i);
                }
                std::hint::black_box(x);
                assert!(c.read().expect("read") > a, "cycles advance");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}
