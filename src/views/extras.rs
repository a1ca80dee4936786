//! The optional extras head: MUStARD++'s extra labels (implicit and explicit emotion,
//! sarcasm type, valence, arousal) from the utterance's text embedding, the same vector
//! the text view computes (no second embedding). Trained by `models/recipe/extras.py`;
//! figures in `models/studies/extras/EXTRAS.md`.
//!
//! One ONNX graph with five outputs, in the order the metadata's `outputs` lists them:
//! softmax outputs `[1, K]` with their class names, regression outputs `[1, 1]` on the
//! 1-9 scale of the annotations. Loaded only when `extras_head.{onnx,json}` exist in
//! the heads dir, so older heads dirs keep working (the event's `extras` is null).

use std::path::Path;

use serde::{Deserialize, Serialize};
use tract_onnx::prelude::*;

use crate::common::onnx::{self, InputSpec, Runnable};
use crate::views::heads::{read_checked, HeadError, HeadMeta, Pinning, TEXT_FEATURE_VERSION};

pub const EXTRAS_HEAD: &str = "extras_head";

/// The event's `extras` field (defined beside the event's other parts, in `common`).
pub use crate::common::extras::{ClassScore, Extras};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum OutputSpec {
    Softmax { name: String, classes: Vec<String> },
    Regression { name: String, range: [f32; 2] },
}

