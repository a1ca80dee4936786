//! `sarcasmd bench`: the whole pipeline over recordings replayed in real time
//! (the measuring is `sarcasmd::tools::bench`; this is its command: config, outputs, files).

use std::path::Path;

use anyhow::Context;

use sarcasmd::config::Config;
use sarcasmd::daemon::DaemonError;
use sarcasmd::pipeline::Engine;

/// Files `sarcasmd bench` writes besides its table.
pub(crate) struct BenchOutputs<'a> {
    pub(crate) json: Option<&'a Path>,
    pub(crate) plot: Option<&'a Path>,
}

pub(crate) fn bench(
    input: &Path,
    config: Option<&Path>,
    runs: usize,
    gap_ms: u32,
    limit: Option<usize>,
    baseline: bool,
    out: BenchOutputs,
) -> anyhow::Result<i32> {
    let mut cfg = match config {
        Some(p) => Config::load(p).map_err(DaemonError::from)?,
        None => Config::default(),
    };
    // Events stay in memory: outputs would add their own costs to the figures.
    cfg.output = Default::default();
    let engine = Engine::load(&cfg).map_err(DaemonError::from)?;
    let clips = sarcasmd::tools::bench::load_clips(input, limit)?;
    let name = config.map_or("defaults".to_string(), |p| p.display().to_string());
    let opts = sarcasmd::tools::bench::BenchOptions {
        runs: runs.max(1),
        gap_ms,
        baseline,
    };
    let report = sarcasmd::tools::bench::run(&engine, &cfg, &name, input, clips, &opts)?;
    print!("{}", sarcasmd::tools::bench::table(&report));
    if let Some(j) = out.json {
        std::fs::write(j, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", j.display()))?;
    }
    if let Some(p) = out.plot {
        let series = sarcasmd::tools::plot::bench::series_of_report(&report)?;
        let title = format!(
            "sarcasmd bench: {} clips, {:.0} s, {}; {}",
            report.clips, report.audio_s, report.config, report.cpu.model
        );
        sarcasmd::tools::plot::write_svg(
            p,
            &sarcasmd::tools::plot::bench::render_svg(&series, &title)?,
        )?;
    }
    Ok(0)
}
