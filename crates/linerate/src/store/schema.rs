//! Opening a history database safely: recognising the file, refusing what is not ours or is
//! newer than us, and creating or migrating the schema (docs/STORE.md).
//!
//! Nothing here writes to a file before it has been recognised as a linerate history of a
//! version we read (or as a new, empty file): a user's other database, a file from a newer
//! linerate and a damaged file are left byte for byte as they were. Every migration runs in one
//! `BEGIN IMMEDIATE` transaction, so a crash or a concurrent opener never sees half a schema.
//! This module must not know about run records: it deals in SQL and versions only.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use rusqlite::{Connection, ErrorCode, Transaction, TransactionBehavior};

use super::StoreError;

/// `PRAGMA application_id` of every linerate history database: ASCII "LNRT".
pub const APPLICATION_ID: i32 = 0x4C4E_5254;

/// The store schema version this linerate writes and the newest it reads (`PRAGMA user_version`).
pub const STORE_SCHEMA_VERSION: u32 = 1;

/// How long a writer waits for another process holding the database before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// One step of the schema's history: from version `to - 1` to `to`.
struct Migration {
    /// Version after this step.
    to: u32,
    /// The SQL that performs it.
    sql: &'static str,
}

/// Every step from an empty file to [`STORE_SCHEMA_VERSION`], oldest first. Append, never edit:
/// a released step is frozen, and `tests/fixtures/store-v<N>.sql` guards that it still loads.
const MIGRATIONS: &[Migration] = &[Migration { to: 1, sql: V1 }];

/// Version 1: groups of runs, runs with their indexed columns and raw record, labels.
const V1: &str = "
CREATE TABLE groups (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL,
    name             TEXT,
    started_unix_ms  INTEGER NOT NULL,
    finished_unix_ms INTEGER,
    params_json      TEXT    NOT NULL
) STRICT;
CREATE TABLE runs (
    id                       INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id                 INTEGER REFERENCES groups(id),
    kind                     TEXT    NOT NULL,
    cell                     TEXT,
    repetition               INTEGER,
    started_unix_ms          INTEGER NOT NULL,
    server                   TEXT    NOT NULL,
    protocol                 TEXT    NOT NULL,
    direction                TEXT    NOT NULL,
    streams                  INTEGER NOT NULL,
    block_bytes              INTEGER NOT NULL,
    window_bytes             INTEGER,
    bits_per_second_target   INTEGER NOT NULL,
    outcome                  TEXT    NOT NULL,
    receiver_bits_per_second REAL,
    record_json              TEXT    NOT NULL,
    record_schema_version    INTEGER NOT NULL
) STRICT;
CREATE TABLE run_labels (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    label  TEXT    NOT NULL,
    UNIQUE (run_id, label)
) STRICT;
CREATE INDEX runs_started ON runs(started_unix_ms);
CREATE INDEX runs_server ON runs(server, started_unix_ms);
CREATE INDEX runs_group ON runs(group_id);
CREATE INDEX run_labels_label ON run_labels(label, run_id);
CREATE INDEX groups_started ON groups(started_unix_ms);
";

/// Opens `path` (creating it and its directories), checks that it is a linerate history this
/// build reads, then switches it to WAL and brings its schema up to date.
pub(super) fn open_file(path: &Path) -> Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot create the directory {} for the history database ({e}): check its \
                 permissions, or use --db to pick another file",
                dir.display()
            )
        })?;
    }
    let mut conn = Connection::open(path).map_err(|e| sql_error(path, "opening", e))?;
    configure(&conn, path)?;
    recognise(&conn, path)?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .map_err(|e| sql_error(path, "switching to WAL", e))?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// A fresh in-memory database with the current schema.
pub(super) fn open_memory() -> Result<Connection> {
    let path = Path::new(":memory:");
    let mut conn = Connection::open_in_memory().map_err(|e| sql_error(path, "opening", e))?;
    configure(&conn, path)?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Per-connection settings; none of them writes to the file.
fn configure(conn: &Connection, path: &Path) -> Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| sql_error(path, "configuring", e))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(|e| sql_error(path, "configuring", e))?;
    Ok(())
}

