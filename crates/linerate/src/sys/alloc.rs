//! glibc malloc's knobs (mallopt(3)) and malloc_trim(3): how much freed memory the allocator
//! keeps, and in how many arenas. Elsewhere (musl, other systems) every call answers
//! Unsupported and changes nothing.

use std::io;

/// At most `n` arenas (M_ARENA_MAX). glibc otherwise creates up to eight per core as threads
/// contend, each reserving 64 MiB of address space and keeping its own freed memory.
pub fn set_arena_max(n: u32) -> io::Result<()> {
    mallopt(Knob::ArenaMax, i32::try_from(n).unwrap_or(i32::MAX))
}

/// Allocations of at least `bytes` are mapped on their own and unmapped when freed
/// (M_MMAP_THRESHOLD). Setting it also turns off glibc's raising of the threshold to the
/// largest block freed so far (up to 32 MiB), after which such blocks stay in the heaps.
pub fn set_mmap_threshold(bytes: usize) -> io::Result<()> {
    mallopt(Knob::MmapThreshold, i32::try_from(bytes).unwrap_or(i32::MAX))
}

/// Gives every arena's free pages back to the system, wherever they are in the heap
/// (malloc_trim(3) with no padding). True when some memory was released.
pub fn trim() -> io::Result<bool> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own free lists under its locks.
        Ok(unsafe { libc::malloc_trim(0) } == 1)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

#[derive(Debug, Clone, Copy)]
enum Knob {
    ArenaMax,
    MmapThreshold,
}

fn mallopt(knob: Knob, value: i32) -> io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let param = match knob {
            Knob::ArenaMax => libc::M_ARENA_MAX,
            Knob::MmapThreshold => libc::M_MMAP_THRESHOLD,
        };
        // SAFETY: mallopt takes two integers and changes only the allocator's parameters.
        if unsafe { libc::mallopt(param, value) } == 1 {
            Ok(())
        } else {
            Err(super::invalid_input(format!("mallopt refused {knob:?} = {value}")))
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (knob, value);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}
