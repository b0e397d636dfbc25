//! The client driver for iperf3 servers (`linerate client HOST --iperf3`): iperf3's control
//! protocol (from `linerate_proto::iperf3`) with linerate's own streams and measurements, so
//! the record has both the server's figures (as iperf3 reports them) and linerate's full
//! figures for this end.
//!
//! iperf3 differences this driver absorbs: the client sends TEST_END when its clock (or byte
//! count) says so; the server then closes its data connections, often with a reset — normal
//! there, so receive errors after TEST_END are not stream failures; the server reports only
//! bytes, duration, retransmits and its process CPU.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use linerate_proto::iperf3::{
    ClientExtras, Iperf3Client, Iperf3Event, make_cookie, params, results_from_side, udp_end_wait,
};
use linerate_proto::{EndCondition, Machine, Protocol, SideResults};

use super::{end_of_test_close, peer_side, receivers_end_at};
use crate::plan::ClientPlan;
use crate::record::{End, Failure, FailureKind, Outcome, RunRecord};
use crate::session::client::{
    LoopState, Opened, check_progress, connect_any, new_record, open_streams, resolve,
};
use crate::session::pump::{self, Turn, Wait};
use crate::session::{Clock, ControlChannel, Interrupt, LiveEvent, Observer, SOFTWARE, StreamSet};
use crate::sys;

/// How long local receivers may take to see the server close its data connections.
const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// Runs one test against an iperf3 server.
pub fn run(plan: &ClientPlan, observer: &mut dyn Observer, interrupt: &Interrupt) -> RunRecord {
    run_on(plan, observer, interrupt, None)
}

/// [`run`], on a control connection the server already took for an iperf3 test when one is
/// given (`session::client`'s opening found the server speaks iperf3's protocol).
pub(crate) fn run_on(
    plan: &ClientPlan,
    observer: &mut dyn Observer,
    interrupt: &Interrupt,
    opened: Option<Opened>,
) -> RunRecord {
    // An iperf3 server writes in -l, so against one this client does too: both ends then
    // send alike, and the record's spec says what they did.
    let mut own = plan.clone();
    own.spec.write_bytes = None;
    let plan = &own;
    let mut record = new_record(plan);
    record.server_software = Some("iperf3".into());
    let mut streams = None;
    let result = drive(plan, &mut record, &mut streams, observer, interrupt, opened);
    if let Some(s) = streams.as_mut()
        && record.client.is_none()
        && s.started().is_some()
    {
        s.abort();
        record.client = Some(s.results(SOFTWARE, 0));
    }
    record.outcome = match result {
        // TEST_END went out early, on the first interrupt, and results were exchanged.
        Ok(()) if interrupt.count() > 0 => Outcome::Interrupted,
        Ok(()) => crate::session::client::judged(&record),
        // The native client's hints (`explain`) are about linerate servers: not added here.
        Err(e) => Outcome::failed(Failure::of(&e)),
    };
    record
}

