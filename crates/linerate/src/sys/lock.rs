//! An advisory lock on a file (`flock(2)`): held while the returned [`FileLock`] lives, and
//! released by the kernel when the process ends, however it ends, so a crashed holder never
//! leaves a stale lock behind. Works between containers that share a volume (one kernel).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

/// A held lock; dropping it releases it.
#[derive(Debug)]
pub struct FileLock(File);

/// Takes the exclusive lock on `path` (created if missing) without waiting: `Ok(None)` when
/// another process holds it.
pub fn try_lock(path: &Path) -> io::Result<Option<FileLock>> {
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    // SAFETY: flock on a file descriptor this function owns; no memory is passed.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(Some(FileLock(file)));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) { Ok(None) } else { Err(e) }
}

/// What the lock file says (its holder's words), at most 512 bytes of it.
pub fn holder(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(f) = File::open(path) {
        let _ = f.take(512).read_to_string(&mut text);
    }
    text.trim().to_string()
}

impl FileLock {
    /// Writes `text` as the holder's words (replacing what an earlier holder wrote).
    pub fn say(&mut self, text: &str) -> io::Result<()> {
        self.0.set_len(0)?;
        self.0.rewind()?;
        self.0.write_all(text.as_bytes())?;
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("linerate-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("x.lock");
        let mut first = try_lock(&path).expect("lock").expect("free");
        first.say("mesh, pid 1").expect("say");
        // flock locks belong to the open file: a second open, even in this process, is refused.
        assert!(try_lock(&path).expect("lock").is_none());
        assert_eq!(holder(&path), "mesh, pid 1");
        drop(first);
        assert!(try_lock(&path).expect("lock").is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
