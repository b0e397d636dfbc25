//! A campaign's fleet tier as people read it, through the fleet command's own renderers
//! (`report::fleet`): without a scale, each fleet run's figures (hosts, shares, spread across
//! hosts and flows, Jain, outliers, totals per direction), then with several runs their totals
//! per direction; with a scale, the scaling table per direction and where the total stops
//! rising (every run's figures are in the JSON).
//!
//! Must not compute figures: they come from `stats::campaign_fleet`.

use std::io::Write;

use crate::report::fleet::{write_fleet_body, write_scale_body};
use crate::report::style::Style;
use crate::stats::campaign_fleet::FleetTierFigures;
use crate::units::count_of;

/// The tier's fleet figures as plain text.
pub fn write_text(f: &FleetTierFigures, out: &mut dyn Write) -> std::io::Result<()> {
    if f.runs.is_empty() {
        return writeln!(out, "No fleet run was made.");
    }
    if !f.scale.is_empty() {
        let counts: Vec<String> = f.scale.iter().map(usize::to_string).collect();
        writeln!(
            out,
            "Scaling curve over the first {} of {}, {}:",
            counts.join(", "),
            count_of(f.targets as u64, "target"),
            count_of(f.counted().count() as u64, "fleet run"),
        )?;
        return write_scale_body(Style::Text, &f.curve, out);
    }
    for r in f.counted() {
        let again = match r.attempts {
            1 => String::new(),
            n => format!(", the attempt that counts of {n}"),
        };
        writeln!(out, "Fleet run {} ({}{again}):", r.repetition, count_of(r.hosts as u64, "host"))?;
        write_fleet_body(Style::Text, &r.summary, None, out)?;
        writeln!(out)?;
    }
    let counted = f.counted().count();
    if counted > 1 {
        writeln!(out, "Totals over the {counted} fleet runs:")?;
        write_scale_body(Style::Text, &f.curve, out)?;
    }
    Ok(())
}
