//! An address as people type it: `HOST`, `HOST:PORT`, `[v6]`, `[v6]:PORT` or a bare IPv6
//! literal, reconciled with a port given apart (`-p`, a campaign's `port =`). Only string
//! handling: no resolution, no I/O.

use crate::plan::DEFAULT_PORT;

/// Splits `host` into the name to resolve and the port, taking the port from `HOST:PORT`
/// or from `port` (`-p`, a campaign's `port =`: `port_words` names it in errors), else the
/// default. A port given both ways is an error naming both, even when they agree (one of them
/// is a typo waiting to happen).
pub fn host_port(host: &str, port: Option<u16>, port_words: &str) -> Result<(String, u16), String> {
    let (name, inline) = split_host_port(host)?;
    let port = match (inline, port) {
        (Some(a), Some(b)) => {
            return Err(format!(
                "the port is given twice: {a} in {host:?} and {b} with {port_words}; give it once"
            ));
        }
        (Some(p), None) | (None, Some(p)) => p,
        (None, None) => DEFAULT_PORT,
    };
    Ok((name, port))
}

/// `(name, port written in the address)` of `HOST`, `HOST:PORT`, `[v6]`, `[v6]:PORT` or a bare
/// IPv6 literal (two or more colons, no port: `::1`, `fe80::1%eth0`). The one reading of an
/// address for the client's host, a campaign tier's host and a fleet's targets.
pub fn split_host_port(addr: &str) -> Result<(String, Option<u16>), String> {
    let bad = |what: &str| {
        format!("{addr:?} {what}; write HOST, HOST:PORT, an IPv6 address or [IPv6]:PORT")
    };
    if let Some(rest) = addr.strip_prefix('[') {
        let (inner, after) =
            rest.split_once(']').ok_or_else(|| bad("has '[' without a closing ']'"))?;
        if inner.is_empty() || inner.contains('[') {
            return Err(bad("names no address between '[' and ']'"));
        }
        return match after {
            "" => Ok((inner.to_owned(), None)),
            _ => {
                let p = after.strip_prefix(':').ok_or_else(|| bad("has no ':PORT' after ']'"))?;
                Ok((inner.to_owned(), Some(port(p, addr)?)))
            }
        };
    }
    match addr.matches(':').count() {
        0 => Ok((addr.to_owned(), None)),
        1 => {
            let (name, p) = addr.split_once(':').ok_or_else(|| bad("is not an address"))?;
            if name.is_empty() {
                return Err(bad("names no host before ':'"));
            }
            Ok((name.to_owned(), Some(port(p, addr)?)))
        }
        _ => Ok((addr.to_owned(), None)),
    }
}

fn port(p: &str, addr: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{p:?} in {addr:?} is not a port (a number from 1 to 65535)")),
    }
}

/// `host:port`, bracketing IPv6 literals: how a run stores its server and how messages name
/// it.
pub fn format_host_port(host: &str, port: u16) -> String {
    format!("{}{port}", host_prefix(host))
}

/// `host:` or `[v6]:`, what every port of `host` starts with once formatted.
fn host_prefix(host: &str) -> String {
    if host.contains(':') { format!("[{host}]:") } else { format!("{host}:") }
}

/// Which stored runs a server the user typed names. A run stores its server as
/// `host:port` (`[v6]:port` for an IPv6 literal); what the user types is read as the client
/// reads its host, so `::1`, `[::1]:5201` and `127.0.0.1` all find their runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMatch {
    /// A port was given: this stored server exactly.
    Exact(String),
    /// No port: every port of this host; the stored servers that start with this
    /// (`host:`, `[v6]:`).
    AnyPort(String),
}

impl ServerMatch {
    /// Reads `typed` (`HOST`, `HOST:PORT`, `[v6]`, `[v6]:PORT`, a bare IPv6 literal).
    pub fn parse(typed: &str) -> Result<ServerMatch, String> {
        let (name, port) = split_host_port(typed)?;
        Ok(match port {
            Some(p) => ServerMatch::Exact(format_host_port(&name, p)),
            None => ServerMatch::AnyPort(host_prefix(&name)),
        })
    }

    /// Whether a run stored against `server` matches.
    pub fn matches(&self, server: &str) -> bool {
        match self {
            ServerMatch::Exact(s) => server == s,
            ServerMatch::AnyPort(prefix) => server.starts_with(prefix.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ServerMatch, host_port};

    #[test]
    fn a_typed_server_finds_its_stored_runs_on_any_port_or_one() {
        let m = |t: &str| ServerMatch::parse(t).expect(t);
        assert!(m("127.0.0.1").matches("127.0.0.1:5201"));
        assert!(m("127.0.0.1").matches("127.0.0.1:7000"));
        assert!(!m("127.0.0.1").matches("127.0.0.10:5201"));
        assert!(m("127.0.0.1:7000").matches("127.0.0.1:7000"));
        assert!(!m("127.0.0.1:7000").matches("127.0.0.1:5201"));
        assert!(m("::1").matches("[::1]:5201"));
        assert!(m("[::1]:5201").matches("[::1]:5201"));
        assert!(!m("::1").matches("[::10]:5201"));
        assert!(ServerMatch::parse("[::1").is_err());
    }

    #[test]
    fn every_spelling_of_host_and_port() {
        for (arg, flag, want) in [
            ("example.net", None, ("example.net", 5201)),
            ("example.net", Some(9), ("example.net", 9)),
            ("example.net:7000", None, ("example.net", 7000)),
            ("127.0.0.1:7000", None, ("127.0.0.1", 7000)),
            ("::1", None, ("::1", 5201)),
            ("::1", Some(9), ("::1", 9)),
            ("[::1]", None, ("::1", 5201)),
            ("[::1]", Some(9), ("::1", 9)),
            ("[::1]:7000", None, ("::1", 7000)),
            ("fe80::1%eth0", None, ("fe80::1%eth0", 5201)),
        ] {
            let got = host_port(arg, flag, "-p").unwrap_or_else(|e| panic!("{arg}: {e}"));
            assert_eq!((got.0.as_str(), got.1), want, "{arg} {flag:?}");
        }
    }

    #[test]
    fn a_port_given_twice_names_both() {
        for arg in ["example.net:7000", "[::1]:7000"] {
            let e = host_port(arg, Some(9), "-p").expect_err(arg);
            assert!(e.contains("7000") && e.contains("-p") && e.contains('9'), "{e}");
        }
    }

    #[test]
    fn malformed_hosts_say_how_to_write_one() {
        for arg in ["[::1", "[]", "[::1]x", "host:", "host:http", ":80", "host:0", "[::1]:99999"] {
            let e = host_port(arg, None, "-p").expect_err(arg);
            assert!(e.contains("HOST:PORT") || e.contains("not a port"), "{arg}: {e}");
        }
    }
}
