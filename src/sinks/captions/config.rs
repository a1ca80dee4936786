//! `[captions]`: where the caption files go and how cues are cut.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::common::validate::Problems;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptionsConfig {
    /// WebVTT file written live; truncated when the daemon starts (cue times are
    /// seconds from the start of the stream).
    pub vtt: Option<PathBuf>,
    /// SRT file written live, same cues.
    pub srt: Option<PathBuf>,
    /// Speaker name for `<v ...>` voice tags (a lectern or single-speaker microphone);
    /// none: no voice tags. sarcasmd does not diarise speakers.
    pub speaker: Option<String>,
    /// Longest cue on screen; longer Whisper segments are split at word boundaries.
    pub max_cue_ms: u32,
    /// When a file reaches this size it is renamed to `<name>.1` (replacing an older
    /// one) and a new file is started, so a daemon running for months stays bounded.
    pub rotate_mb: u32,
}

/// Largest `rotate_mb`: the HTTP listener serves a caption file up to this size.
pub const MAX_ROTATE_MB: u32 = 256;

impl Default for CaptionsConfig {
    fn default() -> Self {
        Self {
            vtt: None,
            srt: None,
            speaker: None,
            max_cue_ms: 7_000,
            rotate_mb: 64,
        }
    }
}

impl CaptionsConfig {
    pub fn enabled(&self) -> bool {
        self.vtt.is_some() || self.srt.is_some()
    }

    /// Every problem of this section (captions are transcripts, so they need
    /// `output.include_transcript`).
    pub fn check(&self, include_transcript: bool, problems: &mut Problems) {
        if self.enabled() && !include_transcript {
            problems.push(
                "captions",
                "captions are transcripts: remove captions.vtt/captions.srt or set output.include_transcript = true",
            );
        }
        if let Some(s) = &self.speaker {
            if s.trim().is_empty() || s.contains(['<', '>', '&', '\n']) || s.contains("-->") {
                problems.push(
                    "captions.speaker",
                    "must be a non-empty name without <, >, &, newlines or -->",
                );
            }
        }
        if !(1_000..=30_000).contains(&self.max_cue_ms) {
            problems.push("captions.max_cue_ms", "must be within 1000..=30000");
        }
        if !(1..=MAX_ROTATE_MB).contains(&self.rotate_mb) {
            problems.push(
                "captions.rotate_mb",
                format!(
                    "must be within 1..={MAX_ROTATE_MB} (a caption file is served whole to the overlay's clients; \
                     64 MB holds months of meetings)"
                ),
            );
        }
        if let (Some(a), Some(b)) = (&self.vtt, &self.srt) {
            if a == b {
                problems.push("captions.srt", "must be a different file from captions.vtt");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privacy_mode_refuses_captions() {
        let cfg = CaptionsConfig {
            vtt: Some("x.vtt".into()),
            ..Default::default()
        };
        let mut p = Problems::default();
        cfg.check(false, &mut p);
        assert_eq!(p.first().unwrap().field, "captions");
        let mut p = Problems::default();
        cfg.check(true, &mut p);
        assert!(p.is_empty());
    }
}
