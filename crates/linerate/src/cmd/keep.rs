//! Storing what ran, never at the cost of the run: a history that cannot be opened or written
//! gives a warning and the results are still printed. Used by every command that runs tests.

use crate::plan::StorePlan;
use crate::record::RunRecord;
use crate::report::notice::{Console, Notice};
use crate::store::{RunMeta, Store};

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

/// Stores `record`; a failure is a warning, not an error. Returns the run id.
pub fn keep(
    store: &mut Option<Store>,
    record: &RunRecord,
    meta: &RunMeta,
    console: &Console,
) -> Option<i64> {
    let s = store.as_mut()?;
    match s.insert_run(record, meta) {
        Ok(id) => Some(id),
        Err(e) => {
            console.show(&Notice::RunNotStored(format!("{e:#}")));
            None
        }
    }
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
        Self { store, kind, group, labels, stop_after, interrupt, console, stored: 0 }
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
        keep(&mut self.store, record, &meta, self.console);
        self.stored += 1;
        if self.stop_after.is_some_and(|n| self.stored >= n) {
            self.interrupt.trigger();
        }
    }
}
