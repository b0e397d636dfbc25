//! Whether a run's figures stand, before it is kept as a completed run: every stream
//! finished ([`failed_streams`]), and the peer's figures can be true given what this end
//! measured of the same streams ([`check_peer`]). A hostile or broken server could otherwise
//! report "8.00 EiB in 0.00 s" for a 1.74 GiB send, be stored as a completed run and, in a
//! fleet, poison the total; and a test whose streams were reset printed "Test complete".
//!
//! Pure: the session hands in both ends' results and how long the test took on its own
//! clock; the answer is the sentence the user reads, or nothing.

use std::collections::HashSet;

use linerate_proto::{Protocol, SideResults, StreamResult, StreamRole, TestSpec};

use crate::record::RunRecord;
use crate::units::ByteCount;

/// How far the two ends' clocks for one stream may disagree, microseconds. Each end times a
/// stream from its own start: a server's start precedes the client's by the `start`
/// message's trip, a fleet's server starts after its client by the `go`'s, and a loaded
/// host schedules either late. One second covers a geostationary satellite path's one-way
/// delay (about 280 ms) three times over with room for scheduling, and is still a small part
/// of any test long enough to measure a rate.
pub const CLOCK_ALLOWANCE_US: u64 = 1_000_000;

/// How many blocks a sender may have in one write when its byte counter is read: a UDP
/// sender's batch (up to 64 datagrams in one `sendmmsg`); a TCP sender has one block in a
/// write. The receiver can hold bytes of a write that has not returned yet, which the
/// sender's counter does not show; the bound allows that many.
const BLOCKS_IN_A_WRITE: u64 = 64;

/// The streams that failed, on either end, as the one line a failed run shows; None when
/// every stream finished. A stream's error is its end's own words ("connection reset by
/// peer"); the same words on many streams are said once, with how many.
pub fn failed_streams(record: &RunRecord) -> Option<String> {
    // The reasons, each with the streams that gave it (in order of first appearance).
    let mut reasons: Vec<(String, Vec<u32>)> = Vec::new();
    let mut failed: HashSet<u32> = HashSet::new();
    for (end, s) in record.all_streams() {
        let Some(e) = &s.error else { continue };
        failed.insert(s.id);
        let why = format!("{end}: {e}");
        match reasons.iter_mut().find(|(w, _)| *w == why) {
            Some((_, ids)) => ids.push(s.id),
            None => reasons.push((why, vec![s.id])),
        }
    }
    if failed.is_empty() {
        return None;
    }
    let total = record.spec.connection_count().max(failed.len() as u32);
    let mut said: Vec<String> =
        reasons.iter().take(3).map(|(why, ids)| format!("{} ({why})", stream_list(ids))).collect();
    if reasons.len() > 3 {
        said.push(format!("{} other reason(s)", reasons.len() - 3));
    }
    Some(format!(
        "{} of {total} stream(s) failed: {}; the figures of the streams that finished are kept, \
         but the test is incomplete",
        failed.len(),
        said.join("; ")
    ))
}

/// "stream 3", "streams 1, 2, 5" or "streams 33-128" (ids in the order given, runs joined).
fn stream_list(ids: &[u32]) -> String {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for id in sorted.iter().copied() {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == id => *hi = id,
            _ => runs.push((id, id)),
        }
    }
    let mut parts: Vec<String> = runs
        .iter()
        .take(4)
        .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
        .collect();
    if runs.len() > 4 {
        parts.push("…".into());
    }
    let noun = if sorted.len() == 1 { "stream" } else { "streams" };
    format!("{noun} {}", parts.join(", "))
}

/// The fastest rate any record may claim, bit/s: ten times the fastest Ethernet standard
/// (1.6 Tbit/s, IEEE 802.3dj) rounded up. Loopback on a current server moves a few hundred
/// Gbit/s; a stream or a test past this is a made-up figure, whatever else it agrees with.
pub const FASTEST_PLAUSIBLE_BITS_PER_SECOND: f64 = 1e13;

/// What a stream may carry in no measurable time (a duration of 0 µs), so that a tiny honest
/// stream is not refused for a rate its clock could not resolve: 100 µs at
/// [`FASTEST_PLAUSIBLE_BITS_PER_SECOND`], 125 MB.
const INSTANT_US: f64 = 100.0;

