//! A matrix's results: per-cell statistics over the repetitions and findings in plain words,
//! the way people conclude from hand-made sweeps ("use -P = half the CPUs", "the window made no difference").
//!
//! Every finding cites the numbers behind it, and differences are only called differences
//! when a Welch t-test says they are unlikely to be noise (`stats::compare`). Pure functions
//! over stored records: a matrix can be re-summarised from the history at any time.

use serde::Serialize;

use crate::plan::matrix::{AxisValue, Cell};
use crate::record::{End, Outcome, RunRecord};
use crate::stats::compare::{Comparison, compare};
use crate::stats::sample::{SampleStats, ci_within, describe};
use crate::stats::summarize;
use crate::units::format_bits_per_second;

/// A cell counts as having reached the best when its mean is within this share of it.
pub const NEAR_BEST: f64 = 0.95;
/// Significance level of the comparisons in findings.
pub const ALPHA: f64 = 0.05;
/// A cell at this share of the declared link's goodput counts as reaching the link.
pub const LINK_NEAR: f64 = 0.90;
/// A cell whose 95 % interval is wider than this share of its mean is called uncertain.
pub const WIDE_CI: f64 = 0.10;

/// One cell over its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellSummary {
    /// Position in the matrix.
    pub index: usize,
    /// `P=4 w=800k`.
    pub label: String,
    /// The axis values.
    pub values: Vec<AxisValue>,
    /// Runs that completed: the only ones counted in the statistics.
    pub runs: usize,
    /// Runs that failed (not counted in the statistics).
    pub failed: usize,
    /// Runs stopped early by the user (not counted in the statistics: their figures cover
    /// part of a test). A resumed matrix runs them again.
    pub interrupted: usize,
    /// Received bits per second (summed over directions), per completed run.
    pub samples: Vec<f64>,
    /// Statistics of `samples`.
    pub bits_per_second: Option<SampleStats>,
    /// Mean process CPU of the client, % of a core.
    pub client_cpu_percent: Option<f64>,
    /// Mean process CPU of the server, % of a core.
    pub server_cpu_percent: Option<f64>,
    /// Largest peak RSS of either end, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Mean retransmitted segments per completed run, summed over the senders (None where no
    /// run's sender could say, e.g. UDP or an OS without TCP_INFO).
    pub retransmits: Option<f64>,
    /// Mean Jain's fairness index of the streams' received rates (`stats::fairness`), over
    /// the runs with two or more streams in a direction.
    pub fairness: Option<f64>,
    /// UDP cells: mean loss, %.
    pub loss_percent: Option<f64>,
    /// The verdict most runs gave (e.g. `cpu`, `path`).
    pub limit: Option<String>,
    /// With `--until-ci`: whether the confidence target was reached.
    pub ci_target_met: Option<bool>,
    /// With `--link-speed`: the mean as a share of the link's theoretical TCP goodput.
    pub link_share: Option<f64>,
    /// A bidirectional cell's directions, each the mean of its completed runs (the cell's
    /// figures above are their total); empty for one direction.
    pub directions: Vec<DirectionRate>,
    /// Request/response cells (`matrix --rr`): transactions per second and latency over the
    /// completed runs; absent for bulk cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<crate::stats::matrix_latency::CellLatency>,
}

/// Everything derived from a matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixSummary {
    /// One per cell, in matrix order.
    pub cells: Vec<CellSummary>,
    /// Conclusions with their evidence.
    pub findings: Vec<String>,
}

/// Summarises `runs` (cell index, record) over `cells`.
///
/// The runs are owned or borrowed (a mesh of 9,900 pairs holds its records once).
pub fn summarize_matrix<R: std::borrow::Borrow<RunRecord>>(
    cells: &[Cell],
    runs: &[(usize, R)],
    until_ci: Option<f64>,
) -> MatrixSummary {
    // One pass over the runs, not one per cell: a large mesh has as many cells as runs.
    let mut by_cell: std::collections::HashMap<usize, Vec<&RunRecord>> = Default::default();
    for (i, r) in runs {
        by_cell.entry(*i).or_default().push(std::borrow::Borrow::borrow(r));
    }
    let cells: Vec<CellSummary> = cells
        .iter()
        .map(|c| {
            let records = by_cell.get(&c.index).map_or(&[][..], Vec::as_slice);
            cell_summary(c, records.iter().copied(), until_ci)
        })
        .collect();
    let findings = if cells.iter().any(|c| c.latency.is_some()) {
        crate::stats::matrix_latency::findings(&cells)
    } else {
        findings(&cells)
    };
    MatrixSummary { cells, findings }
}

