//! `linerate campaign FILE.toml`: several tiers (targets), each with its own matrix, run one
//! after the other — the layered method of measuring localhost, then same-host VMs, then the
//! same L2, then across the DC link, so that each tier's figure is read against the one below.
//!
//! The file is TOML (docs/METHODOLOGY.md, "Campaigns"): `name`, `seed`, `[defaults]` and one
//! `[tiers.NAME]` table per tier, in the order they run. Every key a tier may set can be set
//! in `[defaults]`; the tier wins. Values use the flags' units (`crate::units`). Unknown keys
//! are errors, and every error names the file, line and column and says what to change, so a
//! typo never silently runs a different campaign for an hour. Every cell's test is validated
//! here, before anything runs. A tier with `fleet` or `targets` is a fleet tier
//! (`campaign/fleet.rs`): its servers instead of `host`, one test, optionally a `scale`.
//!
//! Pure: parsing text to a plan. Reading the file (and a fleet tier's targets file, through
//! [`parse_with`]'s reader) is the caller's job.

use std::fmt;
use std::ops::Range;

use linerate_proto::{Direction, EndCondition, Protocol, TestSpec};
use serde::{Deserialize, Serialize};

use crate::plan::campaign_de::{Axis, RawCampaign, Settings};
use crate::plan::matrix::{AxisValue, MatrixPlan};
use crate::plan::size::Size;
use crate::plan::{ClientPlan, DEFAULT_PORT, DEFAULT_UDP_RATE, OutputFormat};
use crate::plan::{DEFAULT_MAX_REPEAT, DEFAULT_REPEAT, MAX_REPEAT_RANGE, REPEAT_RANGE};
use crate::plan::{DEFAULT_MTU, DEFAULT_TCP_BLOCK, DEFAULT_TIME_MS, MTU_RANGE, StorePlan};
use crate::record::LinkAssumption;

mod fleet;

pub use fleet::{ReadTargets, TierFleet};

/// A parsed campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CampaignPlan {
    /// Its name (the file's `name`, else the file name without `.toml`).
    pub name: String,
    /// The file's `seed`, if it fixed one.
    pub seed: Option<u64>,
    /// `[defaults]` as given.
    pub defaults: Settings,
    /// The tiers, in file order.
    pub tiers: Vec<Tier>,
}

/// `linerate campaign FILE`: the parsed file and how to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRun {
    /// The campaign.
    pub plan: CampaignPlan,
    /// The file as given (for the resume hint).
    pub file: std::path::PathBuf,
    /// Order seed (the file's, else random); a resumed campaign uses its stored one.
    pub seed: u64,
    /// `--resume` (Some), with a group id (Some(Some)).
    pub resume: Option<Option<i64>>,
    /// Where runs are stored.
    pub store: StorePlan,
    /// `--db` as given (repeated in the resume hint).
    pub db_given: Option<std::path::PathBuf>,
    /// Text or JSON.
    pub output: OutputFormat,
    /// Hidden `--stop-after N`: stop after N runs as if interrupted (tests of `--resume`).
    pub stop_after: Option<usize>,
}

/// A campaign as a group's plan stores it (`store::GroupParams`): what a report rebuilds its
/// tiers from. (The whole `CampaignPlan` is stored; only its tiers are read back.)
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoredCampaign {
    /// The tiers, in file order.
    pub tiers: Vec<Tier>,
}

/// One tier: a target and the matrix to run against it, or a fleet of targets and the one
/// test each gets (the matrix's single cell).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    /// The `NAME` of `[tiers.NAME]`.
    pub name: String,
    /// Where the server is (a fleet tier: no host; the port its targets default to, and the
    /// coordinator's link).
    pub target: Target,
    /// What to run.
    pub matrix: TierMatrix,
    /// A fleet tier's servers and host counts (`fleet`, `targets`, `scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<TierFleet>,
}

/// A tier's server and the link the user says is in between.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// `link_speed` and `mtu`.
    pub link: Option<LinkAssumption>,
}

/// A tier's matrix with every default resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierMatrix {
    /// Streams axis (empty: not varied, 1 stream).
    pub parallel: Vec<u32>,
    /// Window axis in the file's words (None = autotuning); stored as bytes.
    pub window_bytes: Vec<Option<Size>>,
    /// Length axis in the file's words (None = the protocol's default); stored as bytes.
    pub length_bytes: Vec<Option<Size>>,
    /// Protocol axis.
    pub protocol: Vec<Protocol>,
    /// Direction axis.
    pub direction: Vec<Direction>,
    /// Runs per cell.
    pub repeat: u32,
    /// Length of each run.
    pub time_ms: u64,
    /// Warm-up excluded from each run.
    pub omit_ms: u64,
    /// Pacing per stream (TCP: none if unset; UDP: 1 Mbit/s if unset).
    pub bitrate_bits_per_second: Option<u64>,
    /// Repeat until the 95 % CI half-width is within this share of the mean.
    pub until_ci_fraction: Option<f64>,
    /// With `until_ci`: the most completed runs per cell.
    pub max_repeat: u32,
    /// Request/response cells (`rr = {...}`): every run is an `--rr` (or `--crr`) test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<linerate_proto::latency::RrSpec>,
}

