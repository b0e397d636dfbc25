//! How a long-running server keeps glibc's allocator from holding what its tests freed.
//!
//! Measured on a server under a 2 GiB address-space cap (issue 35; figures in
//! docs/SECURITY.md, "Memory a peer can make the server hold"), glibc's defaults cost it
//! twice:
//!
//! - *freed memory kept*: once a block over the mmap threshold (128 KiB) is freed, glibc
//!   raises the threshold to that block's size (up to 32 MiB), so every later block that size
//!   (a 16 MiB results frame, a decoded list) comes from a heap and stays there when freed:
//!   sixteen hostile frames left 21 MB held afterwards. A fixed threshold keeps large blocks
//!   mapped on their own and unmapped when freed (2 MB held);
//! - *arenas*: glibc makes up to eight arenas per core as threads contend, each reserving
//!   64 MiB of address space and keeping its own free memory: 600 mixed tests left the server
//!   at 1047 MB of address space, half the cap, most of it arenas. One arena per core (at
//!   least two, at most eight) took it to 131 MB; a server thread allocates little once its
//!   test runs (buffers are allocated once), so the arenas are not contended.
//!
//! And when a session ends, every arena's free pages go back to the system (malloc_trim),
//! wherever they lie in the heap: what a test freed is not kept for the next.

use crate::sys;

/// Large blocks are mapped on their own from this size on: glibc's own starting threshold,
/// fixed.
const MMAP_THRESHOLD: usize = 128 << 10;

/// Sets the allocator up for a server: at start, before any session thread exists. Best
/// effort: elsewhere than glibc it changes nothing.
pub(crate) fn tune_for_server() {
    let cores = sys::allowed_cpus().map_or(2, |c| c.len());
    let _ = sys::alloc::set_arena_max(cores.clamp(2, 8) as u32);
    let _ = sys::alloc::set_mmap_threshold(MMAP_THRESHOLD);
}

/// A session ended: the memory it freed goes back to the system.
pub(crate) fn after_session() {
    let _ = sys::alloc::trim();
}
