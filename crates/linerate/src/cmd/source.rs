//! Report sources: a stored run, matrix, campaign, fleet or mesh from the history, or a saved JSON
//! document, turned into a `report::model::Source` (used by `report` and `compare --html`).
//!
//! Stored groups keep how their cells were made: a matrix its axes (as labels), a campaign its
//! parsed plan and seed. Cells are rebuilt from those, so a report lists cells that never ran
//! (an interrupted matrix) as "no completed run" rather than dropping them. No cell label is
//! read back into axis values: a matrix whose stored axes this build does not know is
//! reported by its stored cell labels as they are (`matrix_cells`).
//!
//! Must not compute figures (`report::model` does) or format them (`report::*`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::plan::HistoryRef;
use crate::plan::campaign::{CampaignPlan, StoredCampaign, Tier};
use crate::plan::fleet::FleetIdentity;
use crate::plan::matrix::{AxisValue, Cell, MatrixIdentity, cells_of};
use crate::plan::mesh::MeshIdentity;
use crate::record::{Failure, LinkAssumption, Outcome, RunRecord};
use crate::report::model::{InputRun, ReportKind, Source, TierInput};
use crate::stats::campaign::{TierPlace, tier_server};
use crate::stats::campaign_fleet::FleetShape;
use crate::stats::mesh::MeshShape;
use crate::store::{GroupKind, GroupRow, RunMeta, Store, Stored};

fn is_ipv6(server: &str) -> bool {
    server.starts_with('[')
}

/// One run as a one-cell report.
fn single_run(title: String, id: Option<i64>, record: RunRecord) -> Source {
    let place = TierPlace { name: title.clone(), server: record.server.clone(), link: record.link };
    Source {
        kind: ReportKind::Run,
        finished: record.outcome == Outcome::Completed,
        title,
        name: None,
        seed: None,
        group: None,
        notes: Vec::new(),
        mesh: None,
        tiers: vec![TierInput {
            ipv6: is_ipv6(&place.server),
            place,
            cells: vec![Cell { index: 0, values: Vec::new(), stored_as: None }],
            until_ci: None,
            stopped: None,
            runs: vec![InputRun { cell: 0, repetition: 1, id, record }],
            fleet: None,
        }],
    }
}

/// The report source of a stored run or group.
pub fn load(db: &Path, which: HistoryRef) -> Result<Source> {
    let store = super::history::open_existing(db)?;
    let which = store.resolve(which, false)?;
    load_from(&store, which)
}

/// The report source of a resolved run or group of an open history.
pub fn load_from(store: &Store, which: Stored) -> Result<Source> {
    let db = store.path();
    match which {
        Stored::Run(id) => {
            let (_, record) = store
                .run(id)?
                .ok_or_else(|| Failure::usage(format!("no run {id} in {}", db.display())))?;
            Ok(single_run(format!("run {id}"), Some(id), record))
        }
        Stored::Group(id) => {
            let group = store.group(id)?.ok_or_else(|| {
                Failure::usage(format!(
                    "no group {id} in {} (see `linerate history`)",
                    db.display()
                ))
            })?;
            let runs = store.group_runs(id)?;
            match &group.kind {
                GroupKind::Campaign => stored_campaign(&group, runs),
                GroupKind::Matrix => stored_matrix(&group, runs),
                GroupKind::Fleet => stored_fleet(&group, runs),
                GroupKind::Mesh => stored_mesh(&group, runs),
                other => Err(Failure::usage(format!(
                    "group {id} is {}; `linerate report` reads runs, matrices, campaigns and \
                     fleets (list its runs with `linerate history --group {id}`)",
                    other.noun()
                ))
                .into()),
            }
        }
    }
}

type StoredRuns = Vec<(i64, RunMeta, RunRecord)>;

const UNFINISHED: &str = "not finished: interrupted, or stopped after failed runs";

