//! How long a matrix or a campaign will take, said before its first run: the runs left times
//! each run's length — its time, its omitted warm-up and a setup allowance — and, with
//! `--until-ci` (`until_ci` in a campaign), the most runs it may grow to.
//!
//! The setup allowance is declared, not measured per host: [`SETUP_PER_RUN`] covers the
//! connection, the handshake, the data streams' set-up and the results exchange. On loopback
//! these take about 0.05 s a run (six 1-second runs took 6.3 s in all); across a WAN they are
//! six or seven round trips, 0.5 s at a 70 ms round trip. Once runs have finished, the
//! progress's estimate of the time left (measured on the runs themselves) takes over.
//!
//! Pure: no clock, no I/O. Must not print (`report::schedule` words it).

use std::time::Duration;

use linerate_proto::TestSpec;

use crate::plan::campaign::CampaignPlan;
use crate::plan::matrix::MatrixPlan;

/// What each run is allowed beyond its time and warm-up (see the module's doc).
pub const SETUP_PER_RUN: Duration = Duration::from_millis(500);

/// Runs of one length: a matrix, or one tier of a campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The tier's name (None for a matrix).
    pub name: Option<String>,
    /// Runs left to make (planned, less those an earlier attempt completed).
    pub runs: usize,
    /// With `--until-ci`: the most runs left it may make.
    pub max_runs: Option<usize>,
    /// Each run's time, without the warm-up; None when runs end after a byte count.
    pub time: Option<Duration>,
    /// Each run's omitted warm-up.
    pub omit: Duration,
}

impl Batch {
    /// A matrix's runs of `time` (None: a byte count) and `omit`, less `done` completed ones.
    fn of(
        name: Option<String>,
        plan: &MatrixPlan,
        (time, omit): (Option<Duration>, Duration),
        done: usize,
    ) -> Self {
        let cells = plan.cells().len();
        let max = plan.until_ci.map(|_| cells * plan.max_repeat.max(plan.repeat) as usize);
        Batch {
            name,
            runs: (cells * plan.repeat as usize).saturating_sub(done),
            max_runs: max.map(|m| m.saturating_sub(done)),
            time,
            omit,
        }
    }

    /// One run with its setup allowance; None when runs end after a byte count.
    pub fn per_run(&self) -> Option<Duration> {
        Some(self.time? + self.omit + SETUP_PER_RUN)
    }

    fn total(&self, runs: usize) -> Option<Duration> {
        Some(self.per_run()? * u32::try_from(runs).unwrap_or(u32::MAX))
    }
}

/// The runs a command is about to make, in batches of one run length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The batches with runs left, in the order they run.
    pub batches: Vec<Batch>,
}

impl Schedule {
    /// A matrix of `spec` runs (the end condition and warm-up), `done` of them completed.
    pub fn of_matrix(plan: &MatrixPlan, spec: &TestSpec, done: usize) -> Self {
        let time = spec.duration_ms().map(Duration::from_millis);
        Self {
            batches: vec![Batch::of(None, plan, (time, Duration::from_millis(spec.omit_ms)), done)],
        }
    }

    /// A campaign, `done[i]` runs of tier `i` completed by an earlier attempt.
    pub fn of_campaign(plan: &CampaignPlan, done: &[usize]) -> Self {
        let batches = plan
            .tiers
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let m = &t.matrix;
                let time =
                    (Some(Duration::from_millis(m.time_ms)), Duration::from_millis(m.omit_ms));
                let done = done.get(i).copied().unwrap_or(0);
                if t.fleet.is_some() {
                    // Each fleet run is one run's time, however many hosts it has.
                    let runs = t.planned_runs().saturating_sub(done);
                    let (time, omit) = time;
                    return Batch { name: Some(t.name.clone()), runs, max_runs: None, time, omit };
                }
                Batch::of(Some(t.name.clone()), &t.matrix_plan(0), time, done)
            })
            .filter(|b| b.runs > 0 || b.max_runs.is_some_and(|m| m > 0))
            .collect();
        Self { batches }
    }

    /// Runs planned.
    pub fn runs(&self) -> usize {
        self.batches.iter().map(|b| b.runs).sum()
    }

    /// With `--until-ci` somewhere: the most runs (the others' planned runs included).
    pub fn max_runs(&self) -> Option<usize> {
        self.batches
            .iter()
            .any(|b| b.max_runs.is_some())
            .then(|| self.batches.iter().map(|b| b.max_runs.unwrap_or(b.runs)).sum())
    }

    /// Time of the planned runs; None when some end after a byte count.
    pub fn total(&self) -> Option<Duration> {
        self.batches.iter().map(|b| b.total(b.runs)).sum()
    }

    /// Time of the most runs `--until-ci` may make.
    pub fn max_total(&self) -> Option<Duration> {
        self.batches.iter().map(|b| b.total(b.max_runs.unwrap_or(b.runs))).sum()
    }

    /// True when every run has the same length (one "runs × length" says it all).
    pub fn uniform(&self) -> bool {
        self.batches.windows(2).all(|w| (w[0].time, w[0].omit) == (w[1].time, w[1].omit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::campaign::parse;
    use crate::plan::matrix::AxisValue;

    fn matrix(until_ci: Option<f64>) -> MatrixPlan {
        MatrixPlan {
            axes: vec![(1..=4).map(AxisValue::Parallel).collect(), vec![], vec![]],
            repeat: 3,
            until_ci,
            max_repeat: 10,
            seed: 1,
            udp_rate: 1_000_000,
            length_given: false,
        }
    }

    fn spec(time_ms: u64, omit_ms: u64) -> TestSpec {
        let end = linerate_proto::EndCondition::Duration { duration_ms: time_ms };
        TestSpec { end, omit_ms, ..TestSpec::default_tcp() }
    }

    #[test]
    fn a_matrix_takes_its_runs_times_time_omit_and_setup() {
        let s = Schedule::of_matrix(&matrix(None), &spec(4000, 2000), 0);
        assert_eq!((s.runs(), s.max_runs()), (12, None));
        assert_eq!(s.total(), Some(Duration::from_millis(12 * 6500)));
        let resumed = Schedule::of_matrix(&matrix(Some(0.05)), &spec(4000, 2000), 5);
        assert_eq!((resumed.runs(), resumed.max_runs()), (7, Some(35)));
        assert_eq!(resumed.max_total(), Some(Duration::from_millis(35 * 6500)));
        let bytes = TestSpec {
            end: linerate_proto::EndCondition::Bytes { bytes: 1 << 20 },
            ..TestSpec::default_tcp()
        };
        assert_eq!(Schedule::of_matrix(&matrix(None), &bytes, 0).total(), None);
    }

    #[test]
    fn the_dc_interconnect_example_is_96_runs_of_a_minute() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dc-interconnect.toml");
        let text = std::fs::read_to_string(root).expect("example");
        let plan = parse(&text, "dc-interconnect.toml", "dc").expect("valid");
        let s = Schedule::of_campaign(&plan, &[]);
        assert_eq!((s.runs(), s.batches.len(), s.uniform()), (96, 4, true));
        // 96 minutes of runs, plus the setup allowance.
        assert_eq!(s.total(), Some(Duration::from_millis(96 * 60_500)));
        let resumed = Schedule::of_campaign(&plan, &[24, 24, 3]);
        assert_eq!(resumed.runs(), 21 + 24, "finished tiers drop out");
        assert_eq!(resumed.batches.len(), 2);
    }
}
