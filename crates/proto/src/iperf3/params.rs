//! iperf3's parameter JSON: building it (client) and reading it into a [`TestSpec`] (server).
//!
//! The server side follows what the newest iperf3 servers check (ranges, types) and refuses,
//! with the iperf3 error number the client will print and a sentence for linerate's own log,
//! every option it does not implement. A present flag key means "on" whatever its value, as in
//! iperf3 (`"reverse":false` turns reverse on), so both directions agree with real iperf3.

use serde_json::{Map, Value, json};

use crate::bounded::DecodeError;
use crate::iperf3::errors::{ServerError, errno};
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};

/// iperf3's limit on the parameter JSON (`MAX_PARAMS_JSON_STRING` in 3.18+).
pub const MAX_PARAMS_JSON: u32 = 8192;

/// What decoding the parameters may take (they are read as an untyped tree: a few fields).
const PARAMS_BOUNDS: crate::bounded::Bounds = crate::bounded::Bounds {
    budget: 8 * MAX_PARAMS_JSON as usize,
    max_items: 256,
    max_string: MAX_PARAMS_JSON as usize,
};

/// What an iperf3 client asked for, in linerate's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Iperf3Request {
    /// The test.
    pub spec: TestSpec,
    /// The client wants the server's output in the results (`--get-server-output`).
    pub get_server_output: bool,
    /// UDP datagrams carry 64-bit sequence numbers (`--udp-counters-64bit`), else 32-bit.
    pub udp_counters_64bit: bool,
    /// The version the client says it is, if it says.
    pub client_version: Option<String>,
    /// `-t 0` without `-n`/`-k`: the test runs until the client ends it (TEST_END, or
    /// CLIENT_TERMINATE when it is interrupted), as with an iperf3 server. `spec.end` then
    /// holds [`crate::spec::MAX_DURATION_MS`]; the server bounds it by its own maximum.
    pub endless: bool,
}

/// Why the server will not run a requested test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iperf3Refusal {
    /// What the client is sent (it prints iperf3's text for it).
    pub error: ServerError,
    /// linerate's own explanation, naming the option and the fix.
    pub message: String,
}

fn refuse(error: impl Into<ServerError>, message: impl Into<String>) -> Iperf3Refusal {
    Iperf3Refusal { error: error.into(), message: message.into() }
}

/// What a linerate client asks of an iperf3 server beyond the test itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientExtras {
    /// `--get-server-output`: the server's own output comes back with its results.
    pub get_server_output: bool,
    /// `--repeating-payload`: the server's senders write a repeating pattern (iperf3 fills
    /// them with random bytes otherwise; linerate's own senders always repeat a pattern).
    pub repeating_payload: bool,
}

