//! Tests of opening a history: many openers of a new file at once, files that must be left
//! byte for byte as they were (their `-wal` and `-shm` too), read-only opening, and the faults
//! a user can act on named as such.

use std::path::Path;
use std::sync::{Arc, Barrier};

use super::*;

/// The bytes of `db` and of its `-wal` and `-shm` files (None for a missing one).
fn three_files(db: &Path) -> Vec<Option<Vec<u8>>> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|s| {
            let mut name = db.as_os_str().to_os_string();
            name.push(s);
            std::fs::read(name).ok()
        })
        .collect()
}

/// The names in `db`'s directory, sorted.
fn names(db: &Path) -> Vec<String> {
    let dir = db.parent().expect("parent");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `threads` openers at once, each storing one run in the history at `db`; returns how many
/// runs the history holds afterwards, the files beside it then, and every error.
fn open_at_once(db: &Path, threads: usize) -> (usize, Vec<String>, Vec<String>) {
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (db, start) = (db.to_path_buf(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut s = Store::open(&db).map_err(|e| format!("open: {e:#}"))?;
                s.insert_run(&record("h:1", i as u64, 1), &meta(&[]))
                    .map_err(|e| format!("insert: {e:#}"))
            })
        })
        .collect();
    let errors: Vec<String> =
        handles.into_iter().filter_map(|h| h.join().expect("thread").err()).collect();
    let files = names(db);
    let stored = Store::open_read_only(db).expect("reopen").list(&ListFilter::default());
    (stored.expect("list").len(), files, errors)
}

#[test]
fn many_openers_of_a_new_file_at_once_all_store_their_run() {
    for round in 0..10 {
        let db = TempDb::new("at-once");
        let (stored, files, errors) = open_at_once(db.path(), 8);
        assert_eq!((stored, errors), (8, vec![]), "round {round}");
        assert_eq!(files, vec!["history.sqlite"], "no temporary file is left");
    }
}

#[test]
fn many_openers_of_an_empty_file_at_once_all_store_their_run() {
    // An empty file (touched by hand) is set up in place: the switch to WAL, which SQLite does
    // not retry, must wait for the other openers instead of failing with "database is locked".
    for round in 0..10 {
        let db = TempDb::new("empty-at-once");
        std::fs::create_dir_all(db.path().parent().expect("parent")).expect("dir");
        std::fs::write(db.path(), b"").expect("touch");
        let (stored, _, errors) = open_at_once(db.path(), 8);
        assert_eq!((stored, errors), (8, vec![]), "round {round}");
    }
}

/// A history of schema 2 (newer than this build) whose last transaction is still in its WAL:
/// written by a connection that never checkpoints, copied with its `-wal` and `-shm` while
/// that connection is open (as a crash or a copy of a live file leaves it).
fn newer_with_pending_wal(db: &TempDb) {
    let origin = TempDb::new("newer-origin");
    drop(Store::open(origin.path()).expect("create"));
    let raw = Connection::open(origin.path()).expect("raw");
    raw.pragma_update(None, "wal_autocheckpoint", 0).expect("no checkpoints");
    raw.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 2;").expect("upgrade");
    std::fs::create_dir_all(db.path().parent().expect("parent")).expect("dir");
    for suffix in ["", "-wal", "-shm"] {
        let name = |p: &Path| format!("{}{suffix}", p.display());
        std::fs::copy(name(origin.path()), name(db.path())).expect("copy");
    }
    let _ = raw.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
}

#[test]
fn a_newer_schema_with_a_pending_wal_is_refused_and_its_three_files_left_as_they_were() {
    let db = TempDb::new("newer-wal");
    newer_with_pending_wal(&db);
    let before = three_files(db.path());
    assert!(before.iter().all(|f| f.as_ref().is_some_and(|b| !b.is_empty())), "all three exist");
    let (files, listing) = (names(db.path()), db.path());
    for access in [Access::ReadWrite, Access::ReadOnly] {
        let e = Store::open_for(listing, access).expect_err("must refuse");
        assert_eq!(
            e.downcast_ref::<StoreError>(),
            Some(&StoreError::NewerSchema { path: db.path().into(), found: 2 }),
            "{access:?}: {e:#}"
        );
        assert!(three_files(db.path()) == before, "{access:?}: the file, -wal and -shm changed");
        assert_eq!(names(db.path()), files, "{access:?}: no file appeared or went");
    }
}