fn cell_summary<'a>(
    cell: &Cell,
    records: impl Iterator<Item = &'a RunRecord>,
    until_ci: Option<f64>,
) -> CellSummary {
    let (mut samples, mut failed, mut interrupted) = (Vec::new(), 0, 0);
    let (mut ccpu, mut scpu, mut loss, mut limits) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut retransmits, mut fairness) = (Vec::new(), Vec::new());
    let mut rss: Option<u64> = None;
    let mut goodput = None;
    let mut latencies = Vec::new();
    let mut by_flow: Vec<(linerate_proto::Flow, Vec<f64>)> = Vec::new();
    for r in records {
        goodput = goodput.or_else(|| crate::stats::verdict::declared_goodput(r));
        match r.outcome {
            Outcome::Completed => {}
            Outcome::Interrupted => {
                interrupted += 1;
                continue;
            }
            Outcome::Failed { .. } => {
                failed += 1;
                continue;
            }
        }
        let s = summarize(r);
        samples.push(received_rate(&s));
        let directions = received_by_direction(&s);
        if directions.len() > 1 {
            for d in directions {
                match by_flow.iter_mut().find(|(f, _)| *f == d.flow) {
                    Some((_, v)) => v.push(d.bits_per_second),
                    None => by_flow.push((d.flow, vec![d.bits_per_second])),
                }
            }
        }
        latencies.extend(s.latency.clone());
        let retr: Vec<u64> =
            s.directions.iter().filter_map(|d| d.sender.as_ref()?.retransmits).collect();
        if !retr.is_empty() {
            retransmits.push(retr.iter().sum::<u64>() as f64);
        }
        fairness.extend(crate::stats::fairness::run_fairness(&s));
        for c in &s.cost {
            let v = if c.end == End::Client { &mut ccpu } else { &mut scpu };
            v.extend(c.process_percent_of_core);
            rss = rss.max(c.peak_rss_bytes);
        }
        loss.extend(s.udp.iter().filter_map(|u| u.loss_percent));
        limits.extend(s.verdicts.first().map(crate::stats::Verdict::id));
    }
    let stats = describe(&samples).map(rate_interval);
    let latency = crate::stats::matrix_latency::cell_latency(&latencies);
    // A request/response cell's bytes are requests: no share of a link's goodput.
    let goodput = goodput.filter(|_| latency.is_none());
    let directions = by_flow
        .iter()
        .filter_map(|(flow, v)| Some(DirectionRate { flow: *flow, bits_per_second: mean(v)? }))
        .collect();
    CellSummary {
        latency,
        directions,
        index: cell.index,
        label: cell.label(),
        values: cell.values.clone(),
        runs: samples.len(),
        failed,
        interrupted,
        ci_target_met: until_ci.map(|t| stats.as_ref().is_some_and(|s| ci_within(s, t))),
        link_share: goodput.zip(stats.as_ref()).map(|(g, s)| s.mean / g),
        bits_per_second: stats,
        samples,
        client_cpu_percent: mean(&ccpu),
        server_cpu_percent: mean(&scpu),
        peak_rss_bytes: rss,
        retransmits: mean(&retransmits),
        fairness: mean(&fairness),
        loss_percent: mean(&loss),
        limit: most_common(limits),
    }
}

/// A rate's statistics with the 95 % interval's lower bound truncated at 0: the Student t
/// interval `mean ± t·s/√n` of two or three spread-out runs reaches below zero, where no rate
/// can be. Truncating removes only impossible values, so the interval covers the true mean
/// as often as before; the half-width (the table's `±`, and `--until-ci`) is unchanged.
pub fn rate_interval(mut s: SampleStats) -> SampleStats {
    s.ci95 = s.ci95.map(|(lo, hi)| (lo.max(0.0), hi));
    s
}

