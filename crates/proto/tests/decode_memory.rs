//! What decoding a hostile 16 MiB frame costs, measured with a counting allocator: the peak
//! heap growth while one frame already buffered is decoded, for each shape that used to
//! multiply its size (docs/SECURITY.md lists the figures; `FIGURE name = value` lines with
//! `--nocapture`). One test, so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use linerate_proto::iperf3::Iperf3Results;
use linerate_proto::wire::{
    FrameDecoder, MAX_FRAME_RESULTS, Message, PROTOCOL_VERSION, encode_frame, preamble,
};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let q = unsafe { System.realloc(p, layout, new) };
        if !q.is_null() {
            // Old and new blocks may both exist while the data moves: count the new first.
            grew(new);
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MIB: usize = 1 << 20;
/// The documented bound: the 32 MiB budget, half again for a vector's old and new blocks
/// while it grows, and serde_json's scratch copy of one string up to the frame's size.
const GOAL: usize = 32 * MIB * 3 / 2 + 16 * MIB;

/// Peak heap growth, bytes, while `f` runs.
fn peak_of<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (PEAK.load(Ordering::Relaxed).saturating_sub(base), out)
}

/// A results frame (length prefix included) whose `results` object is `inner`, padded to the
/// full 16 MiB cap by repeating `item` inside the list `[` ... `]` that `inner` has as `{}`.
fn hostile(inner: &str, item: &str) -> Vec<u8> {
    let (head, tail) = inner.split_once("{}").expect("a place for the items");
    let head = format!(r#"{{"type":"results","results":{head}"#);
    let tail = format!("{tail}}}");
    let room = MAX_FRAME_RESULTS as usize - head.len() - tail.len();
    let n = room / (item.len() + 1);
    let mut body = head.into_bytes();
    body.extend_from_slice(format!("{item},").repeat(n).trim_end_matches(',').as_bytes());
    body.extend_from_slice(tail.as_bytes());
    framed(body)
}

fn framed(body: Vec<u8>) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend(body);
    f
}

/// Decodes one buffered frame; returns the peak growth and whether it was accepted.
fn decode_cost(frame: &[u8]) -> (usize, Result<Option<Message>, String>) {
    let mut d = FrameDecoder::new();
    d.push(&preamble(PROTOCOL_VERSION));
    let _ = d.poll_preamble();
    d.set_max_frame(MAX_FRAME_RESULTS);
    d.push(frame);
    let (peak, got) = peak_of(|| d.poll_frame().map_err(|e| e.to_string()));
    (peak, got)
}

#[test]
fn hostile_frames_cost_bounded_memory() {
    let stream = r#"{"id":1,"flow":"client_to_server","role":"sender","bytes":0,"omitted_bytes":0,"duration_us":0,"omitted_us":0,"socket":{},"retransmits":null,"error":null,"intervals":[SAMPLES]}"#;
    let sample = r#"{"start_us":0,"end_us":0,"bytes":0,"omitted":false}"#;
    // Streams of 40000 samples each: no list over the item cap, all of them over the budget.
    let samples = format!("{sample},").repeat(40_000);
    let one_stream = stream.replace("SAMPLES", samples.trim_end_matches(','));
    let shapes: Vec<(&str, Vec<u8>)> = vec![
        (
            "foreign_top_empty_strings",
            hostile(
                r#"{"software":"x","streams":[],"cost":{"window_us":0,"foreign_top":[{}]}}"#,
                r#""""#,
            ),
        ),
        (
            "interfaces_empty_objects",
            hostile(r#"{"software":"x","streams":[],"environment":{"interfaces":[{}]}}"#, "{}"),
        ),
        (
            "unavailable_4_kib_strings",
            hostile(
                r#"{"software":"x","streams":[],"cost":{"window_us":0,"unavailable":[{}]}}"#,
                &format!("\"{}\"", "a".repeat(4096)),
            ),
        ),
        ("streams_of_minimal_samples", hostile(r#"{"software":"x","streams":[{}]}"#, &one_stream)),
        (
            "abort_16_mib_escaped_string",
            framed(
                format!(
                    r#"{{"type":"abort","reason":"other","message":"{}"}}"#,
                    "\\u0041".repeat((MAX_FRAME_RESULTS as usize - 100) / 6)
                )
                .into_bytes(),
            ),
        ),
    ];
    for (name, frame) in &shapes {
        assert!(frame.len() <= MAX_FRAME_RESULTS as usize + 4, "{name} fits the cap");
        let (peak, got) = decode_cost(frame);
        eprintln!("FIGURE decode_peak_{name}_mib = {:.1}", peak as f64 / MIB as f64);
        eprintln!("  ({} bytes: {:?})", frame.len(), got.as_ref().map(|_| "accepted"));
        assert!(peak <= GOAL, "{name}: {peak} bytes");
    }
    // The same first frame as an untyped tree, the way it was decoded before.
    let body = &shapes[0].1[4..];
    let (peak, v) = peak_of(|| serde_json::from_slice::<serde_json::Value>(body).map(drop));
    assert!(v.is_ok());
    eprintln!("FIGURE decode_peak_foreign_top_as_value_mib = {:.1}", peak as f64 / MIB as f64);
    // iperf3 results with an untyped server_output_json of nested empty lists.
    let iperf3 = {
        let head = r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[],"server_output_json":["#;
        let item = format!("[{}]", "[],".repeat(1000).trim_end_matches(','));
        let n = (MAX_FRAME_RESULTS as usize - head.len() - 2) / (item.len() + 1);
        format!("{head}{}]}}", format!("{item},").repeat(n).trim_end_matches(','))
    };
    let (peak, got) = peak_of(|| Iperf3Results::parse(iperf3.as_bytes()).map(drop));
    eprintln!("FIGURE decode_peak_iperf3_nested_lists_mib = {:.1}", peak as f64 / MIB as f64);
    assert!(got.is_err() && peak <= GOAL, "{peak} bytes: {got:?}");
    // A legitimate frame decodes, within the same bound.
    let legit = encode_frame(&Message::Abort {
        reason: linerate_proto::wire::AbortReason::Other,
        message: "fine".into(),
    });
    let (_, got) = decode_cost(&legit);
    assert!(matches!(got, Ok(Some(Message::Abort { .. }))));
}
