//! The events a report reads: utterances with their view scores, source gaps, and a
//! `replay --stats` summary.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The fields of an `utterance` event the page shows (docs/events.md).
#[derive(Debug, Clone, Deserialize)]
pub struct Utterance {
    pub id: u64,
    pub start_s: f64,
    pub end_s: f64,
    pub transcript: Option<String>,
    /// Null when no view the fusion weighs had a score.
    pub p_sarcastic: Option<f64>,
    pub sarcastic: bool,
    pub threshold: f64,
    pub views: Views,
    #[serde(default)]
    pub latency_ms: BTreeMap<String, f64>,
    #[serde(default)]
    pub text_shed: bool,
    #[serde(default)]
    pub forced_split: bool,
    #[serde(default)]
    pub early_end: bool,
    #[serde(default)]
    pub revises: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Views {
    pub text: Option<f64>,
    pub audio: Option<f64>,
    #[serde(default)]
    pub video: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Gap {
    pub source: String,
    pub start_s: f64,
    pub end_s: f64,
    pub reason: String,
}

/// The parts of `sarcasmd replay --stats` the page shows: drop counters by reason and
/// the audio length (the event stream itself carries no counters).
#[derive(Debug, Clone, Deserialize)]
pub struct RunStats {
    pub audio_s: f64,
    pub wall_s: f64,
    #[serde(default)]
    pub dropped: BTreeMap<String, u64>,
    #[serde(default)]
    pub source_gaps: u64,
    #[serde(default)]
    pub source_gap_s: f64,
    #[serde(default)]
    pub budget_violations: u64,
}