/// The figure a cell is judged by: what the receivers got, summed over directions.
pub fn received_rate(s: &crate::stats::Summary) -> f64 {
    DirectionRate::total(&received_by_direction(s))
}

/// What the receivers got in one direction, bit/s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DirectionRate {
    /// The direction.
    pub flow: linerate_proto::Flow,
    /// Its receivers' rate (for a cell: the mean over its completed runs).
    pub bits_per_second: f64,
}

impl DirectionRate {
    /// The directions' rates summed: the figure a run is judged by.
    pub fn total(directions: &[DirectionRate]) -> f64 {
        directions.iter().map(|d| d.bits_per_second).sum()
    }
}

/// Each direction's received rate, in the run's order: [`received_rate`] is their sum, and
/// a bidirectional run (`--bidir`) is shown as both and their total, the same in every view
/// (issue 46: the history listed one direction, the report the unlabelled sum).
pub fn received_by_direction(s: &crate::stats::Summary) -> Vec<DirectionRate> {
    s.directions
        .iter()
        .filter_map(|d| {
            let bits_per_second = d.receiver.as_ref()?.figures.bits_per_second?;
            Some(DirectionRate { flow: d.flow, bits_per_second })
        })
        .collect()
}

/// `C->S 35.1 Gbit/s + S->C 32.8 Gbit/s = 67.9 Gbit/s total` for two directions or more;
/// None for one.
pub fn directions_words(directions: &[DirectionRate]) -> Option<String> {
    (directions.len() > 1).then(|| {
        let parts: Vec<String> = directions
            .iter()
            .map(|d| format!("{} {}", d.flow.label(), format_bits_per_second(d.bits_per_second)))
            .collect();
        let total = format_bits_per_second(DirectionRate::total(directions));
        format!("{} = {total} total", parts.join(" + "))
    })
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn most_common(mut v: Vec<String>) -> Option<String> {
    v.sort();
    let mut best: Option<(usize, String)> = None;
    for chunk in v.chunk_by(|a, b| a == b) {
        if best.as_ref().is_none_or(|(n, _)| chunk.len() > *n) {
            best = Some((chunk.len(), chunk[0].clone()));
        }
    }
    best.map(|(_, l)| l)
}

fn rate(bps: f64) -> String {
    format_bits_per_second(bps)
}

fn mean_of(c: &CellSummary) -> Option<f64> {
    c.bits_per_second.as_ref().map(|s| s.mean)
}

fn mean_or_zero(c: &CellSummary) -> f64 {
    mean_of(c).unwrap_or(0.0)
}

/// The cells that differ from `c` only in the axis `same_axis` says is free.
fn siblings<'a>(
    cells: &'a [CellSummary],
    c: &CellSummary,
    free: impl Fn(&AxisValue) -> bool,
) -> Vec<&'a CellSummary> {
    let key = |x: &CellSummary| x.values.iter().filter(|v| !free(v)).copied().collect::<Vec<_>>();
    let k = key(c);
    cells.iter().filter(|x| key(x) == k).collect()
}

