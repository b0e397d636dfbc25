//! Storing what ran, never at the cost of the run: a history that cannot be opened or written
//! gives a warning and the results are still printed; a run the history did not take is saved
//! as its `-J` document beside the history (or in the temp directory) and comes back as
//! [`Unstored`], so the command can say where and end non-zero. Used by every command that
//! runs tests. The group of a repeated experiment (matrix, fleet, mesh, campaign) is begun or
//! continued here too ([`open_group`]), by one rule for all four.

use anyhow::Context;

use crate::plan::StorePlan;
use crate::record::{FailureKind, RunRecord};
use crate::report::notice::{Console, Notice};
use crate::store::resume::Resumable;
use crate::store::spill::{self, Unstored, UnstoredRuns};
use crate::store::{GroupParams, GroupRow, RunMeta, Store};

/// The store of a plan, or None (with a warning saying why) when it cannot be used.
pub fn open(plan: &StorePlan, console: &Console) -> Option<Store> {
    let path = plan.path.as_ref()?;
    match Store::open(path) {
        Ok(s) => Some(s),
        Err(e) => {
            console.show(&Notice::HistoryUnavailable(format!("{e:#}")));
            None
        }
    }
}

/// Stores `record` in the history of `plan`: `Ok(Some(id))` once stored, `Ok(None)` when no
/// history was asked for (`--no-store`) or the run failed on the user's input (a usage
/// error: `-6` to an IPv4 address; nothing was measured, and the error says what to change).
/// When a history was asked for but could not be opened (`store` is None) or refused the run,
/// the run's `-J` document is saved to a file and [`Unstored`] says where: the command prints
/// its results, then returns it as its error.
pub fn keep(
    store: &mut Option<Store>,
    plan: &StorePlan,
    record: &RunRecord,
    meta: &RunMeta,
) -> Result<Option<i64>, Unstored> {
    if record.outcome.failure().is_some_and(|f| f.kind == FailureKind::Usage) {
        return Ok(None);
    }
    let why = match store.as_mut() {
        None if plan.path.is_none() => return Ok(None),
        None => "the history could not be opened (see the warning above)".to_string(),
        Some(s) => match s.insert_run(record, meta) {
            Ok(id) => return Ok(Some(id)),
            Err(e) => format!("{e:#}"),
        },
    };
    let mut document = Vec::new();
    let saved = crate::report::json::render_run(record, &mut document)
        .map_err(|e| e.to_string())
        .and_then(|()| spill::save(plan.path.as_deref(), record.started_unix_ms, &document));
    Err(Unstored { why, saved })
}

/// Stores the runs of one group (a matrix or a campaign) as they finish, each as a cell with
/// its repetition; with the hidden `--stop-after N` it triggers `interrupt` after the Nth, as
/// Ctrl-C would (the tests of `--resume`).
#[derive(Debug)]
pub struct GroupRuns<'a> {
    /// The history, if there is one (a failure to store is a warning, see [`keep`]).
    pub store: Option<Store>,
    /// The kind every run is stored as.
    pub kind: crate::store::RunKind,
    /// The group they belong to.
    pub group: Option<i64>,
    /// `--label`s.
    pub labels: Vec<String>,
    /// Stop after this many runs were stored.
    pub stop_after: Option<usize>,
    /// Triggered at `stop_after`.
    pub interrupt: &'a crate::session::Interrupt,
    /// Where a failure to store is shown.
    console: &'a Console,
    /// The history asked for, when it is not `store` (it could not be opened): runs are then
    /// saved as files and counted in `unstored`. None: the store's own file, if any.
    pub wanted: Option<std::path::PathBuf>,
    /// Runs the history did not take, each saved as a JSON file: after printing its results
    /// the command ends non-zero with them (see [`GroupRuns::unstored`]).
    unstored: Vec<Unstored>,
    stored: usize,
}

