//! argv on its way through clap: the iperf shorthand `-s` read as the `server` subcommand,
//! requirements clap lets go unmet, and clap's own errors made to name linerate's way.
//!
//! Each is done here, by reading the clap definitions, and not flag by flag: a server flag
//! added later works after `-s` too, and a requirement added later cannot be dropped silently.

use std::ffi::OsString;

use clap::builder::Resettable::Reset;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

/// `linerate -s ARGS` as `linerate server ARGS`, so that `-s` takes every server flag by the
/// same definitions (`--max-streams`, `--exclusive`, `--log-format`, ...) and a client's flag
/// after it is refused by name. None when argv does not use `-s` (or `--server`) as iperf's
/// server switch: a subcommand that comes first has its own flags (`history --server`).
pub(super) fn server_shorthand(cmd: &Command, argv: &[OsString]) -> Option<Vec<OsString>> {
    let (program, args) = argv.split_first()?;
    if !args.first()?.to_str()?.starts_with('-') {
        return None;
    }
    let mut server = false;
    let mut rest = Vec::with_capacity(args.len());
    let mut operands = false;
    for arg in args {
        let text = arg.to_str().filter(|_| !operands);
        match text {
            Some("--") => operands = true,
            Some("-s" | "--server") => {
                server = true;
                continue;
            }
            _ => {}
        }
        match text.and_then(|t| cluster_without_s(cmd, t)) {
            Some(cluster) => {
                server = true;
                rest.push(cluster.into());
            }
            None => rest.push(arg.clone()),
        }
    }
    server.then(|| [program.clone(), "server".into()].into_iter().chain(rest).collect())
}

/// `-s1`, `-4s`, `-sp5201`: a cluster of short flags with `s` among those before any that
/// takes a value (in `-Ts` the `s` is the title): the cluster without it.
fn cluster_without_s(cmd: &Command, token: &str) -> Option<String> {
    let letters = token.strip_prefix('-').filter(|l| !l.starts_with('-') && l.len() > 1)?;
    let switch = |c: char| {
        cmd.get_arguments().any(|a| a.get_short() == Some(c) && !a.get_action().takes_values())
    };
    let at = letters.chars().take_while(|&c| c == 's' || switch(c)).position(|c| c == 's')?;
    let (before, after) = letters.split_at(at);
    Some(format!("-{before}{}", &after[1..]))
}

