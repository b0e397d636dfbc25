//! How the values of a campaign file are read: sizes, rates, times and percentages in the same
//! units as the flags (`crate::units`), and axes written as one value or a list of them.
//!
//! Each value is its own `Deserialize` impl, so an error carries the span of the value that is
//! wrong (toml attaches it) and the caller can point at its line and column. Pure: no I/O.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use linerate_proto::{Direction, Protocol};
use serde::de::{self, Deserializer, IntoDeserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::plan::size::Size;
use crate::units;

/// A value read from one of a few TOML scalar kinds; the `from_*` that applies turns it into `Self`.
trait Scalar: Sized {
    const EXPECTING: &'static str;
    fn from_str<E: de::Error>(_: &str) -> Result<Self, E> {
        Err(E::custom(format!("expected {}", Self::EXPECTING)))
    }
    fn from_u64<E: de::Error>(_: u64) -> Result<Self, E> {
        Err(E::custom(format!("expected {}", Self::EXPECTING)))
    }
    fn from_f64<E: de::Error>(_: f64) -> Result<Self, E> {
        Err(E::custom(format!("expected {}", Self::EXPECTING)))
    }
}

struct ScalarVisitor<T>(PhantomData<T>);

impl<T: Scalar> Visitor<'_> for ScalarVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        T::from_str(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::from_u64(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(v) => T::from_u64(v),
            Err(_) => Err(E::custom(format!("{v} is negative; expected {}", T::EXPECTING))),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        T::from_f64(v)
    }
}

macro_rules! scalar_deserialize {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(ScalarVisitor::<$t>(PhantomData))
            }
        }
    )*};
}

/// `"default"` (the kernel's autotuning, or the protocol's default length) or a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeItem(pub Option<u64>);

/// A size on a matrix axis (`window`, `length`): `"default"` or a size, kept in the words the
/// file wrote it in (`"256k"` labels its cells `w=256k`, as `--window 256k` does on the
/// command line; a bare number keeps its digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AxisSize(pub Option<Size>);

/// A duration: seconds as a number (`60`, `0.3`) or a string with a unit (`"250ms"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub Duration);

/// A rate in SI bits per second: `"10G"` or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(pub u64);

/// A percentage (`5`, `"5%"`, `0.5`), kept as a fraction (0.05).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fraction(pub f64);

/// `"tcp"` or `"udp"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolItem(pub Protocol);

/// `"send"`, `"recv"` or `"bidir"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectionItem(pub Direction);

scalar_deserialize!(SizeItem, AxisSize, Seconds, Rate, Fraction, ProtocolItem, DirectionItem);

impl Scalar for SizeItem {
    const EXPECTING: &'static str = "\"default\" or a size such as \"800k\", \"64K\" or 65536";
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        if s.eq_ignore_ascii_case("default") {
            return Ok(SizeItem(None));
        }
        units::parse_size(s).map(|b| SizeItem(Some(b.bytes()))).map_err(E::custom)
    }
    fn from_u64<E: de::Error>(v: u64) -> Result<Self, E> {
        Ok(SizeItem(Some(v)))
    }
}

impl Scalar for AxisSize {
    const EXPECTING: &'static str = SizeItem::EXPECTING;
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        if s.eq_ignore_ascii_case("default") {
            return Ok(AxisSize(None));
        }
        Size::spelled(s).map(|b| AxisSize(Some(b))).map_err(E::custom)
    }
    fn from_u64<E: de::Error>(v: u64) -> Result<Self, E> {
        Size::spelled(&v.to_string()).map(|b| AxisSize(Some(b))).map_err(E::custom)
    }
}

impl Scalar for Seconds {
    const EXPECTING: &'static str = "seconds, such as 60, 0.5 or \"250ms\"";
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        units::parse_seconds(s).map(Seconds).map_err(E::custom)
    }
    fn from_u64<E: de::Error>(v: u64) -> Result<Self, E> {
        units::parse_seconds(&v.to_string()).map(Seconds).map_err(E::custom)
    }
    fn from_f64<E: de::Error>(v: f64) -> Result<Self, E> {
        if !v.is_finite() || !(0.0..=366.0 * 86_400.0).contains(&v) {
            return Err(E::custom(format!("{v} s is not a duration from 0 to 366 days")));
        }
        Ok(Seconds(Duration::from_secs_f64(v)))
    }
}