/// Checks a record that came whole from someone else — a mesh's pair test, both ends'
/// results as agent A sent them — as far as the requester can: the test is the one asked for
/// (`asked`); the two ends' results agree stream by stream ([`check_peer`], with the
/// requester's `span_us` from its request to the record's arrival as the whole test's
/// longest time); and no stream, nor any direction's streams together over `span_us`, carries
/// more than [`FASTEST_PLAUSIBLE_BITS_PER_SECOND`]. An agent that makes up both ends can make
/// them agree; it cannot make up time the requester measured, nor a rate no link has.
/// Returns why not, as a sentence naming `who` ("agent node-a"), or nothing.
pub fn check_record(
    record: &RunRecord,
    asked: &TestSpec,
    span_us: u64,
    who: &str,
) -> Result<(), String> {
    let refuse = |what: String| Err(format!("{who} {what}; its record is not plausible"));
    if record.spec != *asked {
        return refuse("sent the record of another test than the one asked for".into());
    }
    let rate = |bytes: u64, us: f64| bytes as f64 * 8.0 / (us / 1e6);
    for (end, s) in record.all_streams() {
        let r = rate(s.bytes, s.duration_us as f64 + INSTANT_US);
        if r > FASTEST_PLAUSIBLE_BITS_PER_SECOND {
            return refuse(format!(
                "reported the {end}'s stream {} moving {} in {:.6} s ({:.1e} bit/s), faster than any \
                 link",
                s.id,
                ByteCount(s.bytes),
                secs(s.duration_us),
                r
            ));
        }
    }
    for (end, side) in [("client", &record.client), ("server", &record.server_results)] {
        let Some(side) = side else { continue };
        for role in [StreamRole::Sender, StreamRole::Receiver] {
            let bytes: u64 = side
                .streams
                .iter()
                .filter(|s| s.role == role)
                .map(|s| s.bytes)
                .fold(0, u64::saturating_add);
            let r = rate(bytes, span_us as f64 + INSTANT_US);
            if r > FASTEST_PLAUSIBLE_BITS_PER_SECOND {
                return refuse(format!(
                    "reported the {end} {} {} in all within the {:.2} s the pair test took here, \
                     faster than any link",
                    gerund(role),
                    ByteCount(bytes),
                    secs(span_us)
                ));
            }
        }
    }
    if let (Some(client), Some(server)) = (&record.client, &record.server_results) {
        let ends = Ends { peer: "the target's results", local: "the agent" };
        check_peer(&record.spec, client, server, span_us, ends)
            .map_err(|why| format!("{who} sent a record whose two ends disagree: {why}"))?;
    }
    Ok(())
}

/// The two ends' names in the sentences: the peer's and this end's.
#[derive(Debug, Clone, Copy)]
pub struct Ends {
    /// "the server".
    pub peer: &'static str,
    /// "this client".
    pub local: &'static str,
}

