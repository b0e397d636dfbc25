//! A group's kind and parameters, typed.
//!
//! **Kinds.** A group is a matrix, a campaign, a `--find-max` search or a fleet (a single
//! fleet or a scaling curve); the history's `groups.kind` column holds [`GroupKind::as_str`].
//! A kind this build does not know (a newer linerate wrote it) reads as
//! [`GroupKind::Unknown`]: listed with its word, refused by what cannot read it, never guessed
//! at, and never in the way of the other groups.
//!
//! **Parameters.** `groups.params_json` holds the plan the group ran — what identifies it for
//! `--resume` and what a report rebuilds its cells from — and the seed of its run order.
//! Releases wrote three layouts, all read here and nowhere else:
//!
//! | version | layout | written by |
//! |---|---|---|
//! | 0 | the plan's keys at the top, the seed beside them | the first matrices and fleets (and every `--find-max` search) |
//! | 1 | `{"plan": …, "seed": …}` | matrices and fleets since `--resume`, every campaign |
//! | 2 | `{"version": 2, "plan": …, "seed": …}` | this release |
//!
//! Readers take the plan typed ([`GroupParams::plan`]: `plan::matrix::MatrixIdentity`,
//! `plan::fleet::FleetIdentity`, `plan::campaign::StoredCampaign`), each type defaulting the
//! keys older layouts lack, so nothing reads loose JSON keys. A version above
//! [`GROUP_PARAMS_VERSION`] is refused like a newer store.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The layout of group parameters this build writes.
pub const GROUP_PARAMS_VERSION: u64 = 2;

/// What a group of runs is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupKind {
    /// `linerate matrix`.
    Matrix,
    /// `linerate campaign`.
    Campaign,
    /// `linerate client --find-max`.
    FindMax,
    /// `linerate fleet`, with or without `--scale`.
    Fleet,
    /// `linerate mesh`.
    Mesh,
    /// A calibration of loopback placement on one host (`plan/placement.rs`): no runs, its
    /// trials in the parameters.
    Placement,
    /// A kind this build does not know, by its stored word.
    Unknown(String),
}

impl GroupKind {
    /// Every kind, in the order the history lists them.
    pub const ALL: [GroupKind; 6] = [
        GroupKind::Matrix,
        GroupKind::Campaign,
        GroupKind::FindMax,
        GroupKind::Fleet,
        GroupKind::Mesh,
        GroupKind::Placement,
    ];

    /// The word stored in `groups.kind` (and shown by `linerate history`).
    pub fn as_str(&self) -> &str {
        match self {
            GroupKind::Matrix => "matrix",
            GroupKind::Campaign => "campaign",
            GroupKind::FindMax => "find_max",
            GroupKind::Fleet => "fleet",
            GroupKind::Mesh => "mesh",
            GroupKind::Placement => "placement",
            GroupKind::Unknown(word) => word,
        }
    }

    /// The kind stored as `word`.
    pub fn of(word: &str) -> GroupKind {
        let known = GroupKind::ALL.into_iter().find(|k| k.as_str() == word);
        known.unwrap_or_else(|| GroupKind::Unknown(word.to_string()))
    }

    /// The letter before the id of a group of this kind where the commands take it (`m3`,
    /// `c4`, `f5`, `n6`): the one place the letters are spelled. A find-max search and a
    /// placement calibration have none (`history --group 6` lists them); a kind this build
    /// does not know is taken as a matrix's letter takes any group.
    pub fn letter(&self) -> Option<char> {
        match self {
            GroupKind::Campaign => Some('c'),
            GroupKind::Fleet => Some('f'),
            GroupKind::Mesh => Some('n'),
            GroupKind::FindMax | GroupKind::Placement => None,
            GroupKind::Matrix | GroupKind::Unknown(_) => Some('m'),
        }
    }

