//! The process's standard output and the local time as text: `--logfile` points stdout at a
//! file (so every line that would have gone to the terminal goes there, as iperf3's), and
//! `--timestamps` needs the wall-clock time in the user's strftime(3) format and time zone.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Makes `file` the process's standard output (dup2(2) onto descriptor 1). Flushes what Rust
/// buffered for the old one first.
pub fn redirect_stdout(file: &File) -> io::Result<()> {
    io::Write::flush(&mut io::stdout())?;
    // SAFETY: both descriptors are open for the call (`file` is borrowed, 1 is stdout); dup2
    // closes the old descriptor 1 atomically and only affects the descriptor table.
    let rc = unsafe { libc::dup2(file.as_raw_fd(), libc::STDOUT_FILENO) };
    if rc == -1 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// The local time now in strftime(3) `format` (`%c ` gives "Thu Nov 26 01:15:59 2026 ");
/// empty if the format is not usable (it contains a NUL, or its text exceeds 256 bytes).
pub fn local_time(format: &str) -> String {
    let Ok(c_format) = std::ffi::CString::new(format) else { return String::new() };
    let mut buf = [0u8; 256];
    // SAFETY: time(NULL) only reads the clock; localtime_r writes the zeroed `tm` we own;
    // strftime writes at most buf.len() bytes into `buf` and reads the NUL-terminated format.
    let n = unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return String::new();
        }
        libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c_format.as_ptr(), &tm)
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_follows_the_format() {
        let year = local_time("%Y");
        assert!(year.len() == 4 && year.chars().all(|c| c.is_ascii_digit()), "{year}");
        assert!(local_time("%c ").ends_with(' '));
        assert_eq!(local_time("a\0b"), "");
    }
}
