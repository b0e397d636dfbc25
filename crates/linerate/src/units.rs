//! Units of the command line and of the reports: byte counts, bit rates and
//! durations — parsing user input and formatting figures for humans.
//!
//! # What this module does
//!
//! * [`parse_size`], [`parse_rate`] and [`parse_seconds`] turn the text of a
//!   command-line value into a [`ByteCount`], a [`Bitrate`] or a
//!   [`Duration`], or into a [`UnitError`] whose message names the input, the
//!   problem and the fix.
//! * [`ByteCount::iec`], [`Bitrate::si`] and [`format_bits_per_second`] turn
//!   figures into short human-readable text with three significant digits.
//!
//! # What this module must not do
//!
//! It is pure: no I/O, no printing, no logging, no clock, no global state, and
//! no knowledge of the command-line parser (no clap). Callers decide what a
//! value means (for example whether a rate of 0 means "unlimited" or whether a
//! zero duration is allowed) and how an error reaches the user.
//!
//! # Documented decisions
//!
//! **Sizes** (`-l` block size, `-w` window, `-n` bytes), parsed by
//! [`parse_size`]. As in iperf2, the case of a single-letter suffix chooses the
//! base: upper case is binary, lower case is decimal.
//!
//! | suffix                | factor        | suffix | factor |
//! |-----------------------|---------------|--------|--------|
//! | none or `B`           | 1             |        |        |
//! | `K` or `KiB`          | 1024          | `k` or `kB` | 10³  |
//! | `M` or `MiB`          | 1024²         | `m` or `MB` | 10⁶  |
//! | `G` or `GiB`          | 1024³         | `g` or `GB` | 10⁹  |
//! | `T` or `TiB`          | 1024⁴         | `t` or `TB` | 10¹² |
//!
//! Nothing else is accepted (not `KB`, `kb`, `Mi`, …). Note that `M` is 1024²
//! but `MB` is 10⁶, following the IEC/SI spellings.
//!
//! **Rates** (`-b`), parsed by [`parse_rate`], are bits per second and always
//! SI whatever the case: `k`/`K` = 10³, `m`/`M` = 10⁶, `g`/`G` = 10⁹,
//! `t`/`T` = 10¹². The multiplier (or the plain number) may be followed by
//! `bit/s`, `bps` or `b/s` ("10Gbit/s", "200Mbps", "1500"). A byte unit such
//! as `MB/s` is rejected with a message that says rates are in bits. "0" is
//! accepted; its meaning is the caller's business.
//!
//! **Durations** (`-t`, `-i`, `-O`, `--connect-timeout`), parsed by
//! [`parse_seconds`]: a plain number is seconds; the suffixes `ms`, `s`, `m`
//! (minutes — unlike sizes, where `m` is 10⁶), `h`, `d` (days) and `w` (weeks; for
//! `--since`, `--every` and `--for`) are accepted. The
//! maximum is 366 days (inclusive). Zero is accepted.
//!
//! **Numbers** in all three: decimal digits with an optional fractional part
//! (`1.5`, `.5`, `5.`), at most 24 significant digits after the point. The
//! arithmetic is exact (integers, no floating point): the value times its
//! factor is rounded to the nearest whole byte, bit/s or nanosecond, ties
//! upwards, so "0.1" seconds is exactly 100 ms and "1.5M" is 1572864 bytes.
//! Leading and trailing whitespace is ignored, and whitespace between the
//! number and its unit is allowed ("10 Gbit/s"). Rejected, each with its own
//! message: empty input, signs (`-5`, `+5`), NaN and infinities, exponent
//! notation (`1e9`), malformed numbers, unknown suffixes, and values beyond the
//! range (`u64` bytes or bit/s, 366 days).
//!
//! **Formatting**: [`ByteCount::iec`] uses IEC binary units (`KiB` … `EiB`),
//! [`Bitrate::si`] and [`format_bits_per_second`] use SI units (`kbit/s` …).
//! Values below one unit print as whole numbers ("512 B", "950 bit/s"); larger
//! values print with three significant digits ("1.00 KiB", "12.5 MiB",
//! "200 Mbit/s"), rounded to nearest (ties upwards for integers). A value that
//! would round up to the next unit is shown in that unit (999 999 bit/s is
//! "1.00 Mbit/s"). With binary units, values from 1000 to 1023.49 of a unit
//! print as four-digit integers ("1000 KiB", "1023 KiB").

use std::fmt;
use std::time::Duration;

pub mod peer_text;
pub mod scale;

/// A count of bytes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct ByteCount(pub u64);

/// A bit rate in bits per second (SI: 1 Gbit/s = 10^9 bit/s).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Bitrate(pub u64);

/// Which kind of value was being parsed; used in [`UnitError`] messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quantity {
    /// A byte count ([`parse_size`]).
    Size,
    /// A bit rate ([`parse_rate`]).
    Rate,
    /// A duration ([`parse_seconds`]).
    Duration,
}

impl Quantity {
    /// The generic advice telling the user what a valid value looks like.
    const fn hint(self) -> &'static str {
        match self {
            Self::Size => {
                "use a number with an optional suffix k, K, m, M, g, G, t, T \
                 (lower case = powers of 1000, upper case = powers of 1024), \
                 kB, MB, GB, TB, KiB, MiB, GiB, TiB or B \
                 (e.g. 128K = 131072 bytes, 128k = 128000 bytes)"
            }
            Self::Rate => {
                "use a number of bits per second with an optional suffix \
                 k, m, g or t (either case, always powers of 1000), optionally \
                 followed by bit/s, bps or b/s (e.g. 10G, 2.5g, 200Mbit/s)"
            }
            Self::Duration => {
                "use a number of seconds, optionally followed by ms, s, \
                 m (minutes), h, d (days) or w (weeks) (e.g. 10, 0.5, 250ms, 2m, 30d)"
            }
        }
    }

    /// Describes the largest accepted value, for [`UnitError::TooLarge`].
    fn maximum(self) -> String {
        match self {
            Self::Size => {
                format!("the maximum is {} bytes (about {})", u64::MAX, ByteCount(u64::MAX).iec())
            }
            Self::Rate => {
                format!("the maximum is {} bit/s (about {})", u64::MAX, Bitrate(u64::MAX).si())
            }
            Self::Duration => "the maximum is 366 days (8784h)".to_owned(),
        }
    }
}