impl<'a> GroupRuns<'a> {
    /// Runs of `kind` into `group` of `store`.
    pub fn new(
        store: Option<Store>,
        (kind, group): (crate::store::RunKind, Option<i64>),
        labels: Vec<String>,
        (stop_after, interrupt): (Option<usize>, &'a crate::session::Interrupt),
        console: &'a Console,
    ) -> Self {
        Self {
            store,
            kind,
            group,
            labels,
            stop_after,
            interrupt,
            console,
            wanted: None,
            unstored: Vec::new(),
            stored: 0,
        }
    }

    /// Stores `record` as repetition `rep` of `cell`.
    pub fn keep(&mut self, cell: String, rep: u32, record: &RunRecord) {
        let meta = RunMeta {
            kind: self.kind,
            group: self.group,
            cell: Some(cell),
            repetition: Some(rep),
            labels: self.labels.clone(),
        };
        let path = self.wanted.clone().or_else(|| self.store.as_ref().map(|s| s.path().into()));
        let plan = StorePlan { path, labels: vec![] };
        if let Err(lost) = keep(&mut self.store, &plan, record, &meta) {
            self.console.show(&Notice::RunNotStored(lost.detail()));
            self.unstored.push(lost);
        }
        self.stored += 1;
        if self.stop_after.is_some_and(|n| self.stored >= n) {
            self.interrupt.trigger();
        }
    }

    /// The runs the history did not take, as the command's error once its results are out.
    pub fn unstored(&mut self) -> Result<(), UnstoredRuns> {
        match std::mem::take(&mut self.unstored) {
            lost if lost.is_empty() => Ok(()),
            lost => Err(UnstoredRuns(lost)),
        }
    }
}

/// A repeated experiment's group (a matrix, a fleet or its curve, a mesh, a campaign), begun
/// or continued: the one opening the four commands share. Each then places a continued
/// group's runs in its own cells (`store::resume::placed_runs`).
#[derive(Debug)]
pub struct OpenedGroup {
    /// The group: None without a history, or when the history would not take a new group (a
    /// warning said why, and the runs are saved as files instead, as [`keep`] does).
    pub id: Option<i64>,
    /// The run order's seed: the plan's for a new group, the stored one for a continued one.
    pub seed: u64,
    /// The continued group as stored (its plan, whose runs to place), None for a new one.
    pub continued: Option<GroupRow>,
}

/// The group `--resume` continues (`resume`: `Some(which)`, the group given or the newest
/// unfinished one with `r`'s plan), read before anything runs or is stored; None without
/// `--resume`.
pub fn continued(
    store: Option<&Store>,
    resume: Option<Option<i64>>,
    r: &Resumable<'_>,
) -> anyhow::Result<Option<OpenedGroup>> {
    let Some(which) = resume else { return Ok(None) };
    let s = store.context("--resume needs the history, which cannot be opened")?;
    let g = crate::store::resume::find_open_group(s, which, r)?;
    let seed = crate::store::resume::stored_seed(&g)?;
    Ok(Some(OpenedGroup { id: Some(g.id), seed, continued: Some(g) }))
}

/// A new group in the history for `r`'s plan, run in `seed`'s order. A history that will
/// not take it is a warning, not the end of the experiment: `store` is let go, so every run is
/// then saved as a file and the command ends non-zero, as when the history cannot be opened.
pub fn begin(
    store: &mut Option<Store>,
    r: &Resumable<'_>,
    seed: u64,
    console: &Console,
) -> OpenedGroup {
    let began = store.as_mut().map(|s| {
        let params = GroupParams::new(r.plan, Some(seed))?;
        s.begin_group(r.kind.clone(), r.name, &params)
    });
    let id = match began {
        Some(Ok(id)) => Some(id),
        Some(Err(e)) => {
            console.show(&Notice::HistoryUnavailable(format!("{e:#}")));
            *store = None;
            None
        }
        None => None,
    };
    OpenedGroup { id, seed, continued: None }
}

/// The group `--resume` continues ([`continued`]), or a new one ([`begin`]).
pub fn open_group(
    store: &mut Option<Store>,
    resume: Option<Option<i64>>,
    r: &Resumable<'_>,
    seed: u64,
    console: &Console,
) -> anyhow::Result<OpenedGroup> {
    match continued(store.as_ref(), resume, r)? {
        Some(opened) => Ok(opened),
        None => Ok(begin(store, r, seed, console)),
    }
}

/// How often a requester waiting for the history's requester lock looks again.
const LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// The history's requester lock (`history.sqlite.requester-lock`, beside the database), held
/// by a fleet or a mesh for as long as it runs: two of them on one history (the fleet and the
/// mesh Job of one Kubernetes overlay, a scheduled mesh that overlaps the next) would load
/// the same agents at once and spoil each other's figures, so the second waits for the first,
/// saying who holds it. Without a history (`--no-store`) there is nothing to share and no
/// lock; a lock file that cannot be made is no reason to lose a run (None, no wait).
pub fn requester_lock(
    plan: &StorePlan,
    what: &str,
    console: &Console,
    interrupt: &crate::session::Interrupt,
) -> anyhow::Result<Option<crate::sys::lock::FileLock>> {
    let Some(db) = plan.path.as_ref() else { return Ok(None) };
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".requester-lock");
    let path = db.with_file_name(name);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut told = false;
    loop {
        match crate::sys::lock::try_lock(&path) {
            Ok(Some(mut lock)) => {
                let since = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                let who = format!(
                    "a {what} (pid {}, started {} UTC)",
                    std::process::id(),
                    crate::units::utc(since)
                );
                let _ = lock.say(&who);
                return Ok(Some(lock));
            }
            Ok(None) => {}
            Err(_) => return Ok(None),
        }
        if !told {
            let who = crate::sys::lock::holder(&path);
            let who = if who.is_empty() { "another fleet or mesh".to_string() } else { who };
            console.show(&Notice::AwaitingLock(&who));
            told = true;
        }
        if interrupt.count() > 0 {
            return Err(super::failed::interrupted(interrupt, "nothing ran"));
        }
        std::thread::sleep(LOCK_POLL);
    }
}

