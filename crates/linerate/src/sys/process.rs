//! Process limits and placement: the open-file limit that many streams need, and the CPUs a
//! thread may run on (`-A`).

/// Raises the soft `RLIMIT_NOFILE` (open-file limit) to the hard limit and
/// returns the soft limit now in force (unchanged when raising was refused);
/// `None` when unsupported. `RLIM_INFINITY` comes back as its raw value
/// (`u64::MAX` on 64-bit Linux).
pub fn raise_fd_limit() -> Option<u64> {
    imp::raise_fd_limit()
}

/// A resource limit's soft value; None when unlimited or unreadable.
pub fn soft_limit(which: Limit) -> Option<u64> {
    imp::soft_limit(which)
}

/// The resource limits [`soft_limit`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `RLIMIT_AS`: the process's address space.
    AddressSpace,
    /// `RLIMIT_NPROC`: threads and processes of the user.
    Threads,
}

/// The machine's physical memory in bytes; None where unknown.
pub fn physical_memory() -> Option<u64> {
    imp::physical_memory()
}

/// The kernel's system-wide cap on threads (`/proc/sys/kernel/threads-max`); None where
/// unknown.
pub fn threads_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/threads-max").ok()?.trim().parse().ok()
}

/// The CPUs the calling thread may run on (its affinity mask; a new thread inherits its
/// creator's), ascending; None where unsupported.
pub fn allowed_cpus() -> Option<Vec<u32>> {
    imp::allowed_cpus()
}

/// Binds the calling thread to CPU `cpu`. Errors where the CPU is not in the process's mask
/// (the kernel's `EINVAL`) or the OS cannot pin threads (`Unsupported`).
pub fn pin_current_thread(cpu: u32) -> std::io::Result<()> {
    imp::pin_current_thread(cpu)
}

/// Asks the scheduler to give the calling thread time slices of `slice` (Linux 6.12's
/// custom slices for ordinary threads, `sched_attr.sched_runtime`): a thread asking for a
/// shorter slice than its neighbours gets an earlier deadline, so it runs soon after it
/// wakes. Before 6.12 the kernel reads the field only for deadline tasks, so it changes
/// nothing there. The thread stays an ordinary (`SCHED_OTHER`, nice 0) thread.
pub fn set_thread_slice(slice: std::time::Duration) -> std::io::Result<()> {
    imp::set_thread_slice(slice)
}

/// The CPU the calling thread runs on now; None where the OS does not say.
pub fn current_cpu() -> Option<u32> {
    imp::current_cpu()
}

#[cfg(target_os = "linux")]
mod imp {
    pub(super) fn current_cpu() -> Option<u32> {
        // SAFETY: sched_getcpu takes no arguments and only returns a number or -1.
        u32::try_from(unsafe { libc::sched_getcpu() }).ok()
    }

