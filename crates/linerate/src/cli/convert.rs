//! Arguments to plans: defaults, cross-flag rules and spec validation, with messages that
//! name the flag and the fix.

use std::time::Duration;

use linerate_proto::{Direction, EndCondition, Protocol, TestSpec};

use crate::cli::args::{Cli, Command, CompatArgs, GenerateWhat, JsonFormat, NetArgs, TestArgs};
use crate::plan::search::SearchPlan;
use crate::plan::{ClientPlan, Family, Generated, OutputFormat, Plan, ServerPlan, Shell};
use crate::record::LinkAssumption;

/// Default test length for `client`.
pub const DEFAULT_TIME: Duration = Duration::from_secs(10);
/// Default test length for `selftest`: long enough for a stable figure, short enough to wait for.
pub const SELFTEST_TIME: Duration = Duration::from_secs(3);
/// `--find-max` trial length when `--trial` is not given.
pub const DEFAULT_TRIAL: Duration = Duration::from_secs(5);
/// `--find-max` loss threshold when `--loss` is not given, percent.
pub const DEFAULT_MAX_LOSS_PERCENT: f64 = 0.1;
/// Default UDP rate per stream, as iperf3's (bit/s): low enough to be safe on any path.
pub const DEFAULT_UDP_RATE: u64 = 1 << 20;
/// UDP datagram size before the path MTU is known: fits a 1500-byte IPv4 MTU.
pub const DEFAULT_UDP_DATAGRAM: u32 = 1472;
/// Default TCP block size (bytes per write/read), as iperf3's.
pub const DEFAULT_TCP_BLOCK: u64 = 128 * 1024;
/// Shortest interval between reports.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

pub(super) fn to_plan(cli: Cli) -> Result<Plan, String> {
    match cli.command {
        Some(Command::Client(a)) => {
            client_plan(a.host, &a.net, &a.test, DEFAULT_TIME).map(Plan::Client)
        }
        Some(Command::Server(a)) => Ok(Plan::Server(server_plan(&a.net, a.one_off)?)),
        Some(Command::Selftest(a)) => {
            let net = NetArgs {
                port: 0,
                bind: None,
                ipv4: true,
                ipv6: false,
                json: a.json,
                json_format: JsonFormat::Linerate,
            };
            client_plan("127.0.0.1".into(), &net, &a.test, SELFTEST_TIME).map(Plan::Selftest)
        }
        Some(Command::Generate { what }) => Ok(Plan::Generate(match what {
            GenerateWhat::Man => Generated::Man,
            GenerateWhat::Bash => Generated::Completions(Shell::Bash),
            GenerateWhat::Zsh => Generated::Completions(Shell::Zsh),
            GenerateWhat::Fish => Generated::Completions(Shell::Fish),
        })),
        None => compat_plan(cli.compat),
    }
}

fn compat_plan(c: CompatArgs) -> Result<Plan, String> {
    if c.server {
        return Ok(Plan::Server(server_plan(&c.net, c.one_off)?));
    }
    match c.client {
        Some(host) => client_plan(host, &c.net, &c.test, DEFAULT_TIME).map(Plan::Client),
        None => {
            let net = NetArgs {
                port: 0,
                bind: None,
                ipv4: true,
                ipv6: false,
                json: c.net.json,
                json_format: c.net.json_format,
            };
            client_plan("127.0.0.1".into(), &net, &c.test, SELFTEST_TIME).map(Plan::Selftest)
        }
    }
}

fn family(net: &NetArgs) -> Family {
    match (net.ipv4, net.ipv6) {
        (true, _) => Family::V4,
        (_, true) => Family::V6,
        _ => Family::Any,
    }
}

fn output(net: &NetArgs) -> OutputFormat {
    match (net.json, net.json_format) {
        (false, _) => OutputFormat::Text,
        (true, JsonFormat::Linerate) => OutputFormat::Json,
        (true, JsonFormat::Iperf3) => OutputFormat::Iperf3Json,
    }
}

fn server_plan(net: &NetArgs, one_off: bool) -> Result<ServerPlan, String> {
    if let Some(ip) = net.bind
        && !family(net).allows(&ip)
    {
        return Err(format!("-B {ip} does not match -4/-6; drop one of them"));
    }
    Ok(ServerPlan {
        port: net.port,
        bind: net.bind,
        family: family(net),
        one_off,
        output: output(net),
    })
}