/// Checks the peer's results against this end's, stream by stream; `span_us` is how long the
/// test took on this end's clock, from its start until the peer's results arrived. Returns
/// the refusal ("the server reported ...; its figures are not plausible") or nothing.
///
/// The rules, each something no honest peer can break:
/// * **Streams.** Each stream the peer reports is one of the test's, with the flow the test
///   gives it, reported once, and played in the role opposite to this end's.
/// * **Bytes.** A receiver cannot read more than its sender wrote: the peer cannot report
///   receiving more bytes on a stream than this end sent on it, nor sending fewer than
///   arrived here. TCP gets no slack. A UDP receiver also counts the extra copies a network
///   duplicated, so its bytes less those copies (at most one per distinct datagram) are
///   compared, and its distinct datagrams cannot outnumber the datagrams sent. UDP
///   request/response streams carry no datagram counts, and are not compared.
/// * **Intervals.** A stream's interval samples cannot add up to more than its total.
/// * **Durations.** No stream of the peer's ran longer than the whole test took here (plus
///   [`CLOCK_ALLOWANCE_US`]). And a peer receiver cannot have finished before this end had
///   written what it reports receiving: from this end's interval samples, the start of the
///   interval in which its count (plus [`BLOCKS_IN_A_WRITE`] blocks still in a write) first
///   reached the peer's bytes, less the allowance. That bound is what keeps a peer from
///   inflating a rate by a short duration ("1.74 GiB in 0.00 s"); without interval samples
///   (`-i 0`) it cannot be drawn and only the upper bound applies. A peer sender's duration
///   has no lower bound: a sender's last write may return long before its bytes arrive.
pub fn check_peer(
    spec: &TestSpec,
    local: &SideResults,
    peer: &SideResults,
    span_us: u64,
    ends: Ends,
) -> Result<(), String> {
    let refuse = |what: String| Err(format!("{} {what}; its figures are not plausible", ends.peer));
    let mut seen = HashSet::new();
    for p in &peer.streams {
        if spec.flow_of(p.id) != Some(p.flow) {
            return refuse(format!(
                "reported a stream {} flowing {}, which this test does not have",
                p.id,
                p.flow.label()
            ));
        }
        if !seen.insert(p.id) {
            return refuse(format!("reported stream {} twice", p.id));
        }
        let interval_bytes: u64 = p.intervals.iter().map(|i| i.bytes).fold(0, u64::saturating_add);
        if interval_bytes > p.bytes {
            return refuse(format!(
                "reported intervals of stream {} adding up to {}, more than its total ({})",
                p.id,
                ByteCount(interval_bytes),
                ByteCount(p.bytes)
            ));
        }
        let longest = span_us.saturating_add(CLOCK_ALLOWANCE_US);
        if p.duration_us > longest {
            return refuse(format!(
                "reported stream {} running {:.2} s, longer than the whole test took at {} ({:.2} s)",
                p.id,
                secs(p.duration_us),
                ends.local,
                secs(span_us)
            ));
        }
        let Some(l) = local.streams.iter().find(|l| l.id == p.id) else { continue };
        if l.role == p.role || l.flow != p.flow {
            return refuse(format!(
                "reported stream {} as its {}, which {} is",
                p.id,
                role_noun(p.role),
                ends.local
            ));
        }
        check_pair(spec, l, p, ends).or_else(refuse)?;
    }
    Ok(())
}

/// The byte and duration rules for one stream: `l` this end's view, `p` the peer's.
fn check_pair(
    spec: &TestSpec,
    l: &StreamResult,
    p: &StreamResult,
    ends: Ends,
) -> Result<(), String> {
    let (sender, receiver) = if p.role == StreamRole::Receiver { (l, p) } else { (p, l) };
    let udp = spec.protocol == Protocol::Udp;
    let (received, sent) = match (udp, &sender.udp_sender, &receiver.udp_receiver) {
        (false, _, _) => (receiver.bytes, sender.bytes),
        (true, Some(s), Some(r)) => {
            let distinct = r.counts.received;
            if distinct > s.datagrams {
                let (theirs, mine) = if p.role == StreamRole::Receiver {
                    (distinct, s.datagrams)
                } else {
                    (s.datagrams, distinct)
                };
                return Err(format!(
                    "reported {} {theirs} datagrams on stream {}, where {} {} {mine}",
                    gerund(p.role),
                    p.id,
                    ends.local,
                    verb(l.role),
                ));
            }
            let copies = r.counts.duplicates.min(distinct);
            let copy_bytes = copies.saturating_mul(u64::from(spec.block_bytes));
            (receiver.bytes.saturating_sub(copy_bytes), sender.bytes)
        }
        // UDP request/response streams: no datagram counts to tell copies from data.
        (true, _, _) => return Ok(()),
    };
    if received > sent {
        let (mine, theirs) = byte_pair(l.bytes, p.bytes);
        let than = if p.role == StreamRole::Receiver { "more" } else { "less" };
        return Err(format!(
            "reported {} {theirs} on stream {}, {than} than {} {} on it ({mine})",
            gerund(p.role),
            p.id,
            ends.local,
            verb(l.role),
        ));
    }
    if p.role == StreamRole::Receiver
        && let Some(written_at) = written_by(l, received, spec)
        && p.duration_us.saturating_add(CLOCK_ALLOWANCE_US) < written_at
    {
        return Err(format!(
            "reported receiving {} on stream {} within {:.2} s, but {} had not sent that much \
             before {:.2} s",
            ByteCount(p.bytes),
            p.id,
            secs(p.duration_us),
            ends.local,
            secs(written_at)
        ));
    }
    Ok(())
}

