//! What a decode returns: segments, their words, and the whole transcript.

use serde::Serialize;

pub use crate::common::asr_segment::{AsrSegment, AsrWord};

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Transcript {
    pub text: String,
    pub language: String,
    pub segments: Vec<AsrSegment>,
    /// What the hallucination guards did, e.g. `no_speech`, `repetition_collapsed`.
    pub guards: Vec<&'static str>,
}