/// A stored matrix's identity (what it ran); its defaults where the stored plan does not read.
fn matrix_identity(group: &GroupRow) -> MatrixIdentity {
    group.params.plan().unwrap_or(MatrixIdentity {
        host: None,
        port: None,
        axes: None,
        rounds: Default::default(),
        udp_bits_per_second: None,
        length_given: false,
        spec: None,
    })
}

/// Why a stored matrix is reported by its stored cell labels (its axes do not read).
const AXES_UNREAD: &str = "its stored axes are not ones this build knows (written by a newer \
    linerate?): each cell is named as stored, without the axis breakdown (report it with the \
    release that ran it for that)";

/// The cells of a stored matrix: the cartesian product of its axes, or, when they do not read
/// with this build, one cell per distinct stored cell label in the order they ran, known by
/// that label alone (never read back into axis values).
fn matrix_cells(identity: &MatrixIdentity, runs: &StoredRuns) -> Vec<Cell> {
    if let Some(axes) = &identity.axes {
        return cells_of(axes);
    }
    let mut cells: Vec<Cell> = Vec::new();
    for (_, meta, _) in runs {
        let label = meta.cell.clone().unwrap_or_default();
        if !cells.iter().any(|c| c.stored_as.as_ref() == Some(&label)) {
            cells.push(Cell { index: cells.len(), values: Vec::new(), stored_as: Some(label) });
        }
    }
    cells
}

/// A stored campaign's tiers, from its parsed plan.
fn campaign_tiers(group: &GroupRow) -> Result<Vec<Tier>> {
    let plan: StoredCampaign = group
        .params
        .plan()
        .with_context(|| format!("campaign group {}: its stored plan cannot be read", group.id))?;
    Ok(plan.tiers)
}

/// The cell names of a stored matrix or campaign in its plan's order, as its runs store them
/// (`P=4 w=800k`; a campaign's `TIER/CELL`, tiers in file order, a fleet tier's `k=K`): the
/// order in which `compare` lists cells, as the report's tables do. None for other groups
/// and for plans that do not read back.
pub(super) fn planned_cell_names(group: &GroupRow) -> Option<Vec<String>> {
    let labels = |cells: Vec<Cell>| cells.iter().map(Cell::label).collect::<Vec<_>>();
    match group.kind {
        GroupKind::Matrix => matrix_identity(group).axes.map(|axes| labels(cells_of(&axes))),
        GroupKind::Mesh => group.params.plan::<MeshIdentity>().ok().map(|i| i.labels()),
        GroupKind::Campaign => {
            let seed = group.params.seed.unwrap_or(0);
            let tiers = campaign_tiers(group).ok()?;
            let names = tiers.iter().enumerate().flat_map(|(i, tier)| {
                let cells = match &tier.fleet {
                    Some(f) => f.counts().iter().map(|k| format!("k={k}")).collect(),
                    None => labels(tier.matrix_plan(CampaignPlan::tier_seed(seed, i)).cells()),
                };
                cells.into_iter().map(move |c| format!("{}/{c}", tier.name))
            });
            Some(names.collect())
        }
        _ => None,
    }
}

/// A campaign tier's stored runs (`TIER/CELL`) matched to its cells (a fleet tier's: `k=K`).
fn input_runs(tier: &Tier, cells: &[Cell], runs: &StoredRuns, group: i64) -> Result<Vec<InputRun>> {
    let prefix = format!("{}/", tier.name);
    matched_runs(runs, group, &prefix, |label| tier.cell_index(cells, label))
}

