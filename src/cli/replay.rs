//! `sarcasmd replay`: the daemon's pipeline over a WAV file or raw PCM on stdin, with a
//! config's models, segmentation and outputs (its source is the input).

use std::path::PathBuf;

use sarcasmd::config::replay::ReplayOverrides;
use sarcasmd::config::Config;
use sarcasmd::daemon::builder::Daemon;
use sarcasmd::sources::video::{FileVideoSource, VideoError};

use super::exit::Coded;

/// Run the same pipeline over a WAV file, or raw s16le mono PCM on stdin (`-`).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// WAV file, or `-` for raw PCM on stdin.
    input: String,
    /// Deliver audio at real-time pace, like a microphone.
    #[arg(long)]
    realtime: bool,
    /// Sample rate of raw PCM on stdin.
    #[arg(long, default_value_t = 16_000)]
    rate: u32,
    /// Config file for models, segmentation and outputs (its source is ignored).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where events go (`-` = stdout); overrides the config.
    #[arg(long)]
    events: Option<String>,
    /// Write a JSON run summary (per-stage times, real-time factor, peak RSS) here.
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Whisper model (tiny.en, tiny.en-q8_0, base, base-q8_0); overrides the config.
    #[arg(long)]
    model: Option<String>,
    /// en, de or auto; overrides the config.
    #[arg(long)]
    language: Option<String>,
    /// Raw PCM on stdin comes from a live capture (`arecord ... |`): never block it;
    /// when the pipeline falls behind, drop and count instead of waiting.
    #[arg(long)]
    live: bool,
    /// A video file recorded with the audio (same start): adds the vision view.
    #[arg(long)]
    video: Option<PathBuf>,
}

/// A video file named on the command line that cannot be read: bad input, as an
/// unreadable audio file is, rather than an audio-only run.
#[derive(Debug, thiserror::Error)]
#[error("--video needs a video file ffmpeg can read, recorded with the audio (same start)")]
struct VideoFile(#[source] VideoError);

impl Args {
    pub(crate) fn run(self) -> i32 {
        super::run::daemon_status(self.replay())
    }

    fn replay(self) -> anyhow::Result<i32> {
        let cfg = match &self.config {
            Some(p) => Config::load(p).map_err(Coded::bad_input)?,
            None => Config::default(),
        };
        if let Some(path) = &self.video {
            // A file the user named must be readable: check it before models load
            // (the daemon would otherwise warn and run audio-only).
            FileVideoSource::probe(path).map_err(|e| Coded::bad_input(VideoFile(e)))?;
        }
        let origin = self
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from("<command line>"));
        let cfg = cfg
            .with_replay_overrides(
                ReplayOverrides {
                    input: self.input,
                    realtime: self.realtime,
                    rate_hz: self.rate,
                    live: self.live,
                    events: self.events,
                    model: self.model,
                    language: self.language,
                    video: self.video,
                },
                &origin,
            )
            .map_err(Coded::bad_input)?;
        let stop = super::signals::install_stop_handler()?;
        let r = Daemon::builder(cfg).stop_on(stop).run()?;
        super::summary::report_with_cpu(
            &r.stats,
            self.stats.as_deref(),
            r.stream_cpu_s,
            r.model_load_ms,
        )?;
        Ok(0)
    }
}
