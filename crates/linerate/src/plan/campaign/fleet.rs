//! Fleet tiers of a campaign: a tier that names its servers with `fleet = [...]` (or
//! `targets = "FILE"`) runs one test against all of them at once (`linerate fleet`), or with
//! `scale` the scaling curve over the first k of them (`linerate fleet --scale`).
//!
//! Targets are written and checked exactly as the `fleet` command takes them
//! (`plan::fleet`: `HOST[:PORT][=LABEL]`, duplicates refused); `port` is the port of targets
//! that name none. A fleet tier runs one test, so an axis with more than one value, and
//! `until_ci`, are refused with what to write instead.
//!
//! Pure: a targets file is read through the caller's reader.

use serde::{Deserialize, Serialize};

use crate::plan::campaign_de::Settings;
use crate::plan::fleet::{self, Target};

/// A fleet tier's servers and host counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierFleet {
    /// The servers, in the order given (a scaling curve takes the first k).
    pub targets: Vec<Target>,
    /// The host counts of a scaling curve; empty: every target together.
    pub scale: Vec<usize>,
}

impl TierFleet {
    /// The host counts the tier runs: its scale, else every target at once.
    pub fn counts(&self) -> Vec<usize> {
        if self.scale.is_empty() { vec![self.targets.len()] } else { self.scale.clone() }
    }

    /// How the tier's servers are named in a report: `3 hosts (vm1 … vm3)`.
    pub fn describe(&self) -> String {
        let labels: Vec<&str> = self.targets.iter().map(|t| t.label.as_str()).collect();
        match labels.as_slice() {
            [one] => format!("1 host ({one})"),
            [a, b] => format!("2 hosts ({a}, {b})"),
            [first, .., last] => format!("{} hosts ({first} … {last})", labels.len()),
            [] => "no hosts".into(),
        }
    }
}

/// Reads a targets file named in a campaign file: its text, or why it cannot be read.
pub type ReadTargets<'a> = &'a dyn Fn(&str) -> Result<Vec<u8>, String>;

/// A tier's own keys over `[defaults]`, where a tier's own `host` outranks a `fleet` (or
/// `targets`, `scale`) from `[defaults]`, and its own `fleet` outranks a default `host`: a
/// campaign may give every tier the same fleet and still have a single-server tier.
pub fn merge(own: &Settings, defaults: &Settings) -> Settings {
    let mut s = own.or(defaults);
    let own_fleet = own.fleet.is_some() || own.targets.is_some();
    if own_fleet && own.host.is_none() {
        s.host = None;
    }
    if own.host.is_some() && !own_fleet {
        s.fleet = None;
        s.targets = None;
        s.scale = own.scale.clone();
    }
    s
}

/// The tier's fleet, if its settings name one; refuses what a fleet tier cannot take.
pub fn resolve(
    name: &str,
    s: &Settings,
    read: ReadTargets<'_>,
) -> Result<Option<TierFleet>, String> {
    if s.fleet.is_none() && s.targets.is_none() {
        return match &s.scale {
            Some(_) => Err(format!(
                "tier {name:?}: scale is for fleet tiers; add fleet = [\"HOST\", ...] (or \
                 targets = \"FILE\") to the tier, or drop scale"
            )),
            None => Ok(None),
        };
    }
    if s.host.is_some() {
        return Err(format!(
            "tier {name:?} sets both host and a fleet: a tier is one server (host) or many \
             (fleet or targets); drop one"
        ));
    }
    refuse_matrix_keys(name, s)?;
    let port = s.port.unwrap_or(crate::plan::DEFAULT_PORT);
    let mut targets = Vec::new();
    for t in s.fleet.iter().flatten() {
        targets.push(fleet::parse_target(t, port).map_err(|e| format!("tier {name:?}: {e}"))?);
    }
    if let Some(file) = &s.targets {
        let text = read(file).map_err(|e| format!("tier {name:?}: targets = {file:?}: {e}"))?;
        let more = fleet::parse_targets_file(&text, port)
            .map_err(|e| format!("tier {name:?}: targets file {file}, {e}"))?;
        targets.extend(more);
    }
    if targets.is_empty() {
        return Err(format!(
            "tier {name:?} is a fleet with no servers: list at least one as \
             fleet = [\"HOST[:PORT][=LABEL]\", ...] (or in its targets file)"
        ));
    }
    fleet::check_targets(&targets).map_err(|e| format!("tier {name:?}: {e}"))?;
    let scale = match &s.scale {
        Some(text) => fleet::parse_scale(&text.0, targets.len())
            .map_err(|e| format!("tier {name:?}: {}", e.replace("--scale ", "scale ")))?,
        None => Vec::new(),
    };
    Ok(Some(TierFleet { targets, scale }))
}

/// A fleet tier runs one test: axes with several values and `until_ci` are refused.
fn refuse_matrix_keys(name: &str, s: &Settings) -> Result<(), String> {
    let varied = [
        ("parallel", s.parallel.as_ref().map_or(0, |a| a.0.len())),
        ("window", s.window.as_ref().map_or(0, |a| a.0.len())),
        ("length", s.length.as_ref().map_or(0, |a| a.0.len())),
        ("protocol", s.protocol.as_ref().map_or(0, |a| a.0.len())),
        ("direction", s.direction.as_ref().map_or(0, |a| a.0.len())),
    ];
    if let Some((key, n)) = varied.iter().find(|(_, n)| *n > 1) {
        return Err(format!(
            "tier {name:?} is a fleet, which runs one test on every host (scale varies the \
             hosts), but its {key} has {n} values; give {key} one value, or make one fleet tier \
             per value"
        ));
    }
    Ok(())
}