/// The earliest time (microseconds from the start) at which `sender` can have written
/// `bytes`, from its interval samples: the start of the sample in which its count plus the
/// blocks a write may hold first reached them (the end of the last sample if none did).
/// None without samples.
fn written_by(sender: &StreamResult, bytes: u64, spec: &TestSpec) -> Option<u64> {
    let in_a_write = u64::from(spec.block_bytes).saturating_mul(BLOCKS_IN_A_WRITE);
    let mut count = 0u64;
    for i in &sender.intervals {
        count = count.saturating_add(i.bytes);
        if count.saturating_add(in_a_write) >= bytes {
            return Some(i.start_us);
        }
    }
    sender.intervals.last().map(|i| i.end_us)
}

/// Two byte counts in words that tell them apart: IEC units, exact bytes when those agree.
fn byte_pair(a: u64, b: u64) -> (String, String) {
    let (x, y) = (ByteCount(a).iec(), ByteCount(b).iec());
    if x == y { (format!("{a} bytes"), format!("{b} bytes")) } else { (x, y) }
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// What this end did on a stream: "sent", "received".
fn verb(role: StreamRole) -> &'static str {
    match role {
        StreamRole::Sender => "sent",
        StreamRole::Receiver => "received",
    }
}

/// What the peer reported doing: "sending", "receiving".
fn gerund(role: StreamRole) -> &'static str {
    match role {
        StreamRole::Sender => "sending",
        StreamRole::Receiver => "receiving",
    }
}

fn role_noun(role: StreamRole) -> &'static str {
    match role {
        StreamRole::Sender => "sender",
        StreamRole::Receiver => "receiver",
    }
}

#[cfg(test)]
mod tests {
    use linerate_proto::udp::{UdpCounts, UdpReceiverResult, UdpSenderResult};
    use linerate_proto::{Direction, Flow, IntervalSample};

    use super::*;

    const ENDS: Ends = Ends { peer: "the server", local: "this client" };
    const GIB: u64 = 1 << 30;

    fn side(streams: Vec<StreamResult>) -> SideResults {
        SideResults { software: "t".into(), streams, ..SideResults::default() }
    }

    fn stream(id: u32, role: StreamRole, bytes: u64) -> StreamResult {
        StreamResult { id, ..RunRecord::test_stream(role, bytes) }
    }

    /// Ten one-second samples of `bytes / 10` each.
    fn with_samples(mut s: StreamResult) -> StreamResult {
        s.duration_us = 10_000_000;
        s.intervals = (0..10)
            .map(|i| IntervalSample {
                start_us: i * 1_000_000,
                end_us: (i + 1) * 1_000_000,
                bytes: s.bytes / 10,
                omitted: false,
                tcp: None,
                udp: None,
                rr: None,
            })
            .collect();
        s
    }

    fn spec(streams: u32) -> TestSpec {
        TestSpec { streams, ..TestSpec::default_tcp() }
    }

    fn check(
        spec: &TestSpec,
        local: Vec<StreamResult>,
        peer: Vec<StreamResult>,
    ) -> Result<(), String> {
        check_peer(spec, &side(local), &side(peer), 10_000_000, ENDS)
    }

    #[test]
    fn a_record_from_an_agent_is_held_to_the_time_the_requester_measured() {
        let honest = |bytes: u64| {
            RunRecord::for_tests(
                spec(1),
                side(vec![with_samples(stream(1, StreamRole::Sender, bytes))]),
                side(vec![with_samples(stream(1, StreamRole::Receiver, bytes))]),
            )
        };
        let span = 11_000_000;
        // 10 GiB in 10 s: 8.6 Gbit/s.
        assert_eq!(check_record(&honest(10 * GIB), &spec(1), span, "agent a"), Ok(()));
        // Another test than asked.
        let e = check_record(&honest(GIB), &spec(2), span, "agent a").expect_err("another spec");
        assert!(e.starts_with("agent a sent the record of another test"), "{e}");
        // "8.00 EiB in 1 µs", both ends agreeing.
        let mut absurd = honest(8 << 60);
        for s in absurd.client.iter_mut().chain(absurd.server_results.iter_mut()) {
            s.streams[0].duration_us = 1;
            s.streams[0].intervals.clear();
        }
        let e = check_record(&absurd, &spec(1), span, "agent a").expect_err("8 EiB");
        assert!(e.contains("8.00 EiB") && e.contains("faster than any link"), "{e}");
        // Each stream's rate could be true (8 Tbit/s), but not both streams' bytes in the time
        // the pair test took here: 20 TB in 11 s is 14.5 Tbit/s.
        let tb10 = 10_000_000_000_000;
        let two = RunRecord::for_tests(
            spec(2),
            side((1..=2).map(|i| with_samples(stream(i, StreamRole::Sender, tb10))).collect()),
            side((1..=2).map(|i| with_samples(stream(i, StreamRole::Receiver, tb10))).collect()),
        );
        let e = check_record(&two, &spec(2), span, "agent a").expect_err("too many bytes");
        assert!(e.contains("within the 11.00 s the pair test took here"), "{e}");
        // The two ends disagree: the receiver got more than the sender sent.
        let mut split = honest(GIB);
        if let Some(s) = split.server_results.as_mut() {
            s.streams[0].bytes = 2 * GIB;
        }
        let e = check_record(&split, &spec(1), span, "agent a").expect_err("ends disagree");
        assert!(e.contains("two ends disagree"), "{e}");
        // A tiny stream in no measurable time is no proof of anything.
        let mut tiny = honest(64 * 1024);
        for s in tiny.client.iter_mut().chain(tiny.server_results.iter_mut()) {
            s.streams[0].duration_us = 0;
            s.streams[0].intervals.clear();
        }
        assert_eq!(check_record(&tiny, &spec(1), span, "agent a"), Ok(()));
    }

