//! The `[asr]` section: which Whisper model, language, threads and streaming steps,
//! checked before anything is loaded; and which model is cheaper (load shedding).

use serde::{Deserialize, Serialize};

use super::urgency::Urgency;
use crate::common::validate::{Problems, Validate};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AsrConfig {
    /// `tiny.en`, `tiny.en-q8_0`, `base`, `base-q8_0` (from the model cache).
    pub model: String,
    /// `en`, `de` or `auto` (detect per utterance; needs a multilingual model).
    pub language: String,
    /// whisper.cpp threads for decodes only captions wait on (streaming steps while
    /// someone speaks, interim text). On 2 cores 1 is cheaper while the rest of the
    /// pipeline runs (ggml's workers busy-wait).
    pub threads: u32,
    /// whisper.cpp threads for decodes an event waits on: the final transcript and
    /// streaming's speculative decode at a pause. 0 = `threads`. These run while the
    /// speaker is silent, when the VAD and prosody need little CPU.
    pub final_threads: u32,
    /// Segments whose no-speech probability exceeds this are dropped as non-speech.
    pub no_speech_threshold: f32,
    /// Run the encoder only over the audio present (plus a margin) instead of the full
    /// 30 s window: several times faster on short utterances.
    pub trim_encoder: bool,
    /// With `language = "auto"`, the languages detection may choose from. Whisper's
    /// free choice among ~100 languages is unreliable on short utterances (short German
    /// sarcasm came out as Thai), so a room's languages are stated.
    pub auto_languages: Vec<String>,
    /// Decode the utterance in progress every this many milliseconds and emit its
    /// interim text as `partial` events (live captions). 0 = off. Costs a second
    /// Whisper state and roughly one extra decode per interval while someone speaks.
    pub interim_every_ms: u32,
    /// Streaming recognition: while someone speaks, decode the utterance so far every
    /// this many milliseconds and commit the words two decodes agree on, so the end of
    /// speech leaves only the tail to decode. 0 = decode each utterance once, after it
    /// ends (the one-shot baseline of `sarcasmd bench`). With streaming on, interim
    /// text (`interim_every_ms` > 0) comes from these steps at no extra cost.
    pub stream_step_ms: u32,
    /// Load shedding step 2: a smaller Whisper model (one of the `model` names) that
    /// decodes final transcripts while the analyser is behind. Loaded at start, so it
    /// costs its memory all the time. Empty = none (the step is skipped).
    pub fallback_model: String,
}

impl Default for AsrConfig {
    fn default() -> Self {
        Self {
            model: "tiny.en-q8_0".into(),
            language: "en".into(),
            threads: 1,
            final_threads: 0,
            no_speech_threshold: 0.6,
            trim_encoder: true,
            auto_languages: vec!["en".into(), "de".into()],
            interim_every_ms: 0,
            stream_step_ms: 1000,
            fallback_model: String::new(),
        }
    }
}

pub const KNOWN_MODELS: &[&str] = &["tiny.en", "tiny.en-q8_0", "base", "base-q8_0"];

impl AsrConfig {
    /// whisper.cpp threads for a decode of this urgency.
    pub fn threads_for(&self, urgency: Urgency) -> u32 {
        match urgency {
            Urgency::Captions => self.threads,
            Urgency::Event if self.final_threads > 0 => self.final_threads,
            Urgency::Event => self.threads,
        }
    }

    /// The model-store name of the configured Whisper model.
    pub fn store_name(&self) -> String {
        format!("whisper-{}", self.model)
    }

    /// The model-store name of the fallback model, if one is configured.
    pub fn fallback_store_name(&self) -> Option<String> {
        (!self.fallback_model.is_empty()).then(|| format!("whisper-{}", self.fallback_model))
    }
}

impl Validate for AsrConfig {
    fn check(&self, problems: &mut Problems) {
        if !KNOWN_MODELS.contains(&self.model.as_str()) {
            problems.push(
                "asr.model",
                format!("`{}` is not one of {}", self.model, KNOWN_MODELS.join(", ")),
            );
        }
        match self.language.as_str() {
            "en" => {}
            "de" | "auto" if self.model.contains(".en") => {
                problems.push(
                    "asr.language",
                    format!(
                        "`{}` needs a multilingual model; `{}` is English-only (use `base` or `base-q8_0`)",
                        self.language, self.model
                    ),
                );
            }
            "de" | "auto" => {}
            other => {
                problems.push(
                    "asr.language",
                    format!("`{other}` is not one of en, de, auto"),
                );
            }
        }
        if self.interim_every_ms != 0 && !(300..=10_000).contains(&self.interim_every_ms) {
            problems.push(
                "asr.interim_every_ms",
                "must be 0 (off) or within 300..=10000",
            );
        }
        if self.stream_step_ms != 0 && !(300..=5_000).contains(&self.stream_step_ms) {
            problems.push(
                "asr.stream_step_ms",
                "must be 0 (one-shot decoding) or within 300..=5000",
            );
        }
        if self.auto_languages.is_empty() {
            problems.push("asr.auto_languages", "must name at least one language");
        }
        for l in &self.auto_languages {
            if whisper_rs::get_lang_id(l).is_none() {
                problems.push(
                    "asr.auto_languages",
                    format!("`{l}` is not a Whisper language code"),
                );
            }
        }
        if !self.fallback_model.is_empty() {
            let field = "asr.fallback_model";
            if !KNOWN_MODELS.contains(&self.fallback_model.as_str()) {
                problems.push(
                    field,
                    format!(
                        "`{}` is not one of {} (or empty for none)",
                        self.fallback_model,
                        KNOWN_MODELS.join(", ")
                    ),
                );
            }
            if model_cost_rank(&self.fallback_model) >= model_cost_rank(&self.model) {
                problems.push(
                    field,
                    format!(
                        "`{}` is not smaller than asr.model `{}` (smallest first: {})",
                        self.fallback_model,
                        self.model,
                        BY_COST.join(", ")
                    ),
                );
            }
            if self.language != "en" && self.fallback_model.contains(".en") {
                problems.push(
                    field,
                    format!(
                        "`{}` is English-only but asr.language is `{}`",
                        self.fallback_model, self.language
                    ),
                );
            }
        }
        if !(1..=16).contains(&self.threads) {
            problems.push("asr.threads", "must be within 1..=16");
        }
        if self.final_threads > 16 {
            problems.push(
                "asr.final_threads",
                "must be within 0..=16 (0 = asr.threads)",
            );
        }
        if !(0.0..=1.0).contains(&self.no_speech_threshold) {
            problems.push("asr.no_speech_threshold", "must be within 0..=1");
        }
    }
}

/// The models from cheapest to dearest to run (file size order).
pub(super) const BY_COST: &[&str] = &["tiny.en-q8_0", "tiny.en", "base-q8_0", "base"];

pub(super) fn model_cost_rank(model: &str) -> usize {
    BY_COST
        .iter()
        .position(|m| *m == model)
        .unwrap_or(usize::MAX)
}
