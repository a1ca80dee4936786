//! The vision view: faces in the camera (or a video file) while someone speaks.
//!
//! Per analysed frame: BlazeFace finds faces, the face-mesh model places 468 landmarks
//! in an upright crop of the largest face, and mini-Xception reads its expression
//! (FER2013's 7 classes). The result is a [`FrameObs`]; an utterance's video view is a
//! head over [`functionals`] of the frames it spans. The three models are loaded once
//! ([`VisionModels`], shared); a [`VisionAnalyser`] holds one stream's scratch space.

mod blazeface;
mod features;
mod image;
pub mod stream;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::model::TypedSimpleState;

use crate::common::models::{ModelError, ModelStore};
use crate::common::onnx::{self, OnnxError, Runnable};
use crate::common::validate::{Problems, Validate};
use crate::sources::video::{VideoFrame, MAX_FPS};

pub use blazeface::Detection;
pub use features::{
    functional_names, functionals, FaceObs, FrameObs, Geometry, EXPRESSIONS, NUM_FUNCTIONALS,
    VISION_FEATURE_VERSION,
};
pub use image::{sample_roi, Roi};

/// Names of the converted models in `models/models.lock.json`.
pub const DETECTOR_MODEL: &str = "face-detection";
pub const LANDMARK_MODEL: &str = "face-landmark";
pub const EXPRESSION_MODEL: &str = "emotion";

const LANDMARK_SIZE: usize = 192;
const EXPRESSION_SIZE: usize = 64;
/// MediaPipe enlarges the detection box by this much for the face-mesh crop.
const LANDMARK_ROI_SCALE: f32 = 1.5;
/// The expression model was trained on loose face crops (fer pads its boxes).
const EXPRESSION_ROI_SCALE: f32 = 1.2;

/// Where frames come from. Off by default: the camera is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum VisionSourceConfig {
    #[default]
    None,
    /// A V4L2 camera, by index or by (part of) its name.
    Camera {
        #[serde(default)]
        device: Option<String>,
    },
    /// A video file, e.g. the recording that goes with a replayed WAV.
    File {
        path: PathBuf,
        /// Stream time of the video's first frame.
        #[serde(default)]
        offset_s: f64,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct VisionConfig {
    pub source: VisionSourceConfig,
    /// Frames analysed per second: the vision CPU budget (each costs ~15 ms on x86, see
    /// docs/performance.md). Sources deliver up to 15 fps; the rest are skipped, not queued.
    pub analyse_fps: f32,
    /// Frames between the source and the analyser. Full: the oldest frame is dropped
    /// (and counted), so the analyser always works on the newest.
    pub frame_queue: usize,
    /// BlazeFace score below which a detection is ignored.
    pub min_face_score: f32,
}

impl Default for VisionConfig {
    fn default() -> Self {
        Self {
            source: VisionSourceConfig::None,
            analyse_fps: 5.0,
            frame_queue: 4,
            min_face_score: 0.5,
        }
    }
}

impl VisionConfig {
    pub fn enabled(&self) -> bool {
        !matches!(self.source, VisionSourceConfig::None)
    }
}

impl Validate for VisionConfig {
    fn check(&self, problems: &mut Problems) {
        if !(self.analyse_fps > 0.0 && self.analyse_fps <= MAX_FPS) {
            problems.push(
                "vision.analyse_fps",
                format!("must be within (0, {MAX_FPS}]"),
            );
        }
        if let VisionSourceConfig::File { path, offset_s } = &self.source {
            if path.as_os_str().is_empty() {
                problems.push("vision.source.path", "must name a video file");
            }
            if !offset_s.is_finite() {
                problems.push("vision.source.offset_s", "must be a number");
            }
        }
        if self.frame_queue == 0 {
            problems.push("vision.frame_queue", "must be at least 1");
        }
        if !(self.min_face_score > 0.0 && self.min_face_score < 1.0) {
            problems.push("vision.min_face_score", "must be within (0, 1)");
        }
    }
}

#[derive(Debug, Error)]
pub enum VisionError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    #[error("vision model `{model}` has an unexpected shape: {reason}. Re-run `scripts/fetch-models.sh --force --only {model}`")]
    Shape { model: String, reason: String },
    #[error("vision model `{model}` failed on a frame: {reason}")]
    Run { model: String, reason: String },
}

/// Where a model wants its channels.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    Nchw,
    Nhwc,
}

struct ImageModel {
    name: &'static str,
    runnable: Runnable,
    layout: Layout,
    side: usize,
    channels: usize,
}

