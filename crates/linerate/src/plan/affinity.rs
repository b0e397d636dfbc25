//! `-A/--affinity`: which CPUs each end's data threads run on.
//!
//! iperf3's flag is `-A n[,m]`: the client on CPU n, the server on CPU m. linerate keeps that
//! spelling and lets each side be a list (`0-3`, `0+2`, `1-2+5`): an end's data threads —
//! one per stream, or its pool workers — are bound in turn to the list's CPUs, thread i to
//! CPU i mod len. One CPU pins every data thread there (iperf3's meaning); as many CPUs as
//! threads gives each its own core, which is what "per worker or per stream" asks for
//! without a second flag. Control, interval and cost threads are not pinned: they do not
//! move data.
//!
//! Why pin at all: on a many-core host the scheduler may put a stream and the interrupts of
//! its queue on different sockets or move it mid-test; pinning makes runs repeatable and lets
//! an engineer test one core's capacity. The result names the CPUs each end used
//! (`cost.data_plane.cpus`), so a pinned run is never read as an unpinned one.
//!
//! The client checks its own list against its affinity mask before connecting; the server
//! checks its part on arrival and refuses a CPU it does not have with its own list in the
//! message. Pure parsing here; pinning is `sys::pin_current_thread`.
//!
//! ## Loopback pairing: one of the placements `-A auto` chooses from
//!
//! Since 2026-11-29 pairing is not the rule it was: `-A auto` (the default) measures it
//! against splitting a stream's ends onto two CPUs and the system's placement on each host,
//! once, and runs the fastest (`plan/placement.rs`); `-A pair` asks for it. What follows is
//! how it works and what was measured where it was the rule.
//!
//! On loopback both ends share one kernel, and where the scheduler puts a stream's sender
//! and receiver decides its throughput more than anything else: on different cores every
//! wake-up of the other end is an inter-processor interrupt (costly in a VM) and every byte
//! is written into one core's cache and read out of another's. Measured on this project's
//! 2-vCPU machines (docs/PERFORMANCE.md, "Pairing a stream's ends on loopback"), one stream
//! with both ends on one core moved 1.5–1.6 times the bytes of the scheduler's placement at
//! half the CPU per byte; with two to eight streams, one core per stream pair was level with
//! or ahead of it. So when a TCP bulk test goes to a loopback address of a linerate server
//! and `-A` is not given, the client proposes `spec.pair_cpus` — its allowed CPUs, starting
//! at the one it runs on (so concurrent tests do not all start on CPU 0) — and on both ends
//! stream `id`'s thread runs on `pair_cpus[(id - 1) % len]`, keyed by the stream id both
//! ends know, not by the order of arrival. It is a hint: an end without a CPU of the list
//! runs that thread unpinned; an older server never sees it. Pools (more than 16 streams),
//! UDP bulk, `--crr`, fleets and tests under load keep the system's placement. Each end
//! names the pairing in its result (`cost.data_plane.paired_cpus`, the "data plane" line of
//! the text), and `-A none` turns it off, leaving placement to the system as iperf3 does.
//!
//! **Request/response** (`--rr`) is paired by the same rule: each transaction wakes the
//! other end, which on another core is an inter-processor interrupt each way. Measured on
//! the shared 2-vCPU machine (release build, loopback, `-t 3`, paired and `-A none`
//! interleaved, 4 runs each, load 2.6–6): TCP `--rr` 142.0–144.5 k transactions/s paired
//! against 23.3–142.6 k unpaired; UDP `--rr -u` 161.1–167.7 k against 45.6–148.8 k; `-P 2`
//! 253.8–281.2 k against 217.5–273.0 k. Paired runs are as fast as the best unpaired ones
//! and steady, where the system's placement swings sixfold. `--crr` did not gain (8 runs
//! each: 5.8–17.6 k paired, 9.1–16.0 k unpaired, means 11.8 k and 12.5 k): a transaction
//! there is mostly a connection's set-up and tear-down, which the server accepts on its front
//! door's thread, not the stream's, so pinning the stream threads does not keep it on one
//! core; it is not paired.
//!
//! ### Short slices for paired receivers with the user's buffers
//!
//! With the user's buffers (`-w`) a queue may hold megabytes, and with several pairs on a
//! core a receiver whose batch is ready waits behind the core's
//! senders for its turn while its bytes go cold. So when at least [`SLICE_PAIRS`] pairs share
//! each CPU and `-w` is given, each end's paired TCP receivers ask the scheduler for
//! [`RECEIVER_SLICE`] slices (`sys::set_thread_slice`; Linux 6.12 and later honour it):
//! a shorter slice than the senders' means an earlier deadline, so a receiver that wakes
//! runs at once. Measured on 2 vCPUs (interleaved runs, docs/PERFORMANCE.md "Short slices
//! for paired receivers"): `-P 8 -w 800K` 83.6 against 69.5 Gbit/s, `-w 4M` 87.9 against
//! 65.3, `-P 16 -w 800K` 76.5 against 64.1, `-w 512K` level; without `-w` level (`-P 8`,
//! `-P 16`; `-P 8` again on 2026-11-27, autotuned queues: 69.7 with slices against 68.9),
//! and with fewer pairs per CPU level or worse (`-P 1 -w 800K` 42.0 against 45.7,
//! `-P 4 -w 2M` 87.4 against 93.6), hence the two conditions. Re-measured in two runs of 7
//! interleaved repetitions (2026-11-27): `-P 8 -w 800K` 1.21 and 1.15 times the build
//! without slices, ranges apart. Each end names it (`cost.data_plane.receiver_slice_us`).
//!
//! Pairing itself was re-measured the same way: one stream 1.8–2.2 times the unpaired build
//! in both directions, `-P 8 -w 800K` 1.2 times, the other lines level. (A third loopback
//! rule, short receive queues, lost 7–12 % on `-P 4`/`-P 8` in that re-measurement and was
//! removed.)

