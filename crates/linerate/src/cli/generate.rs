//! `linerate generate man|bash|zsh|fish`: the man pages and shell completions, rendered from
//! the same clap definitions as the parser, so that they cannot drift from the flags. Here, not
//! in `cmd/`, because `cli/` is the only clap user (docs/ARCHITECTURE.md); the command only
//! writes the bytes.
//!
//! `generate man` renders linerate(1); `generate man --dir DIR` it and a page per subcommand
//! (`linerate-client.1`, ...), which the Debian package installs (`packaging/build-deb.sh`).
//! linerate(1) has the sections a man page reader looks for: the top-level help's closing
//! paragraphs (units, examples, EXIT STATUS) each as a section of its own, then ENVIRONMENT
//! and FILES, written here.

use std::io::Write;

use crate::plan::{Generated, Shell};

/// What linerate reads from its environment at run time.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "XDG_DATA_HOME",
        "Where the history of runs is kept: $XDG_DATA_HOME/linerate/history.sqlite, when it \
         is an absolute path.",
    ),
    (
        "HOME",
        "Without an absolute XDG_DATA_HOME, the history is \
         $HOME/.local/share/linerate/history.sqlite.",
    ),
    ("TZ", "The time zone of --timestamps (strftime(3) local time)."),
    (
        "LINERATE_NODE_NAME, LINERATE_ZONE",
        "linerate server: the node and zone it names to clients, as --node-name and --zone \
         (which win); the Kubernetes DaemonSet sets them from the downward API.",
    ),
];

/// The files linerate reads and writes that the user does not name on the command line.
const FILES: &[(&str, &str)] = &[
    (
        "$XDG_DATA_HOME/linerate/history.sqlite",
        "The history (SQLite): every test, matrix and campaign the client runs is stored \
         here unless --no-store is given; --db PATH names another file (docs/STORE.md). \
         Without XDG_DATA_HOME: ~/.local/share/linerate/history.sqlite. The packaged timer \
         example keeps its history in /var/lib/linerate-probe/.",
    ),
    (
        "/etc/linerate/server.toml",
        "The configuration of the packaged service, linerate-server.service (linerate server \
         --config FILE): one key per server flag, named as its long flag with _ for -; a flag \
         given on the command line wins over the file.",
    ),
];

/// What `generate` renders: one page or script, or (man pages into a directory) each file's
/// name and bytes.
#[derive(Debug)]
pub enum Rendered {
    /// The man page linerate(1) or a completion script.
    One(Vec<u8>),
    /// linerate.1 and linerate-SUBCOMMAND.1 for every subcommand, and the directory they go to.
    Pages(std::path::PathBuf, Vec<(String, Vec<u8>)>),
}

/// Renders `what` whole: clap_complete panics when its writer fails, and a closed pipe
/// (`generate bash | head -1`) is the reader's choice, which `main` ends quietly, so the
/// command writes the bytes itself.
pub fn generated(what: &Generated) -> std::io::Result<Rendered> {
    let mut cmd = super::command();
    let mut page = Vec::new();
    match what {
        // `linerate help` is clap's, and `--help` says the same: no page of its own.
        Generated::Man => main_page(cmd.disable_help_subcommand(true), &mut page)?,
        Generated::ManPages(dir) => {
            return Ok(Rendered::Pages(dir.clone(), pages(cmd.disable_help_subcommand(true))?));
        }
        Generated::Completions(shell) => {
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(shell, &mut cmd, "linerate", &mut page);
        }
    }
    Ok(Rendered::One(page))
}

/// linerate.1 and linerate-SUBCOMMAND.1 for every subcommand.
fn pages(mut cmd: clap::Command) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    // Built, clap names each subcommand `linerate-NAME`: the pages' titles and file names.
    cmd.build();
    let mut out = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let man = clap_mangen::Man::new(sub.clone());
        let mut page = Vec::new();
        man.render(&mut page)?;
        if sub.get_name() == "server" {
            section(&mut page, "FILES", &FILES[1..])?;
        }
        see_also(&mut page, &["linerate(1)"])?;
        out.push((man.get_filename(), page));
    }
    let mut page = Vec::new();
    main_page(cmd, &mut page)?;
    out.push(("linerate.1".into(), page));
    Ok(out)
}

/// linerate(1): clap_mangen's sections, the help's closing paragraphs as sections, then
/// ENVIRONMENT, FILES and SEE ALSO.
fn main_page(cmd: clap::Command, w: &mut Vec<u8>) -> std::io::Result<()> {
    let after = cmd.get_after_help().map(|h| h.to_string()).unwrap_or_default();
    let subs: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| format!("linerate-{}(1)", s.get_name()))
        .collect();
    let man = clap_mangen::Man::new(cmd);
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    man.render_subcommands_section(w)?;
    for (heading, lines) in paragraphs(&after) {
        writeln!(w, ".SH \"{}\"", heading.to_uppercase())?;
        // As the help shows them: its tables are aligned by spaces.
        writeln!(w, ".nf")?;
        for line in lines {
            writeln!(w, "{}", roff_line(line))?;
        }
        writeln!(w, ".fi")?;
    }
    section(w, "ENVIRONMENT", ENVIRONMENT)?;
    section(w, "FILES", FILES)?;
    let subs: Vec<&str> = subs.iter().map(String::as_str).collect();
    see_also(w, &subs)?;
    man.render_version_section(w)?;
    Ok(())
}

/// The help's closing text split at its headings (an unindented line ending in `:`).
fn paragraphs(text: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        let heading = line
            .strip_suffix(':')
            .filter(|h| !h.is_empty() && !line.starts_with(char::is_whitespace));
        match (heading, out.last_mut()) {
            (Some(h), _) => out.push((h, Vec::new())),
            (None, Some((_, lines))) => lines.push(line),
            (None, None) => out.push(("Notes", vec![line])),
        }
    }
    out
}

/// A section of tagged paragraphs: each name in bold, its text indented under it.
fn section(w: &mut Vec<u8>, heading: &str, items: &[(&str, &str)]) -> std::io::Result<()> {
    writeln!(w, ".SH {heading}")?;
    for (name, text) in items {
        writeln!(w, ".TP\n\\fB{}\\fR\n{}", roff_text(name), roff_line(text))?;
    }
    Ok(())
}

fn see_also(w: &mut Vec<u8>, pages: &[&str]) -> std::io::Result<()> {
    writeln!(w, ".SH \"SEE ALSO\"\n{}", roff_line(&pages.join(", ")))?;
    Ok(())
}

/// A text line safe in roff: backslashes escaped, and a leading `.` or `'` (a request) made
/// plain text.
fn roff_line(line: &str) -> String {
    let text = roff_text(line);
    if text.starts_with(['.', '\'']) { format!("\\&{text}") } else { text }
}

fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_paragraphs_become_sections() {
        let p = paragraphs("Units:\n  K = 1024\nExit status:\n  0    success\n  3    failed\n");
        assert_eq!(
            p,
            vec![
                ("Units", vec!["  K = 1024"]),
                ("Exit status", vec!["  0    success", "  3    failed"])
            ]
        );
        assert_eq!(roff_line(".nf and \\x"), "\\&.nf and \\ex");
    }
}