fn findings(cells: &[CellSummary]) -> Vec<String> {
    let mut out = Vec::new();
    let measured: Vec<&CellSummary> = cells.iter().filter(|c| mean_of(c).is_some()).collect();
    let Some(best) = measured.iter().max_by(|a, b| mean_or_zero(a).total_cmp(&mean_or_zero(b)))
    else {
        out.push("no cell completed a run: nothing to conclude".into());
        return out;
    };
    let bs = best.bits_per_second.as_ref().map_or(0.0, |s| s.mean);
    out.push(format!("best: {} at {} (mean of {} runs)", best.label, rate(bs), best.runs));
    out.extend(parallel_findings(cells));
    out.extend(link_finding(&measured));
    out.extend(pairwise_findings(cells, |v| matches!(v, AxisValue::Window(_)), "window"));
    out.extend(pairwise_findings(cells, |v| matches!(v, AxisValue::Length(_)), "length"));
    let cpu: Vec<String> = measured
        .iter()
        .filter(|c| c.limit.as_deref().is_some_and(|l| l.starts_with("cpu")))
        .map(|c| match c.limit.as_deref().and_then(|l| l.strip_prefix("cpu(")) {
            Some(side) => format!("{} ({} CPU)", c.label, side.trim_end_matches(')')),
            None => c.label.clone(),
        })
        .collect();
    if !cpu.is_empty() {
        out.push(format!(
            "{} of {} cells were CPU-bound (the verdict most of their runs gave): {}; faster \
             hosts or more streams per core would raise them, not a faster link",
            cpu.len(),
            measured.len(),
            cpu.join(", ")
        ));
    }
    let with = |prefix: &str| -> Vec<String> {
        measured
            .iter()
            .filter_map(|c| {
                let end = c.limit.as_deref()?.strip_prefix(prefix)?.trim_end_matches(')');
                Some(format!("{} ({end})", c.label))
            })
            .collect()
    };
    let starved = with("starved(");
    if !starved.is_empty() {
        out.push(format!(
            "{} of {} cells had a starved end (its threads waited a quarter of the test or more \
             for a CPU, the verdict most of their runs gave): {}; their figures measure the CPU \
             that end got — rerun them on a quiet machine or with fewer streams",
            starved.len(),
            measured.len(),
            starved.join(", ")
        ));
    }
    let busy = with("foreign_load(");
    if !busy.is_empty() {
        out.push(format!(
            "{} of {} cells ran on a busy host (other processes kept a core busy, the verdict \
             most of their runs gave): {}; their figures measure that contention as much as the \
             test — rerun them on a quiet machine",
            busy.len(),
            measured.len(),
            busy.join(", ")
        ));
    }
    for c in cells {
        let Some(s) = &c.bits_per_second else { continue };
        if !s.outliers.is_empty() {
            let values: Vec<String> = s.outliers.iter().map(|&i| rate(c.samples[i])).collect();
            out.push(format!(
                "{}: {} of {} runs are outliers ({}; median {}): kept in the figures — look for \
                 what else ran then",
                c.label,
                s.outliers.len(),
                s.n,
                values.join(", "),
                rate(s.median)
            ));
        }
    }
    let wide: Vec<String> = cells
        .iter()
        .filter(|c| c.ci_target_met.is_none())
        .filter_map(|c| {
            let s = c.bits_per_second.as_ref()?;
            let rel = s.ci95_half_width? / s.mean.abs();
            (rel > WIDE_CI).then(|| format!("{} ±{:.0}%", c.label, rel * 100.0))
        })
        .collect();
    if !wide.is_empty() {
        out.push(format!(
            "uncertain: the 95% interval of {} is wider than ±{:.0}% of the mean (few runs or a \
             noisy machine); differences smaller than that are not established — rerun with \
             more --repeat or --until-ci 5%",
            wide.join(", "),
            WIDE_CI * 100.0
        ));
    }
    for c in cells.iter().filter(|c| c.ci_target_met == Some(false)) {
        out.push(format!(
            "{}: the confidence target was not reached in {} runs (±{:.1}% at 95%): the results vary more than asked",
            c.label,
            c.runs,
            c.bits_per_second.as_ref().and_then(|s| Some(s.ci95_half_width? / s.mean * 100.0)).unwrap_or(f64::NAN)
        ));
    }
    out
}