impl fmt::Display for Quantity {
    /// Writes "size", "rate" or "duration".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Size => "size",
            Self::Rate => "rate",
            Self::Duration => "duration",
        })
    }
}

/// Why a size, rate or duration could not be parsed.
///
/// Every variant keeps the input exactly as given; the `Display` message has
/// the form `invalid <quantity> "<input>": <problem>; <fix>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitError {
    /// The input was empty or only whitespace.
    Empty {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
    },
    /// The input started with a sign (`-5`, `+5`).
    Signed {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
    },
    /// The input was NaN or an infinity.
    NotFinite {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
    },
    /// The number used exponent notation such as `1e9`.
    Exponent {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
    },
    /// The input did not start with a well-formed decimal number.
    Malformed {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
    },
    /// The number had more than 24 significant digits after the point.
    TooManyDecimals {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
    },
    /// The text after the number is not an accepted unit or suffix.
    UnknownSuffix {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
        /// The offending suffix.
        suffix: String,
    },
    /// A rate was given in bytes per second (`MB/s`, `Bps`, …).
    BytesNotBits {
        /// The input as given.
        input: String,
        /// The offending suffix.
        suffix: String,
    },
    /// The value is beyond the representable or allowed range.
    TooLarge {
        /// What was being parsed.
        what: Quantity,
        /// The input as given.
        input: String,
    },
}

impl fmt::Display for UnitError {
    /// Writes `invalid <quantity> "<input>": <problem>; <fix>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty { what, input } => {
                write!(f, "invalid {what} {input:?}: the value is empty; {}", what.hint())
            }
            // `-t -1` reads "a duration cannot be negative", `+5` that no sign is written.
            Self::Signed { what, input } if input.trim_start().starts_with('-') => write!(
                f,
                "invalid {what} {input:?}: a {what} cannot be negative; remove the sign and {}",
                what.hint()
            ),
            Self::Signed { what, input } => write!(
                f,
                "invalid {what} {input:?}: a sign is not allowed (a {what} is never negative); \
                 remove the sign and {}",
                what.hint()
            ),
            Self::NotFinite { what, input } => {
                write!(f, "invalid {what} {input:?}: not a finite number; {}", what.hint())
            }
            Self::Exponent { what, input } => write!(
                f,
                "invalid {what} {input:?}: exponent notation (like 1e9) is not supported; \
                 write the digits out or {}",
                what.hint()
            ),
            Self::Malformed { what, input } => write!(
                f,
                "invalid {what} {input:?}: expected a decimal number such as 128 or 1.5; {}",
                what.hint()
            ),
            Self::TooManyDecimals { what, input } => write!(
                f,
                "invalid {what} {input:?}: more than 24 digits after the decimal point; \
                 round the number to at most 24 decimal places"
            ),
            Self::UnknownSuffix { what, input, suffix } => {
                write!(f, "invalid {what} {input:?}: unknown suffix {suffix:?}; {}", what.hint())
            }
            Self::BytesNotBits { input, suffix } => write!(
                f,
                "invalid rate {input:?}: {suffix:?} is a byte unit but rates are in bits \
                 per second; multiply by 8 and use bit/s (e.g. 12.5MB/s = 100M = 100Mbit/s)"
            ),
            Self::TooLarge { what, input } => write!(
                f,
                "invalid {what} {input:?}: too large, {}; use a smaller value",
                what.maximum()
            ),
        }
    }
}

impl std::error::Error for UnitError {}

/// Most significant digits accepted after the decimal point. Keeps the exact
/// arithmetic within `u128` (10^24 × 3.6·10^12 < 2^128).
const MAX_DECIMALS: usize = 24;

/// The longest accepted duration, in nanoseconds: 366 days.
const MAX_DURATION_NANOS: u128 = 366 * 86_400 * 1_000_000_000;

/// A non-negative decimal number held exactly: `int + frac / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    /// The integer part.
    int: u128,
    /// The digits after the point, as an integer.
    frac: u128,
    /// How many digits `frac` stands for (at most [`MAX_DECIMALS`]).
    scale: u32,
}

impl Decimal {
    /// `self × factor` rounded to the nearest integer (ties upwards);
    /// `None` if it does not fit in a `u128`.
    fn times(self, factor: u128) -> Option<u128> {
        let denom = 10u128.pow(self.scale);
        let whole = self.int.checked_mul(factor)?;
        let part = self.frac.checked_mul(factor)?.checked_add(denom / 2)? / denom;
        whole.checked_add(part)
    }
}

/// The value of a string of ASCII digits; `None` on overflow. `""` is 0.
fn digits_value(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |acc, b| acc.checked_mul(10)?.checked_add(u128::from(b - b'0')))
}

/// How many leading bytes of `s` are ASCII digits.
fn leading_digits(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// A problem with the number at the start of an input, before it is tied to
/// the quantity and the input in a [`UnitError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumberProblem {
    /// See [`UnitError::Empty`].
    Empty,
    /// See [`UnitError::Signed`].
    Signed,
    /// See [`UnitError::NotFinite`].
    NotFinite,
    /// See [`UnitError::Exponent`].
    Exponent,
    /// See [`UnitError::Malformed`].
    Malformed,
    /// See [`UnitError::TooManyDecimals`].
    TooManyDecimals,
    /// See [`UnitError::TooLarge`].
    TooLarge,
}