/// The parameter JSON for `spec` (with `extras`), or a sentence saying which option iperf3
/// cannot take.
///
/// Keys are only sent when the feature is wanted: iperf3 servers treat a present key as "on"
/// whatever its value (`"reverse":false` turns reverse on).
pub fn params(
    spec: &TestSpec,
    client_version: &str,
    extras: ClientExtras,
) -> Result<String, String> {
    if spec.rr.is_some() {
        return Err("request/response tests (--rr) are not supported by iperf3, which measures bulk transfers only; run `linerate server` on the far end".into());
    }
    if spec.streams > 128 {
        return Err(format!(
            "iperf3 servers accept at most 128 streams (-P {}); use -P 128 or fewer",
            spec.streams
        ));
    }
    if spec.omit_ms % 1000 != 0 {
        return Err("iperf3 servers take -O in whole seconds; use e.g. -O 1".into());
    }
    if spec.block_bytes > 1 << 20 {
        return Err("iperf3 servers accept TCP blocks of at most 1 MiB (-l 1M)".into());
    }
    let mut m = Map::new();
    let udp = spec.protocol == Protocol::Udp;
    m.insert(if udp { "udp" } else { "tcp" }.into(), Value::Bool(true));
    m.insert("omit".into(), json!(spec.omit_ms / 1000));
    let (time, num) = match spec.end {
        // The client owns the clock and sends TEST_END itself; the server uses `time` only
        // for its watchdog, so a fractional -t rounds up here.
        EndCondition::Duration { duration_ms } => (duration_ms.div_ceil(1000), 0),
        EndCondition::Bytes { bytes } => (0, bytes),
    };
    m.insert("time".into(), json!(time));
    m.insert("num".into(), json!(num));
    m.insert("blockcount".into(), json!(0));
    if let Some(mss) = spec.mss_bytes {
        m.insert("MSS".into(), json!(mss));
    }
    if spec.no_delay {
        m.insert("nodelay".into(), Value::Bool(true));
    }
    m.insert("parallel".into(), json!(spec.streams));
    match spec.direction {
        Direction::Upload => {}
        Direction::Download => {
            m.insert("reverse".into(), Value::Bool(true));
        }
        Direction::Bidirectional => {
            m.insert("bidirectional".into(), Value::Bool(true));
        }
    }
    if let Some(w) = spec.window_bytes {
        m.insert("window".into(), json!(w));
    }
    m.insert("len".into(), json!(spec.block_bytes));
    if spec.bits_per_second > 0 {
        m.insert("bandwidth".into(), json!(spec.bits_per_second));
    }
    m.insert("pacing_timer".into(), json!(1000));
    if let Some(t) = &spec.title {
        m.insert("title".into(), json!(t));
    }
    if let Some(cc) = &spec.congestion {
        m.insert("congestion".into(), json!(cc));
    }
    if extras.get_server_output {
        m.insert("get_server_output".into(), json!(1));
    }
    if extras.repeating_payload {
        m.insert("repeating_payload".into(), json!(1));
    }
    if udp {
        // linerate's datagram header is iperf3's with 64-bit counters, in both directions.
        m.insert("udp_counters_64bit".into(), json!(1));
    }
    if spec.zerocopy {
        m.insert("zerocopy".into(), json!(1));
    }
    if let Some(tos) = spec.tos {
        m.insert("TOS".into(), json!(tos));
    }
    if let Some(bps) = spec.fq_rate_bps {
        m.insert("fqrate".into(), json!(bps));
    }
    if spec.dont_fragment {
        m.insert("dont_fragment".into(), json!(1));
    }
    if let Some(b) = spec.burst {
        m.insert("burst".into(), json!(b));
    }
    match spec.server_cpus.as_slice() {
        [] => {}
        [cpu] => {
            m.insert("server_affinity".into(), json!(cpu));
        }
        _ => {
            return Err("iperf3 servers are pinned to one CPU (-A n,m): give the server's part \
                        as one CPU"
                .into());
        }
    }
    m.insert("client_version".into(), json!(client_version));
    Ok(Value::Object(m).to_string())
}

/// Options that change what a test does and that this server does not implement, with the
/// client flag that sends each (refused rather than silently ignored) and what the client is
/// told: where iperf3 has a number that names the option ("unable to set IP TOS: Operation
/// not permitted"), that one; else "not implemented yet".
const UNSUPPORTED: &[(&str, &str, ServerError)] = &[
    ("sctp", "--sctp", ServerError::with(errno::NO_SCTP, 0)),
    ("mptcp", "-m/--mptcp", ServerError::with(errno::UNIMPLEMENTED, 0)),
    ("flowlabel", "-L/--flowlabel", ServerError::with(errno::SET_FLOW, errno::os::EPERM)),
    (
        "authtoken",
        "--username/--rsa-public-key-path (authentication)",
        ServerError::with(errno::UNIMPLEMENTED, 0),
    ),
];