/// Over the streams axis: the smallest stream count within [`NEAR_BEST`] of the best, and
/// whether more streams than the best hurt significantly.
fn parallel_findings(cells: &[CellSummary]) -> Vec<String> {
    let is_p = |v: &AxisValue| matches!(v, AxisValue::Parallel(_));
    let p_of = |c: &CellSummary| {
        c.values.iter().find_map(|v| if let AxisValue::Parallel(p) = v { Some(*p) } else { None })
    };
    let mut out = Vec::new();
    if !cells.iter().any(|c| p_of(c).is_some()) {
        return out; // no -P axis (a mesh's pairs): nothing to say, and no quadratic walk
    }
    let mut seen = std::collections::BTreeSet::new();
    for c in cells {
        let mut group = siblings(cells, c, is_p);
        group.retain(|x| mean_of(x).is_some() && p_of(x).is_some());
        if group.len() < 2 || !seen.insert(group.iter().map(|x| x.index).collect::<Vec<_>>()) {
            continue;
        }
        group.sort_by_key(|x| p_of(x));
        let best = group.iter().max_by(|a, b| mean_or_zero(a).total_cmp(&mean_or_zero(b))).copied();
        let Some(best) = best else { continue };
        let top = mean_of(best).unwrap_or(0.0);
        let rest: String = c
            .values
            .iter()
            .filter(|v| !is_p(v))
            .map(AxisValue::label)
            .collect::<Vec<_>>()
            .join(" ");
        let within = if rest.is_empty() { String::new() } else { format!(" with {rest}") };
        if let Some(first) = group.iter().find(|x| mean_or_zero(x) >= NEAR_BEST * top) {
            // The next smaller stream count, if the best's lead over it is not established.
            let below = group.iter().rev().find(|x| p_of(x) < p_of(best));
            let unproven = below.map(|b| (b, compare(&b.samples, &best.samples, ALPHA)));
            let unproven = unproven.filter(|(_, c)| !c.significant);
            out.push(match unproven {
                Some((b, c)) if first.index == best.index => format!(
                    "streams{within}: P={} has the highest mean ({}), but its lead over P={} ({}) \
                     is not significant ({}): more runs would tell",
                    p_of(best).unwrap_or(0),
                    rate(top),
                    p_of(b).unwrap_or(0),
                    rate(mean_or_zero(b)),
                    p_text(&c)
                ),
                _ if first.index == best.index => format!(
                    "streams{within}: P={} is the best ({}); no smaller stream count came within {:.0}% of it",
                    p_of(best).unwrap_or(0),
                    rate(top),
                    NEAR_BEST * 100.0
                ),
                _ => format!(
                    "streams{within}: P={} already reaches {:.0}% of the best ({} vs {} at P={}); more streams add little",
                    p_of(first).unwrap_or(0),
                    mean_or_zero(first) / top * 100.0,
                    rate(mean_or_zero(first)),
                    rate(top),
                    p_of(best).unwrap_or(0)
                ),
            });
        }
        if let Some(last) = group.last().filter(|l| l.index != best.index) {
            let cmp = compare(&best.samples, &last.samples, ALPHA);
            if cmp.significant && cmp.mean_b < cmp.mean_a {
                out.push(format!(
                    "streams{within}: more streams hurt: P={} is {:.1}% below P={} ({})",
                    p_of(last).unwrap_or(0),
                    -cmp.change_percent.unwrap_or(0.0),
                    p_of(best).unwrap_or(0),
                    p_text(&cmp)
                ));
            }
        }
    }
    out
}

/// With `--link-speed`: the first cell (in matrix order, so the fewest streams) at 90 % of the
/// link's theoretical TCP goodput, or how close the best came.
fn link_finding(measured: &[&CellSummary]) -> Option<String> {
    let shares: Vec<(&CellSummary, f64)> =
        measured.iter().filter_map(|c| Some((*c, c.link_share?))).collect();
    let (best, top) = shares.iter().max_by(|a, b| a.1.total_cmp(&b.1)).copied()?;
    if top > crate::stats::verdict::LINK_MAX_SHARE {
        return Some(format!(
            "link: {} reached {:.0}% of the declared link's theoretical TCP goodput, {}",
            best.label,
            top * 100.0,
            crate::stats::verdict::BEYOND_LINK
        ));
    }
    Some(match shares.iter().find(|(_, s)| *s >= LINK_NEAR) {
        Some((c, s)) => format!(
            "link: {} already reaches {:.0}% of the declared link's theoretical TCP goodput",
            c.label,
            s * 100.0
        ),
        None => format!(
            "link: no cell reached {:.0}% of the declared link's theoretical TCP goodput; the \
             best, {}, reached {:.0}%",
            LINK_NEAR * 100.0,
            best.label,
            top * 100.0
        ),
    })
}

