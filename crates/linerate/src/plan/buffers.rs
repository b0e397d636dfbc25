//! Socket buffers when thousands of TCP flows share one host's kernel TCP memory.
//!
//! The kernel charges every TCP socket's queued bytes, sent but unacknowledged and received
//! but unread, to one budget per host, `net.ipv4.tcp_mem` (pages: low, pressure, high). Left
//! to autotuning, each socket may grow to `tcp_wmem`/`tcp_rmem`'s maximum (4 MiB and 32 MiB
//! here), so 10,000 flows can ask for hundreds of GiB; once the budget's high mark is reached
//! the kernel drops arriving segments of *every* connection (`TcpExtTCPRcvQDrop` 13,233 in
//! one `-P 10000 -t 10` run on loopback), the streams' last bytes wait out retransmission
//! back-offs and the test ends in timeouts instead of figures.
//!
//! So with more than [`CAP_ABOVE_CONNECTIONS`] connections and no `-w`, each end sets its
//! own sockets' buffers (as `-w` would) to [`buffer_cap`]: the pressure mark divided among
//! the connections with a share of [`SHARE`] — two ends may share the host (loopback, or
//! namespaces), each socket has a send and a receive queue, and Linux doubles what
//! `SO_SNDBUF`/`SO_RCVBUF` ask for. Never below [`FLOOR`]. The result says it happened
//! (`data_plane.buffer_cap`) and what it was derived from, so a figure is never read as
//! autotuning's. An explicit `-w` is left alone. Below the threshold nothing changes:
//! measured, `-P 1024` completes with autotuned buffers, and a test of a few flows must not
//! lose the window autotuning would give it on a long path.

use linerate_proto::BufferCap;

/// Connections on one end above which an unset `-w` is capped (see the module docs): the
/// same count above which the control connection's dead-peer limit is relaxed
/// (`measure::liveness::LOADED_ABOVE_STREAMS`; `session/streams/` asserts they agree).
pub const CAP_ABOVE_CONNECTIONS: u32 = 1024;
/// How many buffers' worth of each connection the pressure mark must hold (module docs).
pub const SHARE: u64 = 8;
/// The smallest cap: about a quarter of a 64 KiB segment train, still a window per RTT.
pub const FLOOR: u64 = 16 * 1024;

/// The buffer size for each of `connections` TCP sockets on an end whose kernel's TCP
/// memory pressure mark `pressure_bytes` gives, when `-w` (`window`) is unset; None when no
/// cap applies. The mark is asked for only when a cap may apply (reading it is a file read).
pub fn buffer_cap(
    connections: u32,
    window: Option<u64>,
    tcp: bool,
    pressure_bytes: impl FnOnce() -> Option<u64>,
) -> Option<BufferCap> {
    if !tcp || window.is_some() || connections <= CAP_ABOVE_CONNECTIONS {
        return None;
    }
    let pressure = pressure_bytes()?;
    let share = pressure / (SHARE * u64::from(connections));
    let bytes = (share / 1024 * 1024).max(FLOOR);
    Some(BufferCap { bytes, tcp_mem_pressure_bytes: pressure })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn only_many_connections_without_a_window_are_capped() {
        assert_eq!(buffer_cap(1024, None, true, || Some(GIB)), None);
        assert_eq!(buffer_cap(10_000, Some(65536), true, || Some(GIB)), None);
        assert_eq!(buffer_cap(10_000, None, false, || Some(GIB)), None);
        assert_eq!(buffer_cap(10_000, None, true, || None), None);
        assert!(buffer_cap(1025, None, true, || Some(GIB)).is_some());
        let unread = || -> Option<u64> { panic!("the mark is read only when a cap may apply") };
        assert_eq!(buffer_cap(1024, None, true, unread), None);
    }

    #[test]
    fn the_cap_divides_the_pressure_mark_and_keeps_a_floor() {
        // This machine kind: tcp_mem pressure 383,866 pages of 4 KiB.
        let pressure = 383_866 * 4096;
        let cap = buffer_cap(10_000, None, true, || Some(pressure)).expect("capped");
        assert_eq!(cap.bytes, 19 * 1024);
        assert_eq!(cap.tcp_mem_pressure_bytes, pressure);
        assert!(cap.bytes * SHARE * 10_000 <= pressure);
        let cap = buffer_cap(2048, None, true, || Some(pressure)).expect("capped");
        assert_eq!(cap.bytes, 93 * 1024);
        let tiny = buffer_cap(16_384, None, true, || Some(64 << 20)).expect("capped");
        assert_eq!(tiny.bytes, FLOOR);
    }
}
