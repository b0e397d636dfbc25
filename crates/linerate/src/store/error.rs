//! Why the history failed: the refusals and faults a user can act on ([`StoreError`]), and the
//! translation of SQLite's error codes into them, each saying whose fault it is and what to do.
//!
//! A full disk and a read-only history are named as such. SQLite reports some of them as a
//! generic I/O or "cannot open" error (it cannot create or grow the `-shm` file, say); for
//! those, [`sql_error`] looks at the directory (can a small file be written there?) before
//! answering. This module must not open databases.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

use super::schema::{APPLICATION_ID, BUSY_TIMEOUT, STORE_SCHEMA_VERSION};

/// Why a history database or one of its runs was refused. Each message names the file (or the
/// run), says whose fault it is and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The file's store schema is newer than this linerate reads; the file was not modified.
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: u32,
    },
    /// A SQLite database of some other program; the file was not modified.
    NotLinerate {
        /// The database file.
        path: PathBuf,
        /// Its `application_id`.
        application_id: i32,
    },
    /// Not a SQLite database at all; the file was not modified.
    NotSqlite {
        /// The file.
        path: PathBuf,
        /// SQLite's words.
        detail: String,
    },
    /// A SQLite database whose pages are damaged.
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// SQLite's words.
        detail: String,
    },
    /// The disk holding the history is full, so nothing could be written to it.
    DiskFull {
        /// The database file.
        path: PathBuf,
        /// What linerate was doing ("storing a run in").
        doing: String,
        /// SQLite's or the system's words.
        detail: String,
    },
    /// The history cannot be written: a read-only file, directory or file system.
    ReadOnly {
        /// The database file.
        path: PathBuf,
        /// What linerate was doing.
        doing: String,
        /// SQLite's or the system's words.
        detail: String,
    },
    /// Another process held the database for longer than the busy timeout.
    Busy {
        /// The database file.
        path: PathBuf,
        /// What linerate was doing.
        doing: String,
        /// SQLite's words.
        detail: String,
    },
    /// One stored run's record cannot be turned back into a [`RunRecord`](crate::record::RunRecord).
    UnreadableRecord {
        /// The run id.
        run: i64,
        /// Why.
        detail: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NewerSchema { path, found } => write!(
                f,
                "{} was written by a newer linerate (store schema {found}, this one reads up to \
                 {STORE_SCHEMA_VERSION}); upgrade linerate or use --db to pick another file",
                path.display()
            ),
            StoreError::NotLinerate { path, application_id } => write!(
                f,
                "{} is a SQLite database of another program, not a linerate history \
                 (application_id {application_id:#010x}, linerate's is {APPLICATION_ID:#010x}); \
                 it was left untouched: use --db to pick another file",
                path.display()
            ),
            StoreError::NotSqlite { path, detail } => write!(
                f,
                "{} is not a SQLite database ({detail}), so not a linerate history; it was left \
                 untouched: move it away or use --db to pick another file",
                path.display()
            ),
            StoreError::Corrupt { path, detail } => write!(
                f,
                "{} is a damaged SQLite database ({detail}): the file was corrupted outside \
                 linerate (disk fault, copied while being written, edited); recover what can be \
                 with `sqlite3 {} .recover`, or move it away to start a new history, or use --db \
                 to pick another file",
                path.display(),
                path.display()
            ),
            StoreError::DiskFull { path, doing, detail } => write!(
                f,
                "{doing} the history database {}: the disk is full ({detail}); free space on \
                 the file system holding {} (see `df {}`), or give --db PATH on another disk, \
                 or --no-store",
                path.display(),
                folder(path).display(),
                folder(path).display()
            ),
            StoreError::ReadOnly { path, doing, detail } => write!(
                f,
                "{doing} the history database {}: the history at {} is read-only ({detail}); \
                 give --db PATH to store runs elsewhere, make {} and the file writable, or use \
                 --no-store (reading it, e.g. `linerate history`, still works)",
                path.display(),
                path.display(),
                folder(path).display()
            ),
            StoreError::Busy { path, doing, detail } => write!(
                f,
                "{doing} the history database {}: another process held it for more than {} s \
                 ({detail}); wait for the other linerate to finish, or use --db to pick another \
                 file",
                path.display(),
                BUSY_TIMEOUT.as_secs()
            ),
            StoreError::UnreadableRecord { run, detail } => write!(
                f,
                "run {run}: stored record cannot be read ({detail}); the row was changed \
                 outside linerate, the other runs are unaffected"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// The directory holding `path` (`.` for a bare file name).
fn folder(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Turns a SQLite error into one that says whose fault it is and what to do.
pub(super) fn sql_error(path: &Path, doing: &str, e: rusqlite::Error) -> anyhow::Error {
    let (p, detail) = (path.to_path_buf(), e.to_string());
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    };
    let doing = doing.to_string();
    match code {
        Some(ErrorCode::NotADatabase) => StoreError::NotSqlite { path: p, detail }.into(),
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path: p, detail }.into(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StoreError::Busy { path: p, doing, detail }.into()
        }
        Some(ErrorCode::DiskFull) => StoreError::DiskFull { path: p, doing, detail }.into(),
        Some(ErrorCode::ReadOnly) => StoreError::ReadOnly { path: p, doing, detail }.into(),
        Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::SystemIoFailure) => {
            match diagnose(path) {
                Some(Cause::Full(why)) => {
                    StoreError::DiskFull { path: p, doing, detail: format!("{detail}: {why}") }
                        .into()
                }
                Some(Cause::ReadOnly(why)) => {
                    StoreError::ReadOnly { path: p, doing, detail: format!("{detail}: {why}") }
                        .into()
                }
                None => anyhow::anyhow!(
                    "{doing} the history database {}: this machine refused ({detail}); check \
                     the file's and its directory's permissions, or use --db to pick another \
                     file",
                    p.display()
                ),
            }
        }
        _ => anyhow::anyhow!(
            "{doing} the history database {} failed ({detail}): this is a bug in linerate, \
             please report it",
            p.display()
        ),
    }
}

/// What stops writes to a history, as the file system says it.
#[derive(Debug)]
enum Cause {
    Full(std::io::Error),
    ReadOnly(std::io::Error),
}

/// Why SQLite could not create or grow a file beside `path`, if the directory says: writes a
/// 32 KiB probe (the size of a `-shm` file) under a unique name there and removes it, then
/// checks that the database file itself opens for writing (which changes nothing in it).
fn diagnose(path: &Path) -> Option<Cause> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = folder(path).join(format!(".linerate-probe-{}-{n}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut f| f.write_all(&[0; 32 * 1024]).and_then(|()| f.sync_all()));
    let _ = std::fs::remove_file(&probe);
    let file = match written {
        Ok(()) => std::fs::OpenOptions::new().write(true).open(path).map(drop),
        Err(e) => Err(e),
    };
    match file {
        Err(e) if e.kind() == ErrorKind::StorageFull => Some(Cause::Full(e)),
        Err(e)
            if matches!(e.kind(), ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied) =>
        {
            Some(Cause::ReadOnly(e))
        }
        _ => None,
    }
}
