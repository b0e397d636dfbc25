//! Per-flow fairness: Jain's index over the streams' rates, (Σx)² / (n·Σx²) — 1.0 when every
//! stream got the same, 1/n when one stream got everything. The VMware paper's per-VM
//! fairness question, asked of the streams of one run.
//!
//! Pure; no I/O.

use crate::stats::Summary;

/// Jain's index of `rates`; None for fewer than two rates or when they sum to zero (nothing
/// to share, so nothing to judge).
pub fn jain_index(rates: &[f64]) -> Option<f64> {
    if rates.len() < 2 || rates.iter().any(|r| !r.is_finite() || *r < 0.0) {
        return None;
    }
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|r| r * r).sum();
    (squares > 0.0).then(|| sum * sum / (rates.len() as f64 * squares))
}

/// Jain's index over the receivers' per-stream rates of a run, per direction, averaged over
/// the directions that have two or more streams.
pub fn run_fairness(summary: &Summary) -> Option<f64> {
    let per_flow: Vec<f64> = summary.directions.iter().filter_map(|d| d.jain).collect();
    (!per_flow.is_empty()).then(|| per_flow.iter().sum::<f64>() / per_flow.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::jain_index;

    #[test]
    fn equal_shares_are_fair_and_one_taker_is_one_over_n() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain_index(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        let mid = jain_index(&[3.0, 1.0]).expect("defined");
        assert!((mid - 0.8).abs() < 1e-12, "{mid}");
    }

    #[test]
    fn nothing_to_share_is_not_judged() {
        assert_eq!(jain_index(&[1.0]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
        assert_eq!(jain_index(&[1.0, f64::NAN]), None);
    }
}