/// Matches stored runs to cells by label (`prefix` + cell label; `index` names its cell).
fn matched_runs(
    runs: &StoredRuns,
    group: i64,
    prefix: &str,
    index: impl Fn(&str) -> Option<usize>,
) -> Result<Vec<InputRun>> {
    let mut out = Vec::new();
    for (id, meta, record) in runs {
        let Some(label) = meta.cell.as_deref().unwrap_or("").strip_prefix(prefix) else {
            continue;
        };
        let cell = index(label).with_context(|| {
            format!(
                "run {id} of group {group} is of cell {label:?}, which the group's stored plan \
                 does not have: the history was changed outside linerate"
            )
        })?;
        let repetition = meta.repetition.unwrap_or(1);
        out.push(InputRun { cell, repetition, id: Some(*id), record: record.clone() });
    }
    Ok(out)
}

fn stored_matrix(group: &GroupRow, runs: StoredRuns) -> Result<Source> {
    let identity = matrix_identity(group);
    let cells = matrix_cells(&identity, &runs);
    let notes = identity.axes.is_none().then(|| AXES_UNREAD.to_string()).into_iter().collect();
    let title = format!("matrix {}", GroupKind::Matrix.reference(group.id));
    cells_source(group, runs, cells, (title, notes), (identity.rounds.until_ci, None))
}

/// A stored mesh: one tier whose cells are its pairs, each known by its label `A -> B` (a
/// mesh whose stored plan does not read is reported by its runs' stored labels).
fn stored_mesh(group: &GroupRow, runs: StoredRuns) -> Result<Source> {
    let identity: Option<MeshIdentity> = group.params.plan().ok();
    let cells = match &identity {
        Some(i) => crate::plan::mesh::cells(&i.labels()),
        None => matrix_cells(&matrix_identity(group), &runs),
    };
    let until_ci = identity.as_ref().and_then(|i| i.rounds.until_ci);
    let shape = identity.map(|i| MeshShape {
        agents: i.agents.iter().map(|a| a.label.clone()).collect(),
        pairs: i.pairs,
    });
    let title = format!("mesh {}", GroupKind::Mesh.reference(group.id));
    cells_source(group, runs, cells, (title, Vec::new()), (until_ci, shape))
}

/// One tier of `cells`, the group's runs matched to them by label.
fn cells_source(
    group: &GroupRow,
    runs: StoredRuns,
    cells: Vec<Cell>,
    (title, notes): (String, Vec<String>),
    (until_ci, mesh): (Option<f64>, Option<MeshShape>),
) -> Result<Source> {
    let inputs = matched_runs(&runs, group.id, "", |label| {
        Some(cells.iter().find(|c| c.is_named(label))?.index)
    })?;
    let first = runs.first().map(|(_, _, r)| r);
    let server = first.map_or_else(|| "n/a".to_string(), |r| r.server.clone());
    Ok(Source {
        kind: ReportKind::Matrix,
        title: title.clone(),
        name: group.name.clone(),
        seed: group.params.seed,
        group: Some(group.id),
        finished: group.finished,
        notes,
        mesh,
        tiers: vec![TierInput {
            ipv6: is_ipv6(&server),
            place: TierPlace { name: title, server, link: first.and_then(|r| r.link) },
            cells,
            until_ci,
            stopped: (!group.finished).then(|| UNFINISHED.to_string()),
            runs: inputs,
            fleet: None,
        }],
    })
}

/// The targets and host counts of a stored fleet group (none where its plan does not read).
pub(super) fn stored_fleet_shape(group: &GroupRow) -> FleetShape {
    let plan: Option<FleetIdentity> = group.params.plan().ok();
    let (targets, scale) = plan.map_or((0, Vec::new()), |p| (p.targets.len(), p.scale));
    FleetShape { targets, scale }
}

