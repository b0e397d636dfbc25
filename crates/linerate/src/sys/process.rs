//! Process limits: the open-file limit that many streams need.

/// Raises the soft `RLIMIT_NOFILE` (open-file limit) to the hard limit and
/// returns the soft limit now in force (unchanged when raising was refused);
/// `None` when unsupported. `RLIM_INFINITY` comes back as its raw value
/// (`u64::MAX` on 64-bit Linux).
pub fn raise_fd_limit() -> Option<u64> {
    imp::raise_fd_limit()
}

#[cfg(target_os = "linux")]
mod imp {
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
    pub(super) fn raise_fd_limit() -> Option<u64> {
        None
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
}
