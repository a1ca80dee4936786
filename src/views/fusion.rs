//! Views and fusion: small ONNX heads (trained by `models/recipe/`) that turn a text
//! embedding and prosody functionals into per-view probabilities, and a late-fusion
//! head that combines them.
//!
//! Every head ships with a metadata record; a head whose `feature_version` differs from
//! what this build computes is refused, so a retrained feature extractor can never be
//! silently paired with a head trained on the old features.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::common::validate::{Problems, Validate};
use crate::views::extras::ExtrasHead;
pub use crate::views::heads::{
    Head, HeadError, HeadMeta, OperatingPoint, Pinning, DEFAULT_HEADS_DIR, PACKAGED_HEADS_DIR,
    TEXT_FEATURE_VERSION,
};

/// Fusion input: `[logit p_text, logit p_audio, logit p_video, has_text, has_video]`,
/// an absent view's logit being 0 with its flag 0.
pub const FUSION_FEATURE_VERSION: &str = "late-logits-masked-v2";

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FusionConfig {
    /// Decision threshold on `p_sarcastic` at a balanced prior (the heads are calibrated
    /// with both classes weighted equally).
    pub threshold: f32,
    /// The room's expected share of sarcastic utterances. It moves the decision
    /// threshold in log-odds (`logit(t') = logit(threshold) - logit(prior)`), not the
    /// probability: 0.5 (the default) leaves `threshold` as it is; a meeting room that
    /// expects one sarcastic line in ten sets 0.1, so only confident scores are flagged.
    pub prior: f32,
    /// Directory holding `text_head`, `audio_head` and `fusion_head` (.onnx + .json).
    pub heads_dir: Option<PathBuf>,
    /// A named operating point of the text head (`meeting`, `meeting_strict`): the
    /// threshold comes from a false-flag budget measured on held-out meetings, not from
    /// `threshold` and `prior` (which must then stay at their balanced defaults).
    pub operating_point: Option<String>,
}

impl Default for FusionConfig {
    fn default() -> Self {
        Self {
            threshold: 0.5,
            prior: 0.5,
            heads_dir: None,
            operating_point: None,
        }
    }
}

impl FusionConfig {
    /// The threshold on `p_sarcastic` that `sarcastic` uses: `threshold` moved by the
    /// room's prior in log-odds.
    pub fn effective_threshold(&self) -> f32 {
        let t = logit(self.threshold) - logit(self.prior);
        1.0 / (1.0 + (-t).exp())
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

impl Validate for FusionConfig {
    fn check(&self, problems: &mut Problems) {
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            problems.push("fusion.threshold", "must be within (0, 1)");
        }
        if !(self.prior >= 0.01 && self.prior <= 0.99) {
            problems.push(
                "fusion.prior",
                "must be within [0.01, 0.99]: the expected share of sarcastic utterances (0.5 = balanced)",
            );
        }
        if let Some(op) = &self.operating_point {
            if op.trim().is_empty() {
                problems.push(
                    "fusion.operating_point",
                    "is empty: name one of the text head's operating points (e.g. \"meeting\") or leave it out",
                );
            } else if self.threshold != 0.5 || self.prior != 0.5 {
                problems.push(
                    "fusion.operating_point",
                    "sets the threshold itself: leave fusion.threshold and fusion.prior at their defaults (0.5) with it",
                );
            }
        }
    }
}

/// Which views may move the fused score (see [`HeadMeta::weighted_views`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightedViews {
    pub text: bool,
    pub audio: bool,
    pub video: bool,
}

impl WeightedViews {
    pub const ALL: Self = Self {
        text: true,
        audio: true,
        video: true,
    };

    fn from_meta(meta: &HeadMeta, path: &Path) -> Result<Self, HeadError> {
        let Some(names) = &meta.weighted_views else {
            return Ok(Self::ALL);
        };
        let mut w = Self {
            text: false,
            audio: false,
            video: false,
        };
        for n in names {
            match n.as_str() {
                "text" => w.text = true,
                "audio" => w.audio = true,
                "video" => w.video = true,
                other => {
                    return Err(HeadError::Meta {
                        path: path.to_path_buf(),
                        source: format!(
                            "weighted_views names `{other}`; the views are text, audio and video"
                        )
                        .into(),
                    })
                }
            }
        }
        Ok(w)
    }

    /// The view names, for logs and the startup summary.
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.text, "text"),
            (self.audio, "audio"),
            (self.video, "video"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect()
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
    /// The views `p_sarcastic` may depend on (the fusion head's `weighted_views`).
    pub weighted: WeightedViews,
    /// MUStARD++ extras (emotions, sarcasm type, valence, arousal) from the text
    /// embedding: loaded with the text view when `extras_head.*` exist in the heads dir.
    pub extras: Option<ExtrasHead>,
    /// The decision threshold in force on `p_sarcastic`: `fusion.threshold` moved by
    /// `fusion.prior`, or the fused score at the named operating point's text threshold.
    pub threshold: f32,
    /// The operating point in force, when the config names one.
    pub operating_point: Option<(String, OperatingPoint)>,
}

