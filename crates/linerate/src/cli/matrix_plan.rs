//! `matrix` and `campaign` arguments to their plans: the axes, the rounds, the base test of
//! every cell (through `test_plan`) and a campaign file's parse, with messages that name the
//! flag or the file's line and the fix.

use super::args::{CampaignArgs, MatrixArgs};
use super::repeat::{CAMPAIGN, MATRIX, Rounds};
use super::test_args::TestArgs;
use super::test_plan::{client_plan, random_seed, store_plan, with_store};
use crate::plan::campaign::{self, CampaignRun};
use crate::plan::matrix::{AxisValue, MatrixPlan, MatrixRun};
use crate::plan::size::Size;
use crate::plan::{ClientPlan, OutputFormat};
use crate::plan::{DEFAULT_TIME, DEFAULT_UDP_RATE};

use super::test_plan::with_gates;

pub(super) fn matrix_plan(a: MatrixArgs) -> Result<(ClientPlan, MatrixPlan, MatrixRun), String> {
    if a.net.json_stream {
        return Err("--json-stream follows one test's intervals; a matrix writes one document \
                    at the end: use -J (or linerate report mN --format json afterwards)"
            .into());
    }
    let m = &a.test;
    if m.rr && a.rounds.until_ci.is_some() {
        return Err("--until-ci repeats cells until their bit rate's interval is narrow enough; \
                    with --rr, give --repeat instead"
            .into());
    }
    // Every flag a matrix does not take stands at its one default (`TestArgs::defaults`).
    let test =
        TestArgs { run: m.run.clone(), rr: m.rr, rr_shape: m.rr_shape, ..TestArgs::defaults()? };
    let base = with_store(client_plan(a.host, &a.net, &test, DEFAULT_TIME)?, &a.store);
    let base = with_gates(base, &a.gates)?;
    let u32_size = |l: Size| match u32::try_from(l.bytes()) {
        Ok(_) => Ok(l),
        Err(_) => Err(format!("--length {} is too large", l.label())),
    };
    let lengths: Result<Vec<AxisValue>, String> =
        a.length.iter().map(|l| Ok(AxisValue::Length(l.map(u32_size).transpose()?))).collect();
    let axes = vec![
        a.parallel.iter().map(|p| AxisValue::Parallel(*p)).collect(),
        a.window.iter().map(|w| AxisValue::Window(*w)).collect(),
        lengths?,
        a.protocol.iter().map(|p| AxisValue::Protocol((*p).into())).collect(),
        a.direction.iter().map(|d| AxisValue::Direction((*d).into())).collect(),
    ];
    let resume = a.rounds.resume.group(MATRIX, a.store.no_store, base.store.path.is_some())?;
    let Rounds { repeat, until_ci, max_repeat, seed } = a.rounds.rounds();
    let plan = MatrixPlan {
        axes,
        repeat,
        until_ci,
        max_repeat,
        seed,
        udp_rate: m.run.bitrate.map_or(DEFAULT_UDP_RATE, |b| b.bits_per_second()),
        length_given: false,
    };
    // Check every cell's test now, so a bad combination fails before the first run.
    for cell in plan.cells() {
        let spec = plan.cell_plan(&base, &cell).spec;
        spec.validate().map_err(|e| format!("cell {}: {e}", cell.label()))?;
    }
    Ok((base, plan, MatrixRun { resume, stop_after: a.rounds.resume.stop_after }))
}

pub(super) fn campaign_run(a: CampaignArgs) -> Result<CampaignRun, String> {
    let text = std::fs::read_to_string(&a.file)
        .map_err(|e| format!("cannot read the campaign file {}: {e}", a.file.display()))?;
    let stem = a.file.file_stem().map_or("campaign".into(), |s| s.to_string_lossy());
    // A fleet tier's `targets` file is found beside the campaign file unless absolute.
    let dir = a.file.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let plan = campaign::parse_with(&text, &a.file.display().to_string(), &stem, &read)
        .map_err(|e| e.to_string())?;
    let store = store_plan(&a.store);
    let resume = a.resume.group(CAMPAIGN, a.store.no_store, store.path.is_some())?;
    Ok(CampaignRun {
        seed: plan.seed.unwrap_or_else(random_seed),
        plan,
        file: a.file,
        resume,
        store,
        db_given: a.store.db,
        output: if a.json { OutputFormat::Json } else { OutputFormat::Text },
        stop_after: a.resume.stop_after,
    })
}
