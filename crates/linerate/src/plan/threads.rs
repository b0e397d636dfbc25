//! How an end's TCP streams are served (`--threads`).
//!
//! `auto` (the default) gives each stream its own thread up to [`POOL_ABOVE`] streams and
//! above that a pool of one worker per core; `--threads stream` always gives a thread per
//! stream; `--threads N` always a pool of N workers. The crossover is measured, not guessed:
//! docs/PERFORMANCE.md, "Thread per stream or a pool". UDP streams always have a thread each
//! (their batched system calls already move many datagrams per call).

use std::fmt;

use linerate_proto::StreamLayout;

/// An end with more TCP streams than this serves them from a pool (with `auto`).
pub const POOL_ABOVE: u32 = 16;
/// Most pool workers `--threads` accepts.
pub const MAX_WORKERS: u16 = 1024;

/// The data-plane choice of one end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Threads {
    /// By the number of streams: see [`POOL_ABOVE`].
    #[default]
    Auto,
    /// A thread per stream (`--threads stream`).
    PerStream,
    /// A pool of this many workers (`--threads N`).
    Workers(u16),
}

impl Threads {
    /// Parses `auto`, `stream` or a worker count 1..=[`MAX_WORKERS`].
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "stream" | "per-stream" => Ok(Self::PerStream),
            n => match n.parse::<u16>() {
                Ok(n @ 1..=MAX_WORKERS) => Ok(Self::Workers(n)),
                _ => Err(format!(
                    "`{s}` is not a thread setting: use `auto`, `stream` (a thread per stream) \
                     or a number of pool workers from 1 to {MAX_WORKERS}"
                )),
            },
        }
    }

    /// The layout this choice gives on a host with `cores` cores.
    pub fn layout(self, cores: usize) -> StreamLayout {
        match self {
            Self::Auto => StreamLayout {
                pool_above: POOL_ABOVE,
                workers: cores.max(1) as u32,
                explicit: false,
            },
            Self::PerStream => StreamLayout { explicit: true, ..StreamLayout::PER_STREAM },
            Self::Workers(n) => {
                StreamLayout { pool_above: 0, workers: u32::from(n), explicit: true }
            }
        }
    }
}

/// The cores this process may run on (1 if the OS cannot say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// In a server's config file: `threads = "auto"`, `"stream"` or a number of workers.
impl<'de> serde::Deserialize<'de> for Threads {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Number(n) => n.to_string(),
            Raw::Text(s) => s,
        };
        Threads::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Threads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::PerStream => f.write_str("stream"),
            Self::Workers(n) => write!(f, "{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::Protocol;

    #[test]
    fn parses_and_chooses() {
        assert_eq!(Threads::parse("auto"), Ok(Threads::Auto));
        assert_eq!(Threads::parse("stream"), Ok(Threads::PerStream));
        assert_eq!(Threads::parse("4"), Ok(Threads::Workers(4)));
        for bad in ["0", "-1", "1025", "many", ""] {
            let e = Threads::parse(bad).expect_err(bad);
            assert!(e.contains("auto") && e.contains("1024"), "{e}");
        }
        let tcp = |t: Threads, n| t.layout(2).workers_for(n, Protocol::Tcp);
        assert_eq!(tcp(Threads::Auto, POOL_ABOVE), None);
        assert_eq!(tcp(Threads::Auto, POOL_ABOVE + 1), Some(2));
        assert_eq!(Threads::Auto.layout(2).workers_for(1000, Protocol::Udp), None, "UDP");
        assert_eq!(tcp(Threads::PerStream, 10_000), None);
        assert_eq!(tcp(Threads::Workers(8), 3), Some(3), "no idle workers");
        assert_eq!(tcp(Threads::Workers(1), 1), Some(1));
        assert!(!Threads::Auto.layout(2).explicit && Threads::PerStream.layout(2).explicit);
    }
}