impl NumberProblem {
    /// The [`UnitError`] for this problem with `input`, parsed as `what`.
    fn into_error(self, what: Quantity, input: &str) -> UnitError {
        let input = input.to_owned();
        match self {
            Self::Empty => UnitError::Empty { what, input },
            Self::Signed => UnitError::Signed { what, input },
            Self::NotFinite => UnitError::NotFinite { what, input },
            Self::Exponent => UnitError::Exponent { what, input },
            Self::Malformed => UnitError::Malformed { what, input },
            Self::TooManyDecimals => UnitError::TooManyDecimals { what, input },
            Self::TooLarge => UnitError::TooLarge { what, input },
        }
    }
}

/// Splits `input` (trimmed) into its number and the unit text after it
/// (with leading whitespace removed), rejecting everything that is not a
/// plain non-negative decimal number.
fn split_number(what: Quantity, input: &str) -> Result<(Decimal, &str), UnitError> {
    lex_number(input.trim()).map_err(|problem| problem.into_error(what, input))
}

/// [`split_number`] on trimmed text, without the error context.
fn lex_number(s: &str) -> Result<(Decimal, &str), NumberProblem> {
    if s.is_empty() {
        return Err(NumberProblem::Empty);
    }
    let unsigned = s.trim_start_matches(['+', '-']);
    if ["nan", "inf", "infinity"].iter().any(|w| unsigned.eq_ignore_ascii_case(w)) {
        return Err(NumberProblem::NotFinite);
    }
    if unsigned.len() != s.len() {
        return Err(NumberProblem::Signed);
    }
    let int_end = leading_digits(s);
    let (frac_digits, end) = match s[int_end..].strip_prefix('.') {
        Some(after_point) => {
            let n = leading_digits(after_point);
            (&after_point[..n], int_end + 1 + n)
        }
        None => ("", int_end),
    };
    let rest = &s[end..];
    if (int_end == 0 && frac_digits.is_empty()) || rest.starts_with('.') {
        return Err(NumberProblem::Malformed);
    }
    if is_exponent(rest) {
        return Err(NumberProblem::Exponent);
    }
    let frac_digits = frac_digits.trim_end_matches('0');
    if frac_digits.len() > MAX_DECIMALS {
        return Err(NumberProblem::TooManyDecimals);
    }
    let number = Decimal {
        int: digits_value(&s[..int_end]).ok_or(NumberProblem::TooLarge)?,
        frac: digits_value(frac_digits).ok_or(NumberProblem::TooLarge)?,
        scale: u32::try_from(frac_digits.len()).map_err(|_| NumberProblem::TooLarge)?,
    };
    Ok((number, rest.trim_start()))
}

/// Whether the text after a number starts an exponent (`e9`, `E+3`, `e-2`).
fn is_exponent(rest: &str) -> bool {
    let mut chars = rest.chars();
    matches!(chars.next(), Some('e' | 'E')) && matches!(chars.next(), Some('0'..='9' | '+' | '-'))
}

/// The error for an unknown `suffix` of `input`.
fn unknown_suffix(what: Quantity, input: &str, suffix: &str) -> UnitError {
    UnitError::UnknownSuffix { what, input: input.to_owned(), suffix: suffix.to_owned() }
}

/// `number × factor`, rounded, as a `u64` no larger than `max`.
fn scale_to(
    what: Quantity,
    input: &str,
    number: Decimal,
    factor: u128,
    max: u128,
) -> Result<u64, UnitError> {
    number
        .times(factor)
        .filter(|&v| v <= max)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| NumberProblem::TooLarge.into_error(what, input))
}

/// The factor of a size suffix, or `None` if the suffix is not accepted.
fn size_factor(suffix: &str) -> Option<u128> {
    const KI: u128 = 1 << 10;
    Some(match suffix {
        "" | "B" => 1,
        "k" | "kB" => 1_000,
        "K" | "KiB" => KI,
        "m" | "MB" => 1_000_000,
        "M" | "MiB" => KI * KI,
        "g" | "GB" => 1_000_000_000,
        "G" | "GiB" => KI * KI * KI,
        "t" | "TB" => 1_000_000_000_000,
        "T" | "TiB" => KI * KI * KI * KI,
        _ => return None,
    })
}

/// Parses a byte count such as `128K` (131072), `128k` (128000), `1.5M`,
/// `64KiB`, `10MB` or `4096`. See the module documentation for the rules.
///
/// # Errors
///
/// A [`UnitError`] naming the input, the problem and the fix, for empty,
/// signed, non-finite, exponent, malformed, unknown-suffix or too-large input.
pub fn parse_size(s: &str) -> Result<ByteCount, UnitError> {
    let what = Quantity::Size;
    let (number, suffix) = split_number(what, s)?;
    let factor = size_factor(suffix).ok_or_else(|| unknown_suffix(what, s, suffix))?;
    scale_to(what, s, number, factor, u128::from(u64::MAX)).map(ByteCount)
}

/// Parses a bit rate such as `10G`, `2.5g`, `200Mbit/s`, `100mbps`, `1500`
/// or `0`; multipliers are always powers of 1000.
///
/// # Errors
///
/// A [`UnitError`] naming the input, the problem and the fix, for empty,
/// signed, non-finite, exponent, malformed, unknown-suffix, byte-unit or
/// too-large input.
pub fn parse_rate(s: &str) -> Result<Bitrate, UnitError> {
    let what = Quantity::Rate;
    let (number, suffix) = split_number(what, s)?;
    let (factor, unit) = match suffix.chars().next() {
        Some('k' | 'K') => (1_000, &suffix[1..]),
        Some('m' | 'M') => (1_000_000, &suffix[1..]),
        Some('g' | 'G') => (1_000_000_000, &suffix[1..]),
        Some('t' | 'T') => (1_000_000_000_000, &suffix[1..]),
        _ => (1, suffix),
    };
    match unit {
        "" | "bit/s" | "bps" | "b/s" => {}
        _ if unit.starts_with('B') || unit.to_ascii_lowercase().starts_with("byte") => {
            return Err(UnitError::BytesNotBits { input: s.to_owned(), suffix: suffix.to_owned() });
        }
        _ => return Err(unknown_suffix(what, s, suffix)),
    }
    scale_to(what, s, number, factor, u128::from(u64::MAX)).map(Bitrate)
}

