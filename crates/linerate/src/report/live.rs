//! The client's live lines while a test runs: connection, queue position, one line per stream
//! and interval (with a SUM line per direction for `-P`), notices. A TCP sender's lines carry
//! iperf3's Retr (retransmits during the interval) and Cwnd (congestion window at its end);
//! a receiver cannot know them (they are the sender's), so its lines say n/a, once explained.

use std::collections::BTreeMap;
use std::io::Write;

use linerate_proto::{Flow, StreamRole, TcpInternals};

use crate::session::{IntervalRow, LiveEvent, Observer};
use crate::stats::intervals::SenderTick;
use crate::units::peer_text::escape;
use crate::units::scale::Scale;
use crate::units::{ByteCount, format_latency_ns};

/// Prints live events as they happen.
pub struct LivePrinter<W: Write> {
    out: W,
    title: Option<String>,
    /// Each sending stream's `TCP_INFO` at the previous tick (for retransmits per interval).
    last: BTreeMap<(Flow, u32), TcpInternals>,
    /// Whether the n/a of a receiver's Retr and Cwnd has been explained.
    explained: bool,
    /// The unit of rates and transfers (`-f`).
    scale: Scale,
}

impl<W: Write> std::fmt::Debug for LivePrinter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LivePrinter").finish()
    }
}

impl<W: Write> LivePrinter<W> {
    /// Prints to `out`, prefixing lines with `title` (`-T`) when given.
    pub fn new(out: W, title: Option<String>) -> Self {
        Self { out, title, last: BTreeMap::new(), explained: false, scale: Scale::Auto }
    }

    /// Rates and transfers in `scale` (`-f`).
    pub fn with_scale(mut self, scale: Scale) -> Self {
        self.scale = scale;
        self
    }

    fn prefix(&self) -> String {
        self.title.as_ref().map(|t| format!("{t}:  ")).unwrap_or_default()
    }

    fn interval(&mut self, p: &str, rows: &[IntervalRow]) -> std::io::Result<()> {
        let mut ticks = Vec::with_capacity(rows.len());
        for r in rows {
            let s = r.sample;
            let line =
                row(&format!("{:>3}", r.id), r.flow, (s.start_us, s.end_us), s.bytes, self.scale);
            let tick = match (r.role, s.udp.is_some()) {
                (_, true) => None,
                (StreamRole::Receiver, false) => Some(SenderTick::default()),
                (StreamRole::Sender, false) => {
                    let prev = self.last.get(&(r.flow, r.id));
                    let t = SenderTick::of(prev, s.tcp.as_ref());
                    if let Some(now) = s.tcp {
                        self.last.insert((r.flow, r.id), now);
                    }
                    Some(t)
                }
            };
            ticks.push(tick);
            let omitted = if s.omitted { "  (omitted)" } else { "" };
            let udp = s.udp.map(|u| udp_interval(r.role, &u)).unwrap_or_default();
            let rr = s.rr.map(|t| rr_interval(&t, s.end_us - s.start_us)).unwrap_or_default();
            let role = role_name(r.role);
            writeln!(self.out, "{p}{line} {}  {role}{udp}{rr}{omitted}", columns(tick))?;
        }
        for flow in [Flow::ClientToServer, Flow::ServerToClient] {
            let of_flow: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].flow == flow).collect();
            if of_flow.len() > 1 {
                let bytes = of_flow.iter().map(|&i| rows[i].sample.bytes).sum();
                let start = of_flow.iter().map(|&i| rows[i].sample.start_us).min().unwrap_or(0);
                let end = of_flow.iter().map(|&i| rows[i].sample.end_us).max().unwrap_or(0);
                let tick = of_flow.iter().map(|&i| ticks[i]).collect::<Option<Vec<_>>>();
                writeln!(
                    self.out,
                    "{p}{} {}  {}",
                    row("SUM", flow, (start, end), bytes, self.scale),
                    columns(tick.map(SenderTick::sum)),
                    role_name(rows[of_flow[0]].role)
                )?;
            }
        }
        let tcp_receiver =
            rows.iter().any(|r| r.role == StreamRole::Receiver && r.sample.udp.is_none());
        if tcp_receiver && !self.explained {
            self.explained = true;
            writeln!(
                self.out,
                "{p}(Retr and Cwnd are the sender's, here the server's: shown per interval after \
                 the test if it sends them)"
            )?;
        }
        Ok(())
    }
}