fn drive(
    plan: &ClientPlan,
    record: &mut RunRecord,
    streams: &mut Option<StreamSet>,
    observer: &mut dyn Observer,
    interrupt: &Interrupt,
    opened: Option<Opened>,
) -> Result<()> {
    let extras = ClientExtras {
        get_server_output: plan.get_server_output,
        repeating_payload: plan.repeating_payload,
    };
    let refused = |e: String| {
        // Asked for with --iperf3, the user's flags are wrong; found by the fallback, this
        // peer cannot run the test the flags describe.
        let kind = if plan.iperf3 { FailureKind::Usage } else { FailureKind::Incompatible };
        Failure::new(kind, format!("--iperf3: {e}"))
    };
    // Refused before connecting; the test's own parameters follow once connected.
    params(&plan.spec, SOFTWARE, extras).map_err(refused)?;
    let (stream, server, opened) = match opened {
        Some(o) => (o.stream, o.server, Some((o.cookie, o.first))),
        None => {
            let (stream, server) = connect_any(&resolve(&plan.host, plan.port, plan)?, plan)?;
            (stream, server, None)
        }
    };
    record.local_address = stream.local_addr().ok().map(|a| a.to_string());
    record.remote_address = Some(server.to_string());
    let spec = iperf3_spec(plan, &stream);
    record.spec = spec.clone();
    let params = params(&spec, SOFTWARE, extras).map_err(refused)?;
    let mut ctrl = ControlChannel::new(stream)?;
    let cookie = match &opened {
        Some((cookie, _)) => *cookie,
        None => {
            let mut random = [0u8; 36];
            getrandom::getrandom(&mut random)
                .map_err(|e| anyhow::anyhow!("no randomness for the cookie: {e}"))?;
            make_cookie(&random)
        }
    };
    let clock = Clock::new();
    let mut conn = Iperf3Client::new(spec.clone(), cookie, params, clock.now());
    if let Some((_, first)) = opened {
        // The server holds the cookie already (the first bytes of our greeting).
        let _ = conn.poll_transmit();
        conn.handle_input(&first, clock.now())?;
    }
    let mut st = LoopState::default();
    // The client signalled the end (its time, bytes or an interrupt).
    let mut ended = false;
    // UDP upload: when TEST_END goes out after the senders stopped (see `udp_end_wait`).
    let mut test_end_at: Option<Instant> = None;
    // When TEST_END went, from the streams' start: where an iperf3 receiver's time ends.
    let mut test_end_sent: Option<Duration> = None;
    let result = (|| -> Result<()> {
        loop {
            let tick = streams.as_ref().and_then(StreamSet::next_tick);
            let deadlines = [st.stop_at, test_end_at];
            let wait = Wait { tick, deadlines: &deadlines, cap: Duration::from_millis(50) };
            if pump::turn(&mut ctrl, &clock, &mut conn, wait, None)? == Turn::Finished {
                return Ok(());
            }
            while let Some(ev) = conn.poll_event() {
                match ev {
                    Iperf3Event::CreateStreams => {
                        observer.on_event(LiveEvent::Accepted {
                            local: record.local_address.clone().unwrap_or_default(),
                            remote: server.to_string(),
                            server_software: "iperf3",
                        });
                        let mut set =
                            open_streams(plan, &spec, |_| cookie.to_vec(), server, &ctrl, None)?;
                        set.set_peer_program("iperf3");
                        // The slow part of starting (the cost meter's scan of every process)
                        // now, while the server accepts the streams: done at TEST_START it
                        // started our clock, and so TEST_END, 5 to 35 ms after the server's
                        // (its -R senders ran that much longer than -t, +3.6 % on a busy
                        // machine).
                        set.prepare();
                        *streams = Some(set);
                    }
                    Iperf3Event::Start => {
                        let s = streams.as_mut().context("start before streams")?;
                        let now = s.start();
                        observer.on_event(LiveEvent::Started { streams: s.len() });
                        st.stop_at = spec
                            .duration_ms()
                            .map(|d| now + Duration::from_millis(d + spec.omit_ms));
                        st.progress = (now, 0);
                    }
                    Iperf3Event::ResultsRequested => {
                        let s = streams.as_mut().context("results before streams")?;
                        let mut local = finish_streams(s, observer);
                        if spec.protocol == Protocol::Udp
                            && let Some(at) = test_end_sent
                        {
                            // The last datagram came up to one datagram's time before
                            // TEST_END (2.6 ms at 100 Mbit/s with 32 KiB datagrams): the
                            // rate over that span read 0.5 % high where iperf3's is exact.
                            receivers_end_at(&mut local, at);
                        }
                        let json = serde_json::to_string(&results_from_side(&local))?;
                        record.client = Some(local);
                        conn.send_results(&json, clock.now())?;
                    }
                    Iperf3Event::PeerResults(r) => {
                        let mut side = peer_side(&r, &spec, End::Server);
                        record.server_output = r
                            .server_output_json
                            .clone()
                            .or_else(|| r.server_output_text.clone().map(serde_json::Value::from));
                        if let Some(v) = record.server_output.as_ref().and_then(exact_version) {
                            side.software = v;
                        }
                        record.server_results = Some(side);
                    }
                    Iperf3Event::Finished => {}
                }
            }
            if test_end_at.is_some_and(|t| Instant::now() >= t) {
                test_end_at = None;
                test_end_sent = streams.as_ref().and_then(StreamSet::started).map(|t| t.elapsed());
                conn.test_end(clock.now());
            }
            let Some(s) = streams.as_mut() else { continue };
            if s.started().is_none() || ended {
                continue;
            }
            let rows = s.sample(Instant::now(), false);
            if !rows.is_empty() {
                observer.on_event(LiveEvent::Interval(&rows));
            }
            check_progress(s, &mut st, Instant::now())?;
            if interrupt.count() > 0 || end_reached(&spec, s, &st) {
                ended = true;
                // From here the server may reset its streams: our receivers' results say so
                // only if it was not the end (`end_of_test_close`).
                s.forgive(end_of_test_close);
                s.end_signalled();
                if udp_upload(&spec) {
                    // The path's own round trip: the smoothed one of a quiet control
                    // connection is mostly delayed ACKs (milliseconds on loopback).
                    let rtt = sys::tcp_internals(ctrl.stream()).map_or(Duration::ZERO, |t| {
                        Duration::from_micros(t.min_rtt_us.unwrap_or(t.rtt_us).into())
                    });
                    let elapsed = s.started().map_or(Duration::ZERO, |t| t.elapsed());
                    test_end_at = Some(Instant::now() + udp_end_wait(elapsed, rtt));
                } else {
                    test_end_sent = s.started().map(|t| t.elapsed());
                    conn.test_end(clock.now());
                }
            }
        }
    })();
    if result.is_err() {
        if interrupt.count() > 0 && !ended {
            let why = format!("interrupted by {} before the test ended", interrupt.last_name());
            return Err(Failure::new(FailureKind::Interrupted, why).into());
        }
        conn.terminate();
        pump::flush(&mut ctrl, &mut conn);
    }
    result
}

