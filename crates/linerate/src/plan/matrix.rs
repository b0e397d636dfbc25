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

use crate::plan::size::Size;
use crate::plan::{ClientPlan, DEFAULT_TCP_BLOCK, DEFAULT_UDP_DATAGRAM};

/// One value of one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "axis", content = "value", rename_all = "snake_case")]
pub enum AxisValue {
    /// `-P`.
    Parallel(u32),
    /// `-w`; None = the kernel's autotuning.
    Window(Option<Size>),
    /// `-l`; None = the default for the protocol.
    Length(Option<Size>),
    /// TCP or UDP.
    Protocol(Protocol),
    /// Which way data flows.
    Direction(Direction),
}

impl AxisValue {
    /// Short label for tables, sizes in the user's words: `P=4`, `w=256k`, `l=64K`, `udp`.
    pub fn label(&self) -> String {
        match self {
            AxisValue::Parallel(p) => format!("P={p}"),
            AxisValue::Window(None) => "w=default".into(),
            AxisValue::Window(Some(w)) => format!("w={}", w.label()),
            AxisValue::Length(None) => "l=default".into(),
            AxisValue::Length(Some(l)) => format!("l={}", l.label()),
            AxisValue::Protocol(Protocol::Tcp) => "tcp".into(),
            AxisValue::Protocol(Protocol::Udp) => "udp".into(),
            AxisValue::Direction(Direction::Upload) => "send".into(),
            AxisValue::Direction(Direction::Download) => "recv".into(),
            AxisValue::Direction(Direction::Bidirectional) => "bidir".into(),
        }
    }

    /// The same value with sizes labelled canonically (for comparing plans whatever the
    /// spelling: `w=256k` and `w=250K` are one window).
    pub fn canonical(self) -> AxisValue {
        match self {
            AxisValue::Window(w) => AxisValue::Window(w.map(Size::canonical)),
            AxisValue::Length(l) => AxisValue::Length(l.map(Size::canonical)),
            v => v,
        }
    }

    /// The value whose [`AxisValue::label`] is `label`, sizes with the words it has (stored
    /// matrices keep their axes as labels); None for a label no axis value has.
    pub fn from_label(label: &str) -> Option<AxisValue> {
        let size = |t: &str| Size::spelled(t).ok();
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
                ("l", l) => {
                    AxisValue::Length(Some(size(l).filter(|l| u32::try_from(l.bytes()).is_ok())?))
                }
                _ => return None,
            },
        })
    }

    /// Applies this value to a test.
    pub fn apply(&self, spec: &mut TestSpec) {
        match *self {
            AxisValue::Parallel(p) => spec.streams = p,
            AxisValue::Window(w) => spec.window_bytes = w.map(Size::bytes),
            // Lengths beyond u32 are refused when the plan is made (and by `from_label`).
            AxisValue::Length(Some(l)) => {
                spec.block_bytes = u32::try_from(l.bytes()).unwrap_or(u32::MAX)
            }
            AxisValue::Length(None) => {}
            AxisValue::Protocol(p) => spec.protocol = p,
            AxisValue::Direction(d) => spec.direction = d,
        }
    }
}

/// The axis values of a cell label (`P=4 w=256k`); None if a word is not one.
pub fn values_of(label: &str) -> Option<Vec<AxisValue>> {
    label.split_whitespace().map(AxisValue::from_label).collect()
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
    cells
        .into_iter()
        .enumerate()
        .map(|(index, values)| Cell { index, values, stored_as: None })
        .collect()
}

/// One cell: a combination of axis values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Position in the cartesian product (stable across runs of the same matrix).
    pub index: usize,
    /// The values, one per axis, in axis order.
    pub values: Vec<AxisValue>,
    /// The label a stored cell is known by when its axes do not read with this build (a
    /// newer release's axis): shown as stored, never read back into values (empty then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_as: Option<String>,
}

impl Cell {
    /// `P=4 w=800k`.
    pub fn label(&self) -> String {
        match &self.stored_as {
            Some(label) => label.clone(),
            None => self.values.iter().map(AxisValue::label).collect::<Vec<_>>().join(" "),
        }
    }

