//! The SQL behind [`super::Store`]'s reads and writes, and the turning of rows back into
//! typed values.
//!
//! Rows come out "raw" (strings and integers as stored) and are decoded separately, so that a
//! row damaged outside linerate becomes an error naming that run or group rather than a
//! failed query. This module must not open files or manage transactions: callers hand it a
//! connection or a transaction.

use anyhow::Result;
use linerate_proto::{Direction, Protocol};
use rusqlite::types::Type;
use rusqlite::{Connection, Row, ToSql, Transaction, params};

use super::{GroupKind, GroupParams, GroupRow, ListFilter, RunKind, RunMeta, RunRow, StoreError};
use crate::plan::host::ServerMatch;
use crate::record::{Outcome, RunRecord, SCHEMA_VERSION};
use crate::stats::trend::{SeriesKey, TrendPoint, TrendRun};

/// Stores one run (`json` is `record` serialized) and its labels; the caller commits.
pub(super) fn insert_run(
    tx: &Transaction<'_>,
    record: &RunRecord,
    json: &str,
    meta: &RunMeta,
) -> rusqlite::Result<i64> {
    let spec = &record.spec;
    tx.execute(
        "INSERT INTO runs (group_id, kind, cell, repetition, started_unix_ms, server, protocol,
             direction, streams, block_bytes, window_bytes, bits_per_second_target, outcome,
             receiver_bits_per_second, record_json, record_schema_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            meta.group,
            meta.kind.as_str(),
            meta.cell,
            meta.repetition,
            int(record.started_unix_ms)?,
            record.server,
            protocol_name(spec.protocol),
            direction_name(spec.direction),
            spec.streams,
            spec.block_bytes,
            spec.window_bytes.map(int).transpose()?,
            int(spec.bits_per_second)?,
            outcome_name(&record.outcome),
            receiver_rate(record),
            json,
            record.schema_version,
        ],
    )?;
    let id = tx.last_insert_rowid();
    let mut label =
        tx.prepare_cached("INSERT OR IGNORE INTO run_labels (run_id, label) VALUES (?1, ?2)")?;
    for l in &meta.labels {
        label.execute(params![id, l])?;
    }
    Ok(id)
}

/// `v` as SQLite's signed 64-bit integer; values past `i64::MAX` (no real count or time
/// reaches them) are refused rather than wrapped.
pub(super) fn int(v: u64) -> rusqlite::Result<i64> {
    i64::try_from(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// Column `i` as an unsigned count or time; a negative value is a conversion error.
fn get_u64(r: &Row<'_>, i: usize) -> rusqlite::Result<u64> {
    let v: i64 = r.get(i)?;
    u64::try_from(v)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, Type::Integer, Box::new(e)))
}

/// The first direction's receiver rate, the figure a listing shows; None if nothing arrived.
fn receiver_rate(record: &RunRecord) -> Option<f64> {
    let summary = crate::stats::summarize(record);
    let first = summary.directions.first()?;
    first.receiver.as_ref()?.figures.bits_per_second.filter(|r| r.is_finite())
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
    }
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Upload => "upload",
        Direction::Download => "download",
        Direction::Bidirectional => "bidirectional",
    }
}

fn outcome_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Completed => "completed",
        Outcome::Interrupted => "interrupted",
        Outcome::Failed { .. } => "failed",
    }
}

/// The labels of run `id`, in the order they were stored.
fn labels(conn: &Connection, id: i64) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare_cached("SELECT label FROM run_labels WHERE run_id = ?1 ORDER BY rowid")?;
    stmt.query_map([id], |r| r.get(0))?.collect()
}

