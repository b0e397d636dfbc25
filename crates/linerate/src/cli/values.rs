//! The flags' value parsers: each reads one value as the user wrote it and, when it cannot,
//! says what is accepted ("give a whole number from 1 to 128"), rather than clap's own words.

use std::time::Duration;

use crate::plan::HistoryRef;
use crate::plan::size::Size;
use crate::units::{self, Bitrate, ByteCount};

pub(super) fn scale(s: &str) -> Result<crate::units::scale::Scale, String> {
    crate::units::scale::Scale::parse(s)
}

/// A percentage such as `0.1`, `0.1%` or `2%`, from 0 to 100.
pub(super) fn percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage; write e.g. 0.1 or 0.1%"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{s} is outside 0..100 %"));
    }
    Ok(v)
}

/// Integer types a flag may hold, with their largest value.
pub(super) trait Whole: TryFrom<u64> {
    /// The largest value, as a `u64`.
    const MAX: u64;
}

macro_rules! whole_types {
    ($($t:ty),*) => { $(impl Whole for $t { const MAX: u64 = <$t>::MAX as u64; })* };
}
whole_types!(u8, u16, u32, u64, usize, i64);

/// A whole number within `range` (a count, a port, requests per second): clap's own parser
/// answers `0.5` and `-1` with "invalid digit found in string"; this says what is accepted.
pub(super) fn whole<T: Whole>(s: &str, range: std::ops::RangeInclusive<u64>) -> Result<T, String> {
    let (low, high) = (*range.start(), (*range.end()).min(T::MAX));
    // "0 or more" rather than a bound of ten digits or more that no one means to reach.
    let accepted = if high == T::MAX && high >= u64::from(u32::MAX) {
        format!("give a whole number, {low} or more")
    } else {
        format!("give a whole number from {low} to {high}")
    };
    let t = s.trim();
    let n = match t.parse::<u64>() {
        Ok(n) => n,
        Err(_) if t.starts_with('-') => return Err(format!("{s} is negative: {accepted}")),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => u64::MAX,
        Err(_) if t.parse::<f64>().is_ok_and(f64::is_finite) => {
            return Err(format!("{s} is not a whole number: {accepted}"));
        }
        Err(_) => return Err(format!("{s:?} is not a number: {accepted}")),
    };
    if n < low {
        return Err(format!("{s} is too small: {accepted}"));
    }
    T::try_from(n)
        .ok()
        .filter(|_| n <= high)
        .ok_or_else(|| format!("{s} is too large: at most {high}"))
}

/// A whole number, 0 up to what `T` holds.
pub(super) fn count<T: Whole>(s: &str) -> Result<T, String> {
    whole(s, 0..=T::MAX)
}

pub(super) fn affinity(s: &str) -> Result<crate::plan::affinity::Affinity, String> {
    crate::plan::affinity::Affinity::parse(s)
}

pub(super) fn threads(s: &str) -> Result<crate::plan::threads::Threads, String> {
    crate::plan::threads::Threads::parse(s)
}

pub(super) fn seconds(s: &str) -> Result<Duration, String> {
    units::parse_seconds(s).map_err(|e| e.to_string())
}

pub(super) fn size(s: &str) -> Result<ByteCount, String> {
    units::parse_size(s).map_err(|e| e.to_string())
}

/// `default` (None) or a size, keeping the user's words for the matrix's labels.
pub(super) fn optional_size(s: &str) -> Result<Option<Size>, String> {
    if s.eq_ignore_ascii_case("default") {
        Ok(None)
    } else {
        Size::spelled(s).map(Some).map_err(|e| e.to_string())
    }
}

/// `-b RATE[/BURST]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateArg {
    /// The pacing rate.
    pub rate: Bitrate,
    /// iperf3's burst: blocks sent back to back per pacing slot.
    pub burst: Option<std::num::NonZeroU16>,
}

impl RateArg {
    /// The rate in bit/s.
    pub fn bits_per_second(self) -> u64 {
        self.rate.bits_per_second()
    }
}

/// `-b`: a rate, or iperf3's `RATE/BURST`.
pub(super) fn bitrate(s: &str) -> Result<RateArg, String> {
    // "200Mbit/s" is a rate; "200M/16" is iperf3's burst of 16 blocks.
    let digits = |n: &&str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    let Some((r, n)) = s.rsplit_once('/').filter(|(_, n)| digits(n)) else {
        return rate(s).map(|rate| RateArg { rate, burst: None });
    };
    let max = linerate_proto::spec::MAX_BURST;
    let burst = n.parse::<u16>().ok().filter(|b| (1..=max).contains(b)).ok_or_else(|| {
        format!("{s:?}: the burst after the slash is 1..{max} blocks (iperf3's limit), e.g. {r}/10")
    })?;
    Ok(RateArg { rate: rate(r)?, burst: std::num::NonZeroU16::new(burst) })
}

pub(super) fn rate(s: &str) -> Result<Bitrate, String> {
    units::parse_rate(s).map_err(|e| e.to_string())
}

/// `12` is a run, `m3` a matrix (or search) group, `c4` a campaign group, `last` the newest.
pub(super) fn history_ref(s: &str) -> Result<HistoryRef, String> {
    if s == "last" {
        return Ok(HistoryRef::Last);
    }
    let bad = || {
        format!(
            "{s:?} is neither a run id (e.g. 12), a matrix, campaign, fleet or mesh id (e.g. m3, \
             c4, f5, n6) nor `last`"
        )
    };
    match crate::store::GroupRef::parse(s) {
        Some(g) if g.letter.is_some() => Ok(HistoryRef::Group(g.id)),
        _ => s.parse().map(HistoryRef::Run).map_err(|_| bad()),
    }
}