/// Log-odds of `p`, clamped away from 0 and 1 (the fusion head's and the room head's).
pub(crate) fn logit(p: f32) -> f32 {
    let p = p.clamp(1e-4, 1.0 - 1e-4);
    (p / (1.0 - p)).ln()
}

impl Fusion {
    /// The heads the daemon serves: each must be pinned in this binary.
    pub fn load(cfg: &FusionConfig, with_text: bool, with_video: bool) -> Result<Self, HeadError> {
        Self::load_with(cfg, with_text, with_video, Pinning::Required)
    }

    /// [`Fusion::load`] with a choice about pinning (`eval` of heads just trained).
    pub fn load_with(
        cfg: &FusionConfig,
        with_text: bool,
        with_video: bool,
        pinning: Pinning,
    ) -> Result<Self, HeadError> {
        let dir = cfg.heads_dir();
        let load = |name: &str, version: &str| Head::load_with(&dir, name, version, pinning);
        let text = if with_text {
            Some(load("text_head", TEXT_FEATURE_VERSION)?)
        } else {
            None
        };
        let audio = load("audio_head", crate::views::prosody::PROSODY_FEATURE_VERSION)?;
        let video = if with_video {
            Some(load(
                "video_head",
                crate::views::vision::VISION_FEATURE_VERSION,
            )?)
        } else {
            None
        };
        let fused = load("fusion_head", FUSION_FEATURE_VERSION)?;
        let weighted = WeightedViews::from_meta(&fused.meta, &dir.join("fusion_head.json"))?;
        let extras = if with_text {
            ExtrasHead::load_if_present(&dir, pinning)?
        } else {
            None
        };
        let mut f = Self {
            text,
            audio,
            video,
            fused,
            weighted,
            extras,
            threshold: cfg.effective_threshold(),
            operating_point: None,
        };
        if let Some(name) = &cfg.operating_point {
            let op = f.resolve_operating_point(name, &dir)?;
            f.threshold = op.1;
            f.operating_point = Some((name.clone(), op.0));
        }
        Ok(f)
    }

