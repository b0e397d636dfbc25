//! The history's schema: what identifies a linerate history, what this build reads, and the
//! migrations that create or upgrade it (docs/STORE.md).
//!
//! The version check and every migration run in one `BEGIN IMMEDIATE` transaction, so a crash
//! or a concurrent opener never sees half a schema. Opening the file (and refusing it before
//! anything is written) is `open`'s job. This module must not know about run records: it deals
//! in SQL and versions only.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::StoreError;
use super::error::sql_error;

/// `PRAGMA application_id` of every linerate history database: ASCII "LNRT".
pub const APPLICATION_ID: i32 = 0x4C4E_5254;

/// The store schema version this linerate writes and the newest it reads (`PRAGMA user_version`).
pub const STORE_SCHEMA_VERSION: u32 = 1;

/// How long a connection waits for another process holding the database before giving up.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

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

/// The three header facts that say whose file this is, read without writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    application_id: i32,
    pub(super) user_version: u32,
    objects: i64,
}

/// What a file is, once recognised: a new (empty) file, or a linerate history of a version this
/// build reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    /// No tables, no `application_id`, no `user_version` (an empty file counts): ours to set up.
    Empty,
    /// A linerate history of this store schema version (at most [`STORE_SCHEMA_VERSION`]).
    Ours(u32),
}

/// The identity of the file behind `conn`, read in one statement, so in one read transaction:
/// a file another linerate is creating at this moment is seen either before its schema
/// transaction or after it, never half-way (three separate reads once saw the old
/// `application_id` and the new tables, and called a new history "another program's").
pub(super) fn identity(conn: &Connection) -> rusqlite::Result<Identity> {
    conn.query_row(
        "SELECT a.application_id, u.user_version, (SELECT count(*) FROM sqlite_master) \
         FROM pragma_application_id AS a, pragma_user_version AS u",
        [],
        |r| {
            let user_version: i64 = r.get(1)?;
            // user_version is a signed 32-bit field; a negative one is not ours: "newer".
            let user_version = u32::try_from(user_version).unwrap_or(u32::MAX);
            Ok(Identity { application_id: r.get(0)?, user_version, objects: r.get(2)? })
        },
    )
}

/// Whether this build may use a file of identity `id`: refuses one that is not a linerate
/// history (and not empty) or is newer than us.
pub(super) fn recognise(id: Identity, path: &Path) -> Result<Known, StoreError> {
    let empty = id.application_id == 0 && id.user_version == 0 && id.objects == 0;
    if empty {
        return Ok(Known::Empty);
    }
    if id.application_id != APPLICATION_ID {
        return Err(StoreError::NotLinerate {
            path: path.to_path_buf(),
            application_id: id.application_id,
        });
    }
    if id.user_version > STORE_SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { path: path.to_path_buf(), found: id.user_version });
    }
    Ok(Known::Ours(id.user_version))
}

/// Brings the file up to [`STORE_SCHEMA_VERSION`]: the version check and every migration step
/// (creating a new file is step 1) in one `BEGIN IMMEDIATE` transaction. The identity is read
/// inside it, under the write lock: another process may have created or migrated the file
/// since it was last looked at, or replaced it with one we must refuse (then nothing is
/// written and the transaction is rolled back).
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sql_error(path, "locking for the schema check of", e))?;
    let id = identity(&tx).map_err(|e| sql_error(path, "reading the header of", e))?;
    let current = match recognise(id, path)? {
        Known::Empty => 0,
        Known::Ours(v) => v,
    };
    if current == STORE_SCHEMA_VERSION {
        return Ok(());
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
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn, Path::new(":memory:")).expect("create");
        let id = identity(&conn).expect("identity");
        assert_eq!(id.application_id, APPLICATION_ID);
        assert_eq!(id.user_version, STORE_SCHEMA_VERSION);
        assert!(id.objects >= 8, "tables and indexes exist: {id:?}");
    }
}