    /// How the commands take group `id` of this kind: `m3`, `c4`, `f5`, `n6`, `find-max 7`.
    pub fn reference(&self, id: i64) -> String {
        match (self, self.letter()) {
            (_, Some(letter)) => GroupRef { letter: Some(letter), id }.to_string(),
            (GroupKind::Placement, None) => format!("placement {id}"),
            (_, None) => format!("find-max {id}"),
        }
    }

    /// A group of this kind in a message's example, its id left open: `mN`, `nN`.
    pub fn placeholder(&self) -> String {
        format!("{}N", self.letter().unwrap_or('m'))
    }

    /// How messages name a group of this kind: `a matrix`, `a find-max search`.
    pub fn noun(&self) -> String {
        match self {
            GroupKind::Matrix => "a matrix".into(),
            GroupKind::Campaign => "a campaign".into(),
            GroupKind::FindMax => "a find-max search".into(),
            GroupKind::Fleet => "a fleet".into(),
            GroupKind::Mesh => "a mesh".into(),
            GroupKind::Placement => "a placement calibration".into(),
            GroupKind::Unknown(word) => format!("a {word:?} group (unknown to this linerate)"),
        }
    }
}

impl std::fmt::Display for GroupKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A group as the commands take it and `linerate history` shows it: the letter of its kind
/// and its id (`m3`), or the bare id (`3`). Read and written here only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRef {
    /// The letter of its kind ([`GroupKind::letter`]), if given.
    pub letter: Option<char>,
    /// The group's id (1 or more).
    pub id: i64,
}

impl GroupRef {
    /// The kinds a letter names, in the order messages list them.
    pub const LETTERED: [GroupKind; 4] =
        [GroupKind::Matrix, GroupKind::Campaign, GroupKind::Fleet, GroupKind::Mesh];

    /// `m3`, `c4`, `f5`, `n6` or `7`; None for anything else (no id of 1 or more, or a
    /// letter no kind has).
    pub fn parse(s: &str) -> Option<GroupRef> {
        let lettered = |c: &char| GroupRef::LETTERED.iter().any(|k| k.letter() == Some(*c));
        let letter = s.chars().next().filter(lettered);
        let digits = letter.map_or(s, |l| &s[l.len_utf8()..]);
        let id = digits.parse::<i64>().ok().filter(|id| *id > 0)?;
        Some(GroupRef { letter, id })
    }

    /// The kind its letter names, if it has one.
    pub fn kind(&self) -> Option<GroupKind> {
        GroupRef::LETTERED.into_iter().find(|k| self.letter.is_some() && k.letter() == self.letter)
    }

    /// How messages show the accepted forms: `m3 (a matrix), c3 (a campaign), f3 (a fleet or
    /// scaling curve) or n3 (a mesh)`.
    pub fn forms() -> String {
        let form = |k: &GroupKind| {
            let also = if *k == GroupKind::Fleet { " or scaling curve" } else { "" };
            format!("{}3 ({}{also})", k.letter().unwrap_or('m'), k.noun())
        };
        let forms: Vec<String> = GroupRef::LETTERED.iter().map(form).collect();
        match forms.split_last() {
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

impl std::fmt::Display for GroupRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.letter {
            Some(l) => write!(f, "{l}{}", self.id),
            None => write!(f, "{}", self.id),
        }
    }
}

/// A group's parameters: the plan it ran and the seed of its run order, from any layout.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupParams {
    /// The layout it was stored in (0, 1 or [`GROUP_PARAMS_VERSION`]).
    pub version: u64,
    /// The plan, as stored.
    plan: Value,
    /// The seed of its run order, if it has one.
    pub seed: Option<u64>,
}

impl GroupParams {
    /// The parameters of a group that runs `plan` in the order `seed` gives.
    pub fn new(plan: &impl Serialize, seed: Option<u64>) -> Result<GroupParams> {
        let plan = serde_json::to_value(plan).context("a group's plan does not serialize")?;
        Ok(GroupParams { version: GROUP_PARAMS_VERSION, plan, seed })
    }