#[cfg(test)]
mod tests {
    use linerate_proto::{SideResults, TestSpec};

    use super::*;

    fn record() -> RunRecord {
        let side = || SideResults { software: "t".into(), ..Default::default() };
        RunRecord::for_tests(TestSpec::default_tcp(), side(), side())
    }

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("linerate-keep-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn rendered(record: &RunRecord) -> Vec<u8> {
        let mut v = Vec::new();
        crate::report::json::render_run(record, &mut v).expect("render");
        v
    }

    #[test]
    fn no_history_asked_for_stores_and_saves_nothing() {
        let plan = StorePlan { path: None, labels: vec![] };
        let kept = keep(&mut None, &plan, &record(), &RunMeta::test(vec![]));
        assert!(matches!(kept, Ok(None)));
    }

    #[test]
    fn a_run_failed_on_the_users_input_is_not_kept() {
        let d = dir("usage");
        let plan = StorePlan { path: Some(d.join("h.sqlite")), labels: vec![] };
        let mut store = Some(Store::open(plan.path.as_ref().expect("path")).expect("open"));
        let mut usage = record();
        usage.outcome = crate::record::Outcome::failed(crate::record::Failure::usage(
            "host has no address of the requested family (-4/-6)".to_string(),
        ));
        let kept = keep(&mut store, &plan, &usage, &RunMeta::test(vec![]));
        assert!(matches!(kept, Ok(None)), "{kept:?}");
        let mut refused = usage.clone();
        refused.outcome = crate::record::Outcome::failed(crate::record::Failure::new(
            FailureKind::Refused,
            "busy",
        ));
        let kept = keep(&mut store, &plan, &refused, &RunMeta::test(vec![]));
        assert!(matches!(kept, Ok(Some(_))), "a failed test is kept: {kept:?}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_history_that_could_not_be_opened_gets_the_run_as_a_json_file_beside_it() {
        let d = dir("unopened");
        let plan = StorePlan { path: Some(d.join("h.sqlite")), labels: vec![] };
        let rec = record();
        let lost = keep(&mut None, &plan, &rec, &RunMeta::test(vec![])).expect_err("lost");
        let file = lost.saved.as_ref().expect("saved");
        assert_eq!(file.parent(), Some(d.as_path()));
        assert_eq!(std::fs::read(file).expect("read"), rendered(&rec), "the -J document");
        let text = lost.to_string();
        assert!(text.contains("could not be opened") && text.contains("was saved to"), "{text}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_history_that_refuses_the_run_says_why_and_where_the_run_went() {
        let d = dir("refused");
        let db = d.join("h.sqlite");
        drop(Store::open(&db).expect("create"));
        let mut store = Some(Store::open_read_only(&db).expect("read-only"));
        let plan = StorePlan { path: Some(db.clone()), labels: vec![] };
        let rec = record();
        let lost = keep(&mut store, &plan, &rec, &RunMeta::test(vec![])).expect_err("lost");
        assert!(lost.why.contains("is read-only"), "{}", lost.why);
        let file = lost.saved.as_ref().expect("saved");
        assert_eq!(std::fs::read(file).expect("read"), rendered(&rec));
        let _ = std::fs::remove_dir_all(&d);
    }
}