    pub(super) fn allowed_cpus() -> Option<Vec<u32>> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 = the caller.
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        if rc != 0 {
            return None;
        }
        let max = 8 * std::mem::size_of_val(&set);
        // SAFETY: `set` was filled by the kernel and every index is below its capacity.
        Some((0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).map(|c| c as u32).collect())
    }

    /// `struct sched_attr` as of its first version (48 bytes, `SCHED_ATTR_SIZE_VER0`).
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }

    pub(super) fn set_thread_slice(slice: std::time::Duration) -> std::io::Result<()> {
        // Keep the thread's policy and nice value (a user's `nice` or `chrt -b` stays); only
        // the fair policies have slices.
        // SAFETY: a plain call on the calling thread (0) with no pointers.
        let policy = unsafe { libc::sched_getscheduler(0) };
        if ![libc::SCHED_OTHER, libc::SCHED_BATCH, libc::SCHED_IDLE].contains(&policy) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a slice for a thread outside the fair scheduling policies",
            ));
        }
        // SAFETY: as above; on Linux `PRIO_PROCESS` with 0 names the calling thread.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: policy as u32,
            flags: 0,
            nice,
            priority: 0,
            runtime: u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX),
            deadline: 0,
            period: 0,
        };
        // SAFETY: `attr` is a valid, initialised sched_attr of the size it states, which the
        // kernel only reads; pid 0 = the calling thread; flags 0.
        let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &raw const attr, 0) };
        if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    }

    pub(super) fn pin_current_thread(cpu: u32) -> std::io::Result<()> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let max = 8 * std::mem::size_of_val(&set);
        if cpu as usize >= max {
            return Err(crate::sys::invalid_input(format!("cpu {cpu} is beyond {max} CPUs")));
        }
        // SAFETY: `cpu` is below the set's capacity (checked above).
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 = the calling thread.
        let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    }

    pub(super) fn soft_limit(which: super::Limit) -> Option<u64> {
        let resource = match which {
            super::Limit::AddressSpace => libc::RLIMIT_AS,
            super::Limit::Threads => libc::RLIMIT_NPROC,
        };
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `limit` is a valid, writable `rlimit` for the call.
        if unsafe { libc::getrlimit(resource, &mut limit) } != 0 {
            return None;
        }
        #[allow(clippy::useless_conversion, reason = "rlim_t is 32 bits on some targets")]
        let soft = u64::from(limit.rlim_cur);
        (limit.rlim_cur != libc::RLIM_INFINITY).then_some(soft)
    }

    pub(super) fn physical_memory() -> Option<u64> {
        // SAFETY: sysconf takes a name and returns a number; no memory is passed.
        let (pages, size) =
            unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        let (pages, size) = (u64::try_from(pages).ok()?, u64::try_from(size).ok()?);
        pages.checked_mul(size)
    }

    pub(super) fn raise_fd_limit() -> Option<u64> {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `limit` is a valid, writable `rlimit` for the call.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            // SAFETY: `raised` is a valid `rlimit` that the call only reads.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                limit = raised;
            }
        }
        #[allow(clippy::useless_conversion, reason = "rlim_t is 32 bits on some targets")]
        let soft = u64::from(limit.rlim_cur);
        Some(soft)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn current_cpu() -> Option<u32> {
        None
    }

    pub(super) fn raise_fd_limit() -> Option<u64> {
        None
    }

    pub(super) fn allowed_cpus() -> Option<Vec<u32>> {
        None
    }

    pub(super) fn soft_limit(_which: super::Limit) -> Option<u64> {
        None
    }

    pub(super) fn physical_memory() -> Option<u64> {
        None
    }

    pub(super) fn pin_current_thread(_cpu: u32) -> std::io::Result<()> {
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "pinning threads to CPUs"))
    }

    pub(super) fn set_thread_slice(_slice: std::time::Duration) -> std::io::Result<()> {
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "scheduler slices"))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn raise_fd_limit_reports_at_least_1024() {
        let soft = super::raise_fd_limit().expect("supported on Linux");
        assert!(soft >= 1024, "soft limit {soft}");
        // Idempotent: already at the hard limit.
        assert_eq!(super::raise_fd_limit(), Some(soft));
    }

    #[test]
    fn a_thread_may_ask_for_a_short_slice() {
        let t = std::thread::spawn(|| {
            // SAFETY: a plain call on the calling thread.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 3) };
            let r = super::set_thread_slice(std::time::Duration::from_micros(500));
            // SAFETY: as above.
            (r, unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) })
        });
        let (r, nice) = t.join().expect("thread");
        r.expect("sched_setattr with a slice");
        assert_eq!(nice, 3, "the thread's nice value is kept");
    }

    #[test]
    fn a_thread_pins_to_an_allowed_cpu_and_not_to_a_missing_one() {
        let cpus = super::allowed_cpus().expect("supported on Linux");
        assert!(!cpus.is_empty());
        let last = *cpus.last().expect("one cpu");
        std::thread::spawn(move || {
            super::pin_current_thread(last).expect("pin");
            assert_eq!(super::allowed_cpus(), Some(vec![last]), "the thread's mask is that cpu");
            assert!(super::pin_current_thread(100_000).is_err());
        })
        .join()
        .expect("thread");
    }
}