impl Scalar for Rate {
    const EXPECTING: &'static str = "a rate in bit/s such as \"10G\" or \"800M\"";
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        units::parse_rate(s).map(|r| Rate(r.bits_per_second())).map_err(E::custom)
    }
    fn from_u64<E: de::Error>(v: u64) -> Result<Self, E> {
        Ok(Rate(v))
    }
}

impl Scalar for Fraction {
    const EXPECTING: &'static str = "a percentage such as 5 or \"5%\"";
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        let v: f64 =
            s.trim().trim_end_matches('%').trim().parse().map_err(|_| {
                E::custom(format!("{s:?} is not a percentage; write e.g. 5 or \"5%\""))
            })?;
        Self::from_f64(v)
    }
    fn from_u64<E: de::Error>(v: u64) -> Result<Self, E> {
        Self::from_f64(v as f64)
    }
    fn from_f64<E: de::Error>(v: f64) -> Result<Self, E> {
        if !(v > 0.0 && v <= 100.0) {
            return Err(E::custom(format!("{v}% is outside 0..100 %; write e.g. 5 or \"5%\"")));
        }
        Ok(Fraction(v / 100.0))
    }
}

impl Scalar for ProtocolItem {
    const EXPECTING: &'static str = "\"tcp\" or \"udp\"";
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Ok(ProtocolItem(Protocol::Tcp)),
            "udp" => Ok(ProtocolItem(Protocol::Udp)),
            _ => Err(E::custom(format!("unknown protocol {s:?}; expected {}", Self::EXPECTING))),
        }
    }
}

impl Scalar for DirectionItem {
    const EXPECTING: &'static str = "\"send\", \"recv\" or \"bidir\"";
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        match s.to_ascii_lowercase().as_str() {
            "send" | "upload" => Ok(DirectionItem(Direction::Upload)),
            "recv" | "download" | "reverse" => Ok(DirectionItem(Direction::Download)),
            "bidir" | "bidirectional" => Ok(DirectionItem(Direction::Bidirectional)),
            _ => Err(E::custom(format!("unknown direction {s:?}; expected {}", Self::EXPECTING))),
        }
    }
}

impl Serialize for SizeItem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Serialize for AxisSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Serialize for Seconds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX).serialize(s)
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Serialize for Fraction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Serialize for ProtocolItem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Serialize for DirectionItem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<T: Serialize> Serialize for Axis<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// An axis: `parallel = 4` or `parallel = [1, 2, 4, 8]`; an empty list is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis<T>(pub Vec<T>);

