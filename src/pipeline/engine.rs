//! The models every stream shares, loaded once: a daemon reload builds a new `Engine`
//! only when a model setting changed, and each stream keeps its own decoder state (as
//! tract splits a model from its per-stream state).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;

use crate::common::models::{ModelError, ModelStore};
use crate::config::Config;
use crate::views::asr::{AsrError, AsrModel};
use crate::views::fusion::{Fusion, HeadError, Pinning};
use crate::views::prosody;
use crate::views::text::{self, TextEncoder, TextError};
use crate::views::vad::{VadError, VadModel};
use crate::views::vision::{VisionError, VisionModels};

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Asr(#[from] AsrError),
    #[error(transparent)]
    Vad(#[from] VadError),
    #[error(transparent)]
    Text(#[from] TextError),
    #[error(transparent)]
    Head(#[from] HeadError),
    #[error(transparent)]
    Vision(#[from] VisionError),
}

/// Everything loaded once and shared by all streams.
pub struct Engine {
    pub vad: VadModel,
    pub asr: Arc<AsrModel>,
    /// `asr.fallback_model`, for load shedding.
    pub asr_fallback: Option<Arc<AsrModel>>,
    pub text: Option<TextEncoder>,
    /// `None` only for feature extraction (`sarcasmd features`), which runs before any
    /// head exists; the daemon always loads heads.
    pub fusion: Option<Fusion>,
    /// Loaded when a frame source is configured (and for feature extraction).
    pub vision: Option<VisionModels>,
    pub models: BTreeMap<String, String>,
    pub load_ms: f64,
}

/// The model-store names [`Engine::load`] gets for this config (checked by `preflight`
/// without loading them).
pub fn required_models(cfg: &Config, with_vision: bool) -> Vec<String> {
    let mut names = vec!["silero-vad".to_string(), cfg.asr.store_name()];
    names.extend(cfg.asr.fallback_store_name());
    if cfg.text.enabled {
        names.extend([
            text::ENCODER_MODEL.to_string(),
            text::TOKENIZER_MODEL.to_string(),
        ]);
    }
    if with_vision {
        names.extend(
            [
                crate::views::vision::DETECTOR_MODEL,
                crate::views::vision::LANDMARK_MODEL,
                crate::views::vision::EXPRESSION_MODEL,
            ]
            .map(String::from),
        );
    }
    names
}

impl Engine {
    pub fn load(cfg: &Config) -> Result<Self, EngineError> {
        Self::load_inner(cfg, Some(Pinning::Required), cfg.vision.enabled())
    }

    /// Models without the trained heads: for computing training features. The vision
    /// models load when `with_vision` (a manifest with video).
    pub fn load_for_features(cfg: &Config, with_vision: bool) -> Result<Self, EngineError> {
        Self::load_inner(cfg, None, with_vision)
    }

    /// Heads as the daemon serves them, plus the vision models when `with_vision` (a
    /// manifest with video), whatever the config says about the camera: `sarcasmd eval`.
    /// Heads need not be pinned (a head just trained is measured before it is shipped);
    /// an unpinned one is named in a warning.
    pub fn load_for_eval(cfg: &Config, with_vision: bool) -> Result<Self, EngineError> {
        Self::load_inner(cfg, Some(Pinning::WarnOnly), with_vision)
    }

    // Keep in step with `required_models`, which preflight checks. `heads`: load the
    // heads, pinned or not.
    fn load_inner(
        cfg: &Config,
        heads: Option<Pinning>,
        with_vision: bool,
    ) -> Result<Self, EngineError> {
        let t0 = Instant::now();
        let store = ModelStore::new(
            crate::common::models::model_dir(cfg.models.dir.as_deref()),
            !cfg.models.skip_checksums,
        )?;
        let short = |sha: &str| sha.chars().take(12).collect::<String>();
        let mut models = BTreeMap::new();

        let vad_file = store.get("silero-vad")?;
        let vad = VadModel::load(&vad_file.path)?;
        models.insert(
            "vad".into(),
            format!("silero-vad@{}", short(&vad_file.sha256)),
        );

        let asr_file = store.get(&cfg.asr.store_name())?;
        let asr = Arc::new(AsrModel::load(&asr_file.path)?);
        models.insert(
            "asr".into(),
            format!("{}@{}", asr_file.name, short(&asr_file.sha256)),
        );

        let asr_fallback = match cfg.asr.fallback_store_name() {
            Some(name) => {
                let f = store.get(&name)?;
                models.insert(
                    "asr_fallback".into(),
                    format!("{}@{}", f.name, short(&f.sha256)),
                );
                Some(Arc::new(AsrModel::load(&f.path)?))
            }
            None => None,
        };

        let text = if cfg.text.enabled {
            let (encoder, label) = TextEncoder::from_store(&store, &cfg.text)?;
            models.insert("text_encoder".into(), label);
            Some(encoder)
        } else {
            None
        };
        let vision = if with_vision {
            let v = VisionModels::load(&store)?;
            for (k, name) in [
                ("face_detector", crate::views::vision::DETECTOR_MODEL),
                ("face_landmarks", crate::views::vision::LANDMARK_MODEL),
                ("expression", crate::views::vision::EXPRESSION_MODEL),
            ] {
                let f = store.get(name)?;
                models.insert(k.into(), format!("{name}@{}", short(&f.sha256)));
            }
            Some(v)
        } else {
            None
        };
        let fusion = if let Some(pinning) = heads {
            let f = Fusion::load_with(&cfg.fusion, cfg.text.enabled, with_vision, pinning)?;
            if let Some(h) = &f.text {
                models.insert("text_head".into(), h.label());
            }
            models.insert("audio_head".into(), f.audio.label());
            if let Some(h) = &f.video {
                models.insert("video_head".into(), h.label());
            }
            models.insert("fusion_head".into(), f.fused.label());
            let w = f.weighted;
            if w != crate::views::fusion::WeightedViews::ALL {
                log::info!(
                    "fusion: p_sarcastic weighs {} only; the other views are scored and \
                     reported in `views` but did not raise the cross-corpus figure \
                     (models/studies/cross_corpus/CROSS_CORPUS.md)",
                    w.names().join(" + ")
                );
            }
            if f.text.is_none() && !w.audio && !(w.video && f.video.is_some()) {
                log::warn!(
                    "fusion: the text view is off ([text] enabled = false) and p_sarcastic \
                     weighs only {}: events will carry the views but no fused score",
                    w.names().join(" + ")
                );
            }
            if let Some((name, op)) = &f.operating_point {
                log::info!(
                    "fusion: operating point `{name}` ({}): flag from p_sarcastic {:.3} (text view {:.3})",
                    op.budget,
                    f.threshold,
                    op.text_threshold
                );
            } else if (f.threshold - cfg.fusion.threshold).abs() > 1e-6 {
                log::info!(
                    "fusion: prior {} moves the threshold from {} to {:.3}",
                    cfg.fusion.prior,
                    cfg.fusion.threshold,
                    f.threshold
                );
            }
            if let Some(h) = &f.extras {
                models.insert("extras_head".into(), h.label());
            }
            Some(f)
        } else {
            None
        };
        models.insert("prosody".into(), prosody::PROSODY_FEATURE_VERSION.into());
        Ok(Self {
            vad,
            asr,
            asr_fallback,
            text,
            fusion,
            vision,
            models,
            load_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }
}
