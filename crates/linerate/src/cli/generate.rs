//! `linerate generate man|bash|zsh|fish`: the man page and shell completions, rendered from
//! the same clap definitions as the parser. Here, not in `cmd/`, because `cli/` is the only
//! clap user (docs/ARCHITECTURE.md); the command only writes the bytes.

use crate::plan::{Generated, Shell};

/// The man page or a shell's completion script, rendered whole: clap_complete panics when
/// its writer fails, and a closed pipe (`generate bash | head -1`) is the reader's choice,
/// which `main` ends quietly, so the command writes the bytes itself.
pub fn generated(what: Generated) -> std::io::Result<Vec<u8>> {
    let mut cmd = super::command();
    let mut page = Vec::new();
    match what {
        Generated::Man => clap_mangen::Man::new(cmd).render(&mut page)?,
        Generated::Completions(shell) => {
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            clap_complete::generate(shell, &mut cmd, "linerate", &mut page);
        }
    }
    Ok(page)
}