/// Every value may be a negative number: `-t -1` is then a duration its parser refuses
/// ("cannot be negative"), not a missing value followed by the flag `-1` (`--one-off`). Not
/// a value that may be left out (`--resume [GROUP]`): `--resume -4` is the flag `-4`.
pub(super) fn negative_values(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        let required = a.get_num_args().is_none_or(|n| n.min_values() > 0);
        if a.get_action().takes_values() && !a.is_positional() && required {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(negative_values)
}

/// A flag whose requirement clap let go unmet, with the flag that ruled the requirement out.
///
/// clap waives `requires` when the required flag conflicts with another one given:
/// `--probe-rate` requires `--under-load`, which `--rr` rules out, so `--rr --probe-rate 5`
/// parsed and the probe rate was ignored. Parsed again with no conflicts (they were checked
/// already), the requirement holds; the flag that needs it is the one whose requirement,
/// dropped, lets that parse through.
pub(super) fn unmet_requirement(
    cmd: &Command,
    argv: &[OsString],
    matches: &ArgMatches,
) -> Option<String> {
    let strict = no_conflicts(cmd.clone());
    let err = strict.clone().try_get_matches_from(argv).err()?;
    if err.kind() != ErrorKind::MissingRequiredArgument {
        return None;
    }
    let needed = strings(err.get(ContextKind::InvalidArg)).into_iter().next()?;
    let (path, given) = subcommand_matches(matches, Vec::new());
    let scope = path.iter().try_fold(cmd, |c, name| c.find_subcommand(name))?;
    let needy = scope.get_arguments().find(|a| {
        let id = a.get_id().as_str();
        given.ids().any(|g| g.as_str() == id)
            && given.value_source(id) == Some(ValueSource::CommandLine)
            && edit(strict.clone(), &path, &|c| c.mut_arg(id, |a| a.requires(Reset)))
                .try_get_matches_from(argv)
                .is_ok()
    })?;
    let needy = flag_name(needy);
    // What rules the requirement out: the conflict clap reports once it is given.
    let partner = (needed.starts_with('-') && !needed.contains(' '))
        .then(|| {
            let with: Vec<OsString> =
                argv.iter().cloned().chain([OsString::from(&needed)]).collect();
            let err = cmd.clone().try_get_matches_from(with).err()?;
            (err.kind() == ErrorKind::ArgumentConflict).then_some(())?;
            let mut named = strings(err.get(ContextKind::InvalidArg));
            named.extend(strings(err.get(ContextKind::PriorArg)));
            named.into_iter().find(|n| *n != needed)
        })
        .flatten();
    Some(match partner {
        Some(p) => {
            format!(
                "{needy} applies only with {needed}, which does not combine with {p}: drop {needy}"
            )
        }
        None => format!(
            "{needy} applies only with {needed}, which the other flags given rule out: drop {needy}"
        ),
    })
}

/// The subcommand names down to the one whose flags were given, and its matches.
fn subcommand_matches(m: &ArgMatches, mut path: Vec<String>) -> (Vec<String>, &ArgMatches) {
    match m.subcommand() {
        Some((name, sub)) => {
            path.push(name.to_string());
            subcommand_matches(sub, path)
        }
        None => (path, m),
    }
}

/// `cmd` with `f` applied to the subcommand at `path`.
fn edit(cmd: Command, path: &[String], f: &dyn Fn(Command) -> Command) -> Command {
    match path.split_first() {
        None => f(cmd),
        Some((name, rest)) => cmd.mut_subcommand(name, |c| edit(c, rest, f)),
    }
}

/// `cmd` with no conflicts between its flags, at any depth.
fn no_conflicts(cmd: Command) -> Command {
    let groups: Vec<String> = cmd.get_groups().map(|g| g.get_id().to_string()).collect();
    let cmd = groups.iter().fold(cmd, |c, g| c.mut_group(g, |g| g.conflicts_with(Reset)));
    cmd.mut_args(|a| a.conflicts_with(Reset)).mut_subcommands(no_conflicts)
}

/// `-1/--one-off`, `--probe-rate`: a flag as its help names it.
fn flag_name(a: &clap::Arg) -> String {
    match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("-{s}/--{l}"),
        (None, Some(l)) => format!("--{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, None) => a.get_id().to_string(),
    }
}

fn strings(v: Option<&ContextValue>) -> Vec<String> {
    match v {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(v)) => v.clone(),
        _ => Vec::new(),
    }
}

/// iperf2's flags that linerate has under another name or not at all, with what to use.
const IPERF2: [(&[&str], &str); 3] = [
    (&["-d", "--dualtest", "--full-duplex"], "linerate sends both ways at once with --bidir"),
    (
        &["-r", "--tradeoff"],
        "linerate runs one direction per test: run it twice, the second time with -R",
    ),
    (
        &["-y", "--reportstyle"],
        "linerate prints JSON with -J, and CSV from the history with \
         `linerate report last --format csv` after the test",
    ),
];

/// clap's error, made to say what to use instead where linerate knows better: iperf2's flags
/// (`-d`, `-r`, `-y C`), and a client's flag after `-s` (read as `server`, see
/// [`server_shorthand`]).
pub(super) fn explain(cmd: &Command, err: clap::Error, after_s: bool) -> clap::Error {
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let Some(token) = strings(err.get(ContextKind::InvalidArg)).into_iter().next() else {
        return err;
    };
    let flag = token.split('=').next().unwrap_or(&token);
    if let Some((_, instead)) = IPERF2.iter().find(|(names, _)| names.contains(&flag)) {
        let what = "is an iperf2 flag that linerate does not take";
        return cmd.clone().error(ErrorKind::UnknownArgument, format!("{flag} {what}: {instead}"));
    }
    let client_flag = cmd.get_arguments().find(|a| {
        flag.strip_prefix("--").map_or_else(
            || flag.strip_prefix('-').and_then(|s| s.chars().next()) == a.get_short(),
            |long| Some(long) == a.get_long(),
        )
    });
    match client_flag {
        Some(a) if after_s => cmd.clone().error(
            ErrorKind::UnknownArgument,
            format!(
                "{} is a client's flag, and -s runs a server (`linerate server`, whose flags \
                 `linerate server --help` lists): drop it, or give -c HOST to run a client",
                flag_name(a)
            ),
        ),
        _ => err,
    }
}
