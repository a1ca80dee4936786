//! Views and fusion: small ONNX heads (trained by `models/train/`) that turn a text
//! embedding and prosody functionals into per-view probabilities, and a late-fusion
//! head that combines them.
//!
//! Every head ships with a metadata record; a head whose `feature_version` differs from
//! what this build computes is refused, so a retrained feature extractor can never be
//! silently paired with a head trained on the old features.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tract_onnx::prelude::*;

use crate::config::FieldError;
use crate::extras::ExtrasHead;
use crate::onnx::{self, InputSpec, OnnxError, Runnable};

/// Feature versions this build produces.
pub const TEXT_FEATURE_VERSION: &str = "usem3-512-v1";
/// Fusion input: `[logit p_text, logit p_audio, logit p_video, has_text, has_video]`,
/// an absent view's logit being 0 with its flag 0.
pub const FUSION_FEATURE_VERSION: &str = "late-logits-masked-v2";

/// Default head directory: the repo's `models/heads` (installed packages put them
/// next to the binary and point `fusion.heads_dir` there).
pub const DEFAULT_HEADS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/heads");
/// Where the Debian package installs the heads.
pub const PACKAGED_HEADS_DIR: &str = "/usr/share/sarcasmd/heads";

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FusionConfig {
    /// `sarcastic` is true when the fused probability reaches this.
    pub threshold: f32,
    /// Directory holding `text_head`, `audio_head` and `fusion_head` (.onnx + .json).
    pub heads_dir: Option<PathBuf>,
}

impl Default for FusionConfig {
    fn default() -> Self {
        Self {
            threshold: 0.5,
            heads_dir: None,
        }
    }
}

impl FusionConfig {
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(FieldError::new("fusion.threshold", "must be within (0, 1)"));
        }
        Ok(())
    }

    pub fn heads_dir(&self) -> PathBuf {
        if let Some(d) = self
            .heads_dir
            .as_ref()
            .filter(|d| !d.as_os_str().is_empty())
        {
            return d.clone();
        }
        if let Some(d) = std::env::var_os("SARCASMD_HEADS_DIR").filter(|v| !v.is_empty()) {
            return PathBuf::from(d);
        }
        // An installed package has no source tree: use the heads it ships.
        let built = PathBuf::from(DEFAULT_HEADS_DIR);
        if !built.is_dir() && std::path::Path::new(PACKAGED_HEADS_DIR).is_dir() {
            return PACKAGED_HEADS_DIR.into();
        }
        built
    }
}

#[derive(Debug, Error)]
pub enum HeadError {
    #[error("{path}: cannot read head metadata: {reason}. Retrain with `models/train/train.sh` or point fusion.heads_dir at a directory with trained heads")]
    Meta { path: PathBuf, reason: String },
    #[error("{path}: head was trained on features `{found}` but this build computes `{expected}`; retrain it (`models/train/train.sh`)")]
    FeatureVersion {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error(
        "{path}: ONNX file does not match its metadata (SHA-256 {found}, metadata says {expected})"
    )]
    Checksum {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error(transparent)]
    Load(#[from] OnnxError),
    #[error("head `{name}` expects {expected} inputs, got {got}")]
    Dim {
        name: String,
        expected: usize,
        got: usize,
    },
    #[error("head `{name}` failed: {reason}")]
    Run { name: String, reason: String },
}

/// The metadata record written next to every trained head.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct HeadMeta {
    pub name: String,
    pub version: String,
    pub feature_version: String,
    pub input_dim: usize,
    pub onnx_sha256: String,
    #[serde(default)]
    pub training: serde_json::Value,
    #[serde(default)]
    pub metrics: serde_json::Value,
}

/// A head's files after every check: metadata parsed (the raw JSON too, for heads with
/// extra metadata), feature version as expected, ONNX bytes matching the checksum.
pub(crate) struct CheckedHead {
    pub meta: HeadMeta,
    pub meta_json: String,
    pub onnx_path: PathBuf,
    pub bytes: Vec<u8>,
}

pub(crate) fn read_checked(
    dir: &Path,
    name: &str,
    expected_feature_version: &str,
) -> Result<CheckedHead, HeadError> {
    let meta_path = dir.join(format!("{name}.json"));
    let onnx_path = dir.join(format!("{name}.onnx"));
    let meta_json = std::fs::read_to_string(&meta_path).map_err(|e| HeadError::Meta {
        path: meta_path.clone(),
        reason: e.to_string(),
    })?;
    let meta: HeadMeta = serde_json::from_str(&meta_json).map_err(|e| HeadError::Meta {
        path: meta_path.clone(),
        reason: e.to_string(),
    })?;
    if meta.feature_version != expected_feature_version {
        return Err(HeadError::FeatureVersion {
            path: meta_path,
            found: meta.feature_version,
            expected: expected_feature_version.into(),
        });
    }
    let bytes = std::fs::read(&onnx_path).map_err(|e| HeadError::Meta {
        path: onnx_path.clone(),
        reason: e.to_string(),
    })?;
    let found = crate::models::sha256_bytes(&bytes);
    if found != meta.onnx_sha256 {
        return Err(HeadError::Checksum {
            path: onnx_path,
            found,
            expected: meta.onnx_sha256,
        });
    }
    Ok(CheckedHead {
        meta,
        meta_json,
        onnx_path,
        bytes,
    })
}

