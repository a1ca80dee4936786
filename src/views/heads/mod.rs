//! A trained head on disk: `<name>.onnx` beside `<name>.json`, its metadata record.
//! Every head's files are checked the same way before anything runs them: the
//! metadata parses and its `input_dim` is a size a head can have, its `feature_version`
//! is what this build computes (a retrained feature extractor is never silently paired
//! with a head trained on the old features), the ONNX bytes match the recorded
//! checksum and the one pinned in this binary ([`lock`]), and the graph's shapes agree
//! with the metadata and stay small ([`graph`]) before tract builds it. A loaded head
//! is run once on zeros, so that a graph that still does not fit fails at load
//! (`validate`), not at the first utterance.
//!
//! A leaf below both users: `fusion` (the view and fusion heads) and `extras` (the
//! extras head, which `fusion` runs) read their heads here.

mod graph;
pub mod lock;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tract_onnx::prelude::*;

use crate::common::error::BoxError;
use crate::common::onnx::{self, InputSpec, OnnxError, Runnable};

/// Feature versions this build produces.
pub const TEXT_FEATURE_VERSION: &str = "usem3-512-v1";
/// Heads are logistic regressions of a few KB; a larger file is the wrong file.
const MAX_HEAD_BYTES: u64 = 16 << 20;
/// The largest feature vector a head may take (today's: 5 to 512).
pub const MAX_INPUT_DIM: usize = 65_536;
/// Every head the daemon may load, by file stem.
pub const HEAD_NAMES: [&str; 5] = [
    "text_head",
    "audio_head",
    "video_head",
    "fusion_head",
    "extras_head",
];

/// Whether a head must be pinned in this binary's `heads.lock.json` ([`lock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinning {
    /// Serving (`run`, `replay`, `validate`, `bench`): an unpinned head is refused.
    Required,
    /// Measuring (`eval --heads DIR`): a head just trained is not pinned yet; it is
    /// loaded with a warning, every other check still applies.
    WarnOnly,
}
/// Default head directory: the repo's `models/heads` (installed packages put them
/// next to the binary and point `fusion.heads_dir` there).
pub const DEFAULT_HEADS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/heads");
/// Where the Debian package installs the heads.
pub const PACKAGED_HEADS_DIR: &str = "/usr/share/sarcasmd/heads";

#[derive(Debug, Error)]
pub enum HeadError {
    #[error("{path}: cannot read head metadata: {source}. Retrain with `models/recipe/train.sh` or point fusion.heads_dir at a directory with trained heads")]
    Meta {
        path: PathBuf,
        #[source]
        source: BoxError,
    },
    #[error("{path}: head was trained on features `{found}` but this build computes `{expected}`; retrain it (`models/recipe/train.sh`)")]
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
    #[error("{path}: head `{name}` (SHA-256 {found}) is not the one pinned in {} ({pinned}) that this binary was built with, and the daemon serves pinned heads only. Retrain it with `models/recipe/train.sh` (write_head pins what it writes) or pin it with `python3 -m models.recipe.pin_heads`, then rebuild; `sarcasmd eval --heads DIR` measures an unpinned head", lock::HEADS_LOCK_PATH)]
    Unpinned {
        path: PathBuf,
        name: String,
        found: String,
        pinned: String,
    },
    #[error("{path}: not a graph a head may be: {reason}")]
    Graph { path: PathBuf, reason: String },
    #[error(transparent)]
    Load(#[from] OnnxError),
    #[error("head `{name}` expects {expected} inputs, got {got}")]
    Dim {
        name: String,
        expected: usize,
        got: usize,
    },
    #[error("{path}: fusion.operating_point `{name}` is not one of this text head's operating points ({available}); use one of them, or leave it out for the balanced threshold")]
    OperatingPoint {
        path: PathBuf,
        name: String,
        available: String,
    },
    #[error("fusion.operating_point `{name}` needs {why}")]
    OperatingPointUse { name: String, why: String },
    #[error("head `{name}` failed: {reason}")]
    Run { name: String, reason: String },
}

/// The metadata record written next to every trained head.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct HeadMeta {
    pub name: String,
    pub version: String,
    pub feature_version: String,
    /// Read as u64 so a corrupt value is refused with its field, not wrapped or panicked
    /// on; checked against [`MAX_INPUT_DIM`] before anything uses it.
    #[serde(deserialize_with = "input_dim")]
    pub input_dim: usize,
    pub onnx_sha256: String,
    #[serde(default)]
    pub training: serde_json::Value,
    #[serde(default)]
    pub metrics: serde_json::Value,
    /// Fusion head only: the views that may move `p_sarcastic` (`text`, `audio`,
    /// `video`). A view earns its place on the cross-corpus protocol
    /// (`models/recipe/cross_corpus.py`); the others are still scored and reported in
    /// `views` but are masked out of the fused score. Absent (heads trained before the
    /// rule): every view is weighted.
    #[serde(default)]
    pub weighted_views: Option<Vec<String>>,
    /// Text head only: named operating points for rooms where sarcasm is rare. Each is a
    /// threshold on the text view's probability set from a stated false-flag budget on
    /// held-out meetings (`models/recipe/text_head_meetings.py`), so it moves with the
    /// head it was measured on; `fusion.operating_point` picks one by name.
    #[serde(default)]
    pub operating_points: BTreeMap<String, OperatingPoint>,
}

/// One named operating point of a text head (`HeadMeta::operating_points`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct OperatingPoint {
    /// Flag when the text view's probability is at least this.
    pub text_threshold: f32,
    /// The false-flag budget it was set from, in words ("at most 1 % of plain meeting lines").
    pub budget: String,
    /// What it measured on the held-out meetings (plain lines flagged, recall, ...).
    #[serde(default)]
    pub measured_oof: serde_json::Value,
}