/// A stored fleet or scaling curve: one fleet tier of its host runs, a curve's stored as cell
/// `k=K` with their repetition.
fn stored_fleet(group: &GroupRow, runs: StoredRuns) -> Result<Source> {
    let mut shape = stored_fleet_shape(group);
    shape.targets = shape.targets.max(if shape.scale.is_empty() { runs.len() } else { 0 });
    let mut inputs = Vec::new();
    for (id, meta, record) in runs {
        let cell = match shape.scale.is_empty() {
            true => 0,
            false => {
                let named = |k: &usize| meta.cell.as_deref() == Some(&format!("k={k}"));
                let at = shape.scale.iter().position(named);
                at.with_context(|| {
                    format!(
                        "run {id} of fleet {} is of cell {:?}, which its stored host counts do \
                         not have: the history was changed outside linerate",
                        GroupKind::Fleet.reference(group.id),
                        meta.cell
                    )
                })?
            }
        };
        let repetition = meta.repetition.unwrap_or(1);
        inputs.push(InputRun { cell, repetition, id: Some(id), record });
    }
    let seed = group.params.seed;
    Ok(fleet_source((Some(group.id), seed), group.finished, shape, inputs))
}

/// A fleet or scaling curve as a report source: one fleet tier named after its group (`fN`).
pub(super) fn fleet_source(
    (group, seed): (Option<i64>, Option<u64>),
    finished: bool,
    shape: FleetShape,
    runs: Vec<InputRun>,
) -> Source {
    let name = group.map_or_else(|| "fleet".to_string(), |g| GroupKind::Fleet.reference(g));
    let what = if shape.scale.is_empty() { "fleet" } else { "scaling curve" };
    let first = runs.first().map(|r| &r.record);
    let server = first.map_or_else(|| "n/a".to_string(), |r| r.server.clone());
    Source {
        kind: ReportKind::Fleet,
        title: format!("{what} {name}"),
        name: None,
        seed,
        group,
        finished,
        notes: Vec::new(),
        mesh: None,
        tiers: vec![TierInput {
            ipv6: is_ipv6(&server),
            place: TierPlace { name, server, link: first.and_then(|r| r.link) },
            cells: Vec::new(),
            until_ci: None,
            stopped: None,
            runs,
            fleet: Some(shape),
        }],
    }
}

fn stored_campaign(group: &GroupRow, runs: StoredRuns) -> Result<Source> {
    let tiers = campaign_tiers(group)?;
    let seed = group.params.seed;
    let mut inputs = Vec::new();
    for (i, tier) in tiers.iter().enumerate() {
        let m = tier.matrix_plan(CampaignPlan::tier_seed(seed.unwrap_or(0), i));
        let fleet = tier.fleet.as_ref().map(FleetShape::of);
        let cells = if fleet.is_some() { Vec::new() } else { m.cells() };
        let runs = input_runs(tier, &cells, &runs, group.id)?;
        let host = tier.fleet.as_ref().and_then(|f| f.targets.first()).map(|t| &t.host);
        inputs.push(TierInput {
            ipv6: host.unwrap_or(&tier.target.host).contains(':'),
            place: TierPlace {
                name: tier.name.clone(),
                server: tier_server(tier),
                link: tier.target.link,
            },
            cells,
            until_ci: m.until_ci,
            stopped: None,
            runs,
            fleet,
        });
    }
    if let (false, Some(last)) = (group.finished, inputs.last_mut()) {
        last.stopped = Some(UNFINISHED.into());
    }
    let name = group.name.clone().unwrap_or_else(|| "campaign".into());
    Ok(Source {
        kind: ReportKind::Campaign,
        title: format!("campaign {name} ({})", GroupKind::Campaign.reference(group.id)),
        name: Some(name),
        seed,
        group: Some(group.id),
        finished: group.finished,
        notes: Vec::new(),
        mesh: None,
        tiers: inputs,
    })
}

/// A run entry of a matrix or campaign document.
#[derive(Deserialize)]
struct DocRun {
    cell: usize,
    repetition: u32,
    record: RunRecord,
}

/// A document's summary: only what makes the cells; the figures are recomputed.
#[derive(Deserialize)]
struct DocSummary {
    cells: Vec<DocCell>,
}

/// A cell of a document: its values hold bytes, its label the user's words for them.
#[derive(Deserialize)]
struct DocCell {
    index: usize,
    values: Vec<AxisValue>,
    #[serde(default)]
    label: String,
}

