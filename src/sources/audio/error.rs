//! The audio sources' error type.

use std::path::PathBuf;

use thiserror::Error;

use super::resample::ResampleError;

#[derive(Debug, Error)]
pub enum AudioError {
    #[error("{path}: cannot open: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a readable WAV file: {reason}")]
    NotWav { path: PathBuf, reason: String },
    #[error("{path}: unsupported WAV format: {reason} (supported: PCM 16/24/32-bit integer, 32-bit float; convert with `sox IN -b 16 OUT.wav`)")]
    Unsupported { path: PathBuf, reason: String },
    #[error("{path}: WAV file is truncated: {reason}")]
    Truncated { path: PathBuf, reason: String },
    #[error("{path}: holds no audio samples")]
    Empty { path: PathBuf },
    #[error("{what}: read failed after {seconds:.2} s of audio: {reason}")]
    Read {
        what: String,
        seconds: f64,
        reason: String,
    },
    #[error("{what}: invalid sample rate: {reason}")]
    Rate { what: String, reason: String },
    #[error("{what}: resampling failed: {source}")]
    Resample { what: String, source: ResampleError },
}
