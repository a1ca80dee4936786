//! `sarcasmd features` and `sarcasmd embed`: what models/recipe/ learns from, computed by
//! the daemon's own code path.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use sarcasmd::common::models::{self, ModelStore};
use sarcasmd::config::Config;
use sarcasmd::daemon::DaemonError;
use sarcasmd::pipeline::{self, Engine, RunOptions};
use sarcasmd::sinks::event::VecSink;
use sarcasmd::sources::audio::WavSource;
use sarcasmd::sources::video::{FileVideoOptions, FileVideoSource, FrameSource};
use sarcasmd::tools::manifest::Manifest;

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

/// Features for training come from `run_stream`, i.e. exactly the live code path.
pub(crate) fn features(manifest: &Path, out: &Path, config: Option<&Path>) -> anyhow::Result<i32> {
    let cfg = match config {
        Some(p) => Config::load(p).map_err(DaemonError::from)?,
        None => Config::default(),
    };
    let items = Manifest::load(manifest).map_err(DaemonError::from)?.items;
    let with_video = items.iter().any(|it| it.video.is_some());
    let engine = Engine::load_for_features(&cfg, with_video).map_err(DaemonError::from)?;
    let mut w = BufWriter::new(std::fs::File::create(out)?);
    let opts = RunOptions {
        with_features: true,
        ..Default::default()
    };
    for (k, it) in items.iter().enumerate() {
        let Some(audio) = &it.audio else { continue };
        let src = match WavSource::open(audio) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("{}: skipped: {e}", it.id);
                continue;
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
        pipeline::run_stream_av(&engine, &cfg, Box::new(src), frames, &mut sink, &opts)
            .with_context(|| format!("item {}", it.id))?;
        let utterances = sink
            .0
            .into_iter()
            .map(|e| {
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
            })
            .collect();
        serde_json::to_writer(
            &mut w,
            &FeatureLine {
                id: &it.id,
                audio_s,
                utterances,
            },
        )?;
        w.write_all(b"\n")?;
        if (k + 1) % 20 == 0 {
            log::info!("features: {}/{}", k + 1, items.len());
        }
    }
    w.flush()?;
    Ok(0)
}

pub(crate) fn embed(input: &Path, out: &Path, context_s: f32) -> anyhow::Result<i32> {
    let cfg = Config::default();
    let store = ModelStore::new(models::model_dir(cfg.models.dir.as_deref()), true)?;
    let (enc, _) = sarcasmd::views::text::TextEncoder::from_store(&store, &cfg.text)
        .map_err(|e| DaemonError::Engine(e.into()))?;
    let items = Manifest::load(input).map_err(DaemonError::from)?.items;
    let mut w = BufWriter::new(std::fs::File::create(out)?);
    for (k, it) in items.iter().enumerate() {
        let text = it.text.as_deref().unwrap_or("");
        let e = if context_s > 0.0 {
            enc.embed(&sarcasmd::tools::eval::text_with_context(
                it, text, context_s,
            ))?
        } else {
            enc.embed(text)?
        };
        serde_json::to_writer(&mut w, &serde_json::json!({"id": it.id, "embedding": e}))?;
        w.write_all(b"\n")?;
        if (k + 1) % 2000 == 0 {
            log::info!("embed: {}/{}", k + 1, items.len());
        }
    }
    w.flush()?;
    Ok(0)
}
