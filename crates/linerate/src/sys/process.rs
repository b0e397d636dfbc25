//! Process limits and placement: the open-file limit that many streams need, and the CPUs a
//! thread may run on (`-A`).

/// Raises the soft `RLIMIT_NOFILE` (open-file limit) to the hard limit and
/// returns the soft limit now in force (unchanged when raising was refused);
/// `None` when unsupported. `RLIM_INFINITY` comes back as its raw value
/// (`u64::MAX` on 64-bit Linux).
pub fn raise_fd_limit() -> Option<u64> {
    imp::raise_fd_limit()
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

    pub(super) fn pin_current_thread(_cpu: u32) -> std::io::Result<()> {
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "pinning threads to CPUs"))
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
