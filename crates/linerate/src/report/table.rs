//! Tables: one definition of a tier's cell table (the hand-made "throughput range, CPU on
//! server/client, memory" per cell, with the statistics behind it), written as aligned text,
//! a Markdown pipe table or an HTML table.
//!
//! Cells are formatted here, once; the three writers only lay them out. Must not compute
//! statistics (that is `stats/`) or choose what goes into a report (that is the model).

use std::io::Write;

use crate::report::words::html_escape;
use crate::stats::matrix::{CellSummary, MatrixSummary};
use crate::units::peer_text::escape;
use crate::units::{ByteCount, three_figures};

/// A table of already formatted cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Column headings.
    pub header: Vec<String>,
    /// Whether each column is right-aligned (numbers).
    pub right: Vec<bool>,
    /// The rows, each as long as `header`.
    pub rows: Vec<Vec<String>>,
    /// Under the table: what its words mean (a title and one item per word), if anything.
    pub legend: Option<(String, Vec<String>)>,
}

impl Table {
    /// A table with these headings; a heading starting with `>` is a right-aligned column.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| h.trim_start_matches('>').to_string()).collect(),
            right: header.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
            legend: None,
        }
    }

    /// Column widths in characters (not bytes: `–` and `±` are one column).
    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, c) in row.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        w
    }

    /// The table with every cell, heading and legend line shown through [`escape`]: cells
    /// quote stored records (failure reasons, peers' names).
    fn shown(&self) -> Table {
        let e = |s: &String| escape(s).into_owned();
        Table {
            header: self.header.iter().map(e).collect(),
            right: self.right.clone(),
            rows: self.rows.iter().map(|r| r.iter().map(e).collect()).collect(),
            legend: self.legend.as_ref().map(|(t, items)| (e(t), items.iter().map(e).collect())),
        }
    }

    /// Aligned columns separated by two spaces, no trailing blanks.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let shown = self.shown();
        let w = shown.widths();
        let line = |cells: &[String]| {
            let parts: Vec<String> =
                cells.iter().enumerate().map(|(i, c)| pad(c, w[i], self.right[i])).collect();
            parts.join("  ").trim_end().to_string()
        };
        writeln!(out, "{}", line(&shown.header))?;
        for row in &shown.rows {
            writeln!(out, "{}", line(row))?;
        }
        let Some((title, items)) = &shown.legend else { return Ok(()) };
        writeln!(out, "{title}:")?;
        items.iter().try_for_each(|i| writeln!(out, "  - {i}"))
    }

    /// A GitHub-flavoured Markdown pipe table (`|` in cells escaped).
    pub fn write_markdown(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let esc = |c: &String| escape(c).replace('|', "\\|");
        let head: Vec<String> = self.header.iter().map(esc).collect();
        writeln!(out, "| {} |", head.join(" | "))?;
        let rule: Vec<&str> = self.right.iter().map(|r| if *r { "---:" } else { "---" }).collect();
        writeln!(out, "|{}|", rule.join("|"))?;
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(esc).collect();
            writeln!(out, "| {} |", cells.join(" | "))?;
        }
        let Some((title, items)) = &self.legend else { return Ok(()) };
        writeln!(out, "\n*{}:*\n", esc(title))?;
        items.iter().try_for_each(|i| writeln!(out, "- {}", esc(i)))
    }

    /// An HTML `<table>` (cells escaped), numbers in `class="num"` cells.
    pub fn write_html(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "<table>\n<thead><tr>")?;
        for h in &self.header {
            write!(out, "<th>{}</th>", html_escape(h))?;
        }
        writeln!(out, "</tr></thead>\n<tbody>")?;
        for row in &self.rows {
            write!(out, "<tr>")?;
            for (i, c) in row.iter().enumerate() {
                let class = if self.right[i] { " class=\"num\"" } else { "" };
                write!(out, "<td{class}>{}</td>", html_escape(c))?;
            }
            writeln!(out, "</tr>")?;
        }
        writeln!(out, "</tbody>\n</table>")?;
        let Some((title, items)) = &self.legend else { return Ok(()) };
        writeln!(out, "<p class=\"legend\">{}:</p>\n<ul class=\"legend\">", html_escape(title))?;
        for i in items {
            writeln!(out, "<li>{}</li>", html_escape(i))?;
        }
        writeln!(out, "</ul>")
    }
}

fn pad(s: &str, width: usize, right: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(s.chars().count()));
    if right { format!("{fill}{s}") } else { format!("{s}{fill}") }
}

