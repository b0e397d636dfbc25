//! Names the commit a binary was built from, for `linerate --version`: a bug report then says
//! which code it is about, not only "0.1.0", which every commit between releases shares.
//!
//! `LINERATE_COMMIT` is `COMMIT` (12 hex digits of `git rev-parse HEAD`), `COMMIT-dirty` when
//! tracked files differed from that commit at build time, or `unknown commit` outside a git
//! checkout (a source tarball, `cargo package`). A builder that knows the commit otherwise
//! (a distribution's source package) sets `LINERATE_COMMIT` in the environment.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=LINERATE_COMMIT");
    let commit = match std::env::var("LINERATE_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => from_git().unwrap_or_else(|| "unknown commit".to_string()),
    };
    println!("cargo:rustc-env=LINERATE_COMMIT={commit}");
}

/// The checkout's commit, or None when this is not one (or git is missing).
fn from_git() -> Option<String> {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let git_dir = PathBuf::from(git(&dir, &["rev-parse", "--git-dir"])?);
    let common = PathBuf::from(git(&dir, &["rev-parse", "--git-common-dir"])?);
    // Run again when HEAD moves (a commit, a checkout) or the index changes (`git add`), and
    // when this crate's or the protocol crate's sources change (edits that make the tree
    // dirty); cargo would otherwise keep the first answer for as long as `target/` lives.
    let at = |p: &Path| if p.is_absolute() { p.to_path_buf() } else { dir.join(p) };
    let mut watched = vec![at(&git_dir).join("HEAD"), at(&git_dir).join("index")];
    if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(at(&common).join(branch));
    }
    watched.push(at(&common).join("packed-refs"));
    watched.extend([dir.join("src"), dir.join("../proto/src"), dir.join("Cargo.toml")]);
    for p in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let hash = git(&dir, &["rev-parse", "--short=12", "HEAD"])?;
    // Staged and unstaged edits of tracked files; untracked files (build output, notes) do
    // not make a build dirty. `--no-optional-locks`: a build only reads the checkout, it never
    // rewrites the index under a user's own git command.
    let status = Command::new("git")
        .args(["-c", "safe.directory=*", "--no-optional-locks", "status", "--porcelain"])
        .arg("--untracked-files=no")
        .current_dir(&dir)
        .output()
        .ok()?;
    let clean = status.status.success() && status.stdout.is_empty();
    Some(if clean { hash } else { format!("{hash}-dirty") })
}

/// `git ARGS` in `dir`: its trimmed stdout, None on any failure. `safe.directory=*`: a
/// checkout owned by another user (a build as root in CI or in a container) is still read.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
