//! Text a peer (or a stored record) chose, made safe to show on a terminal or in a text log:
//! the one escaping function every renderer and the server's log use (docs/SECURITY.md,
//! "Peer strings").
//!
//! [`escape`] renders every character that could move the cursor, end or rewrite a line,
//! start a terminal control sequence or reorder what a reader sees as visible ASCII: C0
//! controls and DEL as `\n`, `\r`, `\t` or `\x1b`; C1 controls, bidirectional overrides and
//! isolates (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C), line and paragraph separators,
//! zero-width and other invisible format characters as `\u{202e}`. Everything else (letters
//! of any script, emoji, punctuation) is left as it is. A backslash is left alone, so escaping
//! is idempotent (escaping twice changes nothing) and can be applied at every boundary
//! without double escaping; the price is that a peer can *write* `\x1b` literally, which shows
//! the same as an escaped ESC but does nothing.
//!
//! [`escape_lines`] does the same but keeps line breaks and tabs: for our own multi-line text
//! that may embed peer strings (a whole report, an iperf3 server's output). [`bounded`]
//! escapes and caps the length, for logs: a peer cannot make one log line longer than the cap
//! plus a short "… (N bytes cut)".
//!
//! Pure: no I/O. It does not decide where text goes or whether it came from a peer; callers
//! apply it where a string crosses into a terminal, a text log or a Markdown document.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The most characters of one peer-chosen name (software, client version) a log line quotes.
pub const LOG_NAME_CHARS: usize = 200;
/// The most characters of one error or refusal reason a log line quotes (our own words plus
/// what a peer said, e.g. its abort message).
pub const LOG_REASON_CHARS: usize = 1000;

/// Whether `c` must be shown escaped (see the module documentation).
fn hidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' // C0, DEL, C1 controls
        | '\u{61c}' | '\u{200b}'..='\u{200f}' // Arabic letter mark, zero width, LRM/RLM
        | '\u{2028}'..='\u{202e}' // line/paragraph separators, bidi embeddings and overrides
        | '\u{2060}'..='\u{206f}' // word joiner, invisible operators, bidi isolates
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' // byte order mark, interlinear annotation
        | '\u{e0000}'..='\u{e007f}' // tag characters
    )
}

/// Appends the visible form of `c` (which is [`hidden`]) to `out`.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with every [`hidden`] character for which `keep` is false shown escaped; borrowed
/// when nothing needed escaping.
fn escape_except(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let must = |c: char| hidden(c) && !keep(c);
    let Some(first) = s.find(must) else { return Cow::Borrowed(s) };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        if must(c) { push_escaped(&mut out, c) } else { out.push(c) }
    }
    Cow::Owned(out)
}

/// `s` safe to show on one line: every control, bidi or invisible format character escaped.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_except(s, |_| false)
}

/// Like [`escape`] but keeps line feeds and tabs: for multi-line text of our own that may
/// quote peers. A carriage return is still escaped, so no line can be overwritten.
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    escape_except(s, |c| c == '\n' || c == '\t')
}

/// [`escape`] of `s`, cut to at most `max` shown characters plus "… (N bytes cut)" naming
/// how many bytes of `s` were left out. Reads only as much of `s` as it shows.
pub fn bounded(s: &str, max: usize) -> Cow<'_, str> {
    let mut out = String::new();
    let mut shown = 0;
    for (i, c) in s.char_indices() {
        let before = out.len();
        if hidden(c) {
            push_escaped(&mut out, c)
        } else {
            out.push(c)
        }
        shown += out[before..].chars().count();
        if shown > max {
            out.truncate(before);
            let _ = write!(out, "… ({} cut)", super::count_of((s.len() - i) as u64, "byte"));
            return Cow::Owned(out);
        }
    }
    if out == s { Cow::Borrowed(s) } else { Cow::Owned(out) }
}

/// `value` with every string in it (map keys too) passed through `clean`, or None when no
/// string changed (so the common, clean case costs no copy). Every field of a record or a
/// results document at once, so no field can be forgotten. The value must survive a JSON
/// round trip (stored records do by construction); one that does not comes back as None.
pub fn every_string<T>(value: &T, clean: fn(&str) -> Cow<'_, str>) -> Option<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    fn walk(v: &mut serde_json::Value, clean: fn(&str) -> Cow<'_, str>) -> bool {
        use serde_json::Value;
        match v {
            Value::String(s) => match clean(s) {
                Cow::Borrowed(_) => false,
                Cow::Owned(new) => {
                    *s = new;
                    true
                }
            },
            Value::Array(items) => items.iter_mut().fold(false, |c, i| walk(i, clean) | c),
            Value::Object(map) => {
                let old = std::mem::take(map);
                let mut changed = false;
                for (k, mut item) in old {
                    changed |= walk(&mut item, clean);
                    let key = clean(&k);
                    changed |= matches!(key, Cow::Owned(_));
                    map.insert(key.into_owned(), item);
                }
                changed
            }
            _ => false,
        }
    }
    let mut v = serde_json::to_value(value).ok()?;
    if !walk(&mut v, clean) {
        return None;
    }
    serde_json::from_value(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_invisibles_show_escaped() {
        let hostile =
            "a\x1b[2J\r\nServer listening on x\t\u{7f}\u{85}\u{202e}b\u{2066}\u{200b}\u{feff}";
        let e = escape(hostile);
        assert_eq!(
            e,
            "a\\x1b[2J\\r\\nServer listening on x\\t\\x7f\\u{85}\\u{202e}b\\u{2066}\\u{200b}\\u{feff}"
        );
        assert!(e.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{e}");
    }

    #[test]
    fn ordinary_text_of_any_script_is_untouched_and_borrowed() {
        for s in ["linerate 0.9.0", "iperf3 3.16 — Größe ½ 日本語 😀", "C:\\path", ""] {
            assert!(matches!(escape(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn escaping_is_idempotent() {
        let once = escape("x\x1b\u{202e}\n\\x1b").into_owned();
        assert_eq!(escape(&once), once);
        assert_eq!(escape_lines(&once), once);
    }

    #[test]
    fn escape_lines_keeps_line_feeds_and_tabs_only() {
        assert_eq!(escape_lines("a\tb\nc\rd\x1b"), "a\tb\nc\\rd\\x1b");
    }

    #[test]
    fn bounded_caps_what_it_shows_and_says_how_much_was_cut() {
        let big = "x".repeat(16 << 20);
        let b = bounded(&big, LOG_NAME_CHARS);
        assert_eq!(b, format!("{}… ({} bytes cut)", "x".repeat(200), (16 << 20) - 200));
        assert_eq!(bounded("short", 10), "short");
        // Escapes count as what they show: 3 escaped ESCs are 12 characters.
        assert_eq!(bounded("\x1b\x1b\x1b", 9), "\\x1b\\x1b… (1 byte cut)");
        assert_eq!(bounded("é\n", 5), "é\\n");
    }

    #[test]
    fn every_string_reaches_nested_values_and_keys() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("k\x1b".to_string(), vec!["ok".to_string(), "\u{202e}x".to_string()]);
        let got = every_string(&m, escape).expect("changed");
        assert_eq!(
            got.get("k\\x1b").map(Vec::as_slice),
            Some(&["ok".into(), "\\u{202e}x".into()][..])
        );
        let clean = std::collections::BTreeMap::from([("a".to_string(), 1u32)]);
        assert!(every_string(&clean, escape).is_none());
    }
}
