//! A writer that starts every line with a stamp (`--timestamps`: the local time in the user's
//! format, as iperf3 prints it) and, with `--forceflush`, writes each line out as soon as it
//! is complete. The stamp comes from the caller (the clock is not this layer's), so the
//! writer is pure and testable.

use std::io::{self, Write};

/// Wraps `out`: `stamp` is called at the start of each line (None: no stamp).
pub struct Stamped<W: Write, F: FnMut() -> String> {
    out: W,
    stamp: Option<F>,
    flush_lines: bool,
    at_line_start: bool,
}

impl<W: Write, F: FnMut() -> String> Stamped<W, F> {
    /// Lines of `out` start with `stamp()`, if given; each is flushed when `flush_lines`.
    pub fn new(out: W, stamp: Option<F>, flush_lines: bool) -> Self {
        Self { out, stamp, flush_lines, at_line_start: true }
    }
}

impl<W: Write, F: FnMut() -> String> std::fmt::Debug for Stamped<W, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stamped").field("flush_lines", &self.flush_lines).finish()
    }
}

impl<W: Write, F: FnMut() -> String> Write for Stamped<W, F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for line in buf.split_inclusive(|b| *b == b'\n') {
            if self.at_line_start
                && let Some(stamp) = self.stamp.as_mut()
            {
                self.out.write_all(stamp().as_bytes())?;
            }
            self.out.write_all(line)?;
            self.at_line_start = line.ends_with(b"\n");
            if self.at_line_start && self.flush_lines {
                self.out.flush()?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_starts_with_a_stamp_however_it_is_written() {
        let mut n = 0;
        let mut w = Stamped::new(
            Vec::new(),
            Some(|| {
                n += 1;
                format!("[{n}] ")
            }),
            false,
        );
        write!(w, "a\nb").expect("write");
        write!(w, "c\n\nd\n").expect("write");
        drop(w.flush());
        let Stamped { out, .. } = w;
        assert_eq!(String::from_utf8(out).expect("utf8"), "[1] a\n[2] bc\n[3] \n[4] d\n");
    }

    #[test]
    fn without_a_stamp_the_text_is_unchanged() {
        let mut w = Stamped::new(Vec::new(), None::<fn() -> String>, true);
        write!(w, "x\ny").expect("write");
        let Stamped { out, .. } = w;
        assert_eq!(out, b"x\ny");
    }
}
