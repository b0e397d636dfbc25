//! The run history: an embedded SQLite database (docs/STORE.md) that keeps every run record as
//! raw JSON beside a few indexed columns, and groups runs into matrices, campaigns and
//! searches.
//!
//! The stored JSON record is the single source of truth; the columns (server, protocol,
//! streams, the first direction's receiver rate, …) are copies made at insert time so that
//! listing and filtering never parse JSON, and summaries are recomputed from the record on
//! read. A record that no longer parses is reported for that run alone and never stops the
//! rest of the history from being listed.
//!
//! This module must not print, must not decide where the database lives beyond offering
//! [`Store::default_path`] (the CLI turns `--db` into a path), and must not compute statistics
//! beyond calling `stats::summarize` for the indexed rate. It never writes to a file it does
//! not recognise as a linerate history of a version it reads (see [`schema`]).

mod error;
mod group;
mod open;
mod placement;
mod query;
pub mod resume;
pub mod schema;
pub mod spill;

#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use crate::plan::HistoryRef;
use crate::record::RunRecord;

pub use error::StoreError;
pub use group::{GroupKind, GroupParams, GroupRef};
pub use open::Access;

/// What produced a stored run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// A single test run on its own.
    Test,
    /// One cell (one repetition) of a matrix.
    MatrixCell,
    /// One trial of a `--find-max` search.
    FindMaxTrial,
    /// One cell (one repetition) of a campaign.
    CampaignCell,
    /// One host of a fleet.
    FleetHost,
    /// One pair test (one repetition of one pair) of a mesh.
    MeshPair,
}

impl RunKind {
    /// Every kind, in declaration order.
    pub const ALL: [RunKind; 6] = [
        RunKind::Test,
        RunKind::MatrixCell,
        RunKind::FindMaxTrial,
        RunKind::CampaignCell,
        RunKind::FleetHost,
        RunKind::MeshPair,
    ];

    /// The kind of group a run of this kind belongs to (a test on its own: none).
    pub fn group_kind(self) -> Option<GroupKind> {
        match self {
            RunKind::Test => None,
            RunKind::MatrixCell => Some(GroupKind::Matrix),
            RunKind::FindMaxTrial => Some(GroupKind::FindMax),
            RunKind::CampaignCell => Some(GroupKind::Campaign),
            RunKind::FleetHost => Some(GroupKind::Fleet),
            RunKind::MeshPair => Some(GroupKind::Mesh),
        }
    }

    /// The name stored in the `kind` column (the same as the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Test => "test",
            RunKind::MatrixCell => "matrix_cell",
            RunKind::FindMaxTrial => "find_max_trial",
            RunKind::CampaignCell => "campaign_cell",
            RunKind::FleetHost => "fleet_host",
            RunKind::MeshPair => "mesh_pair",
        }
    }

    /// The kind stored as `name`, if it is one this linerate knows.
    pub fn parse(name: &str) -> Option<RunKind> {
        RunKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// What a stored run was part of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// What produced the run.
    pub kind: RunKind,
    /// The group (matrix, campaign, search) it belongs to, from [`Store::begin_group`].
    pub group: Option<i64>,
    /// The cell of the group, in the user's words, e.g. `P=4 w=800k`.
    pub cell: Option<String>,
    /// Which repetition of the cell (1-based by convention of the caller).
    pub repetition: Option<u32>,
    /// User labels (`--label`). Stored as a set: duplicates are dropped, order is kept.
    pub labels: Vec<String>,
}

impl RunMeta {
    /// A single test with these labels.
    pub fn test(labels: Vec<String>) -> Self {
        Self { kind: RunKind::Test, group: None, cell: None, repetition: None, labels }
    }
}

/// One line of the history listing, from the indexed columns only (no JSON is parsed).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Run id, never reused.
    pub id: i64,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// What produced the run.
    pub kind: RunKind,
    /// The group it belongs to.
    pub group: Option<i64>,
    /// The cell of the group.
    pub cell: Option<String>,
    /// The server as the user named it, `host:port`.
    pub server: String,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// `upload`, `download` or `bidirectional`.
    pub direction: String,
    /// Streams per direction.
    pub streams: u32,
    /// `completed`, `interrupted` or `failed`.
    pub outcome: String,
    /// The receivers' rate, bits per second (None when nothing was received): both
    /// directions' total for a bidirectional run, as reports judge a run.
    pub bits_per_second: Option<f64>,
    /// A bidirectional run's directions (read from its record; empty for other runs).
    pub directions: Vec<crate::stats::matrix::DirectionRate>,
    /// User labels.
    pub labels: Vec<String>,
    /// Why a failed run failed (from its record); None for other outcomes.
    pub error: Option<String>,
    /// A request/response run's or a test under load's latency in brief (from its record);
    /// None for other runs.
    pub latency: Option<crate::stats::latency::LatencyBrief>,
}