#[derive(Clone)]
pub struct Head {
    pub meta: HeadMeta,
    runnable: Runnable,
}

impl Head {
    /// Load `<dir>/<name>.onnx` after checking `<dir>/<name>.json`.
    pub fn load(dir: &Path, name: &str, expected_feature_version: &str) -> Result<Self, HeadError> {
        let checked = read_checked(dir, name, expected_feature_version)?;
        let runnable = onnx::load_bytes(
            &checked.onnx_path.display().to_string(),
            &checked.bytes,
            &[InputSpec::f32(&[Some(1), Some(checked.meta.input_dim)])],
        )?;
        Ok(Self {
            meta: checked.meta,
            runnable,
        })
    }

    /// Probability of the sarcastic class.
    pub fn predict(&self, x: &[f32]) -> Result<f32, HeadError> {
        if x.len() != self.meta.input_dim {
            return Err(HeadError::Dim {
                name: self.meta.name.clone(),
                expected: self.meta.input_dim,
                got: x.len(),
            });
        }
        let err = |e: TractError| HeadError::Run {
            name: self.meta.name.clone(),
            reason: format!("{e:#}"),
        };
        let t = Tensor::from_shape(&[1, x.len()], x).map_err(err)?;
        let out = self.runnable.run(tvec![t.into()]).map_err(err)?;
        let p = onnx::output_f32(&out[0]).map_err(err)?;
        let p = *p.last().ok_or_else(|| HeadError::Run {
            name: self.meta.name.clone(),
            reason: "empty output".into(),
        })?;
        if !p.is_finite() {
            return Err(HeadError::Run {
                name: self.meta.name.clone(),
                reason: format!("non-finite output {p}"),
            });
        }
        Ok(p.clamp(0.0, 1.0))
    }

    /// `name@version`, for the event's `models` field.
    pub fn label(&self) -> String {
        format!("{}@{}", self.meta.name, self.meta.version)
    }
}

/// The heads, loaded once.
#[derive(Clone)]
pub struct Fusion {
    pub text: Option<Head>,
    pub audio: Head,
    /// Loaded when a frame source is configured.
    pub video: Option<Head>,
    pub fused: Head,
    /// MUStARD++ extras (emotions, sarcasm type, valence, arousal) from the text
    /// embedding: loaded with the text view when `extras_head.*` exist in the heads dir.
    pub extras: Option<ExtrasHead>,
    pub threshold: f32,
}

fn logit(p: f32) -> f32 {
    let p = p.clamp(1e-4, 1.0 - 1e-4);
    (p / (1.0 - p)).ln()
}

impl Fusion {
    pub fn load(cfg: &FusionConfig, with_text: bool, with_video: bool) -> Result<Self, HeadError> {
        let dir = cfg.heads_dir();
        let text = if with_text {
            Some(Head::load(&dir, "text_head", TEXT_FEATURE_VERSION)?)
        } else {
            None
        };
        let audio = Head::load(&dir, "audio_head", crate::prosody::PROSODY_FEATURE_VERSION)?;
        let video = if with_video {
            Some(Head::load(
                &dir,
                "video_head",
                crate::vision::VISION_FEATURE_VERSION,
            )?)
        } else {
            None
        };
        let fused = Head::load(&dir, "fusion_head", FUSION_FEATURE_VERSION)?;
        let extras = if with_text {
            ExtrasHead::load_if_present(&dir)?
        } else {
            None
        };
        Ok(Self {
            text,
            audio,
            video,
            fused,
            extras,
            threshold: cfg.threshold,
        })
    }

    /// Late fusion over the views that are present. The fused head was trained with
    /// views masked out (logit 0, flag 0), so any two or three views go through it; a
    /// single view's score is passed through unchanged, and an absent view is never
    /// given a made-up score.
    pub fn fuse(
        &self,
        p_text: Option<f32>,
        p_audio: Option<f32>,
        p_video: Option<f32>,
    ) -> Result<Option<f32>, HeadError> {
        let present = [p_text, p_audio, p_video];
        match present.iter().flatten().count() {
            0 => return Ok(None),
            1 => return Ok(present.into_iter().flatten().next()),
            _ => {}
        }
        let l = |p: Option<f32>| p.map_or(0.0, logit);
        let flag = |p: Option<f32>| if p.is_some() { 1.0 } else { 0.0 };
        let x = [
            l(p_text),
            l(p_audio),
            l(p_video),
            flag(p_text),
            flag(p_video),
        ];
        self.fused.predict(&x).map(Some)
    }
}