    #[test]
    fn an_honest_peer_passes() {
        let sent = with_samples(stream(1, StreamRole::Sender, 2 * GIB));
        let mut got = with_samples(stream(1, StreamRole::Receiver, 2 * GIB - 4096));
        got.duration_us = 10_200_000; // its clock started first
        assert_eq!(check(&spec(1), vec![sent.clone()], vec![got.clone()]), Ok(()));
        // Fewer streams reported than ran is a gap in the figures, not a lie.
        assert_eq!(check(&spec(2), vec![sent], vec![]), Ok(()));
    }

    /// Issue 35's hostile server: "8.00 EiB in 0.00 s" for a 1.74 GiB send.
    #[test]
    fn a_peer_cannot_receive_more_than_was_sent() {
        let sent = stream(1, StreamRole::Sender, 1_868_759_040);
        let got = stream(1, StreamRole::Receiver, 8 << 60);
        let err = check(&spec(1), vec![sent.clone()], vec![got]).expect_err("inflated");
        assert_eq!(
            err,
            "the server reported receiving 8.00 EiB on stream 1, more than this client sent on \
             it (1.74 GiB); its figures are not plausible"
        );
        // One byte over: no slack for TCP, and the exact counts when the units agree.
        let got = stream(1, StreamRole::Receiver, 1_868_759_041);
        let err = check(&spec(1), vec![sent], vec![got]).expect_err("one byte over");
        assert!(err.contains("1868759041 bytes") && err.contains("(1868759040 bytes)"), "{err}");
    }

    #[test]
    fn a_peer_sender_cannot_have_sent_less_than_arrived() {
        let reverse = TestSpec { direction: Direction::Download, ..spec(1) };
        let mut got = stream(1, StreamRole::Receiver, GIB);
        got.flow = Flow::ServerToClient;
        let mut sent = stream(1, StreamRole::Sender, GIB / 2);
        sent.flow = Flow::ServerToClient;
        let err = check(&reverse, vec![got], vec![sent]).expect_err("too little");
        assert!(err.contains("reported sending 512 MiB on stream 1, less than this client received on it (1.00 GiB)"), "{err}");
    }

    #[test]
    fn streams_must_be_the_tests_once_each_in_the_other_role() {
        let sent = stream(1, StreamRole::Sender, 100);
        let got = stream(1, StreamRole::Receiver, 100);
        let err = check(&spec(1), vec![sent.clone()], vec![got.clone(), got.clone()]);
        assert!(err.expect_err("twice").contains("reported stream 1 twice"));
        let err = check(&spec(1), vec![sent.clone()], vec![stream(9, StreamRole::Receiver, 1)]);
        assert!(
            err.expect_err("unknown")
                .contains("stream 9 flowing C->S, which this test does not have")
        );
        let err = check(&spec(1), vec![sent.clone()], vec![stream(1, StreamRole::Sender, 1)]);
        assert!(err.expect_err("same role").contains("as its sender, which this client is"));
    }

