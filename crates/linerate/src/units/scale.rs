//! `-f k|m|g|t|K|M|G|T`: the one unit text figures are shown in, as iperf3's `--format`.
//!
//! iperf3 shows transfers in bytes of 1024ⁿ and rates in bits of 1000ⁿ for the lower-case
//! letters (`-f m`: MBytes and Mbits/sec), in bytes of 1024ⁿ per second for the upper-case
//! ones (`-f M`: MBytes/sec). linerate follows it, with its own unit names (MiB, Mbit/s,
//! MiB/s). Without `-f`, each figure gets the unit that suits it ([`Scale::Auto`]).

use super::{ByteCount, format_bits_per_second, three_figures};

/// The unit of text figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scale {
    /// Each figure in the unit that suits it.
    #[default]
    Auto,
    /// Rates in bits of 1000ⁿ per second, transfers in bytes of 1024ⁿ (`-f k|m|g|t`).
    Bits(u8),
    /// Rates and transfers in bytes of 1024ⁿ (`-f K|M|G|T`).
    Bytes(u8),
}

const RATE_BITS: [&str; 5] = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"];
const BYTES: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];

impl Scale {
    /// Reads iperf3's letter.
    pub fn parse(s: &str) -> Result<Self, String> {
        let power = |c: char| "kmgt".find(c.to_ascii_lowercase()).map(|i| i as u8 + 1);
        match (s.chars().next(), s.chars().count()) {
            (Some(c), 1) if power(c).is_some() => {
                let n = power(c).unwrap_or(1);
                Ok(if c.is_ascii_lowercase() { Self::Bits(n) } else { Self::Bytes(n) })
            }
            _ => Err(format!(
                "{s:?} is not a unit: give one letter, k m g t (rates in kbit/s .. Tbit/s) or \
                 K M G T (rates in KiB/s .. TiB/s), as iperf3's -f"
            )),
        }
    }

    /// A byte count in this unit.
    pub fn bytes(self, bytes: u64) -> String {
        match self {
            Self::Auto => ByteCount(bytes).iec(),
            Self::Bits(n) | Self::Bytes(n) => {
                let v = bytes as f64 / 1024f64.powi(i32::from(n));
                format!("{} {}", three_figures(v), BYTES[usize::from(n)])
            }
        }
    }

    /// A rate in bit/s in this unit.
    pub fn rate(self, bits_per_second: f64) -> String {
        if !bits_per_second.is_finite() || bits_per_second < 0.0 {
            return "n/a".into();
        }
        match self {
            Self::Auto => format_bits_per_second(bits_per_second),
            Self::Bits(n) => {
                let v = bits_per_second / 1000f64.powi(i32::from(n));
                format!("{} {}", three_figures(v), RATE_BITS[usize::from(n)])
            }
            Self::Bytes(n) => {
                let v = bits_per_second / 8.0 / 1024f64.powi(i32::from(n));
                format!("{} {}/s", three_figures(v), BYTES[usize::from(n)])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_choose_bits_or_bytes_as_iperf3() {
        assert_eq!(Scale::parse("m"), Ok(Scale::Bits(2)));
        assert_eq!(Scale::parse("G"), Ok(Scale::Bytes(3)));
        for bad in ["x", "mm", "", "1"] {
            assert!(Scale::parse(bad).unwrap_err().contains("k m g t"), "{bad}");
        }
    }

    #[test]
    fn figures_are_shown_in_the_chosen_unit() {
        let m = Scale::parse("m").expect("m");
        assert_eq!(m.rate(1.5e9), "1500.00 Mbit/s");
        assert_eq!(m.bytes(3 << 20), "3.00 MiB");
        let k = Scale::parse("K").expect("K");
        assert_eq!(k.rate(8.0 * 2048.0), "2.00 KiB/s");
        assert_eq!(Scale::parse("g").expect("g").rate(2.5e8), "0.250 Gbit/s");
        assert_eq!(Scale::Auto.rate(1.5e9), format_bits_per_second(1.5e9));
        assert_eq!(Scale::Auto.bytes(3 << 20), ByteCount(3 << 20).iec());
        assert_eq!(m.rate(f64::NAN), "n/a");
    }
}