/// The one unit of a table's rate columns, named in a heading: every rate column of a table
/// has one unit, and a report's tables (a campaign's tiers, and its summary) share it, so two
/// figures side by side are read in one unit — never `18724.09` in one tier's table beside
/// `25.10` in the next. No figure is ever rounded away to 0.00 (small ones keep three
/// significant figures as decimals: `0.984`), and none grows past five integer digits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateUnit {
    /// `Gbit/s`, `Mbit/s`, `kbit/s` or `bit/s`.
    pub name: &'static str,
    scale: f64,
}

/// Shared units a table may use, largest first.
const TABLE_UNITS: [(&str, f64); 4] =
    [("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3), ("bit/s", 1.0)];

impl RateUnit {
    /// The unit for the rates of these summaries' tables, by their magnitude: the largest in
    /// which the typical figure (the median of the cells' means and `extra`) is at least 1, or
    /// a larger one while a figure (a confidence interval's half-width too) would need six or
    /// more integer digits; `extra` are further figures the tables show (a campaign's link
    /// goodputs). The typical figure, not the smallest: one slow pair of a mesh made every
    /// 30 Gbit/s row read 30000 Mbit/s (issue 46); the slow one now reads 0.200 Gbit/s, since
    /// small figures keep three significant digits (`units::three_figures`).
    pub fn of<'a>(
        summaries: impl IntoIterator<Item = &'a MatrixSummary>,
        extra: impl IntoIterator<Item = f64>,
    ) -> Self {
        let stats: Vec<_> = summaries
            .into_iter()
            .flat_map(|s| &s.cells)
            .filter_map(|c| c.bits_per_second.as_ref())
            .collect();
        let extra: Vec<f64> = extra.into_iter().filter(|v| *v > 0.0).collect();
        let figures: Vec<f64> = stats
            .iter()
            .flat_map(|s| [s.min, s.max, s.median, s.mean])
            .filter(|v| *v > 0.0)
            .chain(extra.iter().copied())
            .collect();
        let half_widths = stats.iter().filter_map(|s| s.ci95_half_width);
        let mut typical: Vec<f64> = stats.iter().map(|s| s.mean).filter(|v| *v > 0.0).collect();
        typical.extend(&extra);
        typical.sort_by(f64::total_cmp);
        let low = typical.get(typical.len() / 2).copied();
        let high = figures.iter().copied().chain(half_widths).reduce(f64::max);
        // Nothing measured: the usual unit.
        let mut i = low.map_or(0, |low| {
            TABLE_UNITS.iter().position(|(_, scale)| low >= *scale).unwrap_or(TABLE_UNITS.len() - 1)
        });
        while i > 0 && high.is_some_and(|h| h / TABLE_UNITS[i].1 >= 1e5) {
            i -= 1;
        }
        RateUnit { name: TABLE_UNITS[i].0, scale: TABLE_UNITS[i].1 }
    }

    /// One figure, without the unit.
    pub fn one(self, v: f64) -> String {
        three_figures(v / self.scale)
    }

    /// `lo–hi`.
    fn range(self, lo: f64, hi: f64) -> String {
        format!("{}–{}", self.one(lo), self.one(hi))
    }

    /// `mean ± half-width`.
    fn mean_ci(self, mean: f64, half: Option<f64>) -> String {
        match half {
            Some(h) => format!("{} ± {}", self.one(mean), self.one(h)),
            None => self.one(mean),
        }
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.0}%"))
}

/// One row per cell (request/response cells: `report::latency::cell_table`): received rate
/// over the runs in `unit` (range, median, mean with its 95 % interval, CV), both ends' CPU,
/// the larger peak RSS, retransmits per run, UDP loss when any cell has it, fairness when any
/// cell has two or more streams, and the prevailing verdict. `unit`: the report's
/// ([`RateUnit::of`] over all its tables), or None for this table's own.
pub fn cell_table(summary: &MatrixSummary, unit: Option<RateUnit>) -> Table {
    if summary.cells.iter().any(|c| c.latency.is_some()) {
        return crate::report::latency::cell_table(summary);
    }
    let udp = summary.cells.iter().any(|c| c.loss_percent.is_some());
    let fair = summary.cells.iter().any(|c| c.fairness.is_some());
    let rates = unit.unwrap_or_else(|| RateUnit::of([summary], []));
    // A bidirectional cell's figure is both directions' total: said in the header, and each
    // direction in a column of its own (issue 46).
    let both = summary.cells.iter().any(|c| !c.directions.is_empty());
    let first = match both {
        true => format!("cell ({} received, summed over directions)", rates.name),
        false => format!("cell ({} received)", rates.name),
    };
    let mut header = vec![first.as_str(), ">n", ">min–max", ">median", ">mean ± 95% CI"];
    if both {
        header.push(">each direction (mean)");
    }
    header.extend([">CV", ">CPU client", ">CPU server", ">peak RSS", ">retransmits/run"]);
    if udp {
        header.push(">UDP loss");
    }
    if fair {
        header.push(">fairness (Jain)");
    }
    header.push("verdict");
    let mut t = Table::new(&header);
    for c in &summary.cells {
        let mut row = cell_row(c, rates, udp, fair);
        if both {
            let each: Vec<String> = c
                .directions
                .iter()
                .map(|d| format!("{} {}", d.flow.label(), rates.one(d.bits_per_second)))
                .collect();
            row.insert(5, if each.is_empty() { "—".into() } else { each.join(" + ") });
        }
        t.rows.push(row);
    }
    t.legend = verdict_legend(summary);
    t
}

/// A verdict id (`receive_window`, `cpu(client)`, docs/JSON.md) in the words of a table, and
/// what those words mean.
pub fn verdict_words(id: &str) -> (String, String) {
    let (kind, end) = match id.split_once('(') {
        Some((kind, end)) => (kind, Some(end.trim_end_matches(')'))),
        None => (id, None),
    };
    let end_name = end.map_or("an end".to_string(), |e| format!("the {e}"));
    let (word, meaning): (String, String) = match kind {
        "pacing_target" => (
            "pacing target".into(),
            "the senders' pacing (-b) set the rate: reached within 2 %, or overshot".into(),
        ),
        "receive_window" => (
            "receive window".into(),
            "the receiver's advertised window held the sender back (raise -w or tcp_rmem)".into(),
        ),
        "send_buffer" => {
            ("send buffer".into(), "the sender's own socket buffer held it back".into())
        }
        "sender_pacing" => (
            "sender fell behind".into(),
            "the UDP sender skipped datagrams (woken late or short of CPU), so it sent below -b"
                .into(),
        ),
        "cpu" => (
            end.map_or("CPU".into(), |e| format!("{e} CPU")),
            format!("the test's own work saturated a core of {end_name}"),
        ),
        "foreign_load" => (
            end.map_or("busy host".into(), |e| format!("busy {e} host")),
            format!(
                "a core of {end_name}'s machine was busy with other processes as much as with \
                 the test: rerun on a quiet machine"
            ),
        ),
        "starved" => (
            end.map_or("starved end".into(), |e| format!("starved {e}")),
            format!(
                "{end_name}'s threads waited 25 % or more of the test for a CPU: the rate is its \
                 share of the CPU, not the path's"
            ),
        ),
        "link" => (
            "link".into(),
            "the receiver got 90 % or more of the declared link's TCP goodput".into(),
        ),
        "congestion_loss" => {
            ("loss".into(), "1 % or more of the bytes sent were retransmissions".into())
        }
        "path" => (
            "path".into(),
            "none of the other limits, so the link, a shaper or the peer (by elimination)".into(),
        ),
        "loopback" => (
            "loopback".into(),
            "on loopback, none of the other limits: no link or shaper there, so this host's \
             kernel and scheduler (by elimination)"
                .into(),
        ),
        "receiver_buffer" => (
            "receiver buffer".into(),
            "UDP datagrams overflowed the receiving host's socket buffer".into(),
        ),
        "path_loss" => ("path loss".into(), "UDP datagrams were lost between the hosts".into()),
        other => (other.into(), "see docs/METHODOLOGY.md".into()),
    };
    (word, meaning)
}

/// The legend of the verdicts a table shows, in the order they first appear.
fn verdict_legend(summary: &MatrixSummary) -> Option<(String, Vec<String>)> {
    let mut seen: Vec<&str> = Vec::new();
    for id in summary.cells.iter().filter(|c| c.runs > 0).filter_map(|c| c.limit.as_deref()) {
        if !seen.contains(&id) {
            seen.push(id);
        }
    }
    if seen.is_empty() {
        return None;
    }
    let items = seen.iter().map(|id| {
        let (word, meaning) = verdict_words(id);
        format!("{word}: {meaning}")
    });
    let title = "Verdict (what limited most runs of the cell; rules in docs/METHODOLOGY.md)";
    Some((title.to_string(), items.collect()))
}

/// The runs of a cell that are not in its figures: `1 failed, 1 interrupted`, or empty.
fn not_counted(c: &CellSummary) -> String {
    let parts: Vec<String> = [(c.failed, "failed"), (c.interrupted, "interrupted")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    parts.join(", ")
}

fn cell_row(c: &CellSummary, rates: RateUnit, udp: bool, fair: bool) -> Vec<String> {
    let s = c.bits_per_second.as_ref();
    let na = || "n/a".to_string();
    let not_counted = not_counted(c);
    let runs = if not_counted.is_empty() {
        c.runs.to_string()
    } else {
        format!("{} (+{not_counted})", c.runs)
    };
    let mut row = vec![
        c.label.clone(),
        runs,
        s.map_or_else(na, |s| rates.range(s.min, s.max)),
        s.map_or_else(na, |s| rates.one(s.median)),
        s.map_or_else(na, |s| rates.mean_ci(s.mean, s.ci95_half_width)),
        s.and_then(|s| s.cv).map_or_else(na, |cv| format!("{:.1}%", cv * 100.0)),
        percent(c.client_cpu_percent),
        percent(c.server_cpu_percent),
        c.peak_rss_bytes.map_or_else(na, |b| ByteCount(b).iec()),
        c.retransmits.map_or_else(na, |r| format!("{r:.0}")),
    ];
    if udp {
        row.push(c.loss_percent.map_or_else(na, |l| format!("{l:.3}%")));
    }
    if fair {
        row.push(c.fairness.map_or_else(na, |f| format!("{f:.3}")));
    }
    row.push(match (&c.limit, c.runs) {
        (_, 0) if not_counted.is_empty() => "no completed run".to_string(),
        (_, 0) => format!("no completed run ({not_counted})"),
        (Some(l), _) => verdict_words(l).0,
        (None, _) => na(),
    });
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&["name", ">value"]);
        t.rows.push(vec!["a|b".into(), "1.50".into()]);
        t.rows.push(vec!["<x>".into(), "10–20".into()]);
        t
    }

    #[test]
    fn text_aligns_by_characters_and_numbers_right() {
        let mut out = Vec::new();
        table().write_text(&mut out).expect("write");
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(text, "name  value\na|b    1.50\n<x>   10–20\n");
    }

    fn summary(samples: Vec<f64>) -> MatrixSummary {
        let cell = CellSummary {
            directions: Vec::new(),
            index: 0,
            label: "P=1".into(),
            values: Vec::new(),
            runs: samples.len(),
            failed: 0,
            interrupted: 0,
            bits_per_second: crate::stats::sample::describe(&samples),
            samples,
            client_cpu_percent: Some(12.4),
            server_cpu_percent: None,
            peak_rss_bytes: Some(3 << 20),
            retransmits: None,
            fairness: None,
            loss_percent: None,
            limit: Some("path".into()),
            ci_target_met: None,
            link_share: None,
            latency: None,
        };
        MatrixSummary { cells: vec![cell], findings: Vec::new() }
    }

    #[test]
    fn the_rate_unit_fits_the_figures_and_missing_ones_say_n_a() {
        let slow = cell_table(&summary(vec![1.5e6, 2.5e6]), None);
        assert_eq!(slow.header[0], "cell (Mbit/s received)");
        assert_eq!(slow.rows[0][2], "1.50–2.50");
        assert_eq!(slow.rows[0][7], "n/a", "server CPU not measured");
        assert_eq!(slow.rows[0][6], "12%");
        assert_eq!(slow.rows[0][8], "3.00 MiB");
        let fast = cell_table(&summary(vec![9.4e9]), None);
        assert_eq!(fast.header[0], "cell (Gbit/s received)");
        assert_eq!(fast.rows[0][3], "9.40");
        let none = cell_table(&summary(vec![]), None);
        assert_eq!(none.rows[0][1], "0");
        assert_eq!(none.rows[0].last().map(String::as_str), Some("no completed run"));
    }

    #[test]
    fn a_small_cell_keeps_three_figures_next_to_fast_ones_in_one_unit() {
        // `matrix --window 800k,8K,1M`: the 8K cell got 984 kbit/s, the others 20 Gbit/s.
        // One unit for the column, by the table's magnitude (the median of its cells' means):
        // the fast cells read as they are, the small one keeps three figures.
        let mut t = summary(vec![21.3e9, 21.5e9]);
        for _ in 0..2 {
            t.cells.push(summary(vec![21.3e9, 21.5e9]).cells.remove(0));
        }
        let mut small = summary(vec![984e3, 990e3]).cells.remove(0);
        small.label = "P=1 w=8K".into();
        t.cells.push(small);
        let table = cell_table(&t, None);
        assert_eq!(table.header[0], "cell (Gbit/s received)");
        assert_eq!(table.rows[3][2], "0.000984–0.000990");
        assert_eq!(table.rows[3][3], "0.000987");
        assert_eq!(table.rows[0][2], "21.30–21.50");
        // Mostly slow cells: their unit, and the fast one within five digits.
        let mut t = summary(vec![150e6, 150e6]);
        for _ in 0..2 {
            t.cells.push(summary(vec![150e6, 150e6]).cells.remove(0));
        }
        t.cells.push(summary(vec![2.5e9, 2.6e9]).cells.remove(0));
        let table = cell_table(&t, None);
        assert_eq!(table.header[0], "cell (Mbit/s received)");
        assert_eq!((table.rows[3][3].as_str(), table.rows[0][3].as_str()), ("2550.00", "150.00"));
        assert_eq!(table.rows[0][4], "150.00 ± 0", "identical runs: a zero half-width");
    }

    /// Issue 34: `18724.09–61397.01 … 40060.55 ± 271105.40` in one tier's table (Mbit/s),
    /// Gbit/s in the others. Every rate column has one unit, no figure — a half-width either —
    /// past five integer digits, and a report's tables share the unit.
    #[test]
    fn every_rate_column_has_one_unit_shared_by_a_reports_tables() {
        let every_figure_fits = |t: &Table| {
            for row in &t.rows {
                for cell in &row[2..5] {
                    for n in cell.split(['–', '±', ' ']).filter(|n| !n.is_empty()) {
                        let v: f64 = n.parse().unwrap_or_else(|_| panic!("{cell}: a bare number"));
                        assert!(v < 1e5, "{cell}: more than five integer digits");
                    }
                }
            }
        };
        // Two runs 18.7 and 61.4 Gbit/s (a half-width of 271 Gbit/s) beside a slow cell.
        let mut tier = summary(vec![18.724e9, 61.397e9]);
        tier.cells.push(summary(vec![800e6, 810e6]).cells.remove(0));
        let own = cell_table(&tier, None);
        every_figure_fits(&own);
        assert_eq!(own.header[0], "cell (Gbit/s received)");
        assert_eq!(own.rows[0][2], "18.72–61.40");
        // A campaign: the other tier's table uses the shared unit too.
        let other = summary(vec![25.1e9, 25.3e9]);
        let unit = RateUnit::of([&tier, &other], []);
        for t in [&tier, &other] {
            let table = cell_table(t, Some(unit));
            assert_eq!(table.header[0], "cell (Gbit/s received)");
            every_figure_fits(&table);
        }
        assert_eq!(cell_table(&other, Some(unit)).rows[0][3], "25.20");
    }

    #[test]
    fn verdicts_are_words_with_a_legend_not_ids() {
        let mut t = summary(vec![9e9]);
        t.cells[0].limit = Some("cpu(client)".into());
        let mut other = summary(vec![8e9]).cells.remove(0);
        other.limit = Some("receive_window".into());
        t.cells.push(other);
        let table = cell_table(&t, None);
        let verdicts: Vec<&str> =
            table.rows.iter().map(|r| r.last().expect("v").as_str()).collect();
        assert_eq!(verdicts, ["client CPU", "receive window"]);
        let mut text = Vec::new();
        table.write_text(&mut text).expect("text");
        let text = String::from_utf8(text).expect("utf8");
        assert!(!text.contains("cpu(client)") && !text.contains("receive_window"), "{text}");
        assert!(text.contains("\nVerdict (what limited most runs of the cell"), "{text}");
        assert!(
            text.contains("\n  - client CPU: the test's own work saturated a core of the client\n"),
            "{text}"
        );
        assert!(text.contains("\n  - receive window: the receiver's advertised window"), "{text}");
        let (mut md, mut html) = (Vec::new(), Vec::new());
        table.write_markdown(&mut md).expect("md");
        table.write_html(&mut html).expect("html");
        let (md, html) = (String::from_utf8(md).expect("md"), String::from_utf8(html).expect("h"));
        assert!(md.contains("\n- client CPU: "), "{md}");
        assert!(html.contains("<li>client CPU: "), "{html}");
        assert_eq!(verdict_words("foreign_load(server)").0, "busy server host");
        assert_eq!(verdict_words("starved(client)").0, "starved client");
    }

    #[test]
    fn markdown_and_html_escape_their_special_characters() {
        let (mut md, mut html) = (Vec::new(), Vec::new());
        table().write_markdown(&mut md).expect("md");
        table().write_html(&mut html).expect("html");
        let md = String::from_utf8(md).expect("utf8");
        let html = String::from_utf8(html).expect("utf8");
        assert!(md.contains("| a\\|b | 1.50 |\n"), "{md}");
        assert!(md.contains("|---|---:|\n"), "{md}");
        assert!(html.contains("<td>&lt;x&gt;</td><td class=\"num\">10–20</td>"), "{html}");
    }
}