impl DocCell {
    fn cell(self) -> Cell {
        Cell { index: self.index, values: self.values, stored_as: None }.worded_as(&self.label)
    }
}

#[derive(Deserialize)]
struct DocTier {
    name: String,
    server: String,
    link: Option<LinkAssumption>,
    stopped: Option<String>,
    summary: DocSummary,
    runs: Vec<DocRun>,
    /// A fleet tier's targets and host counts (with its figures, recomputed).
    #[serde(default)]
    fleet: Option<FleetShape>,
}

fn doc_tier(t: DocTier) -> TierInput {
    TierInput {
        ipv6: is_ipv6(&t.server),
        place: TierPlace { name: t.name, server: t.server, link: t.link },
        cells: t.summary.cells.into_iter().map(DocCell::cell).collect(),
        until_ci: None,
        stopped: t.stopped,
        runs: t
            .runs
            .into_iter()
            .map(|r| InputRun {
                cell: r.cell,
                repetition: r.repetition,
                id: None,
                record: r.record,
            })
            .collect(),
        fleet: t.fleet,
    }
}

fn field<T: serde::de::DeserializeOwned>(doc: &Value, key: &str, path: &Path) -> Result<T> {
    serde_json::from_value(doc[key].clone()).with_context(|| {
        format!(
            "{}: its {key:?} is missing or not what a linerate document holds (docs/JSON.md)",
            path.display()
        )
    })
}

/// A `linerate.run`, `linerate.matrix` or `linerate.campaign` document; figures are
/// recomputed from its records, so a report of a file equals a report of the same runs stored.
pub(super) fn from_file(path: &Path) -> Result<Source> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!("cannot read {} (give a run id, mN, cN or a JSON file)", path.display())
    })?;
    let doc: Value = serde_json::from_str(&text).with_context(|| {
        format!("{} is not JSON: give a document saved from linerate -J", path.display())
    })?;
    let title = path.file_name().map_or("report".into(), |n| n.to_string_lossy().into_owned());
    let seed = doc["seed"].as_u64();
    match doc["kind"].as_str() {
        Some("linerate.run") => Ok(single_run(title, None, field(&doc, "record", path)?)),
        Some("linerate.matrix") => {
            let runs: Vec<DocRun> = field(&doc, "runs", path)?;
            let summary: DocSummary = field(&doc, "summary", path)?;
            let stopped: Option<String> = field(&doc, "stopped", path)?;
            let server = runs.first().map_or_else(|| "n/a".into(), |r| r.record.server.clone());
            let link = runs.first().and_then(|r| r.record.link);
            let tier =
                DocTier { name: title.clone(), server, link, stopped, summary, runs, fleet: None };
            let mut tier = doc_tier(tier);
            tier.until_ci = doc["until_ci"].as_f64();
            Ok(Source {
                kind: ReportKind::Matrix,
                finished: tier.stopped.is_none(),
                title,
                name: None,
                seed,
                group: None,
                notes: Vec::new(),
                mesh: None,
                tiers: vec![tier],
            })
        }
        Some("linerate.campaign") => {
            let tiers: Vec<DocTier> = field(&doc, "tiers", path)?;
            Ok(Source {
                kind: ReportKind::Campaign,
                title,
                name: doc["name"].as_str().map(String::from),
                seed,
                group: doc["group"].as_i64(),
                finished: doc["finished"].as_bool().unwrap_or(false),
                notes: Vec::new(),
                mesh: None,
                tiers: tiers.into_iter().map(doc_tier).collect(),
            })
        }
        other => bail!(
            "{}: a document of kind {} — `linerate report` reads linerate.run, linerate.matrix \
             and linerate.campaign documents (docs/JSON.md)",
            path.display(),
            other.map_or("(none)".into(), |k| format!("{k:?}"))
        ),
    }
}