impl OutputSpec {
    fn name(&self) -> &str {
        match self {
            OutputSpec::Softmax { name, .. } | OutputSpec::Regression { name, .. } => name,
        }
    }
    fn len(&self) -> usize {
        match self {
            OutputSpec::Softmax { classes, .. } => classes.len(),
            OutputSpec::Regression { .. } => 1,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
struct ExtrasMeta {
    outputs: Vec<OutputSpec>,
}

/// The outputs the event carries, in the order the head must produce them.
const OUTPUTS: [(&str, &str); 5] = [
    ("emotion_implicit", "softmax"),
    ("emotion_explicit", "softmax"),
    ("sarcasm_type", "softmax"),
    ("valence", "regression"),
    ("arousal", "regression"),
];

#[derive(Clone)]
pub struct ExtrasHead {
    pub meta: HeadMeta,
    pub outputs: Vec<OutputSpec>,
    runnable: Runnable,
}

impl ExtrasHead {
    /// `Ok(None)` when neither file of the head exists in `dir`; otherwise every check
    /// of [`crate::views::fusion::Head::load`] (feature version = the text encoder's, checksum)
    /// plus the output list.
    pub fn load_if_present(dir: &Path, pinning: Pinning) -> Result<Option<Self>, HeadError> {
        let json = dir.join(format!("{EXTRAS_HEAD}.json"));
        let onnx_file = dir.join(format!("{EXTRAS_HEAD}.onnx"));
        if !json.exists() && !onnx_file.exists() {
            return Ok(None);
        }
        Self::load(dir, pinning).map(Some)
    }

    pub fn load(dir: &Path, pinning: Pinning) -> Result<Self, HeadError> {
        let checked = read_checked(dir, EXTRAS_HEAD, TEXT_FEATURE_VERSION, pinning)?;
        let meta_path = dir.join(format!("{EXTRAS_HEAD}.json"));
        let bad = |reason: String| HeadError::Meta {
            path: meta_path.clone(),
            source: reason.into(),
        };
        let extra: ExtrasMeta =
            serde_json::from_str(&checked.meta_json).map_err(|e| HeadError::Meta {
                path: meta_path.clone(),
                source: e.into(),
            })?;
        let names: Vec<(&str, &str)> = extra
            .outputs
            .iter()
            .map(|o| {
                let kind = match o {
                    OutputSpec::Softmax { .. } => "softmax",
                    OutputSpec::Regression { .. } => "regression",
                };
                (o.name(), kind)
            })
            .collect();
        if names != OUTPUTS {
            return Err(bad(format!(
                "outputs must be {OUTPUTS:?} in this order, metadata lists {names:?}"
            )));
        }
        if let Some(o) = extra.outputs.iter().find(|o| {
            matches!(o, OutputSpec::Softmax { classes, .. } if classes.len() < 2 || classes.iter().any(|c| c.trim().is_empty()))
        }) {
            return Err(bad(format!(
                "output `{}` needs at least two non-blank class names",
                o.name()
            )));
        }
        let runnable = onnx::load_proto(
            &checked.onnx_path.display().to_string(),
            &checked.proto,
            &[InputSpec::f32(&[Some(1), Some(checked.meta.input_dim)])],
        )?;
        let head = Self {
            meta: checked.meta,
            outputs: extra.outputs,
            runnable,
        };
        // One run on a zero vector (the training mean after standardisation) checks the
        // graph's output count and sizes against the metadata at load time, not on the
        // first utterance.
        head.raw(&vec![0.0; head.meta.input_dim])?;
        Ok(head)
    }

    /// Every output as a flat vector, checked against the metadata.
    pub fn raw(&self, x: &[f32]) -> Result<Vec<Vec<f32>>, HeadError> {
        let name = &self.meta.name;
        if x.len() != self.meta.input_dim {
            return Err(HeadError::Dim {
                name: name.clone(),
                expected: self.meta.input_dim,
                got: x.len(),
            });
        }
        let run_err = |reason: String| HeadError::Run {
            name: name.clone(),
            reason,
        };
        let err = |e: TractError| run_err(format!("{e:#}"));
        let t = Tensor::from_shape(&[1, x.len()], x).map_err(err)?;
        let out = self.runnable.run(tvec![t.into()]).map_err(err)?;
        if out.len() != self.outputs.len() {
            return Err(run_err(format!(
                "graph has {} outputs, metadata lists {}",
                out.len(),
                self.outputs.len()
            )));
        }
        let mut v = Vec::with_capacity(out.len());
        for (o, spec) in out.iter().zip(&self.outputs) {
            let o = onnx::output_f32(o).map_err(err)?;
            if o.len() != spec.len() {
                return Err(run_err(format!(
                    "output `{}` has {} values, metadata says {}",
                    spec.name(),
                    o.len(),
                    spec.len()
                )));
            }
            if let Some(bad) = o.iter().find(|p| !p.is_finite()) {
                return Err(run_err(format!(
                    "output `{}` is not finite ({bad})",
                    spec.name()
                )));
            }
            v.push(o);
        }
        Ok(v)
    }

    /// The event's `extras` for one utterance embedding.
    pub fn predict(&self, x: &[f32]) -> Result<Extras, HeadError> {
        let raw = self.raw(x)?;
        let top = |i: usize| -> ClassScore {
            let OutputSpec::Softmax { classes, .. } = &self.outputs[i] else {
                unreachable!("checked at load: output {i} is a softmax")
            };
            let (k, p) = raw[i]
                .iter()
                .copied()
                .enumerate()
                .fold((0, f32::MIN), |b, (k, p)| if p > b.1 { (k, p) } else { b });
            ClassScore {
                label: classes[k].clone(),
                p: p.clamp(0.0, 1.0),
            }
        };
        let scale = |i: usize| -> f32 {
            let OutputSpec::Regression { range, .. } = &self.outputs[i] else {
                unreachable!("checked at load: output {i} is a regression")
            };
            raw[i][0].clamp(range[0], range[1])
        };
        Ok(Extras {
            emotion_implicit: top(0),
            emotion_explicit: top(1),
            sarcasm_type: top(2),
            valence: scale(3),
            arousal: scale(4),
        })
    }

    /// `name@version`, for the event's `models` field.
    pub fn label(&self) -> String {
        format!("{}@{}", self.meta.name, self.meta.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::heads::DEFAULT_HEADS_DIR;

    fn shipped() -> ExtrasHead {
        ExtrasHead::load(Path::new(DEFAULT_HEADS_DIR), Pinning::Required)
            .expect("models/heads/extras_head")
    }

    /// A deterministic pseudo-embedding: unit-norm like the encoder's output.
    fn input(seed: u32, d: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let mut v: Vec<f32> = (0..d)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) - 0.5
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn shipped_head_outputs_are_well_formed() {
        let h = shipped();
        assert_eq!(h.meta.feature_version, TEXT_FEATURE_VERSION);
        for seed in 0..5 {
            let x = input(seed, h.meta.input_dim);
            let raw = h.raw(&x).unwrap();
            for (o, spec) in raw.iter().zip(&h.outputs) {
                match spec {
                    OutputSpec::Softmax { classes, name } => {
                        assert_eq!(o.len(), classes.len(), "{name}");
                        let sum: f32 = o.iter().sum();
                        assert!((sum - 1.0).abs() < 1e-4, "{name}: sums to {sum}");
                        assert!(o.iter().all(|p| (0.0..=1.0).contains(p)), "{name}");
                    }
                    OutputSpec::Regression { name, range } => {
                        assert_eq!(*range, [1.0, 9.0], "{name}");
                        assert!((1.0..=9.0).contains(&o[0]), "{name}: {}", o[0]);
                    }
                }
            }
            let e = h.predict(&x).unwrap();
            let classes = |i: usize| match &h.outputs[i] {
                OutputSpec::Softmax { classes, .. } => classes.clone(),
                _ => unreachable!(),
            };
            assert!(classes(0).contains(&e.emotion_implicit.label));
            assert!(classes(1).contains(&e.emotion_explicit.label));
            assert!(classes(2).contains(&e.sarcasm_type.label));
            // The top class of K has at least 1/K.
            assert!(e.sarcasm_type.p >= 1.0 / classes(2).len() as f32 - 1e-6);
            assert!((1.0..=9.0).contains(&e.valence) && (1.0..=9.0).contains(&e.arousal));
        }
        // The class lists the docs name.
        assert_eq!(h.outputs[2].len(), 4);
        assert!(
            matches!(&h.outputs[0], OutputSpec::Softmax { classes, .. } if classes.contains(&"Ridicule".to_string()))
        );
    }

    #[test]
    fn wrong_dimension_is_an_error_not_a_panic() {
        let h = shipped();
        assert!(matches!(h.raw(&[0.0; 3]), Err(HeadError::Dim { .. })));
    }

    #[test]
    fn absent_head_is_none_and_wrong_feature_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ExtrasHead::load_if_present(dir.path(), Pinning::Required)
            .unwrap()
            .is_none());
        let src = Path::new(DEFAULT_HEADS_DIR);
        std::fs::copy(
            src.join("extras_head.onnx"),
            dir.path().join("extras_head.onnx"),
        )
        .unwrap();
        let meta = std::fs::read_to_string(src.join("extras_head.json")).unwrap();
        let meta = meta.replace(TEXT_FEATURE_VERSION, "usem3-768-v9");
        std::fs::write(dir.path().join("extras_head.json"), meta).unwrap();
        match ExtrasHead::load_if_present(dir.path(), Pinning::Required) {
            Err(HeadError::FeatureVersion {
                found, expected, ..
            }) => {
                assert_eq!(found, "usem3-768-v9");
                assert_eq!(expected, TEXT_FEATURE_VERSION);
            }
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("a head for other features was accepted"),
        }
        // One file without the other is a broken heads dir, not an absent head.
        std::fs::remove_file(dir.path().join("extras_head.json")).unwrap();
        assert!(matches!(
            ExtrasHead::load_if_present(dir.path(), Pinning::Required),
            Err(HeadError::Meta { .. })
        ));
    }
}
