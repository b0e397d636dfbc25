//! The flags of every repeated experiment, declared once: how many runs per cell, in which
//! order, until when (`RoundsArgs`: a matrix and a scaling curve, `fleet --scale`), and the
//! resume of an interrupted group (`ResumeArgs`: those two and a campaign, whose rounds are
//! in its file). One definition and one converter into the plan's fields, so the help text,
//! the validation and the error messages cannot differ between commands.
//!
//! A curve differs in two things, both set in [`for_curves`] rather than by a second copy:
//! it runs each host count once unless told (a fleet run is k hosts' tests at one instant,
//! so a curve costs far more than a matrix's cell), and its rounds flags need `--scale` (a
//! single fleet is one run).

use clap::{Args, Command};

use super::values::{count, percent, whole};
use crate::store::{GroupKind, GroupRef};

/// `--repeat`, `--until-ci`, `--max-repeat`, `--seed`, and the resume flags.
#[derive(Debug, Args)]
pub struct RoundsArgs {
    /// Runs per cell (a matrix's combination of axes, a curve's host count) [with
    /// --until-ci: the first round].
    #[arg(long = "repeat", value_name = "N", default_value_t = crate::plan::DEFAULT_REPEAT,
          value_parser = |s: &str| whole::<u32>(s, crate::plan::REPEAT_RANGE))]
    pub repeat: u32,
    /// Repeat each cell until its 95 % confidence interval is within this share of the mean
    /// (e.g. 5%), up to --max-repeat runs; only completed runs count (a curve's: fleet runs
    /// in which every host was measured).
    #[arg(long = "until-ci", value_name = "PERCENT", value_parser = percent)]
    pub until_ci: Option<f64>,
    /// With --until-ci: the most completed runs per cell.
    #[arg(long = "max-repeat", value_name = "N", default_value_t = crate::plan::DEFAULT_MAX_REPEAT,
          requires = "until_ci", value_parser = |s: &str| whole::<u32>(s, crate::plan::MAX_REPEAT_RANGE))]
    pub max_repeat: u32,
    /// Seed of the random run order [default: random, printed].
    #[arg(long = "seed", value_name = "N", value_parser = count::<u64>)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub resume: ResumeArgs,
}

/// `--resume [GROUP]` and the hidden `--stop-after N` that tests it.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Continue the newest unfinished group with these settings (or GROUP, as `linerate
    /// history` shows it): completed runs are kept, failed and missing ones are run in the
    /// stored order.
    #[arg(long = "resume", value_name = "GROUP", num_args = 0..=1, value_parser = group_ref)]
    pub resume: Option<Option<GroupRef>>,
    /// Stop after N runs as if interrupted (for testing --resume).
    #[arg(long = "stop-after", value_name = "N", hide = true, value_parser = count::<usize>)]
    pub stop_after: Option<usize>,
}

/// What a command repeats, in the words of its messages.
#[derive(Debug, Clone)]
pub(super) struct Experiment {
    /// Its name: `matrix`, `scaling curve`, `campaign`.
    pub noun: &'static str,
    /// The kind of group it stores (whose letter `linerate history` puts before the id).
    pub kind: GroupKind,
}

pub(super) const MATRIX: Experiment = Experiment { noun: "matrix", kind: GroupKind::Matrix };
pub(super) const CURVE: Experiment = Experiment { noun: "scaling curve", kind: GroupKind::Fleet };
pub(super) const CAMPAIGN: Experiment = Experiment { noun: "campaign", kind: GroupKind::Campaign };
pub(super) const MESH: Experiment = Experiment { noun: "mesh", kind: GroupKind::Mesh };

/// The rounds as a plan holds them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Rounds {
    /// Runs per cell (the first round).
    pub repeat: u32,
    /// `--until-ci` as a fraction.
    pub until_ci: Option<f64>,
    /// The most runs per cell (never fewer than `repeat`).
    pub max_repeat: u32,
    /// The order's seed (drawn when not given).
    pub seed: u64,
}

impl RoundsArgs {
    /// The rounds, for the plan.
    pub(super) fn rounds(&self) -> Rounds {
        Rounds {
            repeat: self.repeat,
            until_ci: self.until_ci.map(|p| p / 100.0),
            max_repeat: self.max_repeat.max(self.repeat),
            seed: self.seed.unwrap_or_else(super::test_plan::random_seed),
        }
    }
}