/// Parses a duration: a number of seconds (`10`, `0.5`) or a number with a
/// suffix `ms`, `s`, `m` (minutes) or `h`. Exact to the nanosecond; at most
/// 366 days; zero is accepted.
///
/// # Errors
///
/// A [`UnitError`] naming the input, the problem and the fix, for empty,
/// signed, non-finite, exponent, malformed, unknown-suffix or too-long input.
pub fn parse_seconds(s: &str) -> Result<Duration, UnitError> {
    let what = Quantity::Duration;
    let (number, suffix) = split_number(what, s)?;
    let factor: u128 = match suffix {
        "ms" => 1_000_000,
        "" | "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        "d" => 86_400 * 1_000_000_000,
        "w" => 7 * 86_400 * 1_000_000_000,
        _ => return Err(unknown_suffix(what, s, suffix)),
    };
    scale_to(what, s, number, factor, MAX_DURATION_NANOS).map(Duration::from_nanos)
}

/// IEC binary units for byte counts, from bytes up to exbibytes.
const IEC_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// SI units for bit rates, from bit/s up to yottabit/s.
const SI_RATE_UNITS: [&str; 9] =
    ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s", "Pbit/s", "Ebit/s", "Zbit/s", "Ybit/s"];

/// Writes `digits / 10^decimals` with exactly `decimals` decimals, then `unit`.
fn render(digits: u128, decimals: u32, unit: &str) -> String {
    match decimals {
        0 => format!("{digits} {unit}"),
        1 => format!("{}.{} {unit}", digits / 10, digits % 10),
        _ => format!("{}.{:02} {unit}", digits / 100, digits % 100),
    }
}

/// Formats `n` with three significant digits in `units`, each `base` times
/// the previous one; exact integer arithmetic, ties rounded upwards.
fn format_u64(n: u64, base: u64, units: &[&str]) -> String {
    let (n, base) = (u128::from(n), u128::from(base));
    if n < base || units.len() < 2 {
        return format!("{n} {}", units.first().copied().unwrap_or(""));
    }
    let mut k = 1;
    let mut div = base;
    while k + 1 < units.len() && n >= div * base {
        div *= base;
        k += 1;
    }
    loop {
        for decimals in [2, 1] {
            let digits = (n * 10u128.pow(decimals) + div / 2) / div;
            if digits < 1000 {
                return render(digits, decimals, units[k]);
            }
        }
        let whole = (n + div / 2) / div;
        if whole < base || k + 1 == units.len() {
            return render(whole, 0, units[k]);
        }
        div *= base;
        k += 1;
    }
}

/// Formats a finite, non-negative `v` with three significant digits in
/// `units`, each 1000 times the previous one.
fn format_f64(v: f64, units: &[&str]) -> String {
    let mut k = 0;
    let mut div = 1.0_f64;
    while k + 1 < units.len() && v >= div * 1000.0 {
        div *= 1000.0;
        k += 1;
    }
    loop {
        let x = v / div;
        if k == 0 {
            let whole = x.round();
            if whole < 1000.0 || units.len() < 2 {
                return format!("{whole} {}", units.first().copied().unwrap_or(""));
            }
        } else {
            for decimals in [2, 1, 0] {
                let digits = (x * 10f64.powi(decimals)).round();
                if digits < 1000.0 {
                    // In 0..1000 and integral, so the conversion is exact.
                    return render(digits as u128, decimals.unsigned_abs(), units[k]);
                }
            }
            if k + 1 == units.len() {
                return format!("{x:.0} {}", units[k]);
            }
        }
        div *= 1000.0;
        k += 1;
    }
}

impl ByteCount {
    /// The number of bytes.
    #[must_use]
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// IEC binary formatting with three significant digits: "0 B", "512 B",
    /// "1.00 KiB", "12.5 MiB", "4.20 GiB", "1.02 TiB".
    #[must_use]
    pub fn iec(self) -> String {
        format_u64(self.0, 1024, &IEC_UNITS)
    }
}

impl fmt::Display for ByteCount {
    /// Writes [`ByteCount::iec`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.iec())
    }
}

impl Bitrate {
    /// The number of bits per second.
    #[must_use]
    pub const fn bits_per_second(self) -> u64 {
        self.0
    }

    /// SI formatting with three significant digits: "0 bit/s", "950 bit/s",
    /// "1.50 kbit/s", "200 Mbit/s", "36.1 Gbit/s", "1.20 Tbit/s".
    #[must_use]
    pub fn si(self) -> String {
        format_u64(self.0, 1000, &SI_RATE_UNITS)
    }
}

impl fmt::Display for Bitrate {
    /// Writes [`Bitrate::si`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.si())
    }
}

/// Formats a bits-per-second figure held as `f64` (for averages) in the
/// style of [`Bitrate::si`].
///
/// Negative or non-finite values give "n/a". A whole number within `u64` formats exactly as the same [`Bitrate`].
#[must_use]
pub fn format_bits_per_second(bps: f64) -> String {
    /// 2^64, the first integer beyond `u64::MAX`.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    if !bps.is_finite() || bps < 0.0 {
        return "n/a".to_owned();
    }
    if bps.fract() == 0.0 && bps < TWO_POW_64 {
        // Integral and in range, so the conversion is exact.
        return Bitrate(bps as u64).si();
    }
    format_f64(bps, &SI_RATE_UNITS)
}

