//! Opening a history file: looking at it before touching it, creating a new one whole, and
//! the read-write and read-only connections (docs/STORE.md, "Opening").
//!
//! Three promises:
//! * A file this build refuses (another program's, a newer linerate's, not SQLite, damaged) is
//!   recognised through a connection that cannot write: read-only, with read-only shared
//!   memory (`readonly_shm`) when a `-wal` file exists and `immutable` when none does, closed
//!   without a checkpoint. It and its `-wal` and `-shm` files stay byte for byte as they were.
//! * A new history appears whole or not at all: it is built under a temporary name beside the
//!   target and hard-linked into place; of several linerates creating it at once one link wins
//!   and the others open the winner's file, so no one ever sees it half-made.
//! * Every connection sets its busy timeout before its first statement, and the one statement
//!   SQLite does not retry by itself (the switch to WAL, which upgrades a read lock to a write
//!   lock) is retried here until the same timeout.
//!
//! This module must not know about run records: it deals in files and connections.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, MAIN_DB, OpenFlags};

use super::StoreError;
use super::error::sql_error;
use super::schema::{self, BUSY_TIMEOUT, Known, STORE_SCHEMA_VERSION};

/// What a connection may do to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Store runs: creates the file (and its directories) and upgrades its schema.
    ReadWrite,
    /// Read runs only (`history`, `show`, `compare`, `report`): works on a read-only file,
    /// directory or file system and on a full disk, and never writes to the file.
    ReadOnly,
}

/// How long a refusal waits before looking again: a file another process was writing at the
/// moment it was read may have been read torn, so a refusal counts only if it is seen twice.
const SECOND_LOOK: Duration = Duration::from_millis(100);

/// Opens the history at `path` for `access`, refusing without writing a byte a file this
/// build must not use.
pub(super) fn open_file(path: &Path, access: Access) -> Result<Connection> {
    match access {
        Access::ReadWrite => read_write(path),
        Access::ReadOnly => read_only(path),
    }
}

/// A fresh in-memory database with the current schema.
pub(super) fn open_memory() -> Result<Connection> {
    let path = Path::new(":memory:");
    let mut conn = Connection::open_in_memory()
        .and_then(|c| settle(&c).map(|()| c))
        .map_err(|e| sql_error(path, "opening", e))?;
    schema::migrate(&mut conn, path)?;
    Ok(conn)
}

fn read_write(path: &Path) -> Result<Connection> {
    make_parent(path)?;
    if look(path)? == Found::Missing {
        create(path);
    }
    // CREATE: if the link could not be made (a file system without hard links), the file is
    // created here and set up in place below, under SQLite's locks.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = connect(path, flags)?;
    if conn.is_readonly(MAIN_DB).unwrap_or(false) {
        return Err(StoreError::ReadOnly {
            path: path.to_path_buf(),
            doing: "opening".into(),
            detail: "the file or its file system is not writable".into(),
        }
        .into());
    }
    let known = check(&conn, path)?;
    if !wal(&conn) {
        switch_to_wal(&conn, path).inspect_err(|_| no_checkpoint_on_close(&conn))?;
    }
    if known != Known::Ours(STORE_SCHEMA_VERSION) {
        schema::migrate(&mut conn, path).inspect_err(|_| no_checkpoint_on_close(&conn))?;
    }
    Ok(conn)
}

fn read_only(path: &Path) -> Result<Connection> {
    match look(path)? {
        Found::Missing => bail!(
            "no history at {}: run a test first (results are stored by default), or give --db PATH",
            path.display()
        ),
        // Nothing stored yet: an empty history reads as one, without a file connection.
        Found::Known(Known::Empty) => open_memory(),
        // An older history must be upgraded before it reads; that writes.
        Found::Known(Known::Ours(v)) if v < STORE_SCHEMA_VERSION => read_write(path),
        Found::Known(_) | Found::Unsure => reader(path),
    }
}

/// What a look at a file found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// No file.
    Missing,
    /// A file this build may use.
    Known(Known),
    /// It could not be read without writing (or locks were held): the connection that opens
    /// it checks again, under SQLite's locks.
    Unsure,
}