/// Runs matching `filter`, newest first, from the indexed columns only, each with its stored
/// kind name (decoded by the caller, so that a damaged row is named rather than hidden).
pub(super) fn list(
    conn: &Connection,
    filter: &ListFilter,
) -> rusqlite::Result<Vec<(RunRow, String)>> {
    let (clauses, mut args) = filter_clauses(filter);
    // SQLite reads a negative LIMIT as "no limit".
    let limit = filter.limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
    args.push(Box::new(limit));
    let mut sql = format!(
        "SELECT id, started_unix_ms, kind, group_id, cell, server, protocol, direction, streams,
                outcome, receiver_bits_per_second, {LATENCY_RUN}
         FROM runs"
    );
    if !clauses.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&clauses.join(" AND "));
    }
    sql.push_str(" ORDER BY started_unix_ms DESC, id DESC LIMIT ?");
    let mut stmt = conn.prepare_cached(&sql)?;
    let args: Vec<&dyn ToSql> = args.iter().map(|a| a.as_ref() as &dyn ToSql).collect();
    let rows = stmt.query_map(args.as_slice(), |r| {
        let row = RunRow {
            id: r.get(0)?,
            started_unix_ms: get_u64(r, 1)?,
            kind: RunKind::Test,
            group: r.get(3)?,
            cell: r.get(4)?,
            server: r.get(5)?,
            protocol: r.get(6)?,
            direction: r.get(7)?,
            streams: r.get(8)?,
            outcome: r.get(9)?,
            bits_per_second: r.get(10)?,
            labels: Vec::new(),
            error: None,
            latency: None,
            directions: Vec::new(),
        };
        Ok((row, r.get(2)?, r.get::<_, bool>(11)?))
    })?;
    let mut out = Vec::new();
    for listed in rows {
        let (mut row, kind, latency) = listed?;
        row.labels = labels(conn, row.id)?;
        if row.outcome == "failed" {
            row.error = failure(conn, row.id)?;
        }
        if latency {
            row.latency = record(conn, row.id)?
                .and_then(|r| crate::stats::latency::brief(&crate::stats::summarize(&r)));
        } else if row.direction == "bidirectional" && row.outcome != "failed" {
            // The indexed column holds the first direction; the listing shows both and their
            // total, as every other view does.
            let summary = record(conn, row.id)?.map(|r| crate::stats::summarize(&r));
            row.directions = summary
                .as_ref()
                .map(crate::stats::matrix::received_by_direction)
                .unwrap_or_default();
            if row.directions.len() > 1 {
                row.bits_per_second =
                    Some(crate::stats::matrix::DirectionRate::total(&row.directions));
            }
        }
        out.push((row, kind));
    }
    Ok(out)
}

/// True (1) for a request/response run or a test under load, whose latency the listing shows
/// and which are not throughput series; a record that is not valid JSON is neither. A CASE,
/// not AND: SQLite does not short-circuit AND, and `json_extract` fails on a damaged record.
const LATENCY_RUN: &str = "CASE WHEN json_valid(record_json)
          THEN json_extract(record_json, '$.spec.rr') IS NOT NULL
               OR json_extract(record_json, '$.probes') IS NOT NULL
          ELSE 0 END";

/// The WHERE clauses (joined by AND) and their arguments that select `filter`'s runs.
fn filter_clauses(filter: &ListFilter) -> (Vec<&'static str>, Vec<Box<dyn ToSql>>) {
    let mut clauses: Vec<&'static str> = Vec::new();
    let mut args: Vec<Box<dyn ToSql>> = Vec::new();
    if let Some(label) = &filter.label {
        clauses.push("id IN (SELECT run_id FROM run_labels WHERE label = ?)");
        args.push(Box::new(label.clone()));
    }
    match &filter.server {
        Some(ServerMatch::Exact(server)) => {
            clauses.push("server = ?");
            args.push(Box::new(server.clone()));
        }
        // substr, not LIKE: LIKE ignores case and reads `_` and `%` as wildcards.
        Some(ServerMatch::AnyPort(prefix)) => {
            clauses.push("substr(server, 1, ?) = ?");
            args.push(Box::new(i64::try_from(prefix.len()).unwrap_or(i64::MAX)));
            args.push(Box::new(prefix.clone()));
        }
        None => {}
    }
    if let Some(group) = &filter.group {
        clauses.push("group_id = ?");
        args.push(Box::new(*group));
    }
    if let Some(outcome) = &filter.outcome {
        clauses.push("outcome = ?");
        args.push(Box::new(*outcome));
    }
    if let Some(since) = filter.since_unix_ms {
        clauses.push("started_unix_ms >= ?");
        args.push(Box::new(i64::try_from(since).unwrap_or(i64::MAX)));
    }
    (clauses, args)
}

