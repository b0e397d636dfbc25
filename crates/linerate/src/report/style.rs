//! The two styles of a report for people, plain text (a terminal) and Markdown (a wiki page or
//! a ticket): headings, lists and tables in each, and Markdown's escaping. Every section
//! writes through it; it knows nothing of what the sections say.
//!
//! Text passes through `units::peer_text::escape` on the way out (headings, list items,
//! table cells): findings, warnings and failure reasons quote stored records, which quote
//! peers (docs/SECURITY.md, "Peer strings").

use std::io::Write;

use crate::report::table::Table;
use crate::units::peer_text::escape;

/// Plain text or Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Aligned columns, `==` headings, `  - ` bullets.
    Text,
    /// Pipe tables, `#` headings, `- ` bullets.
    Markdown,
}

impl Style {
    /// A heading of `level` (1 = the report's title).
    pub fn heading(self, level: usize, text: &str, out: &mut dyn Write) -> std::io::Result<()> {
        let text = escape(text);
        match self {
            Style::Text if level == 1 => writeln!(out, "{text}"),
            Style::Text => writeln!(out, "== {text} =="),
            Style::Markdown => writeln!(out, "{} {text}\n", "#".repeat(level)),
        }
    }

    /// A titled list ("none" when empty).
    pub fn list(self, title: &str, items: &[String], out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Style::Text => {
                writeln!(out, "{title}:")?;
                if items.is_empty() {
                    return writeln!(out, "  - none");
                }
                items.iter().try_for_each(|i| writeln!(out, "  - {}", escape(i)))
            }
            Style::Markdown => {
                writeln!(out, "\n**{title}:**\n")?;
                if items.is_empty() {
                    return writeln!(out, "- none");
                }
                items.iter().try_for_each(|i| writeln!(out, "- {}", md_escape(i)))
            }
        }
    }

    /// A table in this style.
    pub fn table(self, t: &Table, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Style::Text => t.write_text(out),
            Style::Markdown => t.write_markdown(out),
        }
    }
}

/// Characters Markdown would read as formatting in running text (after [`escape`]).
pub fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape(s).chars() {
        if matches!(c, '\\' | '*' | '_' | '`' | '|' | '<' | '>' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
