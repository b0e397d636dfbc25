//! Pure statistics over raw results: no I/O, no clock. Everything a report shows is computed
//! here from a [`crate::record::RunRecord`], so it can be recomputed from stored records.

pub mod campaign;
pub mod campaign_fleet;
pub mod change_point;
pub mod compare;
pub mod cost;
pub mod doctor;
pub mod doctor_path;
pub mod drift;
pub mod environment;
pub mod fairness;
pub mod fleet;
pub mod integrity;
pub mod intervals;
pub mod latency;
pub mod latency_compare;
pub mod matrix;
pub mod matrix_latency;
pub mod mesh;
pub mod mesh_watch;
pub mod probe;
pub mod sample;
pub mod scaling;
pub mod settings;
pub mod starved;
pub mod summary;
pub mod trend;
pub mod trend_path;
pub mod udp;
pub mod under_load;
pub mod verdict;

pub use cost::{CostSummary, cost_summary, cost_warnings};
pub use summary::{DirectionSummary, Figures, SideFigures, StreamSummary, Summary, summarize};
pub use verdict::Verdict;
