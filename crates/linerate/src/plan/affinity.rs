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
}

impl Affinity {
    /// Parses `-A`'s value: `N`, a list `N-M+K`, optionally `,` and the server's list.
    pub fn parse(s: &str) -> Result<Self, String> {
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
        Ok(Self { client, server })
    }
}

/// Parses one side's list: CPU numbers and ranges joined by `+`, e.g. `0`, `0-3`, `1+3`.
pub fn cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let fix = "write e.g. -A 0, -A 0-3, -A 1+3, or -A 0,1 for the client on 0 and the server on 1";
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

/// The refusal for `cpus` that are not all in `allowed` (an end's affinity mask), naming
/// them and what the end has; None when they all are, or the mask is unknown.
pub fn missing_cpus(cpus: &[u32], allowed: Option<&[u32]>, end: &str) -> Option<String> {
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
        assert_eq!(Affinity::parse("1"), Ok(Affinity { client: vec![1], server: vec![] }));
        assert_eq!(Affinity::parse("1,0"), Ok(Affinity { client: vec![1], server: vec![0] }));
        assert_eq!(Affinity::parse(",2"), Ok(Affinity { client: vec![], server: vec![2] }));
        let a = Affinity::parse("0-2+5,3+1").expect("lists");
        assert_eq!((a.client, a.server), (vec![0, 1, 2, 5], vec![1, 3]));
        assert_eq!(cpu_list("3+3+2"), Ok(vec![2, 3]));
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
        assert_eq!(missing_cpus(&[0, 1], Some(&[0, 1]), "client"), None);
        assert_eq!(missing_cpus(&[7], None, "client"), None);
        let e = missing_cpus(&[1, 7, 8], Some(&[0, 1]), "server").expect("missing");
        assert!(e.contains("CPU 7-8 on the server") && e.contains("CPUs 0-1 only"), "{e}");
        assert_eq!(join(&[0, 1, 2, 5, 7, 8]), "0-2+5+7-8");
    }
}
