//! `linerate compare fA fB`: two stored fleets, or two stored scaling curves, compared
//! (`stats::fleet_compare`), in text or as one `linerate.fleet_compare` JSON document.
//!
//! A fleet is compared only with a fleet of its own form: a fleet against a run, a matrix or a
//! campaign, or a single fleet against a scaling curve, is refused naming both kinds, because
//! their figures answer different questions. `--html` is refused for fleets (not built yet).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use linerate_proto::Environment;

use super::compare::{ALPHA, name};
use super::source::{load_from, stored_fleet_shape};
use crate::record::{Failure, Outcome, RunRecord};
use crate::report::fleet_compare::{FleetCompareDocument, FleetCompared, render};
use crate::report::model::{Report, build};
use crate::stats::environment::end_changes;
use crate::stats::fleet::summarize_fleet;
use crate::stats::fleet_compare::{compare_curves, compare_fleets};
use crate::stats::settings::setting_changes;
use crate::store::{GroupKind, Store, Stored};

/// What a stored reference is, for deciding and for the errors.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Fleet,
    Curve,
    Other(String),
}

fn kind_of(store: &Store, r: Stored) -> Result<Kind> {
    let Stored::Group(id) = r else { return Ok(Kind::Other("a run".into())) };
    let Some(g) = store.group(id)? else { return Ok(Kind::Other("a group".into())) };
    Ok(match g.kind {
        GroupKind::Fleet if !stored_fleet_shape(&g).scale.is_empty() => Kind::Curve,
        GroupKind::Fleet => Kind::Fleet,
        other => Kind::Other(other.noun()),
    })
}

fn words(k: &Kind) -> &str {
    match k {
        Kind::Fleet => "a fleet",
        Kind::Curve => "a fleet scaling curve",
        Kind::Other(w) => w,
    }
}

/// Compares A and B when either is a fleet (None when neither is: `compare` goes on).
pub(super) fn run(
    store: &Store,
    (a, b): (Stored, Stored),
    json: bool,
    html: bool,
) -> Result<Option<ExitCode>> {
    let (ka, kb) = (kind_of(store, a)?, kind_of(store, b)?);
    let fleet = |k: &Kind| matches!(k, Kind::Fleet | Kind::Curve);
    if !fleet(&ka) && !fleet(&kb) {
        return Ok(None);
    }
    let (na, nb) = (name(store, a), name(store, b));
    if ka != kb {
        let why = format!(
            "{na} is {} and {nb} is {}: compare a fleet with a fleet and a scaling curve with a \
             scaling curve (`linerate history` lists them)",
            words(&ka),
            words(&kb)
        );
        return Err(Failure::usage(why).into());
    }
    if html {
        let why = format!(
            "{na} and {nb} are fleets: their comparison is built in text and JSON (-J); an HTML \
             page of a fleet comparison is not built yet, drop --html"
        );
        return Err(Failure::usage(why).into());
    }
    let (ra, rb) = (build(load_from(store, a)?), build(load_from(store, b)?));
    let (Some(fa), Some(fb)) = (ra.fleet(), rb.fleet()) else {
        unreachable!("fleet groups make fleet reports")
    };
    let compared = if ka == Kind::Curve {
        FleetCompared::Scale(compare_curves(&fa.curve, &fb.curve, ALPHA))
    } else {
        let empty = || summarize_fleet(&[]);
        let (sa, sb) =
            [fa, fb].map(|f| f.runs.first().map_or_else(empty, |r| r.summary.clone())).into();
        FleetCompared::Fleet(compare_fleets(&sa, &sb, ALPHA))
    };
    let (settings, environment) = match (first_measured(&ra), first_measured(&rb)) {
        (Some(x), Some(y)) => {
            let settings = setting_changes(x, y).into_iter().filter(|c| c.key != "server");
            let env = end_changes("coordinator", client_env(x), client_env(y));
            (settings.collect(), vec![env])
        }
        _ => (Vec::new(), Vec::new()),
    };
    let doc = FleetCompareDocument::new((na, nb), settings, environment, compared);
    let mut out = std::io::stdout().lock();
    render(&doc, json, &mut out)?;
    out.flush()?;
    Ok(Some(ExitCode::SUCCESS))
}

/// The first host run of a fleet report that was measured (for the settings it ran with).
fn first_measured(r: &Report) -> Option<&RunRecord> {
    r.runs.iter().map(|r| &r.record).find(|r| r.outcome == Outcome::Completed)
}

fn client_env(r: &RunRecord) -> Option<&Environment> {
    r.client.as_ref()?.environment.as_deref()
}