    /// Parameters as stored in any layout a release wrote.
    pub fn read(stored: Value) -> Result<GroupParams> {
        let seed = stored["seed"].as_u64();
        let version = match (&stored["version"], stored["plan"].is_object()) {
            (Value::Null, false) => 0,
            (Value::Null, true) => 1,
            (v, _) => v.as_u64().context("its \"version\" is not a number")?,
        };
        if version > GROUP_PARAMS_VERSION {
            bail!(
                "its parameters are of layout {version}, newer than this linerate reads \
                 ({GROUP_PARAMS_VERSION}): upgrade linerate"
            );
        }
        let plan = match version {
            0 => {
                let mut plan = stored;
                if let Some(map) = plan.as_object_mut() {
                    map.remove("seed");
                }
                plan
            }
            _ => stored["plan"].clone(),
        };
        Ok(GroupParams { version, plan, seed })
    }

    /// The layout this build writes.
    pub fn to_json(&self) -> Value {
        json!({ "version": GROUP_PARAMS_VERSION, "plan": self.plan, "seed": self.seed })
    }

    /// The plan, read as `T` (whose defaults stand for what older layouts did not store).
    pub fn plan<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.plan.clone()).context("its stored plan cannot be read")
    }

    /// The plan as stored, for comparing plans (`store::resume`).
    pub fn plan_json(&self) -> &Value {
        &self.plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_reference_reads_as_it_prints() {
        for kind in GroupRef::LETTERED {
            let r = GroupRef::parse(&kind.reference(12)).expect("a reference reads back");
            assert_eq!((r.id, r.kind()), (12, Some(kind.clone())), "{kind}");
            assert_eq!(r.to_string(), kind.reference(12));
        }
        assert_eq!(GroupKind::Matrix.reference(3), "m3");
        assert_eq!(GroupKind::Mesh.reference(3), "n3");
        assert_eq!(GroupKind::FindMax.reference(3), "find-max 3");
        assert_eq!(GroupKind::Placement.reference(3), "placement 3");
        assert_eq!(GroupRef::parse("7"), Some(GroupRef { letter: None, id: 7 }));
        assert_eq!(GroupRef::parse("7").and_then(|r| r.kind()), None);
        for bad in ["0", "m0", "x3", "m", "-2", "3.5", "f-1", "", "mm3", "m 3"] {
            assert_eq!(GroupRef::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            GroupRef::forms(),
            "m3 (a matrix), c3 (a campaign), f3 (a fleet or scaling curve) or n3 (a mesh)"
        );
    }

    #[test]
    fn every_layout_a_release_wrote_reads_as_the_same_plan_and_seed() {
        let plan = json!({ "axes": [["P=1", "P=2"]], "repeat": 3 });
        let layouts = [
            (json!({ "axes": [["P=1", "P=2"]], "repeat": 3, "seed": 7 }), 0),
            (json!({ "plan": plan, "seed": 7 }), 1),
            (json!({ "version": 2, "plan": plan, "seed": 7 }), 2),
        ];
        for (stored, version) in layouts {
            let p = GroupParams::read(stored.clone()).expect("reads");
            assert_eq!((p.version, p.plan_json(), p.seed), (version, &plan, Some(7)), "{stored}");
            let again = GroupParams::read(p.to_json()).expect("rereads");
            assert_eq!((again.plan_json(), again.seed), (&plan, Some(7)));
        }
        let newer = GroupParams::read(json!({ "version": 3, "plan": {} }));
        assert!(newer.expect_err("refused").to_string().contains("upgrade linerate"));
    }

    #[test]
    fn kinds_read_back_from_their_words_and_unknown_words_are_kept() {
        for k in GroupKind::ALL {
            assert_eq!(GroupKind::of(k.as_str()), k);
        }
        assert_eq!(GroupKind::of("torus"), GroupKind::Unknown("torus".into()));
        assert_eq!(GroupKind::of("torus").as_str(), "torus");
    }
}
