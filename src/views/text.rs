//! Text view, part one: the sentence encoder (multilingual Universal Sentence Encoder
//! v3, rebuilt as ONNX by `scripts/fetch-models.sh`) run in tract.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tract_onnx::prelude::*;

use crate::common::error::BoxError;
use crate::common::models::{ModelError, ModelStore};
use crate::common::onnx::{self, InputSpec, OnnxError, Runnable};
use crate::common::validate::{Problems, Validate};

pub const EMBEDDING_DIM: usize = 512;
/// The encoder and its SentencePiece model, as the model store names them.
pub const ENCODER_MODEL: &str = "usem3";
pub const TOKENIZER_MODEL: &str = "usem3-spm";
const BOS: i64 = 1;
const EOS: i64 = 2;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TextConfig {
    /// Turn the text view off (audio-only scoring, no encoder loaded).
    pub enabled: bool,
    /// Longer inputs are cut to this many SentencePiece tokens (cost grows linearly).
    pub max_tokens: usize,
}

impl Default for TextConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_tokens: 128,
        }
    }
}

impl Validate for TextConfig {
    fn check(&self, problems: &mut Problems) {
        if !(8..=512).contains(&self.max_tokens) {
            problems.push("text.max_tokens", "must be within 8..=512");
        }
    }
}

#[derive(Debug, Error)]
pub enum TextError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Load(#[from] OnnxError),
    #[error("{path}: cannot load tokenizer: {source}")]
    Tokenizer {
        path: String,
        #[source]
        source: sentencepiece::SentencePieceError,
    },
    #[error("text encoder failed on a {tokens}-token input: {source}")]
    Run {
        tokens: usize,
        #[source]
        source: BoxError,
    },
}

/// Encoder and tokenizer, loaded once.
#[derive(Clone)]
pub struct TextEncoder {
    /// The encoder's own SentencePiece model, run by the sentencepiece library: the
    /// ids the encoder was trained with, and ~35 MiB resident (the `tokenizers`
    /// crate's Unigram trie for the same 128k pieces held ~123 MiB).
    tokenizer: Arc<sentencepiece::SentencePieceProcessor>,
    runnable: Runnable,
    max_tokens: usize,
}

impl TextEncoder {
    pub fn load(model: &Path, tokenizer: &Path, cfg: &TextConfig) -> Result<Self, TextError> {
        let tok = sentencepiece::SentencePieceProcessor::open(tokenizer).map_err(|e| {
            TextError::Tokenizer {
                path: tokenizer.display().to_string(),
                source: e,
            }
        })?;
        let runnable = onnx::load_path(model, &[InputSpec::i64(&[Some(1), None])])?;
        Ok(Self {
            tokenizer: Arc::new(tok),
            runnable,
            max_tokens: cfg.max_tokens,
        })
    }

    /// The encoder the daemon serves, from the model store, and the label `models`
    /// names it by (`usem3@<sha256 prefix>`): the daemon, `feedback` and `embed` load it
    /// here, so a correction recorded by the CLI names the encoder the daemon checks.
    pub fn from_store(store: &ModelStore, cfg: &TextConfig) -> Result<(Self, String), TextError> {
        let m = store.get(ENCODER_MODEL)?;
        let t = store.get(TOKENIZER_MODEL)?;
        let label = format!(
            "{ENCODER_MODEL}@{}",
            m.sha256.chars().take(12).collect::<String>()
        );
        Ok((Self::load(&m.path, &t.path, cfg)?, label))
    }

    /// SentencePiece ids with BOS/EOS, cut to `max_tokens`.
    pub fn token_ids(&self, text: &str) -> Result<Vec<i64>, TextError> {
        let body = self.tokenizer.encode(text).map_err(|e| TextError::Run {
            tokens: 0,
            source: format!("tokenizer: {e}").into(),
        })?;
        let keep = body.len().min(self.max_tokens.saturating_sub(2));
        let mut ids = Vec::with_capacity(keep + 2);
        ids.push(BOS);
        ids.extend(body[..keep].iter().map(|p| p.id as i64));
        ids.push(EOS);
        Ok(ids)
    }

    /// L2-normalised 512-d sentence embedding.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, TextError> {
        let ids = self.token_ids(text)?;
        let n = ids.len();
        let err = |e: TractError| TextError::Run {
            tokens: n,
            source: format!("{e:#}").into(),
        };
        let x = Tensor::from_shape(&[1, n], &ids).map_err(err)?;
        let out = self.runnable.run(tvec![x.into()]).map_err(err)?;
        let v = onnx::output_f32(&out[0]).map_err(err)?;
        if v.len() != EMBEDDING_DIM {
            return Err(TextError::Run {
                tokens: n,
                source: format!(
                    "encoder returned {} values, expected {EMBEDDING_DIM}",
                    v.len()
                )
                .into(),
            });
        }
        Ok(v)
    }
}
