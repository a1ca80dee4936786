//! `sarcasmd eval`: MuSAG's per-view figures over a dataset manifest.

use std::path::{Path, PathBuf};

use anyhow::Context;

use sarcasmd::daemon::DaemonError;
use sarcasmd::tools::eval::EvalOptions;
use sarcasmd::tools::manifest::Manifest;
use sarcasmd::{Config, Engine};

/// Where the report goes besides the terminal.
pub(crate) struct EvalOutputs<'a> {
    pub json: Option<&'a Path>,
    pub plot: Option<&'a Path>,
}

pub(crate) fn eval(
    manifest: &Path,
    config: Option<&Path>,
    heads: Option<PathBuf>,
    opts: EvalOptions,
    outputs: EvalOutputs,
) -> anyhow::Result<i32> {
    super::check_outputs(
        &[("--json", outputs.json), ("--plot", outputs.plot)],
        &[("the manifest", Some(manifest)), ("--config", config)],
    )?;
    let mut cfg = match config {
        Some(p) => Config::load(p).map_err(DaemonError::from)?,
        None => Config::default(),
    };
    if heads.is_some() {
        cfg.fusion.heads_dir = heads;
    }
    let manifest = Manifest::load(manifest).map_err(DaemonError::from)?;
    let with_video = manifest.items.iter().any(|it| it.video.is_some());
    let engine = Engine::load_for_eval(&cfg, with_video).map_err(DaemonError::from)?;
    let report = sarcasmd::tools::eval::evaluate(&engine, &cfg, &manifest, &opts)?;
    print!("{}", sarcasmd::tools::eval::render(&report));
    if let Some(j) = outputs.json {
        std::fs::write(j, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", j.display()))?;
    }
    if let Some(p) = outputs.plot {
        let pic = sarcasmd::tools::plot::eval::picture_of_report(&report)?;
        sarcasmd::tools::plot::write_svg(p, &sarcasmd::tools::plot::eval::render_svg(&pic)?)?;
    }
    Ok(0)
}