use crate::plan::placement::{Choice, Placement};
use crate::record::End;

/// Most CPUs one side may list.
pub const MAX_CPUS: usize = 1024;
/// Highest CPU number accepted.
pub const MAX_CPU: u32 = 65_535;

/// Both ends' CPU lists from `-A CLIENT[,SERVER]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affinity {
    /// This end's (the client's) CPUs; empty = not pinned.
    pub client: Vec<u32>,
    /// The server's CPUs, sent in the spec; empty = not pinned.
    pub server: Vec<u32>,
    /// Where a loopback test's ends run when no CPUs are listed (`auto`, `pair`, `split`,
    /// `none`: `plan/placement.rs`); CPU lists leave it to them.
    pub placement: Choice,
}

impl Affinity {
    /// Parses `-A`'s value: a placement (`auto`, `pair`, `split`, `none`), or `N`, a list
    /// `N-M+K`, optionally `,` and the server's list.
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(placement) = Choice::parse(s) {
            return Ok(Self { placement, ..Self::default() });
        }
        let (client, server) = match s.split_once(',') {
            Some((c, sv)) => (c, Some(sv)),
            None => (s, None),
        };
        let client = if client.trim().is_empty() && server.is_some() {
            Vec::new()
        } else {
            cpu_list(client)?
        };
        let server = server.map(cpu_list).transpose()?.unwrap_or_default();
        // Listed CPUs decide; the system's placement stands for whatever they leave.
        Ok(Self { client, server, placement: Choice::Fixed(Placement::System) })
    }
}

