//! The video sources' error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum VideoError {
    #[error("{what}: cannot open: {reason}")]
    Open { what: String, reason: String },
    #[error("{what}: decoding failed after {seconds:.2} s: {reason}")]
    Decode {
        what: String,
        seconds: f64,
        reason: String,
    },
    #[error("{what}: device lost: {reason}")]
    Lost { what: String, reason: String },
}