    #[test]
    fn durations_are_bounded_both_ways() {
        let sent = with_samples(stream(1, StreamRole::Sender, 10 * GIB));
        // Longer than the whole test took here.
        let mut got = with_samples(stream(1, StreamRole::Receiver, 10 * GIB));
        got.duration_us = 11_500_000;
        let err = check(&spec(1), vec![sent.clone()], vec![got]).expect_err("too long");
        assert!(
            err.contains(
                "running 11.50 s, longer than the whole test took at this client (10.00 s)"
            ),
            "{err}"
        );
        // Everything in 0.00 s: a rate inflated by a short duration.
        let mut got = stream(1, StreamRole::Receiver, 10 * GIB);
        got.duration_us = 1_000;
        let err = check(&spec(1), vec![sent.clone()], vec![got]).expect_err("too short");
        assert!(
            err.contains("within 0.00 s, but this client had not sent that much before 9.00 s"),
            "{err}"
        );
        // Half the bytes: the sender's count reached them in its fifth sample, from 4 s on;
        // less the allowance, a receiver needed 3 s at least.
        let mut got = stream(1, StreamRole::Receiver, 5 * GIB);
        got.duration_us = 2_900_000;
        assert!(check(&spec(1), vec![sent.clone()], vec![got.clone()]).is_err());
        got.duration_us = 3_000_000;
        assert_eq!(check(&spec(1), vec![sent], vec![got]), Ok(()));
    }

    #[test]
    fn intervals_cannot_add_up_to_more_than_the_total() {
        let sent = stream(1, StreamRole::Sender, GIB);
        let mut got = with_samples(stream(1, StreamRole::Receiver, GIB));
        got.bytes = GIB / 2;
        let err = check(&spec(1), vec![sent], vec![got]).expect_err("intervals");
        assert!(
            err.contains(
                "intervals of stream 1 adding up to 1.00 GiB, more than its total (512 MiB)"
            ),
            "{err}"
        );
    }

    /// A network may duplicate datagrams; a UDP receiver counts the copies' bytes too. Its
    /// distinct datagrams, and its bytes less the copies, still cannot exceed what was sent.
    #[test]
    fn udp_receivers_may_count_copies_but_not_invent_data() {
        let udp = TestSpec { protocol: Protocol::Udp, block_bytes: 1000, ..spec(1) };
        let mut sent = stream(1, StreamRole::Sender, 100_000);
        sent.udp_sender =
            Some(UdpSenderResult { datagrams: 100, datagram_bytes: 1000, ..Default::default() });
        let receiver = |bytes: u64, received: u64, duplicates: u64| {
            let mut r = stream(1, StreamRole::Receiver, bytes);
            let counts = UdpCounts { received, duplicates, ..Default::default() };
            r.udp_receiver = Some(UdpReceiverResult { counts, ..Default::default() });
            r
        };
        let ok = |r| check(&udp, vec![sent.clone()], vec![r]);
        assert_eq!(ok(receiver(105_000, 100, 5)), Ok(()), "five copies");
        let err = ok(receiver(105_000, 100, 0)).expect_err("bytes nobody sent");
        assert!(err.contains("more than this client sent on it"), "{err}");
        let err = ok(receiver(100_000, 101, 0)).expect_err("a datagram nobody sent");
        assert!(
            err.contains(
                "reported receiving 101 datagrams on stream 1, where this client sent 100"
            ),
            "{err}"
        );
        // Claiming every datagram came twice buys at most one copy each.
        assert!(ok(receiver(300_000, 100, 1_000_000)).is_err());
    }

    #[test]
    fn failed_streams_are_counted_and_said_once_per_reason() {
        let mut client = side((1..=4).map(|i| stream(i, StreamRole::Sender, 10)).collect());
        let server = side((1..=4).map(|i| stream(i, StreamRole::Receiver, 10)).collect());
        let mut record = RunRecord::for_tests(spec(4), client.clone(), server);
        assert_eq!(failed_streams(&record), None);
        for s in &mut client.streams[1..] {
            s.error = Some("connection reset by peer".into());
        }
        record.client = Some(client);
        record.server_results.as_mut().expect("server").streams[0].error =
            Some("did not finish".into());
        let said = failed_streams(&record).expect("failed");
        assert_eq!(
            said,
            "4 of 4 stream(s) failed: streams 2-4 (client: connection reset by peer); stream 1 \
             (server: did not finish); the figures of the streams that finished are kept, but \
             the test is incomplete"
        );
    }
}
