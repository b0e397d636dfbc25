//! Thin wrappers around system calls: socket options and TCP_INFO (`socket`), type of service
//! and pacing caps (`qos`), stdout redirection and local time text (`stdio`), the UDP fast
//! path (`udp`: batched calls, offloads, drop counters), zero-copy sending (`zerocopy`), readiness sets (`epoll`), file locks (`lock`), process
//! limits (`process`), the terminal (`term`) and the allocator's knobs (`alloc`).
//!
//! This is the only part of linerate that may contain raw libc calls. Each function is one or
//! a few system calls and reports what the kernel actually did or granted; when the running
//! OS lacks a capability the answer is typed (`None`, or an [`io::Error`] of kind
//! [`io::ErrorKind::Unsupported`]), never a made-up number.
//!
//! What this layer must not do: print or log, make policy decisions (which sizes, whether a
//! failure is fatal, whether to retry), start threads or keep global state; and it imports
//! nothing from the rest of linerate. Probes built on these wrappers live in `measure/`;
//! where socket options are applied to a test's sockets is `traffic/`'s business.

use std::fmt;
use std::io;

pub mod alloc;
pub mod epoll;
pub mod lock;
pub mod process;
pub mod qos;
pub mod socket;
pub mod stdio;
pub mod term;
pub mod udp;
pub mod zerocopy;

pub use process::{
    Limit, allowed_cpus, current_cpu, physical_memory, pin_current_thread, raise_fd_limit,
    set_thread_slice, soft_limit, threads_max,
};
pub use socket::*;
pub use term::stderr_columns;
pub use zerocopy::ZeroCopySource;

/// An [`io::ErrorKind::InvalidInput`] error with `msg`.
pub(crate) fn invalid_input(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// Prefixes `err` with what was being attempted, keeping its kind.
pub(crate) fn context(err: io::Error, what: fmt::Arguments<'_>) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
}
