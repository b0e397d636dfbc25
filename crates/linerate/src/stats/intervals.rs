//! A TCP sender's figures per interval, as iperf3 shows them (Retr and Cwnd): retransmits
//! during the interval and the congestion window at its end, from the `TCP_INFO` sample each
//! sending stream takes at every interval tick. Pure: no I/O, no clock.

use linerate_proto::{IntervalSample, StreamResult, StreamRole, TcpInternals};

/// One interval of a TCP sender. None: the OS gave no `TCP_INFO` for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderTick {
    /// Segments retransmitted during the interval.
    pub retransmits: Option<u64>,
    /// Congestion window at the interval's end, bytes (segments × sending MSS).
    pub cwnd_bytes: Option<u64>,
}

impl SenderTick {
    /// The tick of one stream: `prev` is the stream's sample at the previous tick (None for
    /// its first interval, whose retransmits count from the connection's start).
    pub fn of(prev: Option<&TcpInternals>, now: Option<&TcpInternals>) -> Self {
        let Some(now) = now else { return Self::default() };
        let before = prev.map_or(0, |p| p.total_retrans);
        Self {
            retransmits: Some(u64::from(now.total_retrans.saturating_sub(before))),
            cwnd_bytes: Some(u64::from(now.cwnd_segments) * u64::from(now.snd_mss_bytes)),
        }
    }

    /// Several streams' ticks of one interval, summed (the SUM line of `-P`); a figure is
    /// known only if every stream reported it.
    pub fn sum(ticks: impl IntoIterator<Item = Self>) -> Self {
        let add = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
        ticks
            .into_iter()
            .reduce(|a, b| Self {
                retransmits: add(a.retransmits, b.retransmits),
                cwnd_bytes: add(a.cwnd_bytes, b.cwnd_bytes),
            })
            .unwrap_or_default()
    }
}

/// Each interval of the given sending streams, summed across them: `(start_us, end_us, tick)`.
/// Streams that are not TCP senders are skipped; intervals are matched by position.
pub fn sender_ticks<'a>(
    streams: impl IntoIterator<Item = &'a StreamResult>,
) -> Vec<(u64, u64, SenderTick)> {
    let senders: Vec<&StreamResult> = streams
        .into_iter()
        .filter(|s| s.role == StreamRole::Sender && s.intervals.iter().any(|i| i.tcp.is_some()))
        .collect();
    let n = senders.iter().map(|s| s.intervals.len()).min().unwrap_or(0);
    (0..n)
        .map(|i| {
            let tick = SenderTick::sum(senders.iter().map(|s| {
                let prev = i.checked_sub(1).and_then(|p| s.intervals[p].tcp.as_ref());
                SenderTick::of(prev, s.intervals[i].tcp.as_ref())
            }));
            let first: &IntervalSample = &senders[0].intervals[i];
            (first.start_us, first.end_us, tick)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(retrans: u32, cwnd: u32) -> TcpInternals {
        TcpInternals {
            total_retrans: retrans,
            cwnd_segments: cwnd,
            snd_mss_bytes: 1000,
            ..Default::default()
        }
    }

    #[test]
    fn retransmits_are_the_delta_and_cwnd_is_in_bytes() {
        assert_eq!(
            SenderTick::of(None, Some(&tcp(3, 10))),
            SenderTick { retransmits: Some(3), cwnd_bytes: Some(10_000) }
        );
        assert_eq!(
            SenderTick::of(Some(&tcp(3, 10)), Some(&tcp(7, 20))),
            SenderTick { retransmits: Some(4), cwnd_bytes: Some(20_000) }
        );
        assert_eq!(SenderTick::of(Some(&tcp(3, 10)), None), SenderTick::default());
    }

    #[test]
    fn the_sum_is_unknown_if_a_stream_is() {
        let a = SenderTick { retransmits: Some(1), cwnd_bytes: Some(5) };
        let b = SenderTick { retransmits: Some(2), cwnd_bytes: Some(7) };
        assert_eq!(
            SenderTick::sum([a, b]),
            SenderTick { retransmits: Some(3), cwnd_bytes: Some(12) }
        );
        assert_eq!(SenderTick::sum([a, SenderTick::default()]), SenderTick::default());
    }
}