/// Looks at `path` without writing to it or to its `-wal` and `-shm` files, refusing what this
/// build must not use. A refusal is confirmed by a second look.
fn look(path: &Path) -> Result<Found> {
    let meta = match std::fs::metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Found::Missing),
        Err(_) => return Ok(Found::Unsure),
        Ok(m) => m,
    };
    if meta.is_dir() {
        bail!("{} is a directory, not a history file: give --db a file's path", path.display());
    }
    if meta.len() == 0 {
        return Ok(Found::Known(Known::Empty));
    }
    match peek(path) {
        Err(_) => {
            std::thread::sleep(SECOND_LOOK);
            peek(path)
        }
        found => found,
    }
}

/// One look through a connection that cannot write: `Err` is a refusal.
fn peek(path: &Path) -> Result<Found> {
    Ok(match identify(path, false)? {
        Ok((_, known)) => Found::Known(known),
        Err(_) => Found::Unsure,
    })
}

/// Reads the identity of `path` through the first of [`read_only_ways`] that works, refusing
/// (`Err`) what this build must not use: the connection and what the file is, or the first
/// error of a way that did not work.
fn identify(path: &Path, ordinary: bool) -> Result<rusqlite::Result<(Connection, Known)>> {
    let mut first = None;
    for way in read_only_ways(path, ordinary) {
        let conn = match open_raw(uri(path, way), read_only_flags()) {
            Ok(conn) => conn,
            Err(e) => {
                first.get_or_insert(e);
                continue;
            }
        };
        no_checkpoint_on_close(&conn);
        match schema::identity(&conn) {
            Ok(id) => return Ok(Ok((conn, schema::recognise(id, path)?))),
            Err(e) if refusal(&e) => return Err(sql_error(path, "reading the header of", e)),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    Ok(Err(first.unwrap_or(rusqlite::Error::InvalidPath(path.to_path_buf()))))
}

/// The ways to read `path` without writing to it, in order: SQLite's ordinary read-only
/// mode (if `ordinary`: it shares the `-shm` index with writers, creating it if need be),
/// read-only shared memory over an existing `-wal` (without a writer, SQLite reads the `-wal`
/// into its own memory), and the file alone (`immutable`) when there is no `-wal` to read.
fn read_only_ways(path: &Path, ordinary: bool) -> Vec<&'static str> {
    let wal_len = std::fs::metadata(wal_file(path)).map(|m| m.len()).ok();
    let mut ways = Vec::new();
    if ordinary {
        ways.push("mode=ro");
    }
    if wal_len.is_some() {
        ways.push("mode=ro&readonly_shm=1");
    }
    if wal_len.unwrap_or(0) == 0 {
        ways.push("mode=ro&immutable=1");
    }
    ways
}

/// Errors that say what the file is (not what the system could not do).
fn refusal(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt))
}

/// A read-only connection to a history this build reads, the first of
/// [`read_only_ways`] that works: the ordinary one unless the directory is read-only or the
/// disk is full.
fn reader(path: &Path) -> Result<Connection> {
    identify(path, true)?.map(|(conn, _)| conn).map_err(|e| sql_error(path, "reading", e))
}

fn read_only_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

/// Opens `path` with `flags`, naming what went wrong.
fn connect(path: &Path, flags: OpenFlags) -> Result<Connection> {
    open_raw(path, flags).map_err(|e| sql_error(path, "opening", e))
}

/// Opens `target` (a path, or a `file:` URI) with the connection's settings in place before
/// any statement can run.
fn open_raw(target: impl AsRef<Path>, flags: OpenFlags) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(target, flags)?;
    settle(&conn)?;
    Ok(conn)
}

/// Per-connection settings; none of them touches the file. The busy timeout first: every
/// later statement (the identity read, the WAL switch, the schema transaction) waits up to
/// [`BUSY_TIMEOUT`] for another process instead of failing at once.
fn settle(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", true)
}

