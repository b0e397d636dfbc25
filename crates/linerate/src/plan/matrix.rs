//! `linerate matrix`: every combination of the axes the user gave (streams, window, length,
//! protocol, direction), each repeated, run in a randomised order.
//!
//! The order is shuffled across cells *and* repetitions with a seeded generator (printed, and
//! settable with `--seed`), so slow drift on a shared machine or link — another tenant, a
//! warming CPU, a TCP memory pool filling up — spreads over all cells instead of biasing
//! whichever ran last. That is the reason tools like hyperfine randomise and netperf's
//! confidence intervals assume independent runs.
//!
//! Pure planning: nothing here runs a test.

use linerate_proto::{Direction, Protocol, TestSpec};
use serde::{Deserialize, Serialize};

use crate::plan::{ClientPlan, DEFAULT_TCP_BLOCK, DEFAULT_UDP_DATAGRAM};

/// One value of one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "axis", content = "value", rename_all = "snake_case")]
pub enum AxisValue {
    /// `-P`.
    Parallel(u32),
    /// `-w`; None = the kernel's autotuning (the seeds' "default").
    Window(Option<u64>),
    /// `-l`; None = the default for the protocol.
    Length(Option<u32>),
    /// TCP or UDP.
    Protocol(Protocol),
    /// Which way data flows.
    Direction(Direction),
}

impl AxisValue {
    /// Short label for tables: `P=4`, `w=800k`, `l=64K`, `udp`, `recv`.
    pub fn label(&self) -> String {
        match self {
            AxisValue::Parallel(p) => format!("P={p}"),
            AxisValue::Window(None) => "w=default".into(),
            AxisValue::Window(Some(w)) => format!("w={}", size_label(*w)),
            AxisValue::Length(None) => "l=default".into(),
            AxisValue::Length(Some(l)) => format!("l={}", size_label(u64::from(*l))),
            AxisValue::Protocol(Protocol::Tcp) => "tcp".into(),
            AxisValue::Protocol(Protocol::Udp) => "udp".into(),
            AxisValue::Direction(Direction::Upload) => "send".into(),
            AxisValue::Direction(Direction::Download) => "recv".into(),
            AxisValue::Direction(Direction::Bidirectional) => "bidir".into(),
        }
    }

    /// The value whose [`AxisValue::label`] is `label` (stored matrices keep their axes as
    /// labels); None for a label no axis value has.
    pub fn from_label(label: &str) -> Option<AxisValue> {
        let size = |t: &str| crate::units::parse_size(t).ok().map(|b| b.0);
        Some(match label {
            "w=default" => AxisValue::Window(None),
            "l=default" => AxisValue::Length(None),
            "tcp" => AxisValue::Protocol(Protocol::Tcp),
            "udp" => AxisValue::Protocol(Protocol::Udp),
            "send" => AxisValue::Direction(Direction::Upload),
            "recv" => AxisValue::Direction(Direction::Download),
            "bidir" => AxisValue::Direction(Direction::Bidirectional),
            _ => match label.split_once('=')? {
                ("P", p) => AxisValue::Parallel(p.parse().ok()?),
                ("w", w) => AxisValue::Window(Some(size(w)?)),
                ("l", l) => AxisValue::Length(Some(u32::try_from(size(l)?).ok()?)),
                _ => return None,
            },
        })
    }

    /// Applies this value to a test.
    pub fn apply(&self, spec: &mut TestSpec) {
        match *self {
            AxisValue::Parallel(p) => spec.streams = p,
            AxisValue::Window(w) => spec.window_bytes = w,
            AxisValue::Length(Some(l)) => spec.block_bytes = l,
            AxisValue::Length(None) => {}
            AxisValue::Protocol(p) => spec.protocol = p,
            AxisValue::Direction(d) => spec.direction = d,
        }
    }
}

/// Every combination of `axes` (empty axes are not varied), in matrix order: the first axis
/// varies slowest.
pub fn cells_of(axes: &[Vec<AxisValue>]) -> Vec<Cell> {
    let mut cells = vec![Vec::new()];
    for axis in axes.iter().filter(|a| !a.is_empty()) {
        cells = cells
            .into_iter()
            .flat_map(|prefix| {
                axis.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(*v);
                    next
                })
            })
            .collect();
    }
    cells.into_iter().enumerate().map(|(index, values)| Cell { index, values }).collect()
}

/// Sizes as people write them: 800k stays 800k (SI), 64K stays 64K (binary).
fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1000 * 1000 && b % (1000 * 1000) == 0 => format!("{}m", b / 1_000_000),
        b if b >= 1024 && b % 1024 == 0 => format!("{}K", b >> 10),
        b if b >= 1000 && b % 1000 == 0 => format!("{}k", b / 1000),
        b => b.to_string(),
    }
}

/// One cell: a combination of axis values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Position in the cartesian product (stable across runs of the same matrix).
    pub index: usize,
    /// The values, one per axis, in axis order.
    pub values: Vec<AxisValue>,
}

impl Cell {
    /// `P=4 w=800k`.
    pub fn label(&self) -> String {
        self.values.iter().map(AxisValue::label).collect::<Vec<_>>().join(" ")
    }

    /// The base test with this cell's values applied.
    pub fn spec(&self, base: &TestSpec) -> TestSpec {
        let mut spec = base.clone();
        for v in &self.values {
            v.apply(&mut spec);
        }
        spec
    }
}