/// The SI unit [`format_bits_per_second`] writes `bps` in, and its size in bit/s
/// (`("Gbit/s", 1e9)`); bit/s for values it writes as "n/a".
pub fn rate_unit(bps: f64) -> (&'static str, f64) {
    let text = format_bits_per_second(bps);
    let unit = text.rsplit(' ').next().unwrap_or("");
    let i = SI_RATE_UNITS.iter().position(|u| *u == unit).unwrap_or(0);
    (SI_RATE_UNITS[i], 1000f64.powi(i as i32))
}

/// A figure already divided by its unit, with at least three significant figures: two
/// decimals from 1 up ("21.31", "984.00"), as many as three figures need below 1 ("0.500",
/// "0.00412"); exactly 0 is "0", and a value that is not a finite number is "n/a".
pub fn three_figures(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_owned();
    }
    if v == 0.0 {
        return "0".to_owned();
    }
    let decimals = if v.abs() >= 1.0 { 2 } else { (2 - v.abs().log10().floor() as i32) as usize };
    format!("{v:.decimals$}")
}

/// A latency in nanoseconds in the unit that suits it, with [`three_figures`]: "850 ns",
/// "52.14 us", "1.20 ms", "2.00 s".
pub fn format_latency_ns(ns: u64) -> String {
    let v = ns as f64;
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{} us", three_figures(v / 1e3)),
        1_000_000..1_000_000_000 => format!("{} ms", three_figures(v / 1e6)),
        _ => format!("{} s", three_figures(v / 1e9)),
    }
}