struct AxisVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for AxisVisitor<T> {
    type Value = Axis<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value or a list of values")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Axis<T>, A::Error> {
        let mut out = Vec::new();
        // Bounded by the file: the list is already parsed.
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        if out.is_empty() {
            return Err(de::Error::custom(
                "an empty list; give at least one value, or leave the key out to not vary it",
            ));
        }
        Ok(Axis(out))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Axis<T>, E> {
        T::deserialize(v.into_deserializer()).map(|v| Axis(vec![v]))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Axis<T>, E> {
        T::deserialize(v.into_deserializer()).map(|v| Axis(vec![v]))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Axis<T>, E> {
        T::deserialize(v.into_deserializer()).map(|v| Axis(vec![v]))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Axis<T>, E> {
        T::deserialize(v.into_deserializer()).map(|v| Axis(vec![v]))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Axis<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AxisVisitor(PhantomData))
    }
}

/// The keys a tier (or `[defaults]`) may set, each optional; a tier's unset keys come from
/// `[defaults]`, then from linerate's defaults.
///
/// Serialized (into the stored plan) with the units in the key names.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Server host name or address.
    pub host: Option<String>,
    /// Server port.
    pub port: Option<u16>,
    /// The path's link rate, for the share of the theoretical TCP goodput.
    #[serde(rename(serialize = "link_speed_bits_per_second"))]
    pub link_speed: Option<Rate>,
    /// The path's IP MTU, with `link_speed`.
    #[serde(rename(serialize = "mtu_bytes"))]
    pub mtu: Option<u32>,
    /// Streams axis.
    pub parallel: Option<Axis<u32>>,
    /// Socket buffer axis.
    #[serde(rename(serialize = "window_bytes"))]
    pub window: Option<Axis<AxisSize>>,
    /// Block / datagram size axis.
    #[serde(rename(serialize = "length_bytes"))]
    pub length: Option<Axis<AxisSize>>,
    /// Protocol axis.
    pub protocol: Option<Axis<ProtocolItem>>,
    /// Direction axis.
    pub direction: Option<Axis<DirectionItem>>,
    /// Runs per cell.
    pub repeat: Option<u32>,
    /// Length of each run.
    #[serde(rename(serialize = "time_ms"))]
    pub time: Option<Seconds>,
    /// Warm-up excluded from each run.
    #[serde(rename(serialize = "omit_ms"))]
    pub omit: Option<Seconds>,
    /// Pacing per stream.
    #[serde(rename(serialize = "bitrate_bits_per_second"))]
    pub bitrate: Option<Rate>,
    /// Repeat until the 95 % CI half-width is within this share of the mean.
    #[serde(rename(serialize = "until_ci_fraction"))]
    pub until_ci: Option<Fraction>,
    /// With `until_ci`: the most completed runs per cell.
    pub max_repeat: Option<u32>,
    /// A fleet tier's servers, `HOST[:PORT][=LABEL]` each (instead of `host`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<Vec<String>>,
    /// A file of a fleet tier's servers, one per line (beside the campaign file if relative).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<String>,
    /// A fleet tier's scaling curve: host counts, `[1, 2, 4]` or `"1..16"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<ScaleText>,
    /// Request/response cells (`rr = { request_size = 64, ... }`): every run of the tier is
    /// an `--rr` test (`--crr` with `connect_each = true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrSettings>,
}

/// A tier's request/response test, as `--rr`'s flags set it; unset keys take their defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RrSettings {
    /// Bytes per request (`--request-size`) [default: 1; UDP: 24].
    #[serde(rename(serialize = "request_bytes"))]
    pub request_size: Option<u32>,
    /// Bytes per response (`--response-size`) [default: 1; UDP: 24].
    #[serde(rename(serialize = "response_bytes"))]
    pub response_size: Option<u32>,
    /// Transactions outstanding per stream (`--in-flight`) [default: 1].
    pub in_flight: Option<u32>,
    /// Open loop: requests per second per stream (`--rr-rate`) [default: closed loop].
    #[serde(rename(serialize = "rate_per_second"))]
    pub rate: Option<u64>,
    /// A connection per transaction (`--crr`) [default: false].
    pub connect_each: Option<bool>,
}

impl Settings {
    /// Every key of `self`, else of `base`.
    pub fn or(&self, base: &Settings) -> Settings {
        macro_rules! pick {
            ($($f:ident),*) => { Settings { $($f: self.$f.clone().or_else(|| base.$f.clone())),* } };
        }
        pick!(
            host, port, link_speed, mtu, parallel, window, length, protocol, direction, repeat,
            time, omit, bitrate, until_ci, max_repeat, fleet, targets, scale, rr
        )
    }
}

/// A fleet tier's host counts as the flag takes them (`1,2,4` or `1..16`): a list of
/// numbers is joined with commas; checked against the targets when the tier is resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScaleText(pub String);

struct ScaleVisitor;

impl<'de> Visitor<'de> for ScaleVisitor {
    type Value = ScaleText;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("host counts such as [1, 2, 4, 8, 16] or \"1..16\"")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ScaleText, A::Error> {
        let mut out: Vec<String> = Vec::new();
        // Bounded by the file: the list is already parsed.
        while let Some(v) = seq.next_element::<u64>()? {
            out.push(v.to_string());
        }
        if out.is_empty() {
            return Err(de::Error::custom(
                "an empty list; give host counts such as [1, 2, 4], or leave scale out to run \
                 every target together",
            ));
        }
        Ok(ScaleText(out.join(",")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<ScaleText, E> {
        Ok(ScaleText(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScaleText, E> {
        Ok(ScaleText(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScaleText, E> {
        Ok(ScaleText(v.to_string()))
    }
}

impl<'de> Deserialize<'de> for ScaleText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScaleVisitor)
    }
}

/// The whole file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCampaign {
    /// The campaign's name (default: the file's name).
    pub name: Option<String>,
    /// Seed of the run orders (default: random, stored for --resume).
    pub seed: Option<u64>,
    /// Keys every tier gets unless it sets them.
    pub defaults: Option<Settings>,
    /// `[tiers.NAME]` tables, with their position in the file.
    pub tiers: Option<std::collections::BTreeMap<String, toml::Spanned<Settings>>>,
}