/// For an axis with two or more values: each pair of cells that differ only in it, compared.
fn pairwise_findings(
    cells: &[CellSummary],
    is_axis: impl Fn(&AxisValue) -> bool + Copy,
    name: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    // Cells without this axis (a mesh's pairs have no axis at all) compare nothing: a mesh of
    // 100 agents has 9,900 cells, and the walk below is quadratic in them.
    if !cells.iter().any(|c| c.values.iter().any(&is_axis)) {
        return out;
    }
    for (i, a) in cells.iter().enumerate() {
        let kin = siblings(cells, a, is_axis);
        for b in &cells[i + 1..] {
            let differs = a.values.iter().zip(&b.values).any(|(x, y)| is_axis(x) && x != y);
            if !differs || a.samples.is_empty() || b.samples.is_empty() {
                continue;
            }
            if !kin.iter().any(|x| x.index == b.index) {
                continue;
            }
            let cmp = compare(&a.samples, &b.samples, ALPHA);
            let verdict = name_sides(&cmp.verdict, &a.label, &b.label);
            out.push(format!("{name}: {} vs {}: {verdict}", b.label, a.label));
        }
    }
    out
}

fn p_text(c: &Comparison) -> String {
    match c.p_value {
        None => "not testable".into(),
        Some(p) if p < 0.001 => "Welch p < 0.001".into(),
        Some(p) => format!("Welch p = {p:.3}"),
    }
}