/// The three header facts that say whose file this is, read without writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    application_id: i32,
    user_version: u32,
    objects: i64,
}

fn identity(conn: &Connection, path: &Path) -> Result<Identity> {
    let read = |e| sql_error(path, "reading the header of", e);
    let application_id =
        conn.pragma_query_value(None, "application_id", |r| r.get(0)).map_err(read)?;
    let user_version: i64 =
        conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(read)?;
    let objects: i64 =
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(read)?;
    // user_version is a signed 32-bit field; a negative one is not ours, so it maps to "newer".
    let user_version = u32::try_from(user_version).unwrap_or(u32::MAX);
    Ok(Identity { application_id, user_version, objects })
}

/// Refuses a file that is not a linerate history (and not empty) or that is newer than us.
fn recognise(conn: &Connection, path: &Path) -> Result<()> {
    let id = identity(conn, path)?;
    let empty = id.application_id == 0 && id.user_version == 0 && id.objects == 0;
    if id.application_id != APPLICATION_ID && !empty {
        return Err(StoreError::NotLinerate {
            path: path.to_path_buf(),
            application_id: id.application_id,
        }
        .into());
    }
    if id.user_version > STORE_SCHEMA_VERSION {
        return Err(
            StoreError::NewerSchema { path: path.to_path_buf(), found: id.user_version }.into()
        );
    }
    Ok(())
}

/// Runs every migration step above the file's version in one immediate transaction. The
/// version is read again inside the transaction: another process may have migrated meanwhile.
fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let current = identity(conn, path)?.user_version;
    if current == STORE_SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sql_error(path, "locking for the schema upgrade of", e))?;
    let current = identity(&tx, path)?.user_version;
    if current > STORE_SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { path: path.to_path_buf(), found: current }.into());
    }
    for step in MIGRATIONS.iter().filter(|m| m.to > current) {
        apply(&tx, step)
            .map_err(|e| sql_error(path, &format!("upgrading to schema {}", step.to), e))?;
    }
    tx.commit().map_err(|e| sql_error(path, "committing the schema upgrade of", e))?;
    Ok(())
}

fn apply(tx: &Transaction<'_>, step: &Migration) -> rusqlite::Result<()> {
    tx.execute_batch(step.sql)?;
    tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    tx.pragma_update(None, "user_version", step.to)
}

/// Turns a SQLite error into one that says whose fault it is and what to do.
pub(super) fn sql_error(path: &Path, doing: &str, e: rusqlite::Error) -> anyhow::Error {
    let p = path.to_path_buf();
    let detail = e.to_string();
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    };
    match code {
        Some(ErrorCode::NotADatabase) => StoreError::NotSqlite { path: p, detail }.into(),
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path: p, detail }.into(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => anyhow::anyhow!(
            "{doing} the history database {}: another process held it for more than {} s \
             ({detail}); wait for the other linerate to finish, or use --db to pick another file",
            p.display(),
            BUSY_TIMEOUT.as_secs()
        ),
        Some(ErrorCode::DiskFull) => anyhow::anyhow!(
            "{doing} the history database {}: the disk is full ({detail}); free some space, or \
             use --db to put the history elsewhere",
            p.display()
        ),
        Some(
            ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly
            | ErrorCode::SystemIoFailure,
        ) => anyhow::anyhow!(
            "{doing} the history database {}: this machine refused ({detail}); check the file's \
             and its directory's permissions, or use --db to pick another file",
            p.display()
        ),
        _ => anyhow::anyhow!(
            "{doing} the history database {} failed ({detail}): this is a bug in linerate, \
             please report it",
            p.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_contiguous_and_end_at_the_current_version() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.to as usize, i + 1, "step {i} must go to version {}", i + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.to), Some(STORE_SCHEMA_VERSION));
    }

    #[test]
    fn a_fresh_database_carries_our_identity() {
        let conn = open_memory().expect("open");
        let id = identity(&conn, Path::new(":memory:")).expect("identity");
        assert_eq!(id.application_id, APPLICATION_ID);
        assert_eq!(id.user_version, STORE_SCHEMA_VERSION);
        assert!(id.objects >= 8, "tables and indexes exist: {id:?}");
    }
}
