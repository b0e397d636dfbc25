//! Trends: one target's stored results over time, split where they changed.
//!
//! People watch an interconnect for months; what they need from the history is "did this link
//! change, when, and by how much", not a table of 3,000 figures. Runs of the same test against
//! the same target (same protocol, direction, streams, block, window and rate: a
//! [`SeriesKey`]) form a series in time order, and each series is split at its change points.
//!
//! The steps are found by `stats::change_point` (its doc says how, and how often it errs).
//! Beside them, `stats::drift` finds what this test is too slow or too coarse for: a
//! fresh drop in the last one or two runs, and a slow drift (Mann–Kendall with a Theil–Sen
//! slope); a drift that fits better than the steps replaces them.
//!
//! The series is the first direction's receiver rate of each completed run (the figure
//! `linerate history` lists); failed runs are counted, not plotted.

use serde::Serialize;

use crate::stats::change_point::{Method, change_points, median};

/// What makes two runs the same test, so their results belong to one series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct SeriesKey {
    /// The server as the user named it, `host:port`.
    pub server: String,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// `upload`, `download` or `bidirectional`.
    pub direction: String,
    /// Streams per direction.
    pub streams: u32,
    /// Block (write) size, bytes.
    pub block_bytes: u64,
    /// Requested socket buffer (`-w`), bytes; None: the kernel's default.
    pub window_bytes: Option<u64>,
    /// Target rate (`-b`), bits per second; 0: unlimited.
    pub target_bits_per_second: u64,
}

/// One stored run of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendPoint {
    /// Its run id in the history.
    pub run: i64,
    /// When it started, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Its receiver rate (first direction), bits per second.
    pub bits_per_second: f64,
    /// Its path's RTT, retransmits and loss (`stats::trend_path`).
    #[serde(flatten)]
    pub path: crate::stats::trend_path::PathFigures,
}

/// A stretch of the series between changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    /// Index of its first point in the series.
    pub first: usize,
    /// Number of points.
    pub count: usize,
    /// Median rate, bits per second.
    pub median: f64,
    /// Lowest and highest rate.
    pub min: f64,
    /// Highest rate.
    pub max: f64,
}

/// A change point: where one segment ends and the next begins.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Index (in the series) of the first point after the change.
    pub at: usize,
    /// That point's run id.
    pub run: i64,
    /// When that run started.
    pub started_unix_ms: u64,
    /// Median of the segment before, bits per second.
    pub before: f64,
    /// Median of the segment after, bits per second.
    pub after: f64,
    /// (after − before) / before.
    pub relative: f64,
    /// The permutation test's p-value.
    pub p_value: f64,
    /// True when the rate fell.
    pub regression: bool,
}

/// One series with its segments and changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// Which test it is.
    pub key: SeriesKey,
    /// Completed runs, oldest first.
    pub points: Vec<TrendPoint>,
    /// Runs of this test that failed or were interrupted in the same span (not plotted).
    pub failed: usize,
    /// The stretches between changes (one when nothing changed; none without points).
    pub segments: Vec<Segment>,
    /// The changes found, oldest first (none when a drift explains the series better).
    pub changes: Vec<Change>,
    /// The last runs well below the runs before them (`stats::drift`), without a drift.
    pub fresh_drop: Option<crate::stats::drift::FreshDrop>,
    /// A steady decline or rise that fits the runs better than steps (`stats::drift`).
    pub drift: Option<crate::stats::drift::Drift>,
    /// The path's RTT, retransmits and loss with a finding (`stats::trend_path`).
    pub path: Vec<crate::stats::trend_path::PathSignal>,
}

/// A whole trend: every series of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trend {
    /// The target as the user gave it.
    pub target: String,
    /// Only runs since this time (milliseconds since the Unix epoch), if the user said.
    pub since_unix_ms: Option<u64>,
    /// How changes were found.
    pub method: Method,
    /// Series, the longest first.
    pub series: Vec<Series>,
}

/// One stored run as the trend reads it: a key, an outcome and a point.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendRun {
    /// Which series.
    pub key: SeriesKey,
    /// None: the run failed or was interrupted, or received nothing.
    pub point: Option<TrendPoint>,
}

