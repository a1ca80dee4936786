//! The event's `extras` field: MUStARD++'s extra labels as the extras head
//! (`views::extras`) scores them and the outputs write them. Here, below both, so the
//! outputs need not import the views.

use serde::Serialize;

/// Top class of a classification output and its probability.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassScore {
    pub label: String,
    pub p: f32,
}

/// The event's `extras` field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Extras {
    pub emotion_implicit: ClassScore,
    pub emotion_explicit: ClassScore,
    pub sarcasm_type: ClassScore,
    /// 1 (very unpleasant) .. 9 (very pleasant), 5 neutral.
    pub valence: f32,
    /// 1 (very calm) .. 9 (very intense).
    pub arousal: f32,
}