/// Parses one side's list: CPU numbers and ranges joined by `+`, e.g. `0`, `0-3`, `1+3`.
pub fn cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let fix = "write e.g. -A 0, -A 0-3, -A 1+3, -A 0,1 for the client on 0 and the server on 1, \
               or a placement: auto, pair, split, none";
    let mut out = Vec::new();
    for part in s.trim().split('+') {
        let number = |t: &str| -> Result<u32, String> {
            t.trim().parse::<u32>().ok().filter(|c| *c <= MAX_CPU).ok_or_else(|| {
                format!("-A {s:?}: {t:?} is not a CPU number (0..={MAX_CPU}); {fix}")
            })
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let c = number(part)?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(format!("-A {s:?}: the range {lo}-{hi} runs backwards; {fix}"));
        }
        if (hi - lo) as usize + out.len() >= MAX_CPUS {
            return Err(format!("-A {s:?}: more than {MAX_CPUS} CPUs"));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The CPU of data thread `index` on an end pinned to `cpus` (None: not pinned).
pub fn cpu_for(cpus: &[u32], index: usize) -> Option<u32> {
    (!cpus.is_empty()).then(|| cpus[index % cpus.len()])
}

/// The loopback pairing's CPU list: `allowed` (the client's CPUs) rotated to start at
/// `now` (the CPU the client runs on), so that tests started at once begin on different
/// CPUs. None for fewer than two CPUs, where there is nothing to choose.
pub fn pair_cpus(allowed: &[u32], now: Option<u32>) -> Option<Vec<u32>> {
    if allowed.len() < 2 {
        return None;
    }
    let at = now.and_then(|c| allowed.iter().position(|a| *a == c)).unwrap_or(0);
    Some(allowed[at..].iter().chain(&allowed[..at]).copied().collect())
}

/// Whether a test of `spec` is of a kind the loopback pairing pays for (module docs): TCP
/// bulk, and request/response with a connection per stream (`--rr`, TCP or UDP); not
/// `--crr`, nor UDP bulk.
pub fn pairs(spec: &linerate_proto::TestSpec) -> bool {
    match spec.rr {
        Some(rr) => !rr.connect_each,
        None => spec.protocol == linerate_proto::Protocol::Tcp,
    }
}

/// The CPU of stream `id` (numbered from 1) under the pairing `pair` (None: not paired).
pub fn paired_cpu(pair: &[u32], id: u32) -> Option<u32> {
    (!pair.is_empty()).then(|| pair[(id.max(1) - 1) as usize % pair.len()])
}

/// The slice paired receivers ask for (module docs).
pub const RECEIVER_SLICE: std::time::Duration = std::time::Duration::from_micros(500);
/// Pairs per CPU from which paired receivers with the user's buffers ask for it.
pub const SLICE_PAIRS: usize = 4;

/// The slice an end's paired TCP receivers ask for: [`RECEIVER_SLICE`] when `streams`
/// stream pairs share the pairing's `pair` CPUs [`SLICE_PAIRS`] or more to a CPU and the
/// user set the buffers (`window_given`); None otherwise (module docs).
pub fn receiver_slice(
    pair: &[u32],
    streams: usize,
    window_given: bool,
) -> Option<std::time::Duration> {
    (!pair.is_empty() && window_given && streams >= SLICE_PAIRS * pair.len())
        .then_some(RECEIVER_SLICE)
}

/// The refusal for `cpus` that are not all in `allowed` (an end's affinity mask), naming
/// them and what the end has; None when they all are, or the mask is unknown.
pub fn missing_cpus(cpus: &[u32], allowed: Option<&[u32]>, end: End) -> Option<String> {
    let allowed = allowed?;
    let missing: Vec<u32> = cpus.iter().copied().filter(|c| !allowed.contains(c)).collect();
    (!missing.is_empty()).then(|| {
        format!(
            "-A asks for CPU {} on the {end}, which may run on CPUs {} only; pick from those",
            join(&missing),
            join(allowed)
        )
    })
}

/// `0+1+3` style, with runs collapsed: `0-2+5`.
pub fn join(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j > i { format!("{}-{}", cpus[i], cpus[j]) } else { cpus[i].to_string() });
        i = j + 1;
    }
    parts.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_spelling_and_lists() {
        let listed = |client: Vec<u32>, server: Vec<u32>| {
            Ok(Affinity { client, server, placement: Choice::Fixed(Placement::System) })
        };
        assert_eq!(Affinity::parse("1"), listed(vec![1], vec![]));
        assert_eq!(Affinity::parse("1,0"), listed(vec![1], vec![0]));
        assert_eq!(Affinity::parse(",2"), listed(vec![], vec![2]));
        let a = Affinity::parse("0-2+5,3+1").expect("lists");
        assert_eq!((a.client, a.server), (vec![0, 1, 2, 5], vec![1, 3]));
        assert_eq!(cpu_list("3+3+2"), Ok(vec![2, 3]));
    }

    #[test]
    fn placements_pin_no_listed_cpu() {
        for (word, placement) in [
            ("none", Choice::Fixed(Placement::System)),
            ("pair", Choice::Fixed(Placement::Pair)),
            ("split", Choice::Fixed(Placement::Split)),
            ("auto", Choice::Auto),
        ] {
            let a = Affinity::parse(word).expect(word);
            assert_eq!((a.client.len(), a.server.len(), a.placement), (0, 0, placement), "{word}");
        }
    }

    #[test]
    fn pairing_starts_at_the_current_cpu_and_keys_on_the_stream_id() {
        assert_eq!(pair_cpus(&[0, 1, 2, 3], Some(2)), Some(vec![2, 3, 0, 1]));
        assert_eq!(pair_cpus(&[0, 1], None), Some(vec![0, 1]));
        assert_eq!(
            pair_cpus(&[4, 6], Some(5)),
            Some(vec![4, 6]),
            "not in the mask: from the first"
        );
        assert_eq!(pair_cpus(&[3], Some(3)), None, "one CPU: nothing to choose");
        let pair = [1, 0];
        assert_eq!(
            (1..=4).map(|id| paired_cpu(&pair, id)).collect::<Vec<_>>(),
            [1, 0, 1, 0].map(Some)
        );
        assert_eq!(paired_cpu(&[], 1), None);
    }

    #[test]
    fn paired_receivers_ask_for_short_slices_with_the_users_buffers_and_four_pairs_a_cpu() {
        let two = [0, 1];
        assert_eq!(receiver_slice(&two, 8, true), Some(RECEIVER_SLICE));
        assert_eq!(receiver_slice(&two, 16, true), Some(RECEIVER_SLICE));
        assert_eq!(receiver_slice(&two, 7, true), None, "three pairs on a CPU");
        assert_eq!(receiver_slice(&two, 8, false), None, "level without -w");
        assert_eq!(receiver_slice(&[], 8, true), None, "not paired");
        assert_eq!(receiver_slice(&[0, 1, 2, 3], 8, true), None, "two pairs a CPU");
    }

    #[test]
    fn bad_lists_say_what_to_write() {
        for bad in ["", "x", "2-1", "-1", "0,", "70000", "0-5000"] {
            let e = Affinity::parse(bad).expect_err(bad);
            assert!(e.contains("-A"), "{bad}: {e}");
        }
        assert!(Affinity::parse("2-1").expect_err("backwards").contains("backwards"));
    }

    #[test]
    fn threads_take_the_cpus_in_turn_and_missing_ones_are_named() {
        assert_eq!(cpu_for(&[], 3), None);
        assert_eq!(
            (0..5).map(|i| cpu_for(&[2, 5], i)).collect::<Vec<_>>(),
            [2, 5, 2, 5, 2].map(Some)
        );
        assert_eq!(missing_cpus(&[0, 1], Some(&[0, 1]), End::Client), None);
        assert_eq!(missing_cpus(&[7], None, End::Client), None);
        let e = missing_cpus(&[1, 7, 8], Some(&[0, 1]), End::Server).expect("missing");
        assert!(e.contains("CPU 7-8 on the server") && e.contains("CPUs 0-1 only"), "{e}");
        assert_eq!(join(&[0, 1, 2, 5, 7, 8]), "0-2+5+7-8");
    }
}
