//! SIGINT/SIGTERM as a counter the drivers poll (first signal: stop gracefully; second: abort).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};

/// Counts interrupt signals received since [`Interrupt::install`].
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    count: Arc<AtomicUsize>,
    last: Arc<AtomicUsize>,
}

impl Interrupt {
    /// Registers handlers for SIGINT and SIGTERM.
    pub fn install() -> Result<Self> {
        let me = Self::default();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let (count, last) = (me.count.clone(), me.last.clone());
            // SAFETY: the handler only performs atomic stores and adds, which are
            // async-signal-safe; it allocates nothing and takes no locks.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    last.store(sig as usize, Ordering::SeqCst);
                    count.fetch_add(1, Ordering::SeqCst);
                })
            }
            .context("cannot install a signal handler")?;
        }
        Ok(me)
    }

    /// A counter that no signal ever raises (for embedded runs and tests); `trigger` raises it.
    pub fn manual() -> Self {
        Self::default()
    }

    /// Raises the counter as a signal would.
    pub fn trigger(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// How many signals arrived.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// The name of the last signal, for messages.
    pub fn last_name(&self) -> &'static str {
        match self.last.load(Ordering::SeqCst) as i32 {
            signal_hook::consts::SIGTERM => "SIGTERM",
            signal_hook::consts::SIGINT => "SIGINT",
            _ => "a stop request",
        }
    }
}