/// Groups `runs` (any order) into series and finds each series' changes.
pub fn trend(target: &str, since_unix_ms: Option<u64>, runs: Vec<TrendRun>, m: Method) -> Trend {
    let mut by_key: std::collections::BTreeMap<SeriesKey, (Vec<TrendPoint>, usize)> =
        Default::default();
    for r in runs {
        let entry = by_key.entry(r.key).or_default();
        match r.point {
            Some(p) => entry.0.push(p),
            None => entry.1 += 1,
        }
    }
    let mut series: Vec<Series> = by_key
        .into_iter()
        .map(|(key, (mut points, failed))| {
            points.sort_by_key(|p| (p.started_unix_ms, p.run));
            let values: Vec<f64> = points.iter().map(|p| p.bits_per_second).collect();
            let mut found = change_points(&values, &m);
            let at: Vec<usize> = found.iter().map(|&(at, _)| at).collect();
            let drift = crate::stats::drift::drift(&values, &at, &m);
            if drift.is_some() {
                found.clear(); // one slow decline, not several steps
            }
            let last = found.last().map_or(0, |&(at, _)| at);
            let fresh_drop = match drift {
                None => crate::stats::drift::fresh_drop(&values, last, &m),
                Some(_) => None,
            };
            let segments = segments(&values, &found);
            let figures: Vec<_> = points.iter().map(|p| p.path).collect();
            let path = crate::stats::trend_path::signals(&figures, last, &m);
            let changes = found
                .iter()
                .zip(segments.windows(2))
                .map(|(&(at, p_value), pair)| {
                    let (before, after) = (pair[0].median, pair[1].median);
                    Change {
                        at,
                        run: points[at].run,
                        started_unix_ms: points[at].started_unix_ms,
                        before,
                        after,
                        relative: (after - before) / before,
                        p_value,
                        regression: after < before,
                    }
                })
                .collect();
            Series { key, points, failed, segments, changes, fresh_drop, drift, path }
        })
        .collect();
    series.sort_by(|a, b| b.points.len().cmp(&a.points.len()).then(a.key.cmp(&b.key)));
    Trend { target: target.to_string(), since_unix_ms, method: m, series }
}

/// The segments `values` falls into, split at `changes`.
fn segments(values: &[f64], changes: &[(usize, f64)]) -> Vec<Segment> {
    if values.is_empty() {
        return Vec::new();
    }
    let mut bounds: Vec<usize> = vec![0];
    bounds.extend(changes.iter().map(|&(at, _)| at));
    bounds.push(values.len());
    bounds
        .windows(2)
        .map(|w| {
            let part = &values[w[0]..w[1]];
            Segment {
                first: w[0],
                count: part.len(),
                median: median(part),
                min: part.iter().copied().fold(f64::INFINITY, f64::min),
                max: part.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_split_by_test_and_failures_counted() {
        let key = |streams| SeriesKey {
            server: "h:5201".into(),
            protocol: "tcp".into(),
            direction: "upload".into(),
            streams,
            block_bytes: 131072,
            window_bytes: None,
            target_bits_per_second: 0,
        };
        let run = |id, streams, bps: Option<f64>| TrendRun {
            key: key(streams),
            point: bps.map(|b| TrendPoint {
                path: Default::default(),
                run: id,
                started_unix_ms: 1000 - id as u64,
                bits_per_second: b,
            }),
        };
        let t = trend(
            "h",
            None,
            vec![run(1, 1, Some(1.0)), run(2, 4, Some(2.0)), run(3, 1, Some(3.0)), run(4, 1, None)],
            Method::default(),
        );
        assert_eq!(t.series.len(), 2);
        assert_eq!(t.series[0].key.streams, 1);
        assert_eq!(t.series[0].failed, 1);
        // Oldest first: run 3 started before run 1.
        let ids: Vec<i64> = t.series[0].points.iter().map(|p| p.run).collect();
        assert_eq!(ids, [3, 1]);
        assert_eq!(t.series[0].segments.len(), 1);
        assert!(t.series[0].changes.is_empty());
    }
}