/// A group of runs: a matrix, a campaign or a `--find-max` search.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRow {
    /// Group id, never reused.
    pub id: i64,
    /// What it is.
    pub kind: GroupKind,
    /// The user's name for it, if any.
    pub name: Option<String>,
    /// When it began, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// The plan it ran and its order seed.
    pub params: GroupParams,
    /// True once [`Store::finish_group`] was called; false for a group that was interrupted.
    pub finished: bool,
}

/// Which runs [`Store::list`] returns; every set field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Runs carrying this label.
    pub label: Option<String>,
    /// Runs against this server (any port of a host, or one `host:port`).
    pub server: Option<crate::plan::host::ServerMatch>,
    /// Runs that started at or after this time, milliseconds since the Unix epoch.
    pub since_unix_ms: Option<u64>,
    /// Runs of this group.
    pub group: Option<i64>,
    /// Runs with this outcome: `completed`, `interrupted` or `failed`.
    pub outcome: Option<&'static str>,
    /// At most this many (the newest).
    pub limit: Option<usize>,
}

/// A stored run or group: a [`HistoryRef`] once `last` has been resolved, so readers never
/// meet an unresolved `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// One run.
    Run(i64),
    /// A matrix, campaign or search (its group id).
    Group(i64),
}

/// An open history database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Store {
    /// `$XDG_DATA_HOME/linerate/history.sqlite`, else `$HOME/.local/share/linerate/history.sqlite`;
    /// None when neither variable gives an absolute directory.
    pub fn default_path() -> Option<PathBuf> {
        default_path_from(std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME"))
    }

    /// Opens (creating if need be) the history at `path`, and its parent directories, to store
    /// runs. Refuses, without writing to them, files that are not linerate histories or are
    /// newer than this linerate; brings older ones up to date in one transaction. Safe to call
    /// from many processes at once, on a new file too.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_for(path, Access::ReadWrite)
    }

    /// Opens the existing history at `path` to read it (`history`, `show`, `compare`,
    /// `report`, a gate's baseline): works on a read-only file, directory or file system and
    /// on a full disk, and never writes to the file. Storing into it fails.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        Self::open_for(path, Access::ReadOnly)
    }

    /// Opens the history at `path` for `access` ([`Store::open`], [`Store::open_read_only`]).
    pub fn open_for(path: &Path, access: Access) -> Result<Store> {
        let conn = open::open_file(path, access)?;
        Ok(Store { conn, path: path.to_path_buf() })
    }

    /// A history that lives in memory only and is gone when dropped (tests).
    #[cfg_attr(linerate_private, allow(dead_code))]
    pub fn open_in_memory() -> Result<Store> {
        Ok(Store { conn: open::open_memory()?, path: PathBuf::from(":memory:") })
    }

    /// The file this history lives in (`:memory:` for an in-memory one).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts a group of `kind` running the plan `params`; returns its id for
    /// [`RunMeta::group`].
    pub fn begin_group(
        &mut self,
        kind: GroupKind,
        name: Option<&str>,
        params: &GroupParams,
    ) -> Result<i64> {
        if let GroupKind::Unknown(word) = &kind {
            anyhow::bail!("cannot record a group of kind {word:?}: a bug in linerate");
        }
        let kind = kind.as_str();
        let params = serde_json::to_string(&params.to_json())?;
        self.conn
            .execute(
                "INSERT INTO groups (kind, name, started_unix_ms, params_json) VALUES (?1, ?2, ?3, ?4)",
                params![kind, name, query::int(crate::record::unix_ms_now())?, params],
            )
            .map_err(|e| self.fault("recording a group in", e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Marks group `id` finished (a group never finished was interrupted). Finishing twice
    /// keeps the first time.
    pub fn finish_group(&mut self, id: i64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE groups SET finished_unix_ms = coalesce(finished_unix_ms, ?2) WHERE id = ?1",
                params![id, query::int(crate::record::unix_ms_now())?],
            )
            .map_err(|e| self.fault("finishing a group in", e))
            .and_then(|n| match n {
                0 => Err(self.no_group(id)),
                _ => Ok(()),
            })
    }

    /// Stores one run with what it was part of, in one transaction; returns its id.
    pub fn insert_run(&mut self, record: &RunRecord, meta: &RunMeta) -> Result<i64> {
        if let Some(g) = meta.group
            && self.group(g)?.is_none()
        {
            return Err(self.no_group(g));
        }
        let json = serde_json::to_string(record)?;
        let path = &self.path;
        let fault = |e| error::sql_error(path, "storing a run in", e);
        // IMMEDIATE takes the write lock up front, so a concurrent writer waits (busy_timeout)
        // instead of failing halfway.
        let tx =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fault)?;
        let id = query::insert_run(&tx, record, &json, meta).map_err(fault)?;
        tx.commit().map_err(fault)?;
        Ok(id)
    }

    /// Runs matching `filter`, newest first (by start time, then id). Reads the indexed columns
    /// only, so runs whose stored record is damaged are still listed.
    pub fn list(&self, filter: &ListFilter) -> Result<Vec<RunRow>> {
        let rows = query::list(&self.conn, filter).map_err(|e| self.fault("listing runs of", e))?;
        rows.into_iter().map(query::with_kind).collect()
    }

    /// The runs of `filter` as a trend reads them (`filter.limit` is ignored: a trend is of
    /// every run in its span).
    pub fn trend_runs(&self, filter: &ListFilter) -> Result<Vec<crate::stats::trend::TrendRun>> {
        query::trend_runs(&self.conn, filter).map_err(|e| self.fault("reading the trend of", e))
    }

    /// The pair tests of the newest `meshes` meshes up to mesh `group` (itself included), for
    /// a mesh's watch of its pairs against the meshes before it.
    pub fn pair_runs(
        &self,
        group: i64,
        meshes: usize,
    ) -> Result<Vec<crate::stats::mesh_watch::PairRun>> {
        query::pair_runs(&self.conn, group, meshes)
            .map_err(|e| self.fault("reading the meshes of", e))
    }

    /// Run `id` with its meta and record; None if there is no such run. A stored record that
    /// cannot be read is a [`StoreError::UnreadableRecord`] naming the run.
    pub fn run(&self, id: i64) -> Result<Option<(RunMeta, RunRecord)>> {
        let raw = query::raw_run(&self.conn, "WHERE id = ?1", id)
            .map_err(|e| self.fault("reading a run of", e))?;
        raw.into_iter().next().map(|r| r.decode().map(|(_, m, rec)| (m, rec))).transpose()
    }

    /// Group `id`; None if there is no such group.
    pub fn group(&self, id: i64) -> Result<Option<GroupRow>> {
        let raw = self
            .conn
            .query_row(&format!("{} WHERE id = ?1", query::GROUP_SELECT), [id], query::raw_group)
            .optional()
            .map_err(|e| self.fault("reading a group of", e))?;
        raw.map(query::RawGroup::decode).transpose()
    }

    /// The newest `limit` groups, newest first.
    pub fn groups(&self, limit: usize) -> Result<Vec<GroupRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "{} ORDER BY started_unix_ms DESC, id DESC LIMIT ?1",
                query::GROUP_SELECT
            ))
            .map_err(|e| self.fault("listing groups of", e))?;
        let raw = stmt
            .query_map([limit], query::raw_group)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.fault("listing groups of", e))?;
        raw.into_iter().map(query::RawGroup::decode).collect()
    }

    /// Every run of group `id` in the order they were stored (the order they ran). Fails on
    /// the first run whose record cannot be read, naming it.
    pub fn group_runs(&self, id: i64) -> Result<Vec<(i64, RunMeta, RunRecord)>> {
        let raw = query::raw_run(&self.conn, "WHERE group_id = ?1 ORDER BY id", id)
            .map_err(|e| self.fault("reading the runs of a group of", e))?;
        raw.into_iter().map(query::RawRun::decode).collect()
    }

    /// `which` with `last` resolved: the newest run, or the matrix, campaign or fleet it belongs to
    /// (`runs_only`: always the run). Other references pass through unchecked (whether they
    /// exist is for the reader to say, with its own words).
    pub fn resolve(&self, which: HistoryRef, runs_only: bool) -> Result<Stored> {
        match which {
            HistoryRef::Run(id) => return Ok(Stored::Run(id)),
            HistoryRef::Group(id) => return Ok(Stored::Group(id)),
            HistoryRef::Last => {}
        }
        let newest = self
            .conn
            .query_row(
                "SELECT r.id, g.id, g.kind FROM runs r LEFT JOIN groups g ON g.id = r.group_id \
                 ORDER BY r.id DESC LIMIT 1",
                [],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.fault("finding the newest run of", e))?;
        let Some((run, group, kind)) = newest else {
            return Err(crate::record::Failure::usage(format!(
                "the history at {} has no runs yet, so there is no `last`: run a test first",
                self.path.display()
            ))
            .into());
        };
        Ok(match (group, kind.as_deref()) {
            (Some(g), Some("matrix" | "campaign" | "fleet")) if !runs_only => Stored::Group(g),
            _ => Stored::Run(run),
        })
    }

    fn fault(&self, doing: &str, e: rusqlite::Error) -> anyhow::Error {
        error::sql_error(&self.path, doing, e)
    }

    fn no_group(&self, id: i64) -> anyhow::Error {
        anyhow::anyhow!(
            "group {id} does not exist in the history database {} (a bug in linerate: groups \
             come from begin_group on the same file)",
            self.path.display()
        )
    }
}

/// [`Store::default_path`] with the environment passed in. Relative or empty values are
/// ignored, as the XDG Base Directory specification requires.
fn default_path_from(xdg_data_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let data =
        absolute(xdg_data_home).or_else(|| absolute(home).map(|h| h.join(".local/share")))?;
    Some(data.join("linerate").join("history.sqlite"))
}