    /// Whether `label` names this cell: its own label, or the same axis values written
    /// otherwise (`w=250K`, as versions before the user's words were kept stored `w=256k`).
    pub fn is_named(&self, label: &str) -> bool {
        label == self.label()
            || self.stored_as.is_none() && values_of(label).is_some_and(|v| v == self.values)
    }

    /// This cell with the size words `label` gives its values, when it names the cell (a
    /// document's cells carry bytes; their labels carry the words).
    pub fn worded_as(self, label: &str) -> Cell {
        match values_of(label) {
            Some(values) if values == self.values => Cell { values, ..self },
            _ => self,
        }
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

/// What identifies a matrix in the history (a group's plan, `store::GroupParams`): everything
/// that shapes its runs but the order seed. `--resume` continues only a group with the same
/// identity; a report rebuilds the cells from its axes. Keys older releases did not store read
/// as their defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixIdentity {
    /// The server's host.
    #[serde(default)]
    pub host: Option<String>,
    /// The server's port.
    #[serde(default)]
    pub port: Option<u16>,
    /// The axes, each value stored as its label in the user's words (`w=256k`); None when a
    /// stored label is of no axis value this build knows.
    #[serde(default, with = "axis_labels")]
    pub axes: Option<Vec<Vec<AxisValue>>>,
    /// `--repeat` (runs per cell), `--until-ci`, `--max-repeat`.
    #[serde(flatten)]
    pub rounds: super::StoredRounds,
    /// Pacing of UDP cells.
    #[serde(default)]
    pub udp_bits_per_second: Option<u64>,
    /// `-l` was given.
    #[serde(default)]
    pub length_given: bool,
    /// The base test.
    #[serde(default)]
    pub spec: Option<TestSpec>,
}

impl MatrixIdentity {
    /// The identity of `plan` run against `base`'s server.
    pub fn of(base: &ClientPlan, plan: &MatrixPlan) -> Self {
        MatrixIdentity {
            host: Some(base.host.clone()),
            port: Some(base.port),
            axes: Some(plan.axes.clone()),
            rounds: super::StoredRounds::of(plan.repeat, plan.until_ci, plan.max_repeat),
            udp_bits_per_second: Some(plan.udp_rate),
            length_given: plan.length_given,
            spec: Some(base.spec.clone()),
        }
    }

    /// The same identity with sizes written canonically: a matrix stored with `w=250K` (as
    /// versions before the user's words were kept wrote `256k`) is the same matrix as `w=256k`.
    pub fn canonical(mut self) -> Self {
        if let Some(axes) = &mut self.axes {
            for v in axes.iter_mut().flatten() {
                *v = v.canonical();
            }
        }
        self
    }
}

/// A matrix's axes as stored: each value by its label, so the user's words for sizes stay.
mod axis_labels {
    use super::AxisValue;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        axes: &Option<Vec<Vec<AxisValue>>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let labels: Option<Vec<Vec<String>>> = axes
            .as_ref()
            .map(|a| a.iter().map(|a| a.iter().map(AxisValue::label).collect()).collect());
        serde::Serialize::serialize(&labels, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<Vec<AxisValue>>>, D::Error> {
        let labels = Option::<Vec<Vec<String>>>::deserialize(d)?;
        Ok(labels.and_then(|axes| {
            axes.iter()
                .map(|a| a.iter().map(|l| AxisValue::from_label(l)).collect::<Option<Vec<_>>>())
                .collect()
        }))
    }
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
    /// With `--until-ci`: the most completed runs per cell.
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
        // The 1 MiB writes are for TCP cells whose length nobody set (`spec.write_bytes`).
        if length_set || !plan.spec.writes_bulk() {
            plan.spec.write_bytes = None;
        }
        plan
    }