/// `input_dim` within `1..=MAX_INPUT_DIM`; larger values (`18446744073709551615`
/// once panicked in tract) are a parse error naming the field.
fn input_dim<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let v = u64::deserialize(d)?;
    match usize::try_from(v) {
        Ok(n) if (1..=MAX_INPUT_DIM).contains(&n) => Ok(n),
        _ => Err(serde::de::Error::custom(format!(
            "input_dim {v} is not a head's size (1..={MAX_INPUT_DIM})"
        ))),
    }
}

/// A head's files after every check: metadata parsed (the raw JSON too, for heads with
/// extra metadata), feature version as expected, ONNX bytes matching the checksum and
/// the pin, and the graph decoded and checked against the metadata.
pub(crate) struct CheckedHead {
    pub meta: HeadMeta,
    pub meta_json: String,
    pub onnx_path: PathBuf,
    pub proto: tract_onnx::pb::ModelProto,
}

pub(crate) fn read_checked(
    dir: &Path,
    name: &str,
    expected_feature_version: &str,
    pinning: Pinning,
) -> Result<CheckedHead, HeadError> {
    let meta_path = dir.join(format!("{name}.json"));
    let onnx_path = dir.join(format!("{name}.onnx"));
    let meta_json = crate::common::file_kind::read_text(
        &meta_path,
        crate::common::file_kind::MAX_TEXT_FILE_BYTES,
    )
    .map_err(|e| HeadError::Meta {
        path: meta_path.clone(),
        source: e.into(),
    })?;
    let meta: HeadMeta = serde_json::from_str(&meta_json).map_err(|e| HeadError::Meta {
        path: meta_path.clone(),
        source: e.into(),
    })?;
    if meta.feature_version != expected_feature_version {
        return Err(HeadError::FeatureVersion {
            path: meta_path,
            found: meta.feature_version,
            expected: expected_feature_version.into(),
        });
    }
    let bytes = crate::common::file_kind::read_bytes(&onnx_path, MAX_HEAD_BYTES).map_err(|e| {
        HeadError::Meta {
            path: onnx_path.clone(),
            source: e.into(),
        }
    })?;
    let found = crate::common::models::sha256_bytes(&bytes);
    if found != meta.onnx_sha256 {
        return Err(HeadError::Checksum {
            path: onnx_path,
            found,
            expected: meta.onnx_sha256,
        });
    }
    check_pinned(name, &onnx_path, &found, bytes.len() as u64, pinning)?;
    let graph_err = |reason: String| HeadError::Graph {
        path: onnx_path.clone(),
        reason,
    };
    let proto = tract_onnx::onnx()
        .proto_model_for_read(&mut bytes.as_slice())
        .map_err(|e| graph_err(format!("not an ONNX model: {e:#}")))?;
    graph::check(&proto, meta.input_dim).map_err(graph_err)?;
    Ok(CheckedHead {
        meta,
        meta_json,
        onnx_path,
        proto,
    })
}

/// The head's bytes against this binary's pin ([`lock`]).
fn check_pinned(
    name: &str,
    path: &Path,
    sha256: &str,
    bytes: u64,
    pinning: Pinning,
) -> Result<(), HeadError> {
    let pinned = match lock::pinned(name) {
        Ok(Some(p)) if p.onnx_sha256 == sha256 && p.onnx_bytes == bytes => return Ok(()),
        Ok(Some(p)) => format!("SHA-256 {}", p.onnx_sha256),
        Ok(None) => "no entry for it".to_string(),
        Err(e) => e.to_string(),
    };
    let e = HeadError::Unpinned {
        path: path.to_path_buf(),
        name: name.to_string(),
        found: sha256.to_string(),
        pinned,
    };
    match pinning {
        Pinning::Required => Err(e),
        Pinning::WarnOnly => {
            log::warn!("{e}; measuring it anyway");
            Ok(())
        }
    }
}

#[derive(Clone)]
pub struct Head {
    pub meta: HeadMeta,
    runnable: Runnable,
}

impl Head {
    /// Load `<dir>/<name>.onnx` after checking `<dir>/<name>.json`; it must be pinned.
    pub fn load(dir: &Path, name: &str, expected_feature_version: &str) -> Result<Self, HeadError> {
        Self::load_with(dir, name, expected_feature_version, Pinning::Required)
    }

    /// [`Head::load`] with a choice about pinning (`eval` of a head just trained).
    pub fn load_with(
        dir: &Path,
        name: &str,
        expected_feature_version: &str,
        pinning: Pinning,
    ) -> Result<Self, HeadError> {
        let checked = read_checked(dir, name, expected_feature_version, pinning)?;
        let runnable = onnx::load_proto(
            &checked.onnx_path.display().to_string(),
            &checked.proto,
            &[InputSpec::f32(&[Some(1), Some(checked.meta.input_dim)])],
        )?;
        let head = Self {
            meta: checked.meta,
            runnable,
        };
        // One run on zeros: a graph that does not fit its metadata fails here, at load
        // (validate), rather than at the first utterance.
        head.predict(&vec![0.0; head.meta.input_dim])?;
        Ok(head)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_head_keeps_its_cause_as_a_source_and_says_it_once() {
        let e = match Head::load(Path::new("/nonexistent/heads"), "text_head", "v") {
            Err(e) => e,
            Ok(_) => panic!("loaded a head from nowhere"),
        };
        let cause = std::error::Error::source(&e).expect("the read error is chained");
        let line = crate::common::error::Chain(&e).to_string();
        assert_eq!(line.matches(&cause.to_string()).count(), 1, "{line}");
        assert!(line.contains("/nonexistent/heads/text_head.json"), "{line}");
    }
}