/// How one `linerate matrix` command runs: afresh, or continuing a stored group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MatrixRun {
    /// `--resume` (Some), naming a group (Some(Some)).
    pub resume: Option<Option<i64>>,
    /// Hidden `--stop-after N`: stop after N runs as if interrupted (tests of `--resume`).
    pub stop_after: Option<usize>,
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixPlan {
    /// One list of values per axis; empty axes are not varied.
    pub axes: Vec<Vec<AxisValue>>,
    /// Runs per cell (at least 1; the first round with `--until-ci`).
    pub repeat: u32,
    /// With `--until-ci`: the 95 % confidence half-width to reach, relative to the mean.
    pub until_ci: Option<f64>,
    /// With `--until-ci`: the most runs per cell.
    pub max_repeat: u32,
    /// Seed of the run order.
    pub seed: u64,
    /// Pacing of UDP cells (`-b`, or the UDP default when not given).
    pub udp_rate: u64,
    /// `-l` was given for every cell (else UDP cells size datagrams to the path MTU).
    pub length_given: bool,
}

impl MatrixPlan {
    /// The client plan of one cell: the base with the cell's values, UDP cells paced at
    /// `udp_rate` and, without an explicit length, sized to the path MTU.
    pub fn cell_plan(&self, base: &ClientPlan, cell: &Cell) -> ClientPlan {
        let mut plan = base.clone();
        plan.spec = cell.spec(&base.spec);
        let length_set = self.length_given
            || cell.values.iter().any(|v| matches!(v, AxisValue::Length(Some(_))));
        if plan.spec.protocol == Protocol::Udp {
            plan.spec.bits_per_second = self.udp_rate;
            if !length_set {
                plan.spec.block_bytes = DEFAULT_UDP_DATAGRAM;
                plan.udp_length_auto = true;
            }
        } else if !length_set {
            plan.spec.block_bytes = DEFAULT_TCP_BLOCK as u32;
            plan.udp_length_auto = false;
        }
        plan
    }

    /// Every combination, first axis slowest.
    pub fn cells(&self) -> Vec<Cell> {
        cells_of(&self.axes)
    }

    /// The order of one round: each of `cells` `times` times, shuffled with `round`'s seed.
    pub fn round(&self, cells: &[usize], times: u32, round: u64) -> Vec<usize> {
        let mut order: Vec<usize> =
            cells.iter().flat_map(|&c| std::iter::repeat_n(c, times as usize)).collect();
        let mut rng = SplitMix(self.seed ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        // Fisher–Yates.
        for i in (1..order.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        order
    }
}

/// SplitMix64: small, well-distributed, and enough to shuffle a run order reproducibly.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> MatrixPlan {
        MatrixPlan {
            axes: vec![
                vec![AxisValue::Parallel(1), AxisValue::Parallel(2), AxisValue::Parallel(4)],
                vec![AxisValue::Window(None), AxisValue::Window(Some(800_000))],
                vec![],
            ],
            repeat: 3,
            until_ci: None,
            max_repeat: 3,
            seed: 42,
            udp_rate: 1 << 20,
            length_given: false,
        }
    }

    #[test]
    fn cells_are_the_cartesian_product_with_readable_labels() {
        let cells = plan().cells();
        assert_eq!(cells.len(), 6);
        assert_eq!(cells[0].label(), "P=1 w=default");
        assert_eq!(cells[5].label(), "P=4 w=800k");
        let spec = cells[5].spec(&TestSpec::default_tcp());
        assert_eq!((spec.streams, spec.window_bytes), (4, Some(800_000)));
    }

    #[test]
    fn rounds_run_every_cell_the_right_number_of_times_in_a_seeded_order() {
        let p = plan();
        let all: Vec<usize> = (0..6).collect();
        let order = p.round(&all, 3, 0);
        assert_eq!(order.len(), 18);
        for c in 0..6 {
            assert_eq!(order.iter().filter(|&&x| x == c).count(), 3);
        }
        assert_eq!(order, p.round(&all, 3, 0), "same seed, same order");
        assert_ne!(order, p.round(&all, 3, 1), "another round, another order");
        let sorted: Vec<usize> = all.iter().flat_map(|&c| [c, c, c]).collect();
        assert_ne!(order, sorted, "shuffled");
    }

    #[test]
    fn labels_read_back_as_the_values_they_name() {
        let values = [
            AxisValue::Parallel(16),
            AxisValue::Window(None),
            AxisValue::Window(Some(800_000)),
            AxisValue::Window(Some(256 * 1024)),
            AxisValue::Window(Some(3 << 20)),
            AxisValue::Window(Some(2_000_000)),
            AxisValue::Length(None),
            AxisValue::Length(Some(1472)),
            AxisValue::Length(Some(64 * 1024)),
            AxisValue::Protocol(Protocol::Udp),
            AxisValue::Protocol(Protocol::Tcp),
            AxisValue::Direction(Direction::Upload),
            AxisValue::Direction(Direction::Download),
            AxisValue::Direction(Direction::Bidirectional),
        ];
        for v in values {
            assert_eq!(AxisValue::from_label(&v.label()), Some(v), "{}", v.label());
        }
        for bad in ["", "P=", "P=x", "q=1", "w=12zz", "l=99999999999"] {
            assert_eq!(AxisValue::from_label(bad), None, "{bad}");
        }
    }

    #[test]
    fn size_labels_keep_the_unit_people_wrote() {
        assert_eq!(size_label(800_000), "800k");
        assert_eq!(size_label(65_536), "64K");
        assert_eq!(size_label(4 << 20), "4M");
        assert_eq!(size_label(1500), "1500");
    }
}
