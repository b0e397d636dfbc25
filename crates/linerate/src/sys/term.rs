//! The terminal: how wide standard error is, for progress lines.

/// Columns of the terminal on standard error, when it is one and says.
pub fn stderr_columns() -> Option<usize> {
    // SAFETY: an all-zero `winsize` is valid; TIOCGWINSZ writes one into the struct we own
    // and fails harmlessly (ENOTTY) when stderr is not a terminal.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}