/// Reads an iperf3 client's parameter JSON into a linerate test, or says why not.
pub fn request_from_params(bytes: &[u8]) -> Result<Iperf3Request, Iperf3Refusal> {
    let v: Value = crate::bounded::from_slice(bytes, PARAMS_BOUNDS).map_err(|e| {
        let what = if matches!(e, DecodeError::Syntax(_)) { "JSON" } else { "acceptable" };
        refuse(errno::RECV_PARAMS, format!("the parameters are not {what} ({e})"))
    })?;
    let m = v
        .as_object()
        .ok_or_else(|| refuse(errno::RECV_PARAMS, "the parameters are not a JSON object"))?;
    let client_version = text(m, "client_version")?;
    if let Some((_, flag, error)) = UNSUPPORTED.iter().find(|(k, _, _)| m.contains_key(*k)) {
        return Err(refuse(
            *error,
            format!(
                "iperf3 option {flag} is not supported by this linerate server; run without it"
            ),
        ));
    }
    let udp = m.contains_key("udp");
    let mut spec = TestSpec::default_tcp();
    spec.protocol = if udp { Protocol::Udp } else { Protocol::Tcp };
    spec.direction = match (m.contains_key("reverse"), m.contains_key("bidirectional")) {
        (true, true) => {
            return Err(refuse(errno::REVERSE_BIDIR, "-R and --bidir cannot be combined"));
        }
        (true, false) => Direction::Download,
        (false, true) => Direction::Bidirectional,
        (false, false) => Direction::Upload,
    };
    spec.streams = ranged(m, "parallel", 1, 128, errno::NUM_STREAMS)?.unwrap_or(1) as u32;
    spec.block_bytes = if udp {
        let min = u64::from(crate::spec::MIN_IPERF3_UDP_DATAGRAM);
        ranged(m, "len", min, 65507, errno::UDP_BLOCK_SIZE)?.unwrap_or(1460) as u32
    } else {
        ranged(m, "len", 1, 1 << 20, errno::BLOCK_SIZE)?.unwrap_or(128 * 1024) as u32
    };
    spec.omit_ms = ranged(m, "omit", 0, 600, errno::OMIT)?.unwrap_or(0) * 1000;
    let end = end_condition(m, spec.block_bytes)?;
    spec.end = end.unwrap_or(EndCondition::Duration { duration_ms: crate::spec::MAX_DURATION_MS });
    spec.window_bytes = ranged(m, "window", 1, 512 << 20, errno::BUF_SIZE)?;
    spec.mss_bytes = ranged(m, "MSS", 1, 32767, errno::MSS)?.map(|v| v as u32);
    // No `bandwidth` is no pacing, for UDP too: iperf3 clients send their 1 Mbit/s UDP default
    // themselves and leave the key out for `-b 0`, which asks for as fast as possible.
    spec.bits_per_second =
        ranged(m, "bandwidth", 0, u64::MAX >> 1, errno::RECV_PARAMS)?.unwrap_or(0);
    spec.no_delay = m.contains_key("nodelay");
    spec.zerocopy = m.contains_key("zerocopy");
    spec.title = text(m, "title")?;
    spec.congestion = text(m, "congestion")?;
    // `-A n,m`: iperf3 pins its whole server to CPU m; linerate binds the test's data threads.
    let cpu =
        ranged(m, "server_affinity", 0, u64::from(crate::spec::MAX_AFFINITY_CPU), errno::AFFINITY)?;
    spec.server_cpus = cpu.map(|c| vec![c as u32]).unwrap_or_default();
    // `-S`/`--dscp` and `--fq-rate`: 0 is iperf3's "unset".
    let tos = ranged(m, "TOS", 0, 255, errno::BAD_TOS)?;
    spec.tos = tos.and_then(|t| std::num::NonZeroU8::new(t as u8));
    let fq_rate = ranged(m, "fqrate", 0, crate::spec::MAX_FQ_RATE_BPS, errno::RECV_PARAMS)?;
    spec.fq_rate_bps = fq_rate.and_then(std::num::NonZeroU64::new);
    // 3.21 sends `dont_fragment` with TCP too, where the kernel already sets the bit.
    spec.dont_fragment = udp && ranged(m, "dont_fragment", 0, 1, errno::RECV_PARAMS)? == Some(1);
    // `-b RATE/BURST`: iperf3 sends the burst only with a rate; 0 is "no burst".
    let burst = ranged(m, "burst", 0, u64::from(crate::spec::MAX_BURST), errno::BURST)?;
    spec.burst = burst
        .and_then(|b| std::num::NonZeroU16::new(b as u16))
        .filter(|_| spec.bits_per_second > 0);
    // iperf3's datagrams carry no secret: its own smallest `-l` holds its header.
    spec.validate_with_udp_min(crate::spec::MIN_IPERF3_UDP_DATAGRAM)
        .map_err(|e| refuse(errno::RECV_PARAMS, e.to_string()))?;
    Ok(Iperf3Request {
        spec,
        udp_counters_64bit: m.contains_key("udp_counters_64bit"),
        get_server_output: m.contains_key("get_server_output"),
        client_version,
        endless: end.is_none(),
    })
}

/// How the client's test ends; None for an endless one (`-t 0` without `-n`/`-k`).
fn end_condition(
    m: &Map<String, Value>,
    block: u32,
) -> Result<Option<EndCondition>, Iperf3Refusal> {
    let time = ranged(m, "time", 0, 86_400, errno::DURATION)?.unwrap_or(0);
    let num = ranged(m, "num", 0, u64::MAX >> 1, errno::RECV_PARAMS)?.unwrap_or(0);
    let blocks = ranged(m, "blockcount", 0, u64::MAX >> 1, errno::RECV_PARAMS)?.unwrap_or(0);
    Ok(match (time, num, blocks) {
        (_, n, _) if n > 0 => Some(EndCondition::Bytes { bytes: n }),
        (_, _, k) if k > 0 => {
            Some(EndCondition::Bytes { bytes: k.saturating_mul(u64::from(block)) })
        }
        (t, _, _) if t > 0 => Some(EndCondition::Duration { duration_ms: t * 1000 }),
        _ => None,
    })
}