impl<W: Write> Observer for LivePrinter<W> {
    fn on_event(&mut self, event: LiveEvent<'_>) {
        let p = self.prefix();
        // Output errors (closed pipe) must not stop a test; the final summary reports them.
        let _ = match event {
            LiveEvent::Accepted { local, remote, server_software } => {
                let software = escape(server_software);
                writeln!(self.out, "{p}Connected {local} -> {remote} ({software})")
            }
            LiveEvent::Started { streams } => writeln!(
                self.out,
                "{p}Test started with {streams} local stream(s)\n{p}{}",
                header()
            ),
            LiveEvent::Interval(rows) => self.interval(&p, rows),
            LiveEvent::Notice(text) => writeln!(self.out, "{p}{}", escape(text)),
            LiveEvent::Queued { position, wait } => {
                let wait =
                    wait.map_or("unknown".to_string(), |w| format!("about {} s", w.as_secs()));
                writeln!(
                    self.out,
                    "{p}Queued: the server runs one test at a time; position {position}, wait {wait}"
                )
            }
        };
        let _ = self.out.flush();
    }
}

fn header() -> String {
    format!(
        "{:<6} {:<5} {:<18} {:>11} {:>14} {:>5} {:>10}  {}",
        "[ ID]", "Flow", "Interval", "Transfer", "Bitrate", "Retr", "Cwnd", "Role"
    )
}

/// The Retr and Cwnd columns: blank for UDP (None), n/a where unknown.
pub(super) fn columns(tick: Option<SenderTick>) -> String {
    let Some(t) = tick else { return format!("{:>5} {:>10}", "", "") };
    format!(
        "{:>5} {:>10}",
        t.retransmits.map_or("n/a".into(), |r| r.to_string()),
        t.cwnd_bytes.map_or("n/a".into(), |c| ByteCount(c).iec())
    )
}

fn role_name(role: StreamRole) -> &'static str {
    match role {
        StreamRole::Sender => "sender",
        StreamRole::Receiver => "receiver",
    }
}

/// A UDP interval's datagram figures, after the role.
fn udp_interval(role: StreamRole, u: &linerate_proto::udp::UdpIntervalSample) -> String {
    match role {
        StreamRole::Sender => format!("  {} datagrams", u.datagrams),
        StreamRole::Receiver => format!(
            "  {} datagrams, {} lost, {} out of order, jitter {:.3} ms",
            u.datagrams,
            u.lost,
            u.out_of_order,
            u.jitter_ns as f64 / 1e6
        ),
    }
}

/// A request/response interval's transactions and latency, after the role.
fn rr_interval(t: &linerate_proto::latency::RrIntervalSample, us: u64) -> String {
    let lat = |v: Option<u64>| v.map_or("n/a".into(), format_latency_ns);
    let rate = if us > 0 {
        format!("{:.0}/s", t.transactions as f64 * 1e6 / us as f64)
    } else {
        "n/a".into()
    };
    format!(
        "  {} transactions ({rate}), p50 {}, p99 {}, max {}",
        t.transactions,
        lat(t.p50_ns),
        lat(t.p99_ns),
        lat(t.max_ns)
    )
}

pub(super) fn row(
    id: &str,
    flow: Flow,
    (start_us, end_us): (u64, u64),
    bytes: u64,
    scale: Scale,
) -> String {
    let secs = end_us.saturating_sub(start_us) as f64 / 1e6;
    let rate = if secs > 0.0 { scale.rate(bytes as f64 * 8.0 / secs) } else { "n/a".into() };
    let interval = format!("{:.2}-{:.2} sec", start_us as f64 / 1e6, end_us as f64 / 1e6);
    format!("[{id:>4}] {:<5} {interval:<18} {:>11} {rate:>14}", flow.label(), scale.bytes(bytes))
}
