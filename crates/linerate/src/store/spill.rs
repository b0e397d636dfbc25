//! Where a run goes when the history will not take it: a JSON file beside the history (or in
//! the temp directory when that cannot be written either), appearing whole or not at all, and
//! [`Unstored`], the error that says where it went so the command can end non-zero.
//!
//! This module writes the bytes it is given; it must not render them (the caller passes the
//! run's `-J` document) and must not print.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A run the history did not take, and where its JSON document was saved instead.
#[derive(Debug)]
pub struct Unstored {
    /// Why the history did not take it (the store's error, or why there was no history).
    pub why: String,
    /// The file holding the run's JSON document, or why none could be written.
    pub saved: Result<PathBuf, String>,
}

impl Unstored {
    /// Why, and where the run went: what follows "this run was not stored: ".
    pub fn detail(&self) -> String {
        match &self.saved {
            Ok(file) => format!(
                "{}. Its JSON (the document -J prints) was saved to {} instead",
                self.why,
                file.display()
            ),
            Err(e) => format!(
                "{}. Its JSON could not be saved either ({e}): the results printed above are all \
                 that is left of it",
                self.why
            ),
        }
    }
}

impl fmt::Display for Unstored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "this run was not stored: {}", self.detail())
    }
}

impl std::error::Error for Unstored {}

/// The runs of one command (a matrix, a campaign) the history did not take, as one error.
#[derive(Debug)]
pub struct UnstoredRuns(pub Vec<Unstored>);

impl fmt::Display for UnstoredRuns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(first) = self.0.first() else { return write!(f, "every run was stored") };
        if self.0.len() == 1 {
            return first.fmt(f);
        }
        write!(
            f,
            "{} runs were not stored (the first: {}); their JSON was saved to:",
            self.0.len(),
            first.why
        )?;
        for run in &self.0 {
            match &run.saved {
                Ok(file) => write!(f, "\n  {}", file.display())?,
                Err(e) => write!(f, "\n  (not saved: {e})")?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for UnstoredRuns {}

/// Saves `document` (a run's JSON) as `linerate-unstored-run-<started>-<pid>-<n>.json` in the
/// directory of the history `db`, else in the temp directory; returns the file, or why
/// neither place took it.
pub fn save(db: Option<&Path>, started_unix_ms: u64, document: &[u8]) -> Result<PathBuf, String> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("linerate-unstored-run-{started_unix_ms}-{}-{n}.json", std::process::id());
    let beside = db
        .and_then(Path::parent)
        .map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d });
    let mut why = Vec::new();
    for dir in beside.into_iter().map(Path::to_path_buf).chain([std::env::temp_dir()]) {
        let file = dir.join(&name);
        match write_whole(&file, document) {
            Ok(()) => return Ok(file),
            Err(e) => why.push(format!("{}: {e}", dir.display())),
        }
    }
    Err(why.join("; "))
}

/// Writes `bytes` to `file` through a temporary name and a rename, so the file is either
/// complete or absent; never replaces an existing file's content with a partial one.
fn write_whole(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = file.as_os_str().to_os_string();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_saved_beside_the_history_whole() {
        let dir = std::env::temp_dir().join(format!("linerate-spill-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = save(Some(&dir.join("h.sqlite")), 42, b"{\"a\": 1}\n").expect("saved");
        assert_eq!(file.parent(), Some(dir.as_path()));
        assert_eq!(std::fs::read(&file).expect("read"), b"{\"a\": 1}\n");
        let left: Vec<_> = std::fs::read_dir(&dir).expect("ls").flatten().collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unstored_runs_say_why_and_where_each_went() {
        let lost = |file: &str| Unstored {
            why: "the disk is full".into(),
            saved: Ok(PathBuf::from(file)),
        };
        let one = UnstoredRuns(vec![lost("/d/a.json")]).to_string();
        assert_eq!(
            one,
            "this run was not stored: the disk is full. Its JSON (the document -J prints) was \
             saved to /d/a.json instead"
        );
        let gone = Unstored { why: "read-only".into(), saved: Err("/tmp: full".into()) };
        let two = UnstoredRuns(vec![lost("/d/a.json"), gone]).to_string();
        assert_eq!(
            two,
            "2 runs were not stored (the first: the disk is full); their JSON was saved to:\n  \
             /d/a.json\n  (not saved: /tmp: full)"
        );
    }

    #[test]
    fn an_unwritable_place_falls_back_to_the_temp_directory() {
        let missing = Path::new("/nonexistent-linerate-dir/h.sqlite");
        let file = save(Some(missing), 7, b"{}").expect("saved in the temp dir");
        assert_eq!(file.parent(), Some(std::env::temp_dir().as_path()));
        let _ = std::fs::remove_file(&file);
    }
}