fn ranged(
    m: &Map<String, Value>,
    key: &str,
    min: u64,
    max: u64,
    i_errno: i32,
) -> Result<Option<u64>, Iperf3Refusal> {
    let Some(v) = m.get(key) else { return Ok(None) };
    match v.as_u64() {
        Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(refuse(i_errno, format!("parameter {key:?} = {v} is out of range {min}..={max}"))),
    }
}

fn text(m: &Map<String, Value>, key: &str) -> Result<Option<String>, Iperf3Refusal> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(refuse(errno::RECV_PARAMS, format!("parameter {key:?} = {v} is not text"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_match_a_3_12_capture() {
        let mut spec = TestSpec::default_tcp();
        spec.end = EndCondition::Duration { duration_ms: 2000 };
        let p = params(&spec, "3.12", ClientExtras::default()).expect("params");
        // Captured from iperf3 3.12 `-c 127.0.0.1 -t 2`.
        assert_eq!(
            p,
            r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#
        );
    }

    #[test]
    fn repeating_payload_is_sent_only_when_asked() {
        let spec = TestSpec::default_tcp();
        let extras = ClientExtras { repeating_payload: true, ..ClientExtras::default() };
        let v: Value = serde_json::from_str(&params(&spec, "x", extras).expect("p")).expect("j");
        assert_eq!(v["repeating_payload"], 1);
        let p = params(&spec, "x", ClientExtras::default()).expect("p");
        assert!(!p.contains("repeating_payload"), "{p}");
    }

    #[test]
    fn params_send_feature_keys_only_when_wanted() {
        let mut spec = TestSpec::default_tcp();
        spec.direction = Direction::Download;
        spec.end = EndCondition::Bytes { bytes: 1000 };
        spec.window_bytes = Some(262_144);
        spec.end = EndCondition::Duration { duration_ms: 1500 };
        let v: Value =
            serde_json::from_str(&params(&spec, "x", ClientExtras::default()).expect("p"))
                .expect("json");
        assert_eq!(v["reverse"], true);
        assert_eq!(v["time"], 2, "fractional -t rounds up for the server's watchdog");
        assert_eq!(v["window"], 262_144);
        assert!(
            v.get("bidirectional").is_none()
                && v.get("nodelay").is_none()
                && v.get("bandwidth").is_none()
        );
    }

    #[test]
    fn server_affinity_goes_both_ways() {
        let mut spec = TestSpec::default_tcp();
        spec.server_cpus = vec![3];
        let p = params(&spec, "x", ClientExtras::default()).expect("one cpu");
        let v: Value = serde_json::from_str(&p).expect("json");
        assert_eq!(v["server_affinity"], 3);
        let req = request_from_params(p.as_bytes()).expect("served");
        assert_eq!(req.spec.server_cpus, vec![3]);
        spec.server_cpus = vec![1, 2];
        assert!(params(&spec, "x", ClientExtras::default()).unwrap_err().contains("one CPU"));
        let bad = request_from_params(br#"{"tcp":true,"time":1,"server_affinity":-1}"#);
        assert_eq!(bad.unwrap_err().error.i_errno, errno::AFFINITY);
        let none = request_from_params(br#"{"tcp":true,"time":1}"#).expect("served");
        assert!(none.spec.server_cpus.is_empty());
    }

    /// `-S`/`--dscp` go as iperf3's `TOS`, `--fq-rate` as `fqrate` (bits per second), both
    /// only when set; an iperf3 client's are read back into the test, 0 meaning unset.
    #[test]
    fn tos_and_fq_rate_go_both_ways() {
        use std::num::{NonZeroU8, NonZeroU64};
        let mut spec = TestSpec::default_tcp();
        let v: Value =
            serde_json::from_str(&params(&spec, "x", ClientExtras::default()).expect("p"))
                .expect("j");
        assert!(v.get("TOS").is_none() && v.get("fqrate").is_none());
        spec.tos = NonZeroU8::new(0xb8);
        spec.fq_rate_bps = NonZeroU64::new(100_000_000);
        let p = params(&spec, "x", ClientExtras::default()).expect("params");
        let v: Value = serde_json::from_str(&p).expect("json");
        assert_eq!((v["TOS"].as_u64(), v["fqrate"].as_u64()), (Some(184), Some(100_000_000)));
        let back = req(&p).expect("served");
        assert_eq!((back.spec.tos, back.spec.fq_rate_bps), (spec.tos, spec.fq_rate_bps));
        let zero = req(r#"{"tcp":true,"time":1,"TOS":0,"fqrate":0}"#).expect("served");
        assert_eq!((zero.spec.tos, zero.spec.fq_rate_bps), (None, None));
    }

    /// `-b RATE/BURST` goes as iperf3's `burst` and is served; past iperf3's 1000 it is
    /// refused with iperf3's own number.
    #[test]
    fn burst_goes_both_ways() {
        let mut spec = TestSpec::default_tcp();
        spec.bits_per_second = 10_000_000;
        spec.burst = std::num::NonZeroU16::new(5);
        let p = params(&spec, "x", ClientExtras::default()).expect("params");
        assert!(p.contains(r#""burst":5"#), "{p}");
        assert_eq!(req(&p).expect("served").spec.burst, spec.burst);
        let none = req(r#"{"tcp":true,"time":1,"bandwidth":1000,"burst":0}"#).expect("served");
        assert_eq!(none.spec.burst, None);
        let big = req(r#"{"tcp":true,"time":1,"bandwidth":1000,"burst":1001}"#);
        assert_eq!(big.unwrap_err().error.i_errno, errno::BURST);
    }

    /// `--dont-fragment` goes as 3.21's `dont_fragment` and is served for UDP; with TCP (where
    /// 3.21 sends it too) the kernel sets the bit already.
    #[test]
    fn dont_fragment_goes_both_ways_for_udp() {
        let mut spec = TestSpec::default_tcp();
        spec.protocol = Protocol::Udp;
        spec.block_bytes = 1400;
        spec.dont_fragment = true;
        let p = params(&spec, "x", ClientExtras::default()).expect("params");
        assert!(p.contains(r#""dont_fragment":1"#), "{p}");
        assert!(req(&p).expect("served").spec.dont_fragment);
        let tcp = req(r#"{"tcp":true,"time":1,"dont_fragment":1}"#).expect("served");
        assert!(!tcp.spec.dont_fragment);
        let off = req(r#"{"udp":true,"time":1,"dont_fragment":0}"#).expect("served");
        assert!(!off.spec.dont_fragment);
    }

    #[test]
    fn params_refuse_what_iperf3_cannot_take() {
        let mut spec = TestSpec::default_tcp();
        spec.streams = 129;
        assert!(params(&spec, "x", ClientExtras::default()).unwrap_err().contains("128"));
        let mut spec = TestSpec::default_tcp();
        spec.omit_ms = 1500;
        assert!(params(&spec, "x", ClientExtras::default()).unwrap_err().contains("-O"));
    }

    fn req(text: &str) -> Result<Iperf3Request, Iperf3Refusal> {
        request_from_params(text.as_bytes())
    }

    #[test]
    fn a_3_12_capture_reads_back_as_the_same_test() {
        let r = req(r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#).expect("ok");
        let mut want = TestSpec::default_tcp();
        want.end = EndCondition::Duration { duration_ms: 2000 };
        assert_eq!(r.spec, want);
        assert_eq!(r.client_version.as_deref(), Some("3.12"));
        assert!(!r.get_server_output);
        assert!(!r.endless);
    }

    /// `-u -b 0` leaves `bandwidth` out (captured from 3.12 and 3.21 clients): an unpaced UDP
    /// test, as an iperf3 server runs it, not iperf3's 1 Mbit/s client default.
    #[test]
    fn udp_without_a_bandwidth_is_unpaced() {
        let unpaced = r#"{"udp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":32768,"pacing_timer":1000,"client_version":"3.12"}"#;
        assert_eq!(req(unpaced).expect("served").spec.bits_per_second, 0);
        let default = r#"{"udp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":32768,"bandwidth":1048576,"pacing_timer":1000,"client_version":"3.12"}"#;
        assert_eq!(req(default).expect("served").spec.bits_per_second, 1 << 20);
    }

    /// `-t 0` is an endless test for iperf3 servers (the client ends it): it is read as one,
    /// never refused; with `-n` or `-k` it is a byte-bound test as before.
    #[test]
    fn t_0_reads_as_an_endless_test() {
        let r = req(r#"{"tcp":true,"time":0,"client_version":"3.21"}"#).expect("served");
        assert!(r.endless);
        assert_eq!(
            r.spec.end,
            EndCondition::Duration { duration_ms: crate::spec::MAX_DURATION_MS }
        );
        let r = req(r#"{"tcp":true,"time":0,"num":1000}"#).expect("served");
        assert!(!r.endless);
        assert_eq!(r.spec.end, EndCondition::Bytes { bytes: 1000 });
    }

    #[test]
    fn round_trip_through_our_own_builder() {
        let mut spec = TestSpec::default_tcp();
        spec.direction = Direction::Bidirectional;
        spec.streams = 4;
        spec.window_bytes = Some(1 << 20);
        spec.bits_per_second = 100_000_000;
        spec.mss_bytes = Some(1200);
        spec.no_delay = true;
        spec.omit_ms = 2000;
        spec.title = Some("t".into());
        spec.congestion = Some("cubic".into());
        spec.end = EndCondition::Bytes { bytes: 12345 };
        let back = req(&params(
            &spec,
            "x",
            ClientExtras { get_server_output: true, ..ClientExtras::default() },
        )
        .expect("params"))
        .expect("parses");
        assert_eq!(back.spec, spec);
        assert!(back.get_server_output);
    }

    #[test]
    fn present_flags_are_on_whatever_their_value() {
        let r = req(r#"{"tcp":true,"time":1,"reverse":false,"get_server_output":0}"#).expect("ok");
        assert_eq!(r.spec.direction, Direction::Download);
        assert!(r.get_server_output);
    }

    #[test]
    fn block_count_becomes_bytes() {
        let r = req(r#"{"tcp":true,"time":0,"blockcount":3,"len":1000}"#).expect("ok");
        assert_eq!(r.spec.end, EndCondition::Bytes { bytes: 3000 });
    }

    /// iperf3's datagrams carry no secret, so its own smallest `-l` (16) is served, while a
    /// native test needs room for the native header.
    #[test]
    fn iperf3_udp_datagrams_down_to_iperf3s_minimum_are_served() {
        for len in [16, 23] {
            let text = format!(r#"{{"udp":true,"time":1,"len":{len}}}"#);
            let r = req(&text).expect("iperf3's -l 16..23 is served");
            assert_eq!(r.spec.block_bytes, len);
            assert!(r.spec.validate().is_err(), "a native test of {len}-byte datagrams is not");
        }
    }

    #[test]
    fn refusals_name_the_option_and_carry_iperf3_numbers() {
        let cases = [
            (r#"{"udp":true,"time":1,"len":8}"#, errno::UDP_BLOCK_SIZE, "len"),
            (r#"{"udp":true,"time":1,"len":15}"#, errno::UDP_BLOCK_SIZE, "len"),
            (r#"{"tcp":true,"time":1,"authtoken":"x"}"#, errno::UNIMPLEMENTED, "authentication"),
            (r#"{"tcp":true,"time":1,"TOS":256}"#, errno::BAD_TOS, "TOS"),
            (r#"{"tcp":true,"time":1,"fqrate":-8}"#, errno::RECV_PARAMS, "fqrate"),
            (r#"{"tcp":true,"time":1,"fqrate":4}"#, errno::RECV_PARAMS, "--fq-rate"),
            (r#"{"tcp":true,"time":1,"sctp":true}"#, errno::NO_SCTP, "--sctp"),
            (r#"{"tcp":true,"time":1,"parallel":129}"#, errno::NUM_STREAMS, "parallel"),
            (r#"{"tcp":true,"time":1,"parallel":0}"#, errno::NUM_STREAMS, "parallel"),
            (r#"{"tcp":true,"time":1,"len":2000000}"#, errno::BLOCK_SIZE, "len"),
            (r#"{"tcp":true,"time":1,"omit":-1}"#, errno::OMIT, "omit"),
            (
                r#"{"tcp":true,"time":1,"reverse":true,"bidirectional":true}"#,
                errno::REVERSE_BIDIR,
                "-R",
            ),
            (r#"{"tcp":true,"time":1,"title":5}"#, errno::RECV_PARAMS, "title"),
            (r#"[1,2]"#, errno::RECV_PARAMS, "object"),
            ("not json", errno::RECV_PARAMS, "JSON"),
        ];
        for (text, code, word) in cases {
            let e = req(text).expect_err(text);
            assert_eq!(e.error.i_errno, code, "{text}: {e:?}");
            assert!(e.message.contains(word), "{text}: {}", e.message);
        }
    }
}