impl ResumeArgs {
    /// The group to continue, as the plan holds it (None: a new group; `Some(None)`: the
    /// newest unfinished one), checked: a group of this kind, and a history to read it from
    /// (`no_store`: `--no-store` was given; `history`: a history file is known).
    pub(super) fn group(
        &self,
        what: Experiment,
        no_store: bool,
        history: bool,
    ) -> Result<Option<Option<i64>>, String> {
        let Some(given) = self.resume else { return Ok(None) };
        let other_kind = |g: &GroupRef| g.letter.is_some() && g.kind() != Some(what.kind.clone());
        if let Some(g) = given.filter(other_kind) {
            return Err(format!(
                "--resume {g} is not a {noun}: give the {noun} as `linerate history` shows \
                 it, e.g. {}",
                what.kind.reference(g.id),
                noun = what.noun
            ));
        }
        if no_store {
            return Err(
                "--resume reads the runs it continues from the history: drop --no-store".into()
            );
        }
        if !history {
            return Err(
                "--resume needs the history: set XDG_DATA_HOME or HOME, or give --db".into()
            );
        }
        Ok(Some(given.map(|g| g.id)))
    }
}

/// `m3`, `c3`, `f3`, `n3` or `3`: a stored group.
fn group_ref(s: &str) -> Result<GroupRef, String> {
    GroupRef::parse(s).ok_or_else(|| {
        format!(
            "{s:?} is not a group; write it as `linerate history` shows it: {}",
            GroupRef::forms()
        )
    })
}

/// The fleet command's rounds are a scaling curve's (see the module's doc): one run per host
/// count unless `--repeat` says otherwise, and every rounds flag needs `--scale`.
pub(super) fn for_curves(cmd: Command) -> Command {
    cmd.mut_subcommand("fleet", |fleet| {
        ["repeat", "until_ci", "seed"]
            .into_iter()
            .fold(fleet, |c, id| c.mut_arg(id, |a| a.requires("scale")))
            .mut_arg("repeat", |a| a.default_value("1"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_read_as_history_shows_it() {
        assert_eq!(group_ref("m3").map(|g| (g.kind(), g.id)), Ok((Some(GroupKind::Matrix), 3)));
        assert_eq!(group_ref("c12").map(|g| (g.kind(), g.id)), Ok((Some(GroupKind::Campaign), 12)));
        assert_eq!(group_ref("n5").map(|g| (g.kind(), g.id)), Ok((Some(GroupKind::Mesh), 5)));
        assert_eq!(group_ref("7"), Ok(GroupRef { letter: None, id: 7 }));
        for bad in ["0", "m0", "x3", "m", "-2", "3.5", "f-1"] {
            let e = group_ref(bad).expect_err(bad);
            assert!(e.contains("is not a group") && e.contains("m3 (a matrix)"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_group_of_another_kind_and_a_missing_history_are_refused() {
        let args =
            |r: &str| ResumeArgs { resume: Some(Some(group_ref(r).expect(r))), stop_after: None };
        assert_eq!(args("m3").group(MATRIX, false, true), Ok(Some(Some(3))));
        assert_eq!(args("3").group(CAMPAIGN, false, true), Ok(Some(Some(3))));
        let e = args("f3").group(MATRIX, false, true).expect_err("a fleet is not a matrix");
        assert!(e.contains("f3 is not a matrix") && e.contains("e.g. m3"), "{e}");
        let e = args("c3").group(MATRIX, true, true).expect_err("the kind is named first");
        assert!(e.contains("not a matrix"), "{e}");
        let e = args("c3").group(CAMPAIGN, true, true).expect_err("--no-store");
        assert!(e.contains("drop --no-store"), "{e}");
        let e = args("c3").group(CAMPAIGN, false, false).expect_err("no history");
        assert!(e.contains("give --db"), "{e}");
        let none = ResumeArgs { resume: None, stop_after: None };
        assert_eq!(none.group(CURVE, true, false), Ok(None), "no --resume, nothing to check");
        let newest = ResumeArgs { resume: Some(None), stop_after: None };
        assert_eq!(newest.group(CURVE, false, true), Ok(Some(None)));
    }

    #[test]
    fn rounds_never_cap_below_the_first_round() {
        let a = RoundsArgs {
            repeat: 12,
            until_ci: Some(5.0),
            max_repeat: 10,
            seed: Some(9),
            resume: ResumeArgs { resume: None, stop_after: None },
        };
        assert_eq!(
            a.rounds(),
            Rounds { repeat: 12, until_ci: Some(0.05), max_repeat: 12, seed: 9 }
        );
    }
}
