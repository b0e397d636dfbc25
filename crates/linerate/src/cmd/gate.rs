//! `--fail-below` and `--fail-regression`: whether finished results pass the user's gates.
//! A failed gate is a [`GateFailed`] error, which `main` turns into exit status 1.

use std::path::Path;

use anyhow::{Context, Result};

use super::compare::{ALPHA, name, same_cell, samples};
use crate::plan::{ClientPlan, Gates};
use crate::record::Failure;
use crate::stats::compare::compare;
use crate::store::Store;
use crate::units::format_bits_per_second;

/// A gate failed: the test ran and fell short (exit status 1). Says which, `; `-separated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateFailed(pub String);

impl std::fmt::Display for GateFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gate failed: {}", self.0)
    }
}

impl std::error::Error for GateFailed {}

/// Fails with [`GateFailed`] when a `--fail-below` or `--fail-regression` gate failed.
pub(crate) fn gate(plan: &ClientPlan, cells: &[(String, Vec<f64>)]) -> Result<()> {
    let failed = failed_gates(&plan.gates, plan.store.path.as_deref(), cells)?;
    if failed.is_empty() {
        return Ok(());
    }
    Err(GateFailed(failed.join("; ")).into())
}

/// Which gates failed for these results (cell label, received rates); empty = passed.
/// The baseline comes from the history at `db`.
pub fn failed_gates(
    gates: &Gates,
    db: Option<&Path>,
    cells: &[(String, Vec<f64>)],
) -> Result<Vec<String>> {
    let mut failed = Vec::new();
    if let Some(min) = gates.below {
        for (cell, xs) in cells.iter().filter(|(_, xs)| !xs.is_empty()) {
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            if mean < min as f64 {
                failed.push(format!(
                    "{cell}: received {} (mean of {}), below --fail-below {}",
                    format_bits_per_second(mean),
                    xs.len(),
                    format_bits_per_second(min as f64)
                ));
            }
        }
    }
    if let Some((drop, baseline)) = gates.regression {
        let db = db.context("--fail-regression needs the history")?;
        let store = Store::open_read_only(db)?;
        let baseline = store.resolve(baseline, false)?;
        let before = samples(&store, baseline)?;
        let mut common = 0;
        for (cell, xs) in cells {
            let Some((_, base)) = before.iter().find(|(c, _)| same_cell(c, cell)) else {
                continue;
            };
            common += 1;
            let c = compare(base, xs, ALPHA);
            let change = c.change_percent.unwrap_or(0.0);
            let testable = c.n_a >= 2 && c.n_b >= 2;
            if change < -drop * 100.0 && (c.significant || !testable) {
                let how = if testable {
                    c.verdict.clone()
                } else {
                    "single runs: not tested for significance".into()
                };
                failed.push(format!("{cell}: {change:.1}% against the baseline ({how})"));
            }
        }
        if common == 0 {
            let why = format!(
                "the baseline {} has no cell in common with these results",
                name(&store, baseline)
            );
            return Err(Failure::usage(why).into());
        }
    }
    Ok(failed)
}
