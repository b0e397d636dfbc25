//! Zero-copy sending (`-Z`): a memory-backed file holding a repeated pattern, sent with
//! `sendfile(2)`, so the sender never copies user memory into the kernel.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::invalid_input;

/// A memory-backed file (Linux `memfd`) holding a repeated byte pattern, sent
/// with `sendfile(2)`: zero-copy sending, where the sender never copies user
/// memory into the kernel.
///
/// The file holds `pattern` repeated from offset 0 and its length is a whole
/// number of patterns, so byte `i` of the file is `pattern[i % pattern.len()]`.
/// [`send`](Self::send) always starts at offset 0.
#[derive(Debug)]
pub struct ZeroCopySource {
    /// The memory-backed file holding the pattern.
    fd: OwnedFd,
    /// File length in bytes; at least 1 and a multiple of the pattern's length.
    len: usize,
}

impl ZeroCopySource {
    /// Creates a memory-backed file of `len` bytes filled with `pattern`
    /// repeated from offset 0.
    ///
    /// `len` must be at least 1 and a multiple of `pattern.len()`, and
    /// `pattern` must not be empty (otherwise [`io::ErrorKind::InvalidInput`]).
    /// On an OS without this capability the error kind is
    /// [`io::ErrorKind::Unsupported`].
    pub fn new(len: usize, pattern: &[u8]) -> io::Result<Self> {
        if len == 0 {
            return Err(invalid_input("zero-copy source length must be at least 1 byte"));
        }
        if pattern.is_empty() {
            return Err(invalid_input("zero-copy source pattern must not be empty"));
        }
        if len % pattern.len() != 0 {
            return Err(invalid_input(format!(
                "zero-copy source length {len} is not a multiple of the pattern length {}",
                pattern.len()
            )));
        }
        let fd = imp::pattern_file(len, pattern)?;
        Ok(Self { fd, len })
    }

    /// Sends up to `max` bytes (at most the file length) from the start of the
    /// file into `sock` with `sendfile(2)` and returns how many bytes the
    /// kernel took, which may be fewer. Returns 0 only when `max` is 0.
    ///
    /// Interrupted calls (`EINTR`) are retried. `EAGAIN`/`EWOULDBLOCK` (a
    /// non-blocking socket, or an expired `SO_SNDTIMEO`) comes back as
    /// [`io::ErrorKind::WouldBlock`].
    pub fn send(&self, sock: &impl AsFd, max: usize) -> io::Result<usize> {
        self.send_from(sock.as_fd(), 0, max)
    }

    /// Whether this OS supports zero-copy sending from a memory-backed file.
    #[cfg(test)]
    pub fn is_supported() -> bool {
        imp::zero_copy_supported()
    }

    /// Sends at most `max` bytes starting at file `offset` (< `self.len`).
    fn send_from(&self, sock: BorrowedFd<'_>, offset: usize, max: usize) -> io::Result<usize> {
        let count = max.min(self.len.saturating_sub(offset));
        if count == 0 {
            return Ok(0);
        }
        match imp::sendfile(sock, self.fd.as_fd(), offset, count)? {
            0 => Err(io::Error::new(io::ErrorKind::WriteZero, "sendfile(2) accepted no bytes")),
            n => Ok(n),
        }
    }
}

/// Linux: memfd and sendfile.
#[cfg(target_os = "linux")]
mod imp {
    use super::invalid_input;
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
    use std::os::unix::fs::FileExt;

    /// Size of the buffer used to fill a pattern file.
    const FILL_CHUNK: usize = 64 * 1024;

    /// Creates an anonymous memory-backed file (close-on-exec).
    fn memfd() -> io::Result<OwnedFd> {
        // SAFETY: the name is a NUL-terminated string literal and the flags are valid.
        let raw = unsafe { libc::memfd_create(c"linerate-zero-copy".as_ptr(), libc::MFD_CLOEXEC) };
        if raw == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    /// A memfd of `len` bytes (a multiple of `pattern.len()`) holding `pattern` repeated.
    pub(super) fn pattern_file(len: usize, pattern: &[u8]) -> io::Result<OwnedFd> {
        let file = File::from(memfd()?);
        let file_len = u64::try_from(len).map_err(|_| invalid_input("file length too large"))?;
        file.set_len(file_len)?;
        // A whole number of patterns, so every chunk starts at a pattern boundary.
        let chunk = pattern.repeat((FILL_CHUNK / pattern.len()).max(1));
        let mut offset = 0;
        while offset < len {
            let n = chunk.len().min(len - offset);
            file.write_all_at(&chunk[..n], offset as u64)?;
            offset += n;
        }
        Ok(OwnedFd::from(file))
    }

    #[cfg(test)]
    pub(super) fn zero_copy_supported() -> bool {
        // memfd_create and sendfile from a memfd arrived together (Linux 3.17).
        !matches!(memfd(), Err(e) if e.kind() == io::ErrorKind::Unsupported)
    }

    /// `sendfile(2)` of `count` bytes from `file` at `offset` into `sock`, retrying on `EINTR`.
    pub(super) fn sendfile(
        sock: BorrowedFd<'_>,
        file: BorrowedFd<'_>,
        offset: usize,
        count: usize,
    ) -> io::Result<usize> {
        let start =
            libc::off_t::try_from(offset).map_err(|_| invalid_input("file offset too large"))?;
        loop {
            let mut off = start;
            // SAFETY: both descriptors are live for the call and `off` is a
            // valid, writable `off_t`; the kernel reads `file`, writes `sock`.
            let sent =
                unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, count) };
            if let Ok(n) = usize::try_from(sent) {
                return Ok(n);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// Other operating systems: unsupported.
#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::os::fd::{BorrowedFd, OwnedFd};

    fn unsupported(what: std::fmt::Arguments<'_>) -> io::Error {
        io::Error::new(io::ErrorKind::Unsupported, format!("{what} is not supported on this OS"))
    }

    pub(super) fn pattern_file(_len: usize, _pattern: &[u8]) -> io::Result<OwnedFd> {
        Err(unsupported(format_args!("zero-copy sending from a memory-backed file")))
    }

    #[cfg(test)]
    #[cfg(test)]
    pub(super) fn zero_copy_supported() -> bool {
        false
    }

    pub(super) fn sendfile(
        _sock: BorrowedFd<'_>,
        _file: BorrowedFd<'_>,
        _offset: usize,
        _count: usize,
    ) -> io::Result<usize> {
        Err(unsupported(format_args!("sendfile(2)")))
    }
}