/// Reads the identity of the file behind `conn` and refuses what this build must not use
/// (closing `conn` without a checkpoint).
fn check(conn: &Connection, path: &Path) -> Result<Known> {
    let refused = |e: anyhow::Error| {
        no_checkpoint_on_close(conn);
        e
    };
    let id =
        schema::identity(conn).map_err(|e| refused(sql_error(path, "reading the header of", e)))?;
    schema::recognise(id, path).map_err(|e| refused(e.into()))
}

/// Makes closing `conn` write nothing: no checkpoint, so a `-wal` stays as it is.
fn no_checkpoint_on_close(conn: &Connection) {
    let _ = conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
}

fn wal(conn: &Connection) -> bool {
    conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
        .is_ok_and(|m| m.eq_ignore_ascii_case("wal"))
}

/// `PRAGMA journal_mode=WAL`, retried while another process holds the file. SQLite does not
/// call the busy handler for it (it upgrades a read lock to a write lock, which could
/// deadlock), so it fails at once where every other statement waits: this loop waits instead,
/// up to the same [`BUSY_TIMEOUT`].
fn switch_to_wal(conn: &Connection, path: &Path) -> Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        let mode =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0));
        match mode {
            Ok(m) if m.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(m) => bail!(
                "switching the history database {} to WAL failed (it stays in {m} mode): keep it \
                 on a local file system (WAL needs shared memory), or use --db to pick another \
                 file",
                path.display()
            ),
            Err(e) if busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(sql_error(path, "switching to WAL", e)),
        }
    }
}

fn busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Builds a new history under a temporary name beside `path` and links it into place. Best
/// effort: if another linerate linked first, its file is used; if the link cannot be made the
/// caller creates the file in place, and any real fault (a full disk, a read-only directory)
/// is reported from there.
fn create(path: &Path) {
    let tmp = sibling(path, "new");
    let built = build(&tmp);
    if built.is_ok() {
        // AlreadyExists: another linerate created it meanwhile; its file is as good as ours.
        let _ = std::fs::hard_link(&tmp, path);
    }
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = tmp.clone().into_os_string();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}

/// A complete history at `tmp`: the schema committed in rollback mode (so it is in the main
/// file), then switched to WAL and closed, leaving one self-contained file.
fn build(tmp: &Path) -> Result<()> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = connect(tmp, flags)?;
    schema::migrate(&mut conn, tmp)?;
    switch_to_wal(&conn, tmp)?;
    conn.close().map_err(|(_, e)| sql_error(tmp, "closing", e))
}

/// `.NAME.PID-N.TAG` beside `path`: unique to this process and call.
fn sibling(path: &Path, tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}-{n}.{tag}", std::process::id()))
}

fn wal_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// Creates the directories above `path`.
fn make_parent(path: &Path) -> Result<()> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else { return Ok(()) };
    std::fs::create_dir_all(dir).map_err(|e| {
        let detail = e.to_string();
        match e.kind() {
            ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied => StoreError::ReadOnly {
                path: path.to_path_buf(),
                doing: format!("creating the directory {} for", dir.display()),
                detail,
            }
            .into(),
            ErrorKind::StorageFull => StoreError::DiskFull {
                path: path.to_path_buf(),
                doing: format!("creating the directory {} for", dir.display()),
                detail,
            }
            .into(),
            _ => anyhow::anyhow!(
                "cannot create the directory {} for the history database ({e}): check its \
                 permissions, or use --db to pick another file",
                dir.display()
            ),
        }
    })
}

/// `path` as a SQLite `file:` URI with `query`: every byte but unreserved ones and `/` is
/// percent-encoded, so a `?`, `#` or `%` in a file name stays part of the name.
fn uri(path: &Path, query: &str) -> String {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::from(if path.is_absolute() { "file://" } else { "file:" });
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(char::from(b));
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s.push('?');
    s.push_str(query);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_keep_odd_file_names_whole() {
        assert_eq!(
            uri(Path::new("/a b/h?.sqlite"), "mode=ro"),
            "file:///a%20b/h%3F.sqlite?mode=ro"
        );
        assert_eq!(uri(Path::new("rel/file:x#1%"), "q"), "file:rel/file%3Ax%231%25?q");
    }
}