/// The comparison's sentence with the cells' names for "A" and "B".
fn name_sides(verdict: &str, a: &str, b: &str) -> String {
    verdict
        .replacen("B equals A", &format!("{b} equals {a}"), 1)
        .replacen("B is", &format!("{b} is"), 1)
        .replacen("than A", &format!("than {a}"), 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample::describe;

    fn cell(index: usize, values: Vec<AxisValue>, samples: Vec<f64>) -> CellSummary {
        CellSummary {
            directions: Vec::new(),
            index,
            label: values.iter().map(AxisValue::label).collect::<Vec<_>>().join(" "),
            values,
            runs: samples.len(),
            failed: 0,
            interrupted: 0,
            bits_per_second: describe(&samples),
            samples,
            client_cpu_percent: None,
            server_cpu_percent: None,
            peak_rss_bytes: None,
            retransmits: None,
            fairness: None,
            loss_percent: None,
            limit: Some("cpu(client)".into()),
            ci_target_met: None,
            link_share: None,
            latency: None,
        }
    }

    #[test]
    fn findings_name_the_knee_the_window_effect_and_outliers() {
        let w = |w: Option<u64>| AxisValue::Window(w.map(crate::plan::size::Size::of_bytes));
        let p = AxisValue::Parallel;
        let cells = vec![
            cell(0, vec![p(1), w(None)], vec![9.2e9, 9.25e9, 9.15e9]),
            cell(1, vec![p(1), w(Some(800_000))], vec![5e9, 5.05e9, 4.95e9]),
            cell(2, vec![p(2), w(None)], vec![9.5e9, 9.6e9, 9.4e9]),
            cell(3, vec![p(2), w(Some(800_000))], vec![9.5e9, 9.55e9, 9.45e9]),
            cell(4, vec![p(4), w(None)], vec![9.8e9, 9.9e9, 9.7e9, 9.8e9, 9.85e9, 9.75e9, 2e9]),
            cell(5, vec![p(4), w(Some(800_000))], vec![9.0e9, 9.05e9, 8.95e9]),
        ];
        let f = findings(&cells);
        let all = f.join("\n");
        assert!(f[0].starts_with("best: P=2 w="), "{all}");
        assert!(
            all.contains("streams with w=default: P=1 already reaches 97% of the best"),
            "{all}"
        );
        assert!(all.contains("streams with w=800k: P=2 is the best"), "{all}");
        assert!(
            all.contains("more streams hurt: P=4 is 5.3% below P=2 (Welch p < 0.001)"),
            "{all}"
        );
        assert!(all.contains("window: P=1 w=800k vs P=1 w=default: P=1 w=800k is 45."), "{all}");
        assert!(all.contains("window: P=2 w=800k vs P=2 w=default: no significant"), "{all}");
        assert!(all.contains("P=4 w=default: 1 of 7 runs are outliers (2.00 Gbit/s"), "{all}");
        assert!(all.contains("6 of 6 cells were CPU-bound"), "{all}");
        assert!(all.contains("P=1 w=default (client CPU)"), "{all}");
    }

    #[test]
    fn a_lead_within_the_noise_is_not_called_best() {
        let p = AxisValue::Parallel;
        let cells = vec![
            cell(0, vec![p(1)], vec![9e9, 10e9, 8e9]),
            cell(1, vec![p(2)], vec![9.5e9, 11e9, 8.2e9]),
        ];
        let all = findings(&cells).join("\n");
        assert!(
            all.contains("P=2 has the highest mean (9.57 Gbit/s), but its lead over P=1"),
            "{all}"
        );
        assert!(all.contains("is not significant (Welch p = 0."), "{all}");
        assert!(!all.contains("P=2 is the best"), "{all}");
    }

    #[test]
    fn only_completed_runs_enter_the_figures() {
        let json = include_str!("../../tests/fixtures/records/tcp_upload.json");
        let done: RunRecord = serde_json::from_str(json).expect("fixture");
        let interrupted = RunRecord { outcome: Outcome::Interrupted, ..done.clone() };
        let failed = RunRecord {
            outcome: Outcome::Failed { error: "x".into(), kind: None },
            ..done.clone()
        };
        let cells = [Cell { index: 0, values: vec![AxisValue::Parallel(2)], stored_as: None }];
        let runs = [(0, done.clone()), (0, interrupted), (0, failed), (0, done)];
        let c = &summarize_matrix(&cells, &runs, None).cells[0];
        assert_eq!((c.runs, c.interrupted, c.failed, c.samples.len()), (2, 1, 1, 2));
        assert_eq!(c.bits_per_second.as_ref().map(|s| s.n), Some(2));
    }

    #[test]
    fn a_rate_interval_never_goes_below_zero() {
        let s = describe(&[27.5e9, 35.4e9]).map(rate_interval).expect("stats");
        let (lo, hi) = s.ci95.expect("interval");
        assert_eq!(lo, 0.0, "t(0.975, 1) = 12.7 makes mean - half-width negative");
        assert!((hi - (s.mean + s.ci95_half_width.expect("h"))).abs() < 1.0);
        let tight = describe(&[9.4e9, 9.5e9, 9.45e9]).map(rate_interval).expect("stats");
        assert!(tight.ci95.expect("interval").0 > 9e9, "untouched when positive");
    }

    /// Issue 34: 744 % of a declared 10 Gbit/s link (a loopback run) "reaches" it. A rate the
    /// link cannot carry says the declaration is wrong; below the link the reading stands.
    #[test]
    fn a_rate_above_the_declared_link_is_a_finding_not_a_pass() {
        let p = AxisValue::Parallel;
        let with_share = |index, share| CellSummary {
            link_share: Some(share),
            ..cell(index, vec![p(index as u32 + 1)], vec![9e9, 9.1e9])
        };
        let all = findings(&[with_share(0, 0.95), with_share(1, 7.443)]).join("\n");
        assert!(all.contains("link: P=2 reached 744% of the declared link's"), "{all}");
        assert!(all.contains("more than that link can carry"), "{all}");
        assert!(!all.contains("link: P=1 already reaches"), "{all}");
        let all = findings(&[with_share(0, 0.95), with_share(1, 1.005)]).join("\n");
        assert!(all.contains("link: P=1 already reaches 95%"), "{all}");
    }

    #[test]
    fn no_completed_cell_says_so() {
        let f = findings(&[cell(0, vec![AxisValue::Parallel(1)], vec![])]);
        assert_eq!(f, vec!["no cell completed a run: nothing to conclude".to_string()]);
    }
}