/// The runs of `filter` as a trend reads them (any order): each run's test, and its rate when
/// it completed and received something. Request/response runs and tests under load are not
/// throughput series and are left out, and so are a mesh's pair tests: their server is the
/// receiving agent, whose series would mix every sender's (a mesh watches each pair itself,
/// `stats::mesh_watch`).
pub(super) fn trend_runs(
    conn: &Connection,
    filter: &ListFilter,
) -> rusqlite::Result<Vec<TrendRun>> {
    let (clauses, args) = filter_clauses(filter);
    let mut sql = format!(
        "SELECT id, started_unix_ms, server, protocol, direction, streams, block_bytes,
                window_bytes, bits_per_second_target, outcome, receiver_bits_per_second,
                record_json
         FROM runs WHERE NOT {LATENCY_RUN} AND kind != 'mesh_pair'"
    );
    for c in clauses {
        sql.push_str(" AND ");
        sql.push_str(c);
    }
    let mut stmt = conn.prepare(&sql)?;
    let args: Vec<&dyn ToSql> = args.iter().map(|a| a.as_ref() as &dyn ToSql).collect();
    let rows = stmt.query_map(args.as_slice(), |r| {
        let (key, rate) = series_key(r, r.get(2)?)?;
        let (run, started_unix_ms) = (r.get(0)?, get_u64(r, 1)?);
        // The path's figures from the record (a record that cannot be read has none).
        let path = || {
            let json: String = r.get(11).unwrap_or_default();
            serde_json::from_str::<RunRecord>(&json)
                .map(|rec| crate::stats::trend_path::of(&rec))
                .unwrap_or_default()
        };
        let point = rate.map(|bits_per_second| TrendPoint {
            run,
            started_unix_ms,
            bits_per_second,
            path: path(),
        });
        Ok(TrendRun { key, point })
    })?;
    rows.collect()
}

/// A row's test (columns 3 to 8: protocol, direction, streams, block, window, target rate) with
/// `server`, and its receiver rate (column 10) when it completed (column 9) and received
/// something: what a trend and a mesh's watch read of each run.
fn series_key(r: &Row<'_>, server: String) -> rusqlite::Result<(SeriesKey, Option<f64>)> {
    let key = SeriesKey {
        server,
        protocol: r.get(3)?,
        direction: r.get(4)?,
        streams: r.get(5)?,
        block_bytes: get_u64(r, 6)?,
        window_bytes: r.get::<_, Option<i64>>(7)?.and_then(|w| u64::try_from(w).ok()),
        target_bits_per_second: get_u64(r, 8)?,
    };
    let outcome: String = r.get(9)?;
    let rate: Option<f64> = r.get(10)?;
    Ok((key, rate.filter(|b| outcome == "completed" && *b > 0.0)))
}

/// The pair tests of the newest `meshes` mesh groups before group `before` (or up to it).
pub(super) fn pair_runs(
    conn: &Connection,
    before: i64,
    meshes: usize,
) -> rusqlite::Result<Vec<crate::stats::mesh_watch::PairRun>> {
    let mut stmt = conn.prepare(
        "SELECT r.group_id, g.started_unix_ms, r.cell, r.protocol, r.direction, r.streams,
                r.block_bytes, r.window_bytes, r.bits_per_second_target, r.outcome,
                r.receiver_bits_per_second
         FROM runs r JOIN groups g ON g.id = r.group_id
         WHERE r.kind = 'mesh_pair' AND r.cell IS NOT NULL AND r.group_id IN (
             SELECT id FROM groups WHERE kind = 'mesh' AND id <= ?1
             ORDER BY started_unix_ms DESC, id DESC LIMIT ?2)",
    )?;
    let limit = i64::try_from(meshes).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![before, limit], |r| {
        let (key, bits_per_second) = series_key(r, String::new())?;
        Ok(crate::stats::mesh_watch::PairRun {
            group: r.get(0)?,
            group_started_unix_ms: get_u64(r, 1)?,
            cell: r.get(2)?,
            key,
            bits_per_second,
        })
    })?;
    rows.collect()
}

/// The record of run `id`; None when it cannot be read (the listing shows what it can).
fn record(conn: &Connection, id: i64) -> rusqlite::Result<Option<RunRecord>> {
    let json: String =
        conn.query_row("SELECT record_json FROM runs WHERE id = ?1", [id], |r| r.get(0))?;
    Ok(serde_json::from_str::<RunRecord>(&json).ok())
}

/// The error of failed run `id`, from its record (None if the record cannot say).
fn failure(conn: &Connection, id: i64) -> rusqlite::Result<Option<String>> {
    Ok(match record(conn, id)?.map(|r| r.outcome) {
        Some(Outcome::Failed { error, .. }) => Some(error.to_string()),
        _ => None,
    })
}