    /// Every combination, first axis slowest.
    pub fn cells(&self) -> Vec<Cell> {
        cells_of(&self.axes)
    }
}

/// The order of round `round` of a grid whose first round was shuffled with `seed`: each of
/// `cells` `times` times, shuffled with the round's seed (`session::grid`).
pub fn round_order(seed: u64, cells: &[usize], times: u32, round: u64) -> Vec<usize> {
    let order: Vec<usize> =
        cells.iter().flat_map(|&c| std::iter::repeat_n(c, times as usize)).collect();
    shuffled(order, round_seed(seed, round))
}

/// The order seed of round `round` of a run whose first round was shuffled with `seed`.
pub fn round_seed(seed: u64, round: u64) -> u64 {
    seed ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `items` in a random order that `seed` reproduces (Fisher–Yates over SplitMix64): the run
/// order of matrices and fleet scaling curves, so slow drifts of a machine spread over every
/// cell instead of biasing the ones that ran last.
pub fn shuffled<T>(mut items: Vec<T>, seed: u64) -> Vec<T> {
    let mut rng = SplitMix(seed);
    for i in (1..items.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
    items
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
                vec![AxisValue::Window(None), AxisValue::Window(Some(Size::of_bytes(800_000)))],
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
        let order = round_order(p.seed, &all, 3, 0);
        assert_eq!(order.len(), 18);
        for c in 0..6 {
            assert_eq!(order.iter().filter(|&&x| x == c).count(), 3);
        }
        assert_eq!(order, round_order(p.seed, &all, 3, 0), "same seed, same order");
        assert_ne!(order, round_order(p.seed, &all, 3, 1), "another round, another order");
        let sorted: Vec<usize> = all.iter().flat_map(|&c| [c, c, c]).collect();
        assert_ne!(order, sorted, "shuffled");
    }

    #[test]
    fn labels_read_back_as_the_values_they_name() {
        let values = [
            AxisValue::Parallel(16),
            AxisValue::Window(None),
            AxisValue::Window(Some(Size::of_bytes(800_000))),
            AxisValue::Window(Some(Size::of_bytes(256 * 1024))),
            AxisValue::Window(Some(Size::of_bytes(3 << 20))),
            AxisValue::Window(Some(Size::of_bytes(2_000_000))),
            AxisValue::Window(Some(Size::spelled("256k").expect("size"))),
            AxisValue::Length(None),
            AxisValue::Length(Some(Size::of_bytes(1472))),
            AxisValue::Length(Some(Size::of_bytes(64 * 1024))),
            AxisValue::Protocol(Protocol::Udp),
            AxisValue::Protocol(Protocol::Tcp),
            AxisValue::Direction(Direction::Upload),
            AxisValue::Direction(Direction::Download),
            AxisValue::Direction(Direction::Bidirectional),
        ];
        for v in values {
            let back = AxisValue::from_label(&v.label());
            assert_eq!(back, Some(v), "{}", v.label());
            assert_eq!(back.map(|b| b.label()), Some(v.label()), "the words read back");
        }
        for bad in ["", "P=", "P=x", "q=1", "w=12zz", "l=99999999999"] {
            assert_eq!(AxisValue::from_label(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_cell_is_named_by_its_values_whatever_the_words() {
        let words = Size::spelled("256k").expect("size");
        let cell = Cell {
            index: 0,
            values: vec![AxisValue::Parallel(2), AxisValue::Window(Some(words))],
            stored_as: None,
        };
        assert_eq!(cell.label(), "P=2 w=256k", "the user's words, not w=250K");
        assert!(cell.is_named("P=2 w=256k"));
        assert!(cell.is_named("P=2 w=250K"), "as older versions stored it");
        assert!(cell.is_named("P=2 w=256000"));
        assert!(!cell.is_named("P=2 w=256K"));
        assert!(!cell.is_named("P=4 w=256k"));
        let plain = Cell {
            values: vec![AxisValue::Parallel(2), AxisValue::Window(Some(Size::of_bytes(256_000)))],
            ..cell.clone()
        };
        assert_eq!(plain.clone().worded_as("P=2 w=256k").label(), "P=2 w=256k");
        assert_eq!(plain.worded_as("P=4 w=1M").label(), "P=2 w=250K", "not its label: unchanged");
    }
}
