//! `sarcasmd bench`: the whole pipeline over recordings replayed in real time
//! (the measuring is `sarcasmd::tools::bench`; this is its command: config, outputs, files).

use std::path::{Path, PathBuf};

use anyhow::Context;

use sarcasmd::config::Config;
use sarcasmd::pipeline::Engine;
use sarcasmd::tools::bench::{BenchOptions, BenchReport};

use super::check_outputs::check_outputs;
use super::exit::{self, Coded};

/// Latency, CPU and memory of the whole pipeline: replay recordings in real time
/// (streaming, then one-shot decoding as the baseline) and print a table; JSON with
/// every run goes to --json. INPUT: a folder of .wav (a .txt beside each gives the
/// reference transcript for word error rates), one .wav, or a manifest.
#[derive(clap::Args)]
pub(crate) struct Args {
    input: PathBuf,
    /// Config (board profile) to bench; its source and outputs are ignored.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Repetitions of each mode (figures are medians).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Silence after each clip, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    gap_ms: u32,
    /// Only the first N clips.
    #[arg(long)]
    limit: Option<usize>,
    /// Skip the one-shot baseline.
    #[arg(long)]
    no_baseline: bool,
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the latency CDF per mode (p50/p95 marked) and the per-stage medians,
    /// stacked, as SVG here (docs/pictures.md).
    #[arg(long)]
    plot: Option<PathBuf>,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.bench())
    }

    fn bench(self) -> anyhow::Result<i32> {
        check_outputs(
            &[
                ("--json", self.json.as_deref()),
                ("--plot", self.plot.as_deref()),
            ],
            &[
                ("the input", Some(&self.input)),
                ("--config", self.config.as_deref()),
            ],
        )?;
        let mut cfg = match &self.config {
            Some(p) => Config::load(p).map_err(Coded::bad_input)?,
            None => Config::default(),
        };
        // Events stay in memory: outputs would add their own costs to the figures.
        cfg.output = Default::default();
        let engine = Engine::load(&cfg).map_err(Coded::models)?;
        let clips = sarcasmd::tools::bench::load_clips(&self.input, self.limit)?;
        let name = self
            .config
            .as_deref()
            .map_or("defaults".to_string(), |p| p.display().to_string());
        let opts = BenchOptions {
            runs: self.runs.max(1),
            gap_ms: self.gap_ms,
            baseline: !self.no_baseline,
        };
        let report = sarcasmd::tools::bench::run(&engine, &cfg, &name, &self.input, clips, &opts)?;
        print!("{}", sarcasmd::tools::bench::table(&report));
        if let Some(j) = &self.json {
            std::fs::write(j, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("writing {}", j.display()))?;
        }
        if let Some(p) = &self.plot {
            plot(&report, p)?;
        }
        Ok(0)
    }
}

/// The latency CDFs and stage stacks of this run.
fn plot(report: &BenchReport, path: &Path) -> anyhow::Result<()> {
    let series = sarcasmd::tools::plot::bench::series_of_report(report)?;
    let title = format!(
        "sarcasmd bench: {} clips, {:.0} s, {}; {}",
        report.clips, report.audio_s, report.config, report.cpu.model
    );
    sarcasmd::tools::plot::write_svg(
        path,
        &sarcasmd::tools::plot::bench::render_svg(&series, &title)?,
    )?;
    Ok(())
}
