//! The ASR stage's error type.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum AsrError {
    #[error("{path}: not a whisper.cpp ggml model: {reason}. Run `scripts/fetch-models.sh` to rebuild it")]
    BadModel { path: PathBuf, reason: String },
    #[error("{path}: whisper.cpp could not load the model ({source:?})")]
    Load {
        path: PathBuf,
        source: whisper_rs::WhisperError,
    },
    #[error("whisper.cpp failed to transcribe {seconds:.2} s of audio: {source:?}")]
    Transcribe {
        seconds: f64,
        source: whisper_rs::WhisperError,
    },
    #[error("audio for ASR contains a non-finite sample at index {0}")]
    NonFinite(usize),
}
