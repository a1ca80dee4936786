//! The run summary that `run` and `replay` log at the end and write with `--stats`.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use sarcasmd::common::resources;
use sarcasmd::pipeline::RunStats;

#[derive(Serialize)]
struct Summary<'a> {
    #[serde(flatten)]
    run: &'a RunStats,
    /// CPU seconds (all threads) spent on the stream, model loading excluded.
    cpu_s: f64,
    /// CPU seconds per audio second; null when less than a second of audio was read (a
    /// stop during model load, a few bytes on stdin), where the ratio means nothing.
    rtf_cpu: Option<f64>,
    /// Wall seconds per audio second; null as `rtf_cpu`.
    rtf_wall: Option<f64>,
    peak_rss_mb: f64,
    model_load_ms: f64,
}

pub(crate) fn report_with_cpu(
    stats: &RunStats,
    path: Option<&Path>,
    cpu_s: f64,
    model_load_ms: f64,
) -> anyhow::Result<()> {
    let per_audio_s = |x: f64| resources::per_audio_second(x, stats.audio_s);
    let s = Summary {
        run: stats,
        cpu_s,
        rtf_cpu: per_audio_s(cpu_s),
        rtf_wall: per_audio_s(stats.wall_s),
        peak_rss_mb: resources::peak_rss_mb(),
        model_load_ms,
    };
    log::info!(
        "{:.1} s audio in {:.2} s wall ({}), {} utterances, {} events, drops {:?}, peak RSS {:.0} MB",
        stats.audio_s,
        stats.wall_s,
        s.rtf_cpu.map_or_else(
            || if stats.audio_s > 0.0 {
                "under 1 s of audio: no ratio".to_string()
            } else {
                "no audio read".to_string()
            },
            |r| format!("{r:.3} CPU-s per audio-s")
        ),
        stats.count("utterances"),
        stats.count("events"),
        stats.dropped,
        s.peak_rss_mb
    );
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_vec_pretty(&s)?)
            .with_context(|| format!("writing stats to {}", p.display()))?;
    }
    Ok(())
}