fn client_plan(
    host: String,
    net: &NetArgs,
    t: &TestArgs,
    default_time: Duration,
) -> Result<ClientPlan, String> {
    let mut spec = test_spec(t, default_time)?;
    let find_max = t.find_max.then(|| {
        let trial = t.trial.unwrap_or(DEFAULT_TRIAL);
        spec.end = EndCondition::Duration { duration_ms: millis(trial).max(1) };
        SearchPlan {
            max_loss: t.loss.unwrap_or(DEFAULT_MAX_LOSS_PERCENT) / 100.0,
            // Unset -b means "start unpaced", not the 1 Mbit/s UDP default.
            start_bits_per_second: t.bitrate.map_or(0, |b| b.bits_per_second()),
        }
    });
    if t.connect_timeout.is_zero() {
        return Err("--connect-timeout must be more than 0 s".into());
    }
    Ok(ClientPlan {
        host,
        port: net.port,
        spec,
        family: family(net),
        bind: net.bind,
        cport: t.cport,
        connect_timeout: t.connect_timeout,
        output: output(net),
        link: t
            .link_speed
            .filter(|l| l.bits_per_second() > 0)
            .map(|l| LinkAssumption { bits_per_second: l.bits_per_second(), mtu_bytes: t.mtu }),
        iperf3: t.iperf3,
        get_server_output: t.get_server_output,
        udp_length_auto: t.udp && t.length.is_none(),
        find_max,
    })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn test_spec(t: &TestArgs, default_time: Duration) -> Result<TestSpec, String> {
    let end = match (t.time, t.bytes) {
        (_, Some(b)) => EndCondition::Bytes { bytes: b.bytes() },
        (Some(d), None) => {
            if d < Duration::from_millis(1) {
                return Err("-t must be at least 1 ms (0.001)".into());
            }
            EndCondition::Duration { duration_ms: millis(d) }
        }
        (None, None) => EndCondition::Duration { duration_ms: millis(default_time) },
    };
    if !t.interval.is_zero() && t.interval < MIN_INTERVAL {
        return Err("-i must be 0 (no interval reports) or at least 0.01 s".into());
    }
    let block = match (t.length, t.udp) {
        (Some(l), _) => l.bytes(),
        // Replaced by the path's size once the control connection is up (see
        // `ClientPlan::udp_length_auto`); 1472 fits a 1500-byte IPv4 MTU.
        (None, true) => u64::from(DEFAULT_UDP_DATAGRAM),
        (None, false) => DEFAULT_TCP_BLOCK,
    };
    let block_bytes =
        u32::try_from(block).map_err(|_| format!("-l {block} is too large; at most 64M"))?;
    let spec = TestSpec {
        protocol: if t.udp { Protocol::Udp } else { Protocol::Tcp },
        direction: match (t.reverse, t.bidir) {
            (true, _) => Direction::Download,
            (_, true) => Direction::Bidirectional,
            _ => Direction::Upload,
        },
        streams: t.parallel,
        end,
        block_bytes,
        window_bytes: t.window.map(|w| w.bytes()),
        bits_per_second: match (t.bitrate, t.udp) {
            (Some(b), _) => b.bits_per_second(),
            (None, true) => DEFAULT_UDP_RATE,
            (None, false) => 0,
        },
        mss_bytes: t.mss,
        no_delay: t.no_delay,
        congestion: t.congestion.clone(),
        omit_ms: t.omit.map_or(0, millis),
        interval_ms: millis(t.interval),
        zerocopy: t.zerocopy,
        title: t.title.clone(),
    };
    spec.validate().map_err(|e| e.to_string())?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use crate::cli::parse;
    use crate::plan::{Family, OutputFormat, Plan};
    use linerate_proto::{Direction, EndCondition};

    fn client(args: &[&str]) -> crate::plan::ClientPlan {
        match parse(args.iter().copied()) {
            Ok(Plan::Client(p)) => p,
            other => panic!("expected a client plan from {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn iperf_style_and_subcommand_forms_agree() {
        let a = client(&["linerate", "-c", "h", "-P", "4", "-t", "2.5", "-R", "-w", "256K"]);
        let b = client(&["linerate", "client", "h", "-P", "4", "-t", "2.5", "-R", "-w", "256K"]);
        assert_eq!(a, b);
        assert_eq!(a.spec.streams, 4);
        assert_eq!(a.spec.end, EndCondition::Duration { duration_ms: 2500 });
        assert_eq!(a.spec.direction, Direction::Download);
        assert_eq!(a.spec.window_bytes, Some(262_144));
    }

    #[test]
    fn units_follow_iperf_conventions() {
        let p = client(&["linerate", "client", "h", "-n", "100M", "-b", "10G", "-l", "64k"]);
        assert_eq!(p.spec.end, EndCondition::Bytes { bytes: 100 * 1024 * 1024 });
        assert_eq!(p.spec.bits_per_second, 10_000_000_000);
        assert_eq!(p.spec.block_bytes, 64_000);
    }

    #[test]
    fn defaults() {
        let p = client(&["linerate", "client", "h"]);
        assert_eq!(p.port, 5201);
        assert_eq!(p.spec.end, EndCondition::Duration { duration_ms: 10_000 });
        assert_eq!(p.spec.block_bytes, 128 * 1024);
        assert_eq!(p.spec.interval_ms, 1000);
        assert_eq!(p.family, Family::Any);
        assert_eq!(p.output, OutputFormat::Text);
        assert!(matches!(parse(["linerate"]), Ok(Plan::Selftest(_))));
        assert!(matches!(parse(["linerate", "-s", "-1"]), Ok(Plan::Server(s)) if s.one_off));
    }

    #[test]
    fn bad_input_names_the_flag() {
        for (args, needle) in [
            (vec!["linerate", "client", "h", "-t", "abc"], "abc"),
            (vec!["linerate", "client", "h", "-P", "0"], "0"),
            (vec!["linerate", "client", "h", "-P", "5000"], "5000"),
            (vec!["linerate", "client", "h", "-l", "1G"], "-l"),
            (vec!["linerate", "client", "h", "-R", "--bidir"], "--bidir"),
            (vec!["linerate", "client", "h", "-t", "1", "-n", "1M"], "--bytes"),
            (vec!["linerate", "client", "h", "-i", "0.001"], "-i"),
            (vec!["linerate", "client", "h", "-C", "bad name"], "-C"),
            (vec!["linerate", "client", "h", "-M", "5"], "-M"),
            (vec!["linerate", "-s", "-c", "h"], "--client"),
        ] {
            let err = parse(args.iter().copied()).expect_err("must fail").to_string();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn subcommand_and_compat_flags_do_not_mix() {
        assert!(parse(["linerate", "-P", "2", "server"]).is_err());
    }
}
