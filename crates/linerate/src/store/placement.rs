//! The placement calibrations a history keeps (`plan/placement.rs`): each a finished group of
//! kind `placement` with no runs, its trials and the host they ran on in its parameters. The
//! newest calibration of a shape on a host with the same [`HostKey`] is the one in force; one
//! of another host (a new kernel, another CPU model, another set of CPUs) is history, kept
//! and listed, never used for this one. A calibration whose parameters cannot be read (a newer
//! layout, a damaged row) is passed over, not an error: it can be measured again.

use anyhow::Result;

use super::{GroupKind, GroupParams, Store};
use crate::plan::placement::{Calibration, HostKey, Shape};

/// How many of the newest calibrations are looked through for this host's.
const LOOK_BACK: i64 = 64;

impl Store {
    /// The newest finished calibration of `shape` on `host`, if the history holds one.
    pub fn calibration(&self, host: &HostKey, shape: Shape) -> Result<Option<Calibration>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT params_json FROM groups WHERE kind = ?1 AND finished_unix_ms IS NOT NULL \
                 ORDER BY id DESC LIMIT ?2",
            )
            .map_err(|e| self.fault("reading the placement calibrations of", e))?;
        let rows = stmt
            .query_map(rusqlite::params![GroupKind::Placement.as_str(), LOOK_BACK], |r| {
                r.get::<_, String>(0)
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.fault("reading the placement calibrations of", e))?;
        Ok(rows
            .iter()
            .filter_map(|text| serde_json::from_str(text).ok())
            .filter_map(|v| GroupParams::read(v).ok()?.plan::<Calibration>().ok())
            .find(|c| c.host == *host && c.shape == shape))
    }

    /// Keeps calibration `c` as a finished group; returns its id.
    pub fn save_calibration(&mut self, c: &Calibration) -> Result<i64> {
        let id = self.begin_group(GroupKind::Placement, None, &GroupParams::new(c, None)?)?;
        self.finish_group(id)?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::placement::Trials;
    use crate::record::Placement;

    fn calibration(kernel: &str, shape: Shape, at: u64) -> Calibration {
        Calibration {
            host: HostKey { cpu_model: "AMD EPYC".into(), kernel: kernel.into(), cpus: vec![0, 1] },
            shape,
            streams: 1,
            trial_ms: 300,
            at_unix_ms: at,
            trials: vec![Trials { placement: Placement::Pair, bits_per_second: vec![1e9] }],
        }
    }

    #[test]
    fn the_newest_calibration_of_the_hosts_key_and_shape_is_in_force() {
        let mut store = Store::open_in_memory().expect("store");
        let host = calibration("6.18", Shape::OneStream, 1).host;
        assert_eq!(store.calibration(&host, Shape::OneStream).expect("reads"), None);
        for c in [
            calibration("6.18", Shape::OneStream, 1),
            calibration("6.18", Shape::OneStream, 2),
            calibration("6.18", Shape::Streams, 3),
            calibration("6.19", Shape::OneStream, 4),
        ] {
            store.save_calibration(&c).expect("kept");
        }
        let at = |kernel: &str, shape| {
            let host = HostKey { kernel: kernel.into(), ..host.clone() };
            store.calibration(&host, shape).expect("reads").map(|c| c.at_unix_ms)
        };
        assert_eq!(at("6.18", Shape::OneStream), Some(2), "the newest of the host's");
        assert_eq!(at("6.18", Shape::Streams), Some(3));
        assert_eq!(at("6.19", Shape::OneStream), Some(4));
        assert_eq!(at("6.20", Shape::OneStream), None, "a new kernel is calibrated again");
        let other_cpus = HostKey { cpus: vec![0, 1, 2, 3], ..host.clone() };
        assert_eq!(store.calibration(&other_cpus, Shape::OneStream).expect("reads"), None);
        // A row that does not read is passed over, not an error.
        store
            .conn
            .execute(
                "INSERT INTO groups (kind, started_unix_ms, finished_unix_ms, params_json) \
                 VALUES ('placement', 5, 5, '{\"version\": 2, \"plan\": {\"host\": 7}}')",
                [],
            )
            .expect("insert");
        assert_eq!(at("6.18", Shape::OneStream), Some(2));
    }
}