impl ImageModel {
    /// Load with the input shape the file declares and check it is a square image of
    /// `side` pixels with `channels` channels in either layout.
    fn load(
        store: &ModelStore,
        name: &'static str,
        side: usize,
        channels: usize,
    ) -> Result<Self, VisionError> {
        let m = store.get(name)?;
        let runnable = onnx::load_path(&m.path, &[])?;
        let shape: Vec<usize> = runnable
            .model()
            .input_fact(0)
            .ok()
            .and_then(|f| f.shape.as_concrete().map(|s| s.to_vec()))
            .unwrap_or_default();
        let layout = match shape.as_slice() {
            [1, c, h, w] if *c == channels && *h == side && *w == side => Layout::Nchw,
            [1, h, w, c] if *c == channels && *h == side && *w == side => Layout::Nhwc,
            _ => {
                return Err(VisionError::Shape {
                    model: name.into(),
                    reason: format!("input {shape:?}, expected a {side}x{side}x{channels} image"),
                })
            }
        };
        Ok(Self {
            name,
            runnable,
            layout,
            side,
            channels,
        })
    }

    fn run(
        &self,
        state: &mut TypedSimpleState,
        input: &[f32],
    ) -> Result<Vec<Vec<f32>>, VisionError> {
        let err = |e: TractError| VisionError::Run {
            model: self.name.into(),
            reason: format!("{e:#}"),
        };
        let (s, c) = (self.side, self.channels);
        let shape = match self.layout {
            Layout::Nchw => [1, c, s, s],
            Layout::Nhwc => [1, s, s, c],
        };
        let t = Tensor::from_shape(&shape, input).map_err(err)?;
        let out = state.run(tvec![t.into()]).map_err(err)?;
        out.iter()
            .map(|v| onnx::output_f32(v).map_err(err))
            .collect()
    }

    /// Sample `roi` into this model's input, `norm` mapping [0, 255] channels.
    fn input_from(&self, frame: &VideoFrame, roi: &Roi, norm: impl Fn(f32) -> f32) -> Vec<f32> {
        let (s, c) = (self.side, self.channels);
        let mut x = vec![0.0f32; s * s * c];
        let layout = self.layout;
        sample_roi(
            &frame.rgb,
            frame.width,
            frame.height,
            roi,
            s,
            s,
            |ox, oy, rgb| {
                let px: [f32; 3];
                let chans: &[f32] = if c == 1 {
                    // OpenCV's BGR2GRAY weights, as fer used in training.
                    px = [0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2], 0.0, 0.0];
                    &px[..1]
                } else {
                    &rgb[..]
                };
                for (k, v) in chans.iter().enumerate() {
                    let i = match layout {
                        Layout::Nchw => (k * s + oy) * s + ox,
                        Layout::Nhwc => (oy * s + ox) * c + k,
                    };
                    x[i] = norm(*v);
                }
            },
        );
        x
    }
}

/// The three vision models, loaded once and shared by every stream.
#[derive(Clone)]
pub struct VisionModels {
    inner: std::sync::Arc<[ImageModel; 3]>,
}

impl VisionModels {
    pub fn load(store: &ModelStore) -> Result<Self, VisionError> {
        let detector = ImageModel::load(store, DETECTOR_MODEL, blazeface::INPUT_SIZE, 3)?;
        let landmarks = ImageModel::load(store, LANDMARK_MODEL, LANDMARK_SIZE, 3)?;
        let expression = ImageModel::load(store, EXPRESSION_MODEL, EXPRESSION_SIZE, 1)?;
        Ok(Self {
            inner: std::sync::Arc::new([detector, landmarks, expression]),
        })
    }

    /// A stream's analyser: its own tract states (plans and scratch tensors are
    /// allocated once, not per frame) over the shared models.
    pub fn analyser(&self, cfg: &VisionConfig) -> Result<VisionAnalyser, VisionError> {
        let spawn = |m: &ImageModel| {
            m.runnable.spawn().map_err(|e| VisionError::Run {
                model: m.name.into(),
                reason: format!("{e:#}"),
            })
        };
        let [d, l, e] = &*self.inner;
        Ok(VisionAnalyser {
            states: [spawn(d)?, spawn(l)?, spawn(e)?],
            models: self.clone(),
            anchors: blazeface::anchors(),
            min_face_score: cfg.min_face_score,
        })
    }
}

/// One stream's vision state.
pub struct VisionAnalyser {
    models: VisionModels,
    states: [TypedSimpleState; 3],
    anchors: Vec<(f32, f32)>,
    min_face_score: f32,
}

