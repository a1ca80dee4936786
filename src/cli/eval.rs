//! `sarcasmd eval`: MuSAG's per-view figures over a dataset manifest.

use std::path::PathBuf;

use anyhow::Context;

use sarcasmd::tools::eval::EvalOptions;
use sarcasmd::tools::manifest::Manifest;
use sarcasmd::{Config, Engine};

use super::check_outputs::check_outputs;
use super::exit::{self, Coded};
use super::parse::seconds_at_least_zero;

/// Score a labelled manifest with the real pipeline and the served heads; print a
/// MuSAG-style table (every view and combination, with and without context, baselines,
/// confusion, calibration, annotator agreement). Audio goes through VAD and Whisper;
/// gold transcripts only with --gold-text.
#[derive(clap::Args)]
pub(crate) struct Args {
    manifest: PathBuf,
    /// Config for models, heads and thresholds (its source and outputs are ignored).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Heads directory (overrides the config), e.g. heads trained for one protocol.
    #[arg(long)]
    heads: Option<PathBuf>,
    /// Score the gold transcript instead of Whisper's for items with audio.
    #[arg(long)]
    gold_text: bool,
    /// Seconds of preceding context for the context rows; 0 leaves them out.
    #[arg(long, default_value_t = 15.0, value_parser = seconds_at_least_zero)]
    context_s: f32,
    /// Only items of this split (e.g. `test`).
    #[arg(long)]
    split: Option<String>,
    /// Only the first N items (after --split).
    #[arg(long)]
    limit: Option<usize>,
    /// Write the report with every row and every item's scores as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw ROC curves and a reliability diagram of each view and the served
    /// fusion, with the baselines, as SVG here (docs/pictures.md).
    #[arg(long)]
    plot: Option<PathBuf>,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.eval())
    }

    fn eval(self) -> anyhow::Result<i32> {
        check_outputs(
            &[
                ("--json", self.json.as_deref()),
                ("--plot", self.plot.as_deref()),
            ],
            &[
                ("the manifest", Some(&self.manifest)),
                ("--config", self.config.as_deref()),
            ],
        )?;
        let mut cfg = match &self.config {
            Some(p) => Config::load(p).map_err(Coded::bad_input)?,
            None => Config::default(),
        };
        if self.heads.is_some() {
            cfg.fusion.heads_dir = self.heads;
        }
        let manifest = Manifest::load(&self.manifest).map_err(Coded::bad_input)?;
        let with_video = manifest.items.iter().any(|it| it.video.is_some());
        let engine = Engine::load_for_eval(&cfg, with_video).map_err(Coded::models)?;
        let opts = EvalOptions {
            gold_text: self.gold_text,
            context_s: self.context_s,
            split: self.split,
            limit: self.limit,
        };
        let report = sarcasmd::tools::eval::evaluate(&engine, &cfg, &manifest, &opts)?;
        print!("{}", sarcasmd::tools::eval::render(&report));
        if let Some(j) = &self.json {
            std::fs::write(j, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("writing {}", j.display()))?;
        }
        if let Some(p) = &self.plot {
            let pic = sarcasmd::tools::plot::eval::picture_of_report(&report)?;
            sarcasmd::tools::plot::write_svg(p, &sarcasmd::tools::plot::eval::render_svg(&pic)?)?;
        }
        Ok(0)
    }
}
