//! The UDP half of [`super::StreamSet`]: a UDP stream's thread body, its live counters for
//! interval samples, and its final figures in the record's shape.
//!
//! The send and receive loops themselves live in `traffic::udp`; this module wires them to a
//! stream's start gate, controls and record, and must not print or speak the protocol.

use std::net::UdpSocket;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_proto::StreamRole;
use linerate_proto::udp::{
    DatagramFormat, UdpCounts, UdpIntervalSample, UdpReceiverResult, UdpSenderResult,
};

use crate::session::thread_clock::ThreadClock;
use crate::traffic::{
    ByteBudget, StartGate, StreamCounters, TrafficControl, UdpReceiveFinal, UdpReceiveOptions,
    UdpSendFinal, UdpSendOptions, UdpShared, UdpSnapshot, udp_receive_loop, udp_send_loop,
};

/// How a UDP stream thread ended.
#[derive(Debug)]
pub(super) enum UdpOutcome {
    /// The sender's totals.
    Sent(UdpSendFinal),
    /// The receiver's totals (boxed: its jitter histogram summary makes it large).
    Received(Box<UdpReceiveFinal>),
}

/// What the stream set keeps for one UDP stream.
pub(super) struct UdpTrack {
    shared: Arc<UdpShared>,
    outcome: Arc<Mutex<Option<UdpOutcome>>>,
    last: UdpSnapshot,
    omitted: Option<UdpSnapshot>,
    datagram_bytes: u32,
}

/// Everything a UDP stream thread needs.
pub(super) struct UdpStreamSetup {
    pub role: StreamRole,
    pub sock: UdpSocket,
    pub ctl: Arc<TrafficControl>,
    pub gate: Arc<StartGate>,
    pub counters: Arc<StreamCounters>,
    pub budget: Option<Arc<ByteBudget>>,
    pub datagram_bytes: u32,
    pub bits_per_second: u64,
    /// Datagrams per burst (`-b RATE/BURST`; 1 = none).
    pub burst: u64,
    pub epoch: Instant,
    pub quiet: Duration,
    pub format: DatagramFormat,
    /// Receivers ask for `UDP_GRO` (unless `--no-gro`).
    pub gro: bool,
}

/// The thread body of a UDP stream and the handle the stream set keeps.
pub(super) fn prepare(setup: UdpStreamSetup) -> (impl FnOnce() + Send + 'static, UdpTrack) {
    let shared = Arc::new(UdpShared::default());
    let outcome = Arc::new(Mutex::new(None));
    let track = UdpTrack {
        shared: shared.clone(),
        outcome: outcome.clone(),
        last: UdpSnapshot::default(),
        omitted: None,
        datagram_bytes: setup.datagram_bytes,
    };
    let body = move || {
        let s = setup;
        let Some(start) = s.gate.wait() else { return };
        let clock = ThreadClock::now();
        let bytes = s.datagram_bytes as usize;
        let (result, last) = match s.role {
            StreamRole::Sender => {
                let opts = UdpSendOptions {
                    datagram_bytes: bytes,
                    bits_per_second: s.bits_per_second,
                    burst: s.burst,
                    budget: s.budget.as_deref(),
                    format: s.format,
                    epoch: s.epoch,
                    gso: true,
                };
                let r = udp_send_loop(&s.sock, start, &s.ctl, &s.counters, &shared, opts);
                let now = Instant::now();
                let end = s.ctl.stopped_at().map_or(now, |t| t.min(now));
                let r = r.map(UdpOutcome::Sent);
                (r, Some(end))
            }
            StreamRole::Receiver => {
                let opts = UdpReceiveOptions {
                    datagram_bytes: bytes,
                    format: s.format,
                    epoch: s.epoch,
                    quiet: s.quiet,
                    gro: s.gro,
                    nap: s.bits_per_second == 0,
                };
                let r = udp_receive_loop(&s.sock, &s.ctl, &s.counters, &shared, opts);
                let last = r.as_ref().ok().and_then(|f| f.last);
                (r.map(|f| UdpOutcome::Received(Box::new(f))), last)
            }
        };
        let elapsed = last.map_or_else(|| start.elapsed(), |t| t.saturating_duration_since(start));
        let error = match result {
            Ok(o) => {
                if let Ok(mut slot) = outcome.lock() {
                    *slot = Some(o);
                }
                None
            }
            Err(e) => Some(e),
        };
        clock.finish(&s.counters, elapsed, error);
    };
    (body, track)
}

impl UdpTrack {
    /// Marks the end of the warm-up.
    pub(super) fn mark_omitted(&mut self) {
        self.omitted = Some(self.shared.snapshot());
    }

    /// The interval since the last call.
    pub(super) fn interval(&mut self, role: StreamRole) -> UdpIntervalSample {
        let now = self.shared.snapshot();
        let (a, b) = (UdpCounts::from(&now.counts), UdpCounts::from(&self.last.counts));
        let d = a.since(&b);
        let sample = UdpIntervalSample {
            datagrams: match role {
                StreamRole::Sender => now.datagrams_sent.saturating_sub(self.last.datagrams_sent),
                StreamRole::Receiver => d.received,
            },
            lost: d.lost,
            out_of_order: d.out_of_order,
            jitter_ns: (now.jitter_seconds.max(0.0) * 1e9).round() as u64,
        };
        self.last = now;
        sample
    }

    /// The stream's final figures: from the thread's totals when it finished, else from the
    /// last live snapshot (a stream cut short).
    pub(super) fn results(
        &self,
        role: StreamRole,
    ) -> (Option<UdpSenderResult>, Option<UdpReceiverResult>) {
        let omitted = self.omitted.unwrap_or_default();
        let outcome = self.outcome.lock().ok();
        match (role, outcome.as_deref().and_then(Option::as_ref)) {
            (StreamRole::Sender, Some(UdpOutcome::Sent(f))) => {
                let mut r = UdpSenderResult::new(f.datagrams, self.datagram_bytes, &f.burst);
                r.skipped = f.skipped;
                r.fell_behind = f.fell_behind;
                r.gso = f.gso;
                r.omitted_datagrams = omitted.datagrams_sent;
                (Some(r), None)
            }
            (StreamRole::Receiver, Some(UdpOutcome::Received(f))) => {
                let mut r = UdpReceiverResult::new(&f.counts, &f.jitter);
                r.kernel_drops = f.kernel_drops;
                r.gro = f.gro;
                r.nap_us_max = f.nap_max.map(|d| d.as_micros() as u64);
                r.omitted = UdpCounts::from(&omitted.counts);
                (None, Some(r))
            }
            (StreamRole::Sender, _) => {
                let snap = self.shared.snapshot();
                let r = UdpSenderResult {
                    datagrams: snap.datagrams_sent,
                    omitted_datagrams: omitted.datagrams_sent,
                    datagram_bytes: self.datagram_bytes,
                    skipped: snap.send_skipped,
                    ..UdpSenderResult::default()
                };
                (Some(r), None)
            }
            (StreamRole::Receiver, _) => {
                let snap = self.shared.snapshot();
                let r = UdpReceiverResult {
                    counts: UdpCounts::from(&snap.counts),
                    omitted: UdpCounts::from(&omitted.counts),
                    jitter_ns: (snap.jitter_seconds.max(0.0) * 1e9).round() as u64,
                    kernel_drops: snap.kernel_drops,
                    ..UdpReceiverResult::default()
                };
                (None, Some(r))
            }
        }
    }
}