/// `n` and the noun, plural unless `n` is 1: "1 retransmit", "16 retransmits".
pub fn count_of(n: u64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// UTC date and time of a Unix timestamp in ms, e.g. `2026-11-22 07:30:12`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let rem = secs % 86_400;
    let (y, m, d) = civil_date(secs / 86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// (year, month 1–12, day 1–31) of the day `days` after 1970-01-01 (Howard Hinnant's
/// civil-from-days).
pub fn civil_date(days: u64) -> (i64, i64, i64) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests may panic on unexpected results.
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_795_328_386_000), "2026-11-22 06:19:46");
        assert_eq!(civil_date(0), (1970, 1, 1));
    }

    #[test]
    fn latencies_take_the_unit_that_suits_them() {
        assert_eq!(format_latency_ns(850), "850 ns");
        assert_eq!(format_latency_ns(52_140), "52.14 us");
        assert_eq!(format_latency_ns(1_200_000), "1.20 ms");
        assert_eq!(format_latency_ns(2_000_000_000), "2.00 s");
    }

    /// Parses a size that must be valid.
    fn size(s: &str) -> u64 {
        parse_size(s).unwrap().bytes()
    }

    /// Parses a rate that must be valid.
    fn rate(s: &str) -> u64 {
        parse_rate(s).unwrap().bits_per_second()
    }

    /// Parses a duration that must be valid.
    fn secs(s: &str) -> Duration {
        parse_seconds(s).unwrap()
    }

    /// The message of an error that must occur; checks it quotes the input.
    fn message(result: Result<impl fmt::Debug, UnitError>, input: &str) -> String {
        let msg = result.unwrap_err().to_string();
        assert!(msg.contains(&format!("{input:?}")), "{msg:?} should quote {input:?}");
        msg
    }

    /// Plain numbers and the `B` unit, up to `u64::MAX`.
    #[test]
    fn size_plain_and_b() {
        assert_eq!(size("0"), 0);
        assert_eq!(size("4096"), 4096);
        assert_eq!(size("4096B"), 4096);
        assert_eq!(size("007"), 7);
        assert_eq!(size("18446744073709551615"), u64::MAX);
    }

    /// Upper-case suffixes are binary, lower-case ones decimal.
    #[test]
    fn size_single_letter_suffixes_both_cases() {
        assert_eq!(size("128K"), 131_072);
        assert_eq!(size("128k"), 128_000);
        assert_eq!(size("3M"), 3 << 20);
        assert_eq!(size("3m"), 3_000_000);
        assert_eq!(size("2G"), 2 << 30);
        assert_eq!(size("2g"), 2_000_000_000);
        assert_eq!(size("5T"), 5 << 40);
        assert_eq!(size("5t"), 5_000_000_000_000);
    }

    /// The explicit IEC and SI unit spellings.
    #[test]
    fn size_unit_spellings() {
        assert_eq!(size("1KiB"), 1024);
        assert_eq!(size("1MiB"), 1 << 20);
        assert_eq!(size("1GiB"), 1 << 30);
        assert_eq!(size("1TiB"), 1 << 40);
        assert_eq!(size("1kB"), 1_000);
        assert_eq!(size("1MB"), 1_000_000);
        assert_eq!(size("1GB"), 1_000_000_000);
        assert_eq!(size("1TB"), 1_000_000_000_000);
    }

    /// Fractions are exact and round to the nearest byte, ties upwards.
    #[test]
    fn size_fractions_round_to_nearest() {
        assert_eq!(size("1.5M"), 1_572_864);
        assert_eq!(size("0.5K"), 512);
        assert_eq!(size(".5k"), 500);
        assert_eq!(size("2."), 2);
        assert_eq!(size("1.4"), 1);
        assert_eq!(size("1.5"), 2);
        assert_eq!(size("0.0001K"), 0);
        assert_eq!(size("0.001K"), 1);
        assert_eq!(size("1.000000000000000000000000000000"), 1);
    }

    /// Surrounding whitespace and a space before the unit are accepted.
    #[test]
    fn size_whitespace() {
        assert_eq!(size("  128K\t"), 131_072);
        assert_eq!(size("\n64 KiB "), 65_536);
    }

    /// Unknown suffixes are named in the error, with the accepted ones.
    #[test]
    fn size_unknown_suffixes() {
        let msg = message(parse_size("12Q"), "12Q");
        assert!(msg.contains("unknown suffix \"Q\""), "{msg}");
        assert!(msg.contains("128K = 131072 bytes"), "{msg}");
        for bad in ["1KB", "1kb", "1kiB", "1Ki", "1 K B", "1b", "1Kbit/s", "12_000", "1,5"] {
            let msg = message(parse_size(bad), bad);
            assert!(msg.contains("unknown suffix"), "{msg}");
        }
    }

    /// Each rejection path has its own message naming the input.
    #[test]
    fn size_rejections() {
        assert!(message(parse_size(""), "").contains("empty"));
        assert!(message(parse_size("   "), "   ").contains("empty"));
        assert!(message(parse_size("-5"), "-5").contains("sign"));
        assert!(message(parse_size("-5K"), "-5K").contains("sign"));
        assert!(message(parse_size("+5"), "+5").contains("sign"));
        assert!(message(parse_size("NaN"), "NaN").contains("finite"));
        assert!(message(parse_size("inf"), "inf").contains("finite"));
        assert!(message(parse_size("-Infinity"), "-Infinity").contains("finite"));
        assert!(message(parse_size("1e9"), "1e9").contains("exponent"));
        assert!(message(parse_size("1.5E+3"), "1.5E+3").contains("exponent"));
        assert!(message(parse_size("K"), "K").contains("decimal number"));
        assert!(message(parse_size("abc"), "abc").contains("decimal number"));
        assert!(message(parse_size("."), ".").contains("decimal number"));
        assert!(message(parse_size("1.2.3"), "1.2.3").contains("decimal number"));
        let long = format!("0.{}1", "0".repeat(24));
        assert!(message(parse_size(&long), &long).contains("decimal places"));
    }

    /// Values beyond `u64::MAX` bytes are rejected; values just below are not.
    #[test]
    fn size_overflow() {
        for bad in [
            "20000000T",
            "18446744073709551616",
            "16777216T",
            "99999999999999999999999999999999999999999",
        ] {
            let msg = message(parse_size(bad), bad);
            assert!(msg.contains("too large"), "{msg}");
            assert!(msg.contains("18446744073709551615"), "{msg}");
        }
        assert_eq!(size("16777215.999999T"), 18_446_744_073_708_452_104);
    }

    /// Rate multipliers are powers of 1000 in either case.
    #[test]
    fn rate_suffixes_both_cases() {
        assert_eq!(rate("10G"), 10_000_000_000);
        assert_eq!(rate("10g"), 10_000_000_000);
        assert_eq!(rate("3k"), 3_000);
        assert_eq!(rate("3K"), 3_000);
        assert_eq!(rate("7m"), 7_000_000);
        assert_eq!(rate("7M"), 7_000_000);
        assert_eq!(rate("2t"), 2_000_000_000_000);
        assert_eq!(rate("2T"), 2_000_000_000_000);
        assert_eq!(rate("1500"), 1_500);
        assert_eq!(rate("0"), 0);
    }

    /// The optional `bit/s`, `bps` and `b/s` units.
    #[test]
    fn rate_unit_spellings() {
        assert_eq!(rate("10Gbit/s"), 10_000_000_000);
        assert_eq!(rate("200Mbps"), 200_000_000);
        assert_eq!(rate("200mb/s"), 200_000_000);
        assert_eq!(rate("1500bit/s"), 1_500);
        assert_eq!(rate("1500bps"), 1_500);
        assert_eq!(rate("1500b/s"), 1_500);
        assert_eq!(rate(" 10 Gbit/s "), 10_000_000_000);
    }

    /// Fractional rates round to the nearest bit/s.
    #[test]
    fn rate_fractions() {
        assert_eq!(rate("2.5G"), 2_500_000_000);
        assert_eq!(rate("0.001k"), 1);
        assert_eq!(rate("1.5"), 2);
        assert_eq!(rate("0.0001"), 0);
    }

    /// Each rate rejection path, including byte units and overflow.
    #[test]
    fn rate_rejections() {
        assert!(message(parse_rate(""), "").contains("empty"));
        assert!(message(parse_rate("-1M"), "-1M").contains("sign"));
        assert!(message(parse_rate("nan"), "nan").contains("finite"));
        assert!(message(parse_rate("1e9"), "1e9").contains("exponent"));
        assert!(message(parse_rate("fast"), "fast").contains("decimal number"));
        for bad in ["10Q", "10Gb", "10Gbit", "10Gi", "10 G bit/s", "1kk"] {
            let msg = message(parse_rate(bad), bad);
            assert!(msg.contains("unknown suffix"), "{msg}");
            assert!(msg.contains("bits per second"), "{msg}");
        }
        for bad in ["100MB/s", "100MBps", "100B/s", "5 Gbyte/s"] {
            let msg = message(parse_rate(bad), bad);
            assert!(msg.contains("multiply by 8"), "{msg}");
        }
        let msg = message(parse_rate("18446744073709551616"), "18446744073709551616");
        assert!(msg.contains("too large"), "{msg}");
        assert!(message(parse_rate("20000000T"), "20000000T").contains("too large"));
        assert_eq!(rate("18446744073709551615"), u64::MAX);
    }

    /// Plain seconds are exact to the nanosecond ("0.1" is 100 ms).
    #[test]
    fn seconds_plain_and_fractional() {
        assert_eq!(secs("10"), Duration::from_secs(10));
        assert_eq!(secs("0"), Duration::ZERO);
        assert_eq!(secs("0.1"), Duration::from_millis(100));
        assert_eq!(secs("0.5"), Duration::from_millis(500));
        assert_eq!(secs("2.25"), Duration::from_millis(2_250));
        assert_eq!(secs("0.000000001"), Duration::from_nanos(1));
        assert_eq!(secs("0.0000000015"), Duration::from_nanos(2));
        assert_eq!(secs("0.0000000004"), Duration::ZERO);
        assert_eq!(secs(" 3 "), Duration::from_secs(3));
    }

    /// The `ms`, `s`, `m` and `h` suffixes.
    #[test]
    fn seconds_suffixes() {
        assert_eq!(secs("250ms"), Duration::from_millis(250));
        assert_eq!(secs("0.5ms"), Duration::from_micros(500));
        assert_eq!(secs("3s"), Duration::from_secs(3));
        assert_eq!(secs("2m"), Duration::from_secs(120));
        assert_eq!(secs("1.5m"), Duration::from_secs(90));
        assert_eq!(secs("1h"), Duration::from_secs(3_600));
        assert_eq!(secs("0.1h"), Duration::from_secs(360));
        assert_eq!(secs("2 s"), Duration::from_secs(2));
        assert_eq!(secs("30d"), Duration::from_secs(30 * 86_400));
        assert_eq!(secs("2w"), Duration::from_secs(14 * 86_400));
    }

    /// 366 days is accepted, a nanosecond more is not.
    #[test]
    fn seconds_limits() {
        assert_eq!(secs("8784h"), Duration::from_secs(366 * 86_400));
        assert_eq!(secs("31622400"), Duration::from_secs(366 * 86_400));
        for bad in ["31622400.000000001", "8785h", "99999999999999999999999999999999999999999"] {
            let msg = message(parse_seconds(bad), bad);
            assert!(msg.contains("366 days"), "{msg}");
        }
    }

    /// Each duration rejection path, including unknown suffixes.
    #[test]
    fn seconds_rejections() {
        assert!(message(parse_seconds(""), "").contains("empty"));
        assert!(message(parse_seconds("-1"), "-1").contains("sign"));
        assert!(message(parse_seconds("NAN"), "NAN").contains("finite"));
        assert!(message(parse_seconds("inf"), "inf").contains("finite"));
        assert!(message(parse_seconds("1e3"), "1e3").contains("exponent"));
        assert!(message(parse_seconds("soon"), "soon").contains("decimal number"));
        for bad in ["10y", "10D", "10sec", "10min", "1us", "10S", "5M", "1h30m"] {
            let msg = message(parse_seconds(bad), bad);
            assert!(msg.contains("unknown suffix"), "{msg}");
            assert!(msg.contains("250ms"), "{msg}");
        }
    }

    /// IEC formatting at its boundaries.
    #[test]
    fn iec_formatting() {
        let cases: [(u64, &str); 16] = [
            (0, "0 B"),
            (512, "512 B"),
            (1023, "1023 B"),
            (1024, "1.00 KiB"),
            (1536, "1.50 KiB"),
            (10_234, "9.99 KiB"),
            (10_235, "10.0 KiB"),
            (102_348, "99.9 KiB"),
            (102_349, "100 KiB"),
            (1_023_999, "1000 KiB"),
            (1_048_063, "1023 KiB"),
            (1_048_064, "1.00 MiB"),
            (13_107_200, "12.5 MiB"),
            (4_509_715_661, "4.20 GiB"),
            (1_121_501_860_331, "1.02 TiB"),
            (u64::MAX, "16.0 EiB"),
        ];
        for (n, want) in cases {
            assert_eq!(ByteCount(n).iec(), want, "{n}");
            assert_eq!(ByteCount(n).to_string(), want, "{n}");
        }
    }

    /// SI formatting at its boundaries.
    #[test]
    fn si_formatting() {
        let cases: [(u64, &str); 14] = [
            (0, "0 bit/s"),
            (950, "950 bit/s"),
            (999, "999 bit/s"),
            (1_000, "1.00 kbit/s"),
            (1_500, "1.50 kbit/s"),
            (12_500, "12.5 kbit/s"),
            (999_499, "999 kbit/s"),
            (999_999, "1.00 Mbit/s"),
            (1_000_000, "1.00 Mbit/s"),
            (200_000_000, "200 Mbit/s"),
            (36_123_000_000, "36.1 Gbit/s"),
            (1_200_000_000_000, "1.20 Tbit/s"),
            (1_005, "1.01 kbit/s"),
            (u64::MAX, "18.4 Ebit/s"),
        ];
        for (n, want) in cases {
            assert_eq!(Bitrate(n).si(), want, "{n}");
            assert_eq!(Bitrate(n).to_string(), want, "{n}");
        }
    }

    /// Formatting of `f64` figures, including "n/a" cases and huge values.
    #[test]
    fn float_formatting() {
        assert_eq!(format_bits_per_second(0.0), "0 bit/s");
        assert_eq!(format_bits_per_second(-0.0), "0 bit/s");
        assert_eq!(format_bits_per_second(0.4), "0 bit/s");
        assert_eq!(format_bits_per_second(949.7), "950 bit/s");
        assert_eq!(format_bits_per_second(999.6), "1.00 kbit/s");
        assert_eq!(format_bits_per_second(1_500.2), "1.50 kbit/s");
        assert_eq!(format_bits_per_second(999_999.9), "1.00 Mbit/s");
        assert_eq!(format_bits_per_second(36.123e9), "36.1 Gbit/s");
        assert_eq!(format_bits_per_second(199_999_999.5), "200 Mbit/s");
        assert_eq!(format_bits_per_second(1.2e12), "1.20 Tbit/s");
        assert_eq!(format_bits_per_second(1e20), "100 Ebit/s");
        assert_eq!(format_bits_per_second(1.5e24), "1.50 Ybit/s");
        assert_eq!(format_bits_per_second(2.5e27), "2500 Ybit/s");
        for bad in [-1.0, -1e-300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(format_bits_per_second(bad), "n/a", "{bad}");
        }
        assert!(format_bits_per_second(f64::MAX).ends_with(" Ybit/s"));
        assert_eq!(format_bits_per_second(f64::MIN_POSITIVE), "0 bit/s");
    }

    /// A spread of `u64` values: powers of 2 and 10 and their neighbours,
    /// the formatting boundaries, and the extremes.
    fn spread() -> Vec<u64> {
        let mut values = vec![0, 1, u64::MAX, u64::MAX - 1, u64::MAX / 2];
        for shift in 0..64 {
            let p = 1u64 << shift;
            values.extend([p - 1, p, p + 1, p / 3 * 2, p + p / 2]);
        }
        let mut p10 = 1u64;
        while let Some(next) = p10.checked_mul(10) {
            for m in [1, 9, 99, 999, 9_995, 9_999, 99_949, 99_950, 999_499, 999_500] {
                values.extend([p10.saturating_mul(m), p10.saturating_mul(m).saturating_sub(1)]);
            }
            p10 = next;
        }
        values
    }

    /// Checks that `text` is "<number> <unit>" with at most four digits
    /// and three significant digits when it has a decimal point.
    fn check_shape(text: &str, units: &[&str]) {
        let (number, unit) = text.split_once(' ').unwrap();
        assert!(units.contains(&unit), "{text}");
        let digits = number.chars().filter(char::is_ascii_digit).count();
        assert!(number.chars().all(|c| c.is_ascii_digit() || c == '.'), "{text}");
        if number.contains('.') {
            assert_eq!(digits, 3, "{text}");
        } else {
            assert!(digits <= 4, "{text}");
        }
    }

    /// Formatting a spread of values never panics and keeps three significant digits.
    #[test]
    fn formatting_never_panics_and_keeps_shape() {
        for n in spread() {
            let iec = ByteCount(n).iec();
            check_shape(&iec, &IEC_UNITS);
            let si = Bitrate(n).si();
            check_shape(&si, &SI_RATE_UNITS);
            if n >= 1000 {
                assert!(!si.starts_with("1000 "), "{n} {si}");
            }
            #[allow(clippy::cast_precision_loss)]
            let f = n as f64;
            check_shape(&format_bits_per_second(f), &SI_RATE_UNITS);
            check_shape(&format_bits_per_second(f + 0.5), &SI_RATE_UNITS);
            check_shape(&format_bits_per_second(f * 0.999_9), &SI_RATE_UNITS);
        }
    }

    /// Three significant figures at least, whatever the magnitude.
    #[test]
    fn three_figures_never_hide_a_small_value() {
        let cases = [
            (21.314, "21.31"),
            (984.0, "984.00"),
            (1.0, "1.00"),
            (0.5, "0.500"),
            (0.000_984, "0.000984"),
            (0.004_123, "0.00412"),
            (0.0, "0"),
            (f64::NAN, "n/a"),
        ];
        for (v, want) in cases {
            assert_eq!(three_figures(v), want, "{v}");
        }
        assert_eq!(rate_unit(984_000.0), ("kbit/s", 1e3));
        assert_eq!(rate_unit(21.3e9), ("Gbit/s", 1e9));
        assert_eq!(rate_unit(999_999.9), ("Mbit/s", 1e6), "rounds up into the next unit");
        assert_eq!(rate_unit(12.0), ("bit/s", 1.0));
    }

    /// `format_bits_per_second` agrees with `Bitrate::si` on whole numbers.
    #[test]
    fn float_and_integer_formatting_agree_on_integers() {
        for n in spread() {
            #[allow(clippy::cast_precision_loss)]
            let f = n as f64;
            if f < 18_446_744_073_709_551_616.0 && f as u64 == n {
                assert_eq!(format_bits_per_second(f), Bitrate(n).si(), "{n}");
            }
        }
    }

    /// Parsed values format as expected.
    #[test]
    fn parse_then_format_round_trips() {
        assert_eq!(parse_size("1.5M").unwrap().iec(), "1.50 MiB");
        assert_eq!(parse_size("128K").unwrap().to_string(), "128 KiB");
        assert_eq!(parse_rate("10G").unwrap().to_string(), "10.0 Gbit/s");
        assert_eq!(parse_rate("36.1g").unwrap().si(), "36.1 Gbit/s");
    }

    /// The newtypes serialize as bare numbers.
    #[test]
    fn serde_is_transparent() {
        assert_eq!(serde_json::to_string(&ByteCount(42)).unwrap(), "42");
        assert_eq!(serde_json::to_string(&Bitrate(7)).unwrap(), "7");
        assert_eq!(serde_json::from_str::<ByteCount>("131072").unwrap(), ByteCount(131_072));
        assert_eq!(serde_json::from_str::<Bitrate>("10").unwrap(), Bitrate(10));
    }

    /// `UnitError` is a `std::error::Error` with the documented message shape.
    #[test]
    fn errors_are_std_errors_and_comparable() {
        let err: Box<dyn std::error::Error> = Box::new(parse_size("x").unwrap_err());
        assert!(err.to_string().starts_with("invalid size \"x\": "));
        assert_eq!(
            parse_size("12Q"),
            Err(UnitError::UnknownSuffix {
                what: Quantity::Size,
                input: "12Q".to_owned(),
                suffix: "Q".to_owned(),
            })
        );
        assert_eq!(
            parse_size("12Q").unwrap_err().to_string(),
            "invalid size \"12Q\": unknown suffix \"Q\"; use a number with an optional suffix \
             k, K, m, M, g, G, t, T (lower case = powers of 1000, upper case = powers of 1024), \
             kB, MB, GB, TB, KiB, MiB, GiB, TiB or B (e.g. 128K = 131072 bytes, 128k = 128000 bytes)"
        );
    }
}
