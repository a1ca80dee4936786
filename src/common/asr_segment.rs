//! A Whisper segment and its words, as a decode returns them (`views::asr`) and as
//! events carry them to the outputs (`asr_segments`, the cues of the captions). Here,
//! below both, so the outputs need not import the views.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AsrSegment {
    /// Seconds from the start of the audio handed in.
    pub start_s: f64,
    pub end_s: f64,
    pub text: String,
    pub no_speech_prob: f32,
    /// Words with their token ids (streaming decoding); only with `want_words`.
    #[serde(skip)]
    pub words: Vec<AsrWord>,
}

/// One word of a decode: text as Whisper wrote it (leading space included) and times
/// from whisper.cpp's token timestamps (approximate: often a word late with tiny.en).
#[derive(Debug, Clone, PartialEq)]
pub struct AsrWord {
    pub text: String,
    pub start_s: f64,
    pub end_s: f64,
}
