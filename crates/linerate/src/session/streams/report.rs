//! A stream set's final results: each stream's figures (its counters, its socket's last
//! TCP_INFO and grants), how the end served them (`DataPlane`), and what the test cost the
//! end.

use std::time::{Duration, Instant};

use linerate_proto::{
    DataPlane, ProcessCpu, SideResults, SocketReport, StreamResult, StreamRole, WorkerReport,
};

use super::{LocalStream, Probe, StreamSet};
use crate::record::canonical;
use crate::sys;

impl StreamSet {
    /// Final results of every local stream and what the test cost this end. Call after
    /// `all_done` (or after `abort`, for partial results): waits up to a second for threads
    /// to exit. `concurrent_tests` is how many other tests this process ran meanwhile.
    pub fn results(&mut self, software: &str, concurrent_tests: u32) -> SideResults {
        self.gate.release();
        let deadline = Instant::now() + Duration::from_secs(1);
        let workers = self.pool.iter_mut().flatten().map(|w| &mut w.thread);
        for t in self.streams.iter_mut().map(|s| &mut s.thread).chain(workers) {
            if let Some(t) = t.take() {
                while !t.is_finished() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                if t.is_finished() {
                    let _ = t.join();
                }
            }
        }
        let streams = self.streams.iter().map(|s| self.stream_result(s)).collect();
        let plane = self.data_plane();
        let threads = match &plane.workers[..] {
            [] => sum_cpu(self.streams.iter().map(|s| s.counters.thread_cpu())),
            w => sum_cpu(w.iter().map(|w| w.cpu)),
        };
        let cost = self.cost.take().map(|m| {
            let mut c = m.finish(Instant::now(), threads, concurrent_tests);
            c.data_plane = Some(plane);
            Box::new(c)
        });
        SideResults {
            software: software.to_string(),
            streams,
            intervals_dropped: false,
            intervals_per_sample: self
                .streams
                .first()
                .map_or(1, |s| s.intervals.intervals_per_sample()),
            cost,
            environment: self.environment.clone(),
        }
    }

    /// How this end served its streams, with each pool worker's figures.
    fn data_plane(&self) -> DataPlane {
        let workers: Vec<WorkerReport> = self
            .pool
            .iter()
            .flatten()
            .map(|w| {
                let f = w.figures.lock().ok().and_then(|f| *f).unwrap_or_default();
                WorkerReport {
                    streams: f.streams,
                    cpu: f.cpu,
                    wait_us: f.wait_us,
                    wall_us: f.wall_us,
                }
            })
            .collect();
        let mode = if self.pool.is_some() { "pool" } else { "per-stream" };
        let chosen_by = if self.layout.explicit { "--threads" } else { "auto" };
        DataPlane {
            mode: mode.into(),
            chosen_by: chosen_by.into(),
            workers,
            buffer_cap: self.buffer_cap,
            loopback_rcvbuf: None,
            cpus: self.cpus.clone(),
            unpinned: self.unpinned.load(std::sync::atomic::Ordering::Relaxed),
            paired_cpus: if self.paired > 0 { self.pair_cpus.clone() } else { Vec::new() },
            pair_split: self.paired > 0 && self.pair_split,
            receiver_slice_us: self
                .receiver_slice
                .filter(|_| self.sliced.load(std::sync::atomic::Ordering::Relaxed) > 0)
                .map(|d| d.as_micros() as u64),
            notsent_lowat: self.unsent.report(),
        }
    }

    fn stream_result(&self, s: &LocalStream) -> StreamResult {
        // One TCP_INFO read serves both the snapshot and the retransmit count.
        let tcp = s.probe.tcp_internals();
        let (udp_sender, udp_receiver) = s.udp.as_ref().map_or((None, None), |u| u.results(s.role));
        let bytes = s.counters.bytes();
        let end = s.counters.end();
        let duration_us = end
            .or_else(|| self.started().map(|st| st.elapsed()))
            .map_or(0, |d| d.as_micros() as u64);
        // A stream that ended inside the warm-up has every byte omitted.
        let (omitted_bytes, omitted_us) = match s.omitted {
            Some(o) => o,
            None if self.omit.is_zero() => (0, 0),
            None => (bytes, duration_us),
        };
        let mut socket = s.socket.clone();
        if let Probe::Tcp(p) = &s.probe {
            // At the end: autotuned buffers have grown since the set-up.
            merge_facts(&mut socket, sys::socket_facts(p));
        }
        StreamResult {
            id: s.id,
            flow: s.flow,
            role: s.role,
            bytes,
            omitted_bytes,
            duration_us,
            omitted_us,
            intervals: s.intervals.as_slice().to_vec(),
            socket,
            retransmits: tcp
                .filter(|_| s.role == StreamRole::Sender)
                .map(|t| u64::from(t.total_retrans)),
            tcp,
            thread_cpu: s.counters.thread_cpu(),
            thread_wait_us: s.counters.thread_wait_us(),
            udp_sender,
            udp_receiver,
            error: s
                .counters
                .error_unless(|e| self.forgiven.is_some_and(|f| f(s.role, e)))
                .or_else(|| {
                    (end.is_none() && self.started().is_some())
                        .then(|| "did not finish".to_string())
                }),
            latency: s.rr.as_ref().map(|r| Box::new(r.result())),
        }
    }
}

/// The sum of CPU figures; None if any is unknown.
fn sum_cpu(mut cpu: impl Iterator<Item = Option<ProcessCpu>>) -> Option<ProcessCpu> {
    cpu.try_fold(ProcessCpu::default(), |acc, c| {
        c.map(|c| ProcessCpu {
            user_us: acc.user_us + c.user_us,
            system_us: acc.system_us + c.system_us,
        })
    })
}

/// What a stream's socket report says at the set-up: its addresses and what was granted.
pub(super) fn socket_report(
    local: std::io::Result<std::net::SocketAddr>,
    peer: std::io::Result<std::net::SocketAddr>,
    granted: sys::SocketFacts,
) -> SocketReport {
    let mut r = SocketReport {
        local_address: local.ok().map(|a| canonical(a).to_string()),
        peer_address: peer.ok().map(|a| canonical(a).to_string()),
        ..SocketReport::default()
    };
    merge_facts(&mut r, granted);
    r
}

/// Overwrites what `r` says of the socket with the facts in `f` that are known.
fn merge_facts(r: &mut SocketReport, f: sys::SocketFacts) {
    r.send_buffer_bytes = f.send_buffer_bytes.or(r.send_buffer_bytes);
    r.recv_buffer_bytes = f.recv_buffer_bytes.or(r.recv_buffer_bytes);
    r.mss_bytes = f.mss_bytes.or(r.mss_bytes);
    r.congestion = f.congestion.or(r.congestion.take());
    r.no_delay = f.no_delay.or(r.no_delay);
    r.tos = f.tos.or(r.tos);
    r.max_pacing_rate_bps = f.max_pacing_rate_bps.or(r.max_pacing_rate_bps);
    r.dont_fragment = f.dont_fragment.or(r.dont_fragment);
}
