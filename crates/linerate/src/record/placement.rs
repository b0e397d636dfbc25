//! Where a loopback test's two ends ran, and why: the placement `plan/placement.rs` chooses
//! (by calibration on the host, by the user's `-A`, or by rule), carried in the record so that
//! every result names it. It lives in `record` because the record holds it and every layer
//! above reads it.

use serde::{Deserialize, Serialize};

/// One way to place a loopback test's ends (`plan/placement.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Each stream's two ends on one CPU.
    Pair,
    /// Each stream's two ends on two CPUs, the ends spread evenly.
    Split,
    /// The system's scheduler places every thread.
    System,
}

impl Placement {
    /// Every placement, in the order ties are broken (`plan/placement.rs`).
    pub const ALL: [Placement; 3] = [Placement::Pair, Placement::Split, Placement::System];

    /// The word for it (`-A`'s value, the record's, the history's).
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Pair => "pair",
            Placement::Split => "split",
            Placement::System => "system",
        }
    }
}

/// The placement a test runs with and why, as its record names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The placement.
    pub placement: Placement,
    /// Why, in words ("calibrated on this host on …", "-A split", "by rule: …").
    pub why: String,
}