/// Puts the stored kind name into `row`, or names the run whose kind is unknown.
pub(super) fn with_kind((mut row, kind): (RunRow, String)) -> Result<RunRow> {
    row.kind = RunKind::parse(&kind).ok_or_else(|| StoreError::UnreadableRecord {
        run: row.id,
        detail: format!("unknown run kind {kind:?}"),
    })?;
    Ok(row)
}

/// One run as stored, before its record is parsed.
#[derive(Debug)]
pub(super) struct RawRun {
    id: i64,
    kind: String,
    group: Option<i64>,
    cell: Option<String>,
    repetition: Option<i64>,
    record_json: String,
    record_schema_version: i64,
    labels: Vec<String>,
}

/// Runs selected by `tail` (a WHERE clause with `?1` = `arg`, and an ORDER BY).
pub(super) fn raw_run(conn: &Connection, tail: &str, arg: i64) -> rusqlite::Result<Vec<RawRun>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, kind, group_id, cell, repetition, record_json, record_schema_version
         FROM runs {tail}"
    ))?;
    let rows = stmt.query_map([arg], |r| {
        Ok(RawRun {
            id: r.get(0)?,
            kind: r.get(1)?,
            group: r.get(2)?,
            cell: r.get(3)?,
            repetition: r.get(4)?,
            record_json: r.get(5)?,
            record_schema_version: r.get(6)?,
            labels: Vec::new(),
        })
    })?;
    let mut out = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    for run in &mut out {
        run.labels = labels(conn, run.id)?;
    }
    Ok(out)
}

impl RawRun {
    /// The run's id, meta and record, or an error naming the run.
    pub(super) fn decode(self) -> Result<(i64, RunMeta, RunRecord)> {
        let id = self.id;
        let bad = |detail: String| StoreError::UnreadableRecord { run: id, detail };
        let kind = RunKind::parse(&self.kind)
            .ok_or_else(|| bad(format!("unknown run kind {:?}", self.kind)))?;
        let repetition = self
            .repetition
            .map(u32::try_from)
            .transpose()
            .map_err(|_| bad(format!("repetition {:?} out of range", self.repetition)))?;
        if self.record_schema_version > i64::from(SCHEMA_VERSION) {
            return Err(bad(format!(
                "record schema {} is newer than this linerate reads (up to {SCHEMA_VERSION}); \
                 upgrade linerate",
                self.record_schema_version
            ))
            .into());
        }
        let record: RunRecord =
            serde_json::from_str(&self.record_json).map_err(|e| bad(e.to_string()))?;
        let meta =
            RunMeta { kind, group: self.group, cell: self.cell, repetition, labels: self.labels };
        Ok((id, meta, record))
    }
}

/// The columns of a group, in the order [`raw_group`] reads them.
pub(super) const GROUP_SELECT: &str = "SELECT id, kind, name, started_unix_ms,
    finished_unix_ms IS NOT NULL, params_json FROM groups";

/// One group as stored, before its parameters are parsed.
#[derive(Debug)]
pub(super) struct RawGroup {
    id: i64,
    kind: String,
    name: Option<String>,
    started_unix_ms: u64,
    finished: bool,
    params_json: String,
}

/// Reads a row of [`GROUP_SELECT`].
pub(super) fn raw_group(r: &Row<'_>) -> rusqlite::Result<RawGroup> {
    Ok(RawGroup {
        id: r.get(0)?,
        kind: r.get(1)?,
        name: r.get(2)?,
        started_unix_ms: get_u64(r, 3)?,
        finished: r.get(4)?,
        params_json: r.get(5)?,
    })
}

impl RawGroup {
    /// The group, or an error naming it.
    pub(super) fn decode(self) -> Result<GroupRow> {
        let params = serde_json::from_str(&self.params_json)
            .map_err(anyhow::Error::from)
            .and_then(GroupParams::read)
            .map_err(|e| {
                anyhow::anyhow!(
                    "group {}: stored parameters cannot be read ({e:#}); the row was changed \
                     outside linerate or by a newer one, its runs are unaffected",
                    self.id
                )
            })?;
        Ok(GroupRow {
            id: self.id,
            kind: GroupKind::of(&self.kind),
            name: self.name,
            started_unix_ms: self.started_unix_ms,
            params,
            finished: self.finished,
        })
    }
}