#[test]
fn reading_an_empty_or_missing_history_writes_nothing() {
    let db = TempDb::new("read-empty");
    let e = Store::open_read_only(db.path()).expect_err("no file");
    assert!(format!("{e:#}").starts_with("no history at"), "{e:#}");
    assert!(!db.path().exists() && !db.path().parent().expect("dir").exists(), "nothing created");
    std::fs::create_dir_all(db.path().parent().expect("parent")).expect("dir");
    std::fs::write(db.path(), b"").expect("touch");
    let s = Store::open_read_only(db.path()).expect("an empty file reads as an empty history");
    assert_eq!(s.list(&ListFilter::default()).expect("list"), vec![]);
    assert_eq!(names(db.path()), vec!["history.sqlite"]);
    assert_eq!(db.bytes(), b"", "still empty");
}

#[test]
fn a_read_only_store_reads_and_refuses_to_store_naming_why() {
    let db = TempDb::new("read-only");
    let id = {
        let mut s = Store::open(db.path()).expect("create");
        s.insert_run(&record("h:1", 5, 1), &meta(&["x"])).expect("insert")
    };
    let before = db.bytes();
    let mut s = Store::open_read_only(db.path()).expect("open read-only");
    assert_eq!(s.list(&ListFilter::default()).expect("list").len(), 1);
    assert!(s.run(id).expect("read").is_some());
    let e = s.insert_run(&record("h:1", 6, 1), &meta(&[])).expect_err("read-only");
    assert!(matches!(e.downcast_ref(), Some(StoreError::ReadOnly { .. })), "{e:#}");
    let text = e.to_string();
    assert!(text.contains("is read-only") && text.contains("give --db PATH"), "{text}");
    drop(s);
    assert!(db.bytes() == before, "the file was not written");
}

#[test]
fn a_full_disk_is_named_as_such() {
    // SQLITE_FULL, as a full disk gives it: the file may not grow by one page (the CLI tests
    // fill a real, small tmpfs).
    let db = TempDb::new("full");
    let mut s = Store::open(db.path()).expect("create");
    let pages: i64 = s.conn.query_row("PRAGMA page_count", [], |r| r.get(0)).expect("pages");
    s.conn.pragma_update(None, "max_page_count", pages).expect("cap");
    let mut big = record("h:1", 1, 1);
    big.warnings = vec!["x".repeat(64 * 1024)];
    let e = s.insert_run(&big, &meta(&[])).expect_err("no room");
    assert!(matches!(e.downcast_ref(), Some(StoreError::DiskFull { .. })), "{e:#}");
    let text = e.to_string();
    let dir = db.path().parent().expect("dir").display().to_string();
    assert!(text.contains("the disk is full"), "{text}");
    assert!(text.contains(&format!("free space on the file system holding {dir}")), "{text}");
    assert!(!text.contains("permissions"), "{text}");
}

#[test]
fn a_store_waits_for_a_writer_holding_the_file() {
    let db = TempDb::new("held");
    drop(Store::open(db.path()).expect("create"));
    let mut holder = Connection::open(db.path()).expect("raw");
    let tx = holder.transaction_with_behavior(TransactionBehavior::Immediate).expect("hold");
    let waiter = {
        let db = db.path().to_path_buf();
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let stored = Store::open(&db)?.insert_run(&record("h:1", 1, 1), &meta(&[]));
            stored.map(|id| (id, started.elapsed()))
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(600));
    tx.commit().expect("release");
    let (id, waited) = waiter.join().expect("thread").expect("stored after the wait");
    assert_eq!(id, 1);
    assert!(waited >= std::time::Duration::from_millis(500), "it waited: {waited:?}");
}