/// The test as run: with `-u` and no `-l`, datagrams of the control connection's maximum
/// segment size, as an iperf3 client sizes them (it assumes the data takes the control
/// connection's path, so they fit its MTU; 32 KiB on loopback, where the segment is bound to
/// half the peer's first window), where linerate's native client sizes them to the path MTU.
fn iperf3_spec(plan: &ClientPlan, ctrl: &std::net::TcpStream) -> linerate_proto::TestSpec {
    match plan.udp_length_auto.then(|| sys::socket_facts(ctrl).mss_bytes).flatten() {
        Some(mss) => plan.sized(mss.clamp(MIN_IPERF3_DATAGRAM, MAX_IPERF3_DATAGRAM)),
        None => plan.spec.clone(),
    }
}

/// iperf3's smallest datagram: its own header (sequence number and send time).
const MIN_IPERF3_DATAGRAM: u32 = 16;
/// The largest UDP payload over IPv4 (65535 less the IP and UDP headers), iperf3's limit.
const MAX_IPERF3_DATAGRAM: u32 = 65_507;

/// True if this end sends UDP (upload or `--bidir`): TEST_END then waits for its datagrams.
fn udp_upload(spec: &linerate_proto::TestSpec) -> bool {
    spec.protocol == Protocol::Udp && spec.direction != linerate_proto::Direction::Download
}

/// The client decides the end: time, or (for -n) bytes moved by either side's streams here.
fn end_reached(spec: &linerate_proto::TestSpec, s: &StreamSet, st: &LoopState) -> bool {
    match spec.end {
        EndCondition::Duration { .. } => st.stop_at.is_some_and(|t| Instant::now() >= t),
        EndCondition::Bytes { bytes } => s.total_bytes() >= bytes || s.all_done(),
    }
}

/// Stops local streams (receivers end when the server closes its side) and collects results.
fn finish_streams(s: &mut StreamSet, observer: &mut dyn Observer) -> SideResults {
    s.end_signalled();
    s.wait_done(DRAIN_LIMIT);
    let rows = s.sample(Instant::now(), true);
    if !rows.is_empty() {
        observer.on_event(LiveEvent::Interval(&rows));
    }
    s.abort();
    s.results(SOFTWARE, 0)
}

/// The iperf3 server's exact version, where its own output (`--get-server-output`) names it:
/// `start.version` of its `-J` document ("iperf 3.21"), or the first line of its text when
/// it runs with `-V`. Its plain text does not say.
fn exact_version(output: &serde_json::Value) -> Option<String> {
    let named = |v: &str| v.starts_with("iperf 3.") && v.len() < 40;
    match output {
        serde_json::Value::String(text) => text.lines().map(str::trim).find(|l| named(l)),
        other => other["start"]["version"].as_str().filter(|v| named(v)),
    }
    .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::exact_version;
    use serde_json::json;

    #[test]
    fn the_servers_own_output_names_its_version() {
        let doc = json!({ "start": { "version": "iperf 3.21" } });
        assert_eq!(exact_version(&doc).as_deref(), Some("iperf 3.21"));
        let text = json!("iperf 3.12\nLinux host 6.1\n-----\nServer listening on 5201");
        assert_eq!(exact_version(&text).as_deref(), Some("iperf 3.12"));
        assert_eq!(exact_version(&json!("Server listening on 5201\n")), None);
        assert_eq!(exact_version(&json!({ "start": {} })), None);
    }
}