impl Tier {
    /// Runs planned (before any `until_ci` rounds): cells × repeat, or for a fleet tier its
    /// fleet runs (host counts × repeat; each fleet run is one run of every host in it).
    pub fn planned_runs(&self) -> usize {
        let units = match &self.fleet {
            Some(f) => f.counts().len(),
            None => self.matrix_plan(0).cells().len(),
        };
        units * self.matrix.repeat as usize
    }

    /// A fleet tier as the `fleet` command's plan: its test (the matrix's one cell) against
    /// every target, over its host counts, `repeat` runs each in `seed`'s order.
    pub fn fleet_plan(
        &self,
        seed: u64,
        output: OutputFormat,
        store: StorePlan,
    ) -> Option<crate::plan::fleet::FleetPlan> {
        let f = self.fleet.as_ref()?;
        let matrix = self.matrix_plan(seed);
        let cell = matrix.cells().into_iter().next()?;
        Some(crate::plan::fleet::FleetPlan {
            targets: f.targets.clone(),
            base: matrix.cell_plan(&self.client_plan(output, store), &cell),
            scale: f.counts(),
            repeat: self.matrix.repeat,
            seed,
            each_address: false,
            agent_wait: crate::plan::fleet::AgentWait::default(),
            // The curve is a grid (`session::grid`) like a matrix tier: the same rounds.
            until_ci: self.matrix.until_ci_fraction,
            max_repeat: self.matrix.max_repeat,
            resume: None,
            stop_after: None,
            key_file: None,
        })
    }

    /// The tier's matrix with the run order drawn from `seed`.
    pub fn matrix_plan(&self, seed: u64) -> MatrixPlan {
        let m = &self.matrix;
        MatrixPlan {
            axes: vec![
                m.parallel.iter().map(|p| AxisValue::Parallel(*p)).collect(),
                m.window_bytes.iter().map(|w| AxisValue::Window(*w)).collect(),
                m.length_bytes.iter().map(|l| AxisValue::Length(*l)).collect(),
                m.protocol.iter().map(|p| AxisValue::Protocol(*p)).collect(),
                m.direction.iter().map(|d| AxisValue::Direction(*d)).collect(),
            ],
            repeat: m.repeat,
            until_ci: m.until_ci_fraction,
            max_repeat: m.max_repeat,
            seed,
            udp_rate: m.bitrate_bits_per_second.unwrap_or(DEFAULT_UDP_RATE),
            length_given: false,
        }
    }

    /// The base test of every cell (the cells' values are applied on top).
    pub fn client_plan(&self, output: OutputFormat, store: StorePlan) -> ClientPlan {
        let m = &self.matrix;
        let spec = TestSpec {
            end: EndCondition::Duration { duration_ms: m.time_ms },
            block_bytes: DEFAULT_TCP_BLOCK as u32,
            bits_per_second: m.bitrate_bits_per_second.unwrap_or(0),
            omit_ms: m.omit_ms,
            interval_ms: 1000,
            rr: m.rr,
            ..TestSpec::default_tcp()
        };
        ClientPlan {
            output,
            link: self.target.link,
            store,
            ..ClientPlan::to(&self.target.host, self.target.port, spec)
        }
    }

    /// The index of the cell a stored run names (`label`, after `TIER/`): one of `cells` of
    /// the tier's matrix, or in a fleet tier the host count `k=K`.
    pub fn cell_index(&self, cells: &[crate::plan::matrix::Cell], label: &str) -> Option<usize> {
        match &self.fleet {
            Some(f) => {
                let k: usize = label.strip_prefix("k=")?.parse().ok()?;
                f.counts().iter().position(|&n| n == k)
            }
            None => Some(cells.iter().find(|c| c.is_named(label))?.index),
        }
    }
}

impl CampaignPlan {
    /// The run-order seed of tier `index` (each tier is shuffled on its own).
    pub fn tier_seed(seed: u64, index: usize) -> u64 {
        seed ^ (index as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03)
    }

    /// Runs planned (before any `until_ci` rounds), over all tiers.
    pub fn planned_runs(&self) -> usize {
        self.tiers.iter().map(Tier::planned_runs).sum()
    }
}

/// Why a campaign file was refused: where, and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CampaignError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
    /// What is wrong and the fix.
    pub message: String,
}