    /// The named operating point of the text head and the threshold on `p_sarcastic`
    /// it amounts to. It is measured on the text view, so it holds only while the fused
    /// score moves with the text view alone: the fused score at the text threshold,
    /// through the fusion head's own calibration (a monotone map of one view).
    fn resolve_operating_point(
        &self,
        name: &str,
        dir: &Path,
    ) -> Result<(OperatingPoint, f32), HeadError> {
        let use_err = |why: &str| HeadError::OperatingPointUse {
            name: name.to_string(),
            why: why.to_string(),
        };
        let text = self
            .text
            .as_ref()
            .ok_or_else(|| use_err("the text view ([text] enabled = true)"))?;
        if self.weighted
            != (WeightedViews {
                text: true,
                audio: false,
                video: false,
            })
        {
            return Err(use_err(
                "a fusion head that weighs the text view alone (it was measured on the text view)",
            ));
        }
        let op = text
            .meta
            .operating_points
            .get(name)
            .cloned()
            .ok_or_else(|| HeadError::OperatingPoint {
                path: dir.join("text_head.json"),
                name: name.to_string(),
                available: if text.meta.operating_points.is_empty() {
                    "it has none".into()
                } else {
                    text.meta
                        .operating_points
                        .keys()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            })?;
        if !(op.text_threshold > 0.0 && op.text_threshold < 1.0) {
            return Err(use_err("a text threshold within (0, 1) in text_head.json"));
        }
        let fused = self.run_head(Some(op.text_threshold), None, None)?;
        // The fusion head clips the text logit: past the clip every text score maps to
        // one fused score, and the threshold would flag lines below it.
        let just_below = 1.0 / (1.0 + (0.05 - logit(op.text_threshold)).exp());
        if self.run_head(Some(just_below), None, None)? >= fused {
            return Err(use_err(
                "a text threshold where the fusion head's calibration still moves (it saturates there)",
            ));
        }
        Ok((op, fused))
    }

    /// The served fused score: the fusion head over the weighted views that are
    /// present, the others masked (logit 0, flag 0) as in the head's training. A view
    /// without weight never moves the score, so when no weighted view is present there
    /// is no score (`None`) rather than one made up from views that did not earn it.
    /// The head also calibrates a single view's score.
    pub fn fuse(
        &self,
        p_text: Option<f32>,
        p_audio: Option<f32>,
        p_video: Option<f32>,
    ) -> Result<Option<f32>, HeadError> {
        let w = self.weighted;
        let keep = |on: bool, p: Option<f32>| p.filter(|_| on);
        let (t, a, v) = (
            keep(w.text, p_text),
            keep(w.audio, p_audio),
            keep(w.video, p_video),
        );
        if t.is_none() && a.is_none() && v.is_none() {
            return Ok(None);
        }
        self.run_head(t, a, v).map(Some)
    }

    /// Late fusion over whichever views are given, weighted or not: the combinations
    /// `sarcasmd eval` reports beside the served score. A single view's score is passed
    /// through unchanged, and an absent view is never given a made-up score.
    pub fn fuse_views(
        &self,
        p_text: Option<f32>,
        p_audio: Option<f32>,
        p_video: Option<f32>,
    ) -> Result<Option<f32>, HeadError> {
        let present = [p_text, p_audio, p_video];
        match present.iter().flatten().count() {
            0 => Ok(None),
            1 => Ok(present.into_iter().flatten().next()),
            _ => self.run_head(p_text, p_audio, p_video).map(Some),
        }
    }

    fn run_head(
        &self,
        p_text: Option<f32>,
        p_audio: Option<f32>,
        p_video: Option<f32>,
    ) -> Result<f32, HeadError> {
        let l = |p: Option<f32>| p.map_or(0.0, logit);
        let flag = |p: Option<f32>| if p.is_some() { 1.0 } else { 0.0 };
        let x = [
            l(p_text),
            l(p_audio),
            l(p_video),
            flag(p_text),
            flag(p_video),
        ];
        self.fused.predict(&x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(weighted: Option<&[&str]>) -> HeadMeta {
        HeadMeta {
            name: "fusion_head".into(),
            version: "t".into(),
            feature_version: FUSION_FEATURE_VERSION.into(),
            input_dim: 5,
            onnx_sha256: String::new(),
            training: serde_json::Value::Null,
            metrics: serde_json::Value::Null,
            weighted_views: weighted.map(|w| w.iter().map(|s| s.to_string()).collect()),
            operating_points: Default::default(),
        }
    }

    #[test]
    fn the_prior_moves_the_threshold_in_log_odds() {
        let at = |threshold: f32, prior: f32| {
            FusionConfig {
                threshold,
                prior,
                ..FusionConfig::default()
            }
            .effective_threshold()
        };
        assert!((at(0.5, 0.5) - 0.5).abs() < 1e-6);
        assert!((at(0.6, 0.5) - 0.6).abs() < 1e-6);
        // A room expecting one sarcastic line in five: flag from 0.8 (1 - prior at 0.5).
        assert!((at(0.5, 0.2) - 0.8).abs() < 1e-5);
        assert!((at(0.5, 0.9) - 0.1).abs() < 1e-5);
        // Log-odds add: logit(t') = logit(0.7) - logit(0.2).
        let expect = 1.0 / (1.0 + (-(logit(0.7) - logit(0.2))).exp());
        assert!((at(0.7, 0.2) - expect).abs() < 1e-6);
    }

    #[test]
    fn prior_is_validated_and_old_configs_default_to_balanced() {
        let mut c = FusionConfig::default();
        assert_eq!(c.prior, 0.5);
        c.prior = 0.0;
        assert_eq!(c.validate().unwrap_err().field, "fusion.prior");
        c.prior = 1.0;
        assert!(c.validate().is_err());
        c.prior = 0.1;
        assert!(c.validate().is_ok());
        let mut c = FusionConfig {
            operating_point: Some("meeting".into()),
            ..FusionConfig::default()
        };
        assert!(c.validate().is_ok());
        c.prior = 0.3;
        assert_eq!(c.validate().unwrap_err().field, "fusion.operating_point");
        c.prior = 0.5;
        c.operating_point = Some(" ".into());
        assert_eq!(c.validate().unwrap_err().field, "fusion.operating_point");
        let old: FusionConfig = toml::from_str("threshold = 0.6\n").unwrap();
        assert_eq!(old.prior, 0.5);
        assert!((old.effective_threshold() - 0.6).abs() < 1e-6);
    }

    #[test]
    fn weighted_views_come_from_the_fusion_heads_metadata() {
        let p = Path::new("fusion_head.json");
        assert_eq!(
            WeightedViews::from_meta(&meta(None), p).unwrap(),
            WeightedViews::ALL
        );
        let w = WeightedViews::from_meta(&meta(Some(&["text"])), p).unwrap();
        assert_eq!(w.names(), vec!["text"]);
        let err = WeightedViews::from_meta(&meta(Some(&["text", "smell"])), p).unwrap_err();
        assert!(err.to_string().contains("smell"), "{err}");
    }
}
