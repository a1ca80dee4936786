//! `sarcasmd features`: per-utterance feature vectors of a manifest's audio, computed by
//! the daemon's own code path (what `models/recipe/` learns from).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use sarcasmd::config::Config;
use sarcasmd::pipeline::{self, Engine, RunOptions};
use sarcasmd::sinks::event::{UtteranceEvent, VecSink};
use sarcasmd::sources::audio::WavSource;
use sarcasmd::sources::video::{FileVideoOptions, FileVideoSource, FrameSource};
use sarcasmd::tools::manifest::{Manifest, ManifestItem};

use super::check_outputs::check_outputs;
use super::exit::{self, Coded};

/// Per-utterance feature vectors of audio clips, computed by the live pipeline, for
/// training. MANIFEST is JSON lines (docs/manifest.md); items without audio are skipped.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[arg(long)]
    manifest: PathBuf,
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Serialize)]
struct FeatureLine<'a> {
    id: &'a str,
    audio_s: f64,
    utterances: Vec<FeatureUtt>,
}

#[derive(Serialize)]
struct FeatureUtt {
    start_s: f64,
    end_s: f64,
    transcript: String,
    p_text: Option<f32>,
    p_audio: Option<f32>,
    prosody: Vec<f32>,
    text_embedding: Option<Vec<f32>>,
    /// Vision functionals when the item has video and a face was seen.
    vision: Option<Vec<f32>>,
}

impl From<UtteranceEvent> for FeatureUtt {
    fn from(e: UtteranceEvent) -> Self {
        let f = e
            .features
            .unwrap_or_else(|| unreachable!("with_features set"));
        FeatureUtt {
            start_s: e.start_s,
            end_s: e.end_s,
            transcript: e.transcript.unwrap_or_default(),
            p_text: e.views.text,
            p_audio: e.views.audio,
            prosody: f.prosody,
            text_embedding: f.text_embedding,
            vision: f.vision,
        }
    }
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.features())
    }

    /// Features for training come from `run_stream`, i.e. exactly the live code path.
    fn features(self) -> anyhow::Result<i32> {
        check_outputs(
            &[("--out", Some(&self.out))],
            &[
                ("--manifest", Some(&self.manifest)),
                ("--config", self.config.as_deref()),
            ],
        )?;
        let cfg = match &self.config {
            Some(p) => Config::load(p).map_err(Coded::bad_input)?,
            None => Config::default(),
        };
        let items = Manifest::load(&self.manifest)
            .map_err(Coded::bad_input)?
            .items;
        let with_video = items.iter().any(|it| it.video.is_some());
        let engine = Engine::load_for_features(&cfg, with_video).map_err(Coded::models)?;
        let mut w = BufWriter::new(std::fs::File::create(&self.out)?);
        // One set of options (and counters) for every item, as one stream of runs.
        let opts = RunOptions {
            with_features: true,
            ..Default::default()
        };
        for (k, it) in items.iter().enumerate() {
            let Some(audio) = &it.audio else { continue };
            if let Some(line) = item_features(&engine, &cfg, &opts, it, audio)? {
                serde_json::to_writer(&mut w, &line)?;
                w.write_all(b"\n")?;
            }
            if (k + 1) % 20 == 0 {
                log::info!("features: {}/{}", k + 1, items.len());
            }
        }
        w.flush()?;
        Ok(0)
    }
}

/// One item's line; `None` when its audio cannot be read (logged, skipped).
fn item_features<'a>(
    engine: &Engine,
    cfg: &Config,
    opts: &RunOptions,
    it: &'a ManifestItem,
    audio: &Path,
) -> anyhow::Result<Option<FeatureLine<'a>>> {
    let src = match WavSource::open(audio) {
        Ok(s) => s,
        Err(e) => {
            log::warn!("{}: skipped: {e}", it.id);
            return Ok(None);
        }
    };
    let audio_s = src.info().duration_s();
    // The item's video starts with its audio; frames take the camera's path.
    let frames = match &it.video {
        Some(v) => match FileVideoSource::open(v, FileVideoOptions::default()) {
            Ok(f) => Some(Box::new(f) as Box<dyn FrameSource>),
            Err(e) => {
                log::warn!("{}: video skipped: {e}", it.id);
                None
            }
        },
        None => None,
    };
    let mut sink = VecSink::default();
    pipeline::run_stream_av(engine, cfg, Box::new(src), frames, &mut sink, opts)
        .with_context(|| format!("item {}", it.id))?;
    Ok(Some(FeatureLine {
        id: &it.id,
        audio_s,
        utterances: sink.0.into_iter().map(FeatureUtt::from).collect(),
    }))
}