impl fmt::Display for CampaignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
    }
}

impl std::error::Error for CampaignError {}

/// Parses a campaign. `file` names it in errors; `default_name` is used without `name`. A
/// fleet tier's `targets` file is refused: use [`parse_with`] to read those. (The tests'.)
#[cfg_attr(linerate_private, allow(dead_code))]
pub fn parse(text: &str, file: &str, default_name: &str) -> Result<CampaignPlan, CampaignError> {
    let unread = |_: &str| Err("targets files are read by `linerate campaign` only".to_string());
    parse_with(text, file, default_name, &unread)
}

/// [`parse`], reading a fleet tier's `targets = "FILE"` through `read` (the caller resolves
/// the name, e.g. beside the campaign file).
pub fn parse_with(
    text: &str,
    file: &str,
    default_name: &str,
    read: ReadTargets<'_>,
) -> Result<CampaignPlan, CampaignError> {
    let at = |span: Option<Range<usize>>, message: String| {
        let (line, column) = line_col(text, span.map_or(0, |s| s.start));
        CampaignError { file: file.to_string(), line, column, message }
    };
    let raw: RawCampaign = toml::from_str(text).map_err(|e| at(e.span(), explain(text, &e)))?;
    let defaults = raw.defaults.unwrap_or_default();
    let mut tiers: Vec<_> = raw.tiers.unwrap_or_default().into_iter().collect();
    if tiers.is_empty() {
        return Err(at(
            None,
            "no tiers: add a [tiers.NAME] table with a host for each target, e.g. \
             [tiers.localhost] host = \"127.0.0.1\""
                .into(),
        ));
    }
    // The map is sorted by name; the spans give the order the user wrote.
    tiers.sort_by_key(|(_, t)| t.span().start);
    let tiers = tiers
        .into_iter()
        .map(|(name, t)| {
            let span = t.span();
            let settings = fleet::merge(&t.into_inner(), &defaults);
            resolve(&name, &settings, read).map_err(|m| at(Some(span), m))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let name = raw.name.unwrap_or_else(|| default_name.to_string());
    Ok(CampaignPlan { name, seed: raw.seed, defaults, tiers })
}

/// A tier's settings (its own over `[defaults]`) to a checked tier.
fn resolve(name: &str, s: &Settings, read: ReadTargets<'_>) -> Result<Tier, String> {
    if name.is_empty() || name.contains('/') {
        return Err(format!(
            "tier name {name:?} cannot be used: it names the tier's cells in the history \
             (\"TIER/CELL\"), so it must be non-empty and without '/'"
        ));
    }
    let fleet = fleet::resolve(name, s, read)?;
    // A tier's host is read as the client's is: `HOST`, `HOST:PORT`, `[v6]:PORT`.
    let (host, port) = match &fleet {
        Some(_) => (String::new(), s.port.unwrap_or(DEFAULT_PORT)),
        None => {
            let host = s.host.clone().filter(|h| !h.trim().is_empty()).ok_or_else(|| {
                format!(
                    "tier {name:?} has no host; add host = \"ADDRESS\" (or a fleet: fleet = \
                     [\"HOST\", ...]) to [tiers.{name}] or [defaults]"
                )
            })?;
            crate::plan::host::host_port(host.trim(), s.port, "port =")
                .map_err(|e| format!("tier {name:?}, host = {host:?}: {e}"))?
        }
    };
    let mtu = s.mtu.unwrap_or(DEFAULT_MTU);
    if !MTU_RANGE.contains(&u64::from(mtu)) {
        return Err(format!(
            "tier {name:?}: mtu = {mtu} is outside {}..={} bytes",
            MTU_RANGE.start(),
            MTU_RANGE.end()
        ));
    }
    if s.mtu.is_some() && s.link_speed.is_none() {
        return Err(format!("tier {name:?}: mtu is only used with link_speed; add link_speed"));
    }
    let repeat = s.repeat.unwrap_or(DEFAULT_REPEAT);
    if !REPEAT_RANGE.contains(&u64::from(repeat)) {
        return Err(format!(
            "tier {name:?}: repeat = {repeat} is outside {}..={}",
            REPEAT_RANGE.start(),
            REPEAT_RANGE.end()
        ));
    }
    let max_repeat = s.max_repeat.unwrap_or(DEFAULT_MAX_REPEAT);
    if s.max_repeat.is_some() && s.until_ci.is_none() {
        return Err(format!("tier {name:?}: max_repeat is only used with until_ci; add until_ci"));
    }
    if !MAX_REPEAT_RANGE.contains(&u64::from(max_repeat)) {
        return Err(format!(
            "tier {name:?}: max_repeat = {max_repeat} is outside {}..={}",
            MAX_REPEAT_RANGE.start(),
            MAX_REPEAT_RANGE.end()
        ));
    }
    let time_ms = s.time.map_or(DEFAULT_TIME_MS, |t| millis(t.0));
    if time_ms == 0 {
        return Err(format!("tier {name:?}: time must be at least 1 ms (0.001)"));
    }
    let tier = Tier {
        name: name.to_string(),
        target: Target {
            host,
            port,
            link: s
                .link_speed
                .filter(|l| l.0 > 0)
                .map(|l| LinkAssumption { bits_per_second: l.0, mtu_bytes: mtu }),
        },
        matrix: TierMatrix {
            parallel: s.parallel.as_ref().map(|a| a.0.clone()).unwrap_or_default(),
            window_bytes: axis(&s.window, |w| w.0),
            // Too large for a block: left for the spec check to refuse with its range.
            length_bytes: axis(&s.length, |l| l.0),
            protocol: axis(&s.protocol, |p| p.0),
            direction: axis(&s.direction, |d| d.0),
            repeat,
            time_ms,
            omit_ms: s.omit.map_or(0, |o| millis(o.0)),
            bitrate_bits_per_second: s.bitrate.map(|b| b.0),
            until_ci_fraction: s.until_ci.map(|c| c.0),
            max_repeat: max_repeat.max(repeat),
            rr: s.rr.as_ref().map(|r| {
                let udp =
                    s.protocol.as_ref().is_some_and(|p| p.0.iter().any(|p| p.0 == Protocol::Udp));
                let least = if udp { linerate_proto::spec::MIN_UDP_DATAGRAM } else { 1 };
                linerate_proto::latency::RrSpec {
                    request_bytes: r.request_size.unwrap_or(least),
                    response_bytes: r.response_size.unwrap_or(least),
                    in_flight: r.in_flight.unwrap_or(1),
                    rate_per_second: r.rate.unwrap_or(0),
                    connect_each: r.connect_each.unwrap_or(false),
                }
            }),
        },
        fleet,
    };
    check_cells(&tier)?;
    Ok(tier)
}

/// An axis's values, or none (the axis is not varied).
fn axis<T, U>(a: &Option<Axis<T>>, f: impl Fn(&T) -> U) -> Vec<U> {
    a.as_ref().map(|a| a.0.iter().map(f).collect()).unwrap_or_default()
}

/// Every cell's test must be one a server accepts, before anything runs.
fn check_cells(tier: &Tier) -> Result<(), String> {
    let plan = tier.matrix_plan(0);
    let base = tier.client_plan(OutputFormat::Text, StorePlan::default());
    base.spec.validate().map_err(|e| format!("tier {:?}: {e}", tier.name))?;
    for cell in plan.cells() {
        let spec = plan.cell_plan(&base, &cell).spec;
        spec.validate().map_err(|e| {
            format!(
                "tier {:?}, cell \"{}\": {e}; change the tier's axes (or [defaults]) so every \
                 combination is valid",
                tier.name,
                cell.label()
            )
        })?;
    }
    Ok(())
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// 1-based line and column (in characters) of byte `offset`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// toml's message, rewritten where we can say more: unknown keys get the table they are in
/// and the nearest known key; value errors get the key they belong to.
pub(crate) fn explain(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().to_string();
    let offset = e.span().map_or(0, |s| s.start);
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let mut quoted = rest.split('`').step_by(2);
        let key = quoted.next().unwrap_or_default();
        let known: Vec<&str> = quoted.filter(|k| !k.is_empty()).collect();
        let table =
            table_at(text, offset).map_or("at the top level".to_string(), |t| format!("in {t}"));
        let hint = match nearest(key, &known) {
            Some(k) => format!("did you mean \"{k}\"?"),
            None => format!("the keys are: {}", known.join(", ")),
        };
        return format!("unknown key \"{key}\" {table}; {hint}");
    }
    match key_at(text, offset) {
        Some(key) if !msg.contains(&format!("`{key}`")) => format!("{key}: {msg}"),
        _ => msg,
    }
}

/// The `[table]` header governing byte `offset`, if any.
fn table_at(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset.min(text.len()))?;
    before.lines().rev().map(|l| l.split('#').next().unwrap_or("").trim()).find_map(|l| {
        let end = l.rfind(']')?;
        l.starts_with('[').then(|| l[..=end].to_string())
    })
}

/// The key of the `key = value` line holding byte `offset`, if the offset is in its value.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
    let line = text.get(start..offset)?;
    let key = line.split('=').next().filter(|_| line.contains('='))?.trim();
    (!key.is_empty() && !key.starts_with('[')).then(|| key.trim_matches('"').to_string())
}

/// The known key closest to `key`, if it is close enough to be a typo.
fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let limit = (key.chars().count() / 3).clamp(1, 3);
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests;