impl VisionAnalyser {
    /// Faces in `frame`, in frame pixels (centre, size) with keypoints, best first.
    pub fn detect(&mut self, frame: &VideoFrame) -> Result<Vec<Detection>, VisionError> {
        let det = &self.models.inner[0];
        // Letterbox: the whole frame, centred in a square, as MediaPipe feeds it.
        let side = frame.width.max(frame.height) as f32;
        let letterbox = Roi {
            cx: frame.width as f32 / 2.0,
            cy: frame.height as f32 / 2.0,
            width: side,
            height: side,
            angle_rad: 0.0,
        };
        let x = det.input_from(frame, &letterbox, |v| v / 127.5 - 1.0);
        let out = det.run(&mut self.states[0], &x)?;
        let (mut regressors, mut scores) = (None, None);
        for o in out {
            match o.len() {
                n if n == blazeface::NUM_ANCHORS * blazeface::NUM_COORDS => regressors = Some(o),
                n if n == blazeface::NUM_ANCHORS => scores = Some(o),
                _ => {}
            }
        }
        let (Some(regressors), Some(scores)) = (regressors, scores) else {
            return Err(VisionError::Shape {
                model: DETECTOR_MODEL.into(),
                reason: "outputs are not [896 x 16] boxes and [896] scores".into(),
            });
        };
        let to_frame = |x: f32, y: f32| letterbox.to_frame(x, y);
        Ok(
            blazeface::decode(&self.anchors, &regressors, &scores, self.min_face_score)
                .into_iter()
                .map(|d| {
                    let (cx, cy) = to_frame(d.cx, d.cy);
                    let mut keypoints = d.keypoints;
                    for kp in keypoints.iter_mut() {
                        *kp = to_frame(kp.0, kp.1);
                    }
                    Detection {
                        cx,
                        cy,
                        w: d.w * side,
                        h: d.h * side,
                        keypoints,
                        ..d
                    }
                })
                .collect(),
        )
    }

    /// Analyse one frame: the largest face's expression and geometry, or no face.
    pub fn analyse(&mut self, frame: &VideoFrame) -> Result<FrameObs, VisionError> {
        let faces = self.detect(frame)?;
        let Some(face) = faces
            .iter()
            .max_by(|a, b| (a.w * a.h).total_cmp(&(b.w * b.h)))
        else {
            return Ok(FrameObs {
                t_s: frame.t_s,
                face: None,
            });
        };
        // Rotate so the eyes are level (MediaPipe's ROI rule: the subject's right eye
        // is on the image's left).
        let (r, l) = (
            face.keypoints[blazeface::KP_RIGHT_EYE],
            face.keypoints[blazeface::KP_LEFT_EYE],
        );
        let angle_rad = (l.1 - r.1).atan2(l.0 - r.0);
        let roi = |scale: f32| {
            let side = face.w.max(face.h) * scale;
            Roi {
                cx: face.cx,
                cy: face.cy,
                width: side,
                height: side,
                angle_rad,
            }
        };
        let models = self.models.clone();
        let [_, mesh_model, expr_model] = &*models.inner;
        let [_, mesh_state, expr_state] = &mut self.states;
        let mesh_input = mesh_model.input_from(frame, &roi(LANDMARK_ROI_SCALE), |v| v / 255.0);
        let mesh_out = mesh_model.run(mesh_state, &mesh_input)?;
        let geometry = mesh_geometry(&mesh_out, angle_rad);
        let probs = expr_model
            .run(
                expr_state,
                &expr_model.input_from(frame, &roi(EXPRESSION_ROI_SCALE), |v| {
                    (v / 255.0 - 0.5) * 2.0
                }),
            )?
            .into_iter()
            .next()
            .unwrap_or_default();
        let expression: [f32; 7] = probs.try_into().map_err(|p: Vec<f32>| VisionError::Shape {
            model: EXPRESSION_MODEL.into(),
            reason: format!("{} outputs, expected 7 classes", p.len()),
        })?;
        Ok(FrameObs {
            t_s: frame.t_s,
            face: Some(FaceObs {
                detection_score: face.score,
                centre: (face.cx / frame.width as f32, face.cy / frame.height as f32),
                size: face.w / frame.width as f32,
                expression,
                geometry,
            }),
        })
    }
}

/// Face-mesh outputs: 468 x (x, y, z) in crop pixels and a face-presence logit. A crop
/// the model rejects gives no geometry (the detection's expression still counts).
fn mesh_geometry(out: &[Vec<f32>], roll_rad: f32) -> Option<Geometry> {
    let points = out.iter().find(|o| o.len() == 468 * 3)?;
    let presence = out.iter().find(|o| o.len() == 1).map(|o| o[0]);
    if presence.is_some_and(|logit| logit < 0.0) {
        return None;
    }
    let p: Vec<(f32, f32)> = points.chunks_exact(3).map(|c| (c[0], c[1])).collect();
    Geometry::from_mesh(&p, roll_rad)
}
