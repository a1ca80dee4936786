//! One item's scores, as written to the JSON report.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::tools::manifest::ModalityLabels;

/// One item's scores, as written to the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct ItemResult {
    pub id: String,
    pub label: Option<bool>,
    #[serde(skip)]
    pub modality_labels: ModalityLabels,
    #[serde(skip)]
    pub annotators: Vec<bool>,
    pub has_audio: bool,
    pub has_video: bool,
    /// Utterances the pipeline found in the item's audio (0 for text-only items).
    pub utterances: usize,
    /// "whisper" or "gold": which transcript the text view read.
    pub text_from: Option<&'static str>,
    pub text: Option<String>,
    /// Context words prepended in the context condition.
    pub context_words: usize,
    /// Probability per configuration ("T", "A", "T+A", "served", "T|ctx", ...): present
    /// only when the item has every view the configuration needs.
    pub p: BTreeMap<String, f32>,
    /// The item has audio but the pipeline found no utterance: the served system said
    /// nothing, which the "served" rows count as "not sarcastic".
    pub silent: bool,
    /// `text_key` of the gold transcript: matched against the heads' training items.
    #[serde(skip)]
    pub gold_key: Option<String>,
}
