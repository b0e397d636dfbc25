//! Pure statistics over raw results: no I/O, no clock. Everything a report shows is computed
//! here from a [`crate::record::RunRecord`], so it can be recomputed from stored records.

pub mod summary;

pub use summary::{DirectionSummary, Figures, SideFigures, StreamSummary, Summary, summarize};
