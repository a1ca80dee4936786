//! `[room]`: whether the daemon learns from the room's corrections, where it keeps them,
//! and how far a correction reaches.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::common::validate::{Problems, Validate};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoomConfig {
    /// Accept corrections (`POST /events/{id}/feedback`, MQTT `<prefix>/<device>/feedback`,
    /// `sarcasmd feedback`) and apply the room head to every event. Off by default: a
    /// `replay` or `eval` scores with the shipped heads alone.
    pub enabled: bool,
    /// The corrections file (append-only JSON lines). A relative path is taken from the
    /// working directory, which is the state directory under systemd
    /// (`/var/lib/sarcasmd`).
    pub store: PathBuf,
    /// Corrections kept at most; beyond it the oldest are dropped when the file is
    /// compacted (counted: `sarcasmd_room_corrections_dropped_total`).
    pub max_corrections: usize,
    /// Events held in memory so a correction can name one by its `id` (with its text
    /// embedding and prosody); older ones are refused with a reason.
    pub recent_events: usize,
    /// A line whose sentence-embedding cosine to a line the room marked "not sarcastic"
    /// is at least this is scored just below the operating point (muted). 0.9 was chosen
    /// on AMI meeting series by `models/studies/room_feedback`.
    pub mute_cosine: f32,
    /// The most a mute lowers a score, in log-odds of the served score: a line scored
    /// further above the threshold than this stays flagged (lowered by this much), so a
    /// near-duplicate match cannot erase a confident flag outright. 3.0 takes a 0.95 just
    /// below every shipped operating point. With today's fusion (the text logit clipped to
    /// ±4, temperature 0.333: every served score ≤ 0.79) it never binds; it bounds what a
    /// sharper head could let a mute do.
    pub max_shift_logit: f32,
    /// Keep each corrected line's transcript in the store (for `sarcasmd feedback
    /// --list`); off, only the embedding, prosody and scores are kept. Ignored when
    /// `output.include_transcript` is off.
    pub keep_transcripts: bool,
}

impl Default for RoomConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            store: PathBuf::from("room/corrections.jsonl"),
            max_corrections: 500,
            recent_events: 1000,
            mute_cosine: 0.9,
            max_shift_logit: 3.0,
            keep_transcripts: false,
        }
    }
}

impl Validate for RoomConfig {
    fn check(&self, problems: &mut Problems) {
        if self.store.as_os_str().is_empty() || self.store.file_name().is_none() {
            problems.push(
                "room.store",
                "must name a file (e.g. \"room/corrections.jsonl\")",
            );
        }
        if !(1..=100_000).contains(&self.max_corrections) {
            problems.push("room.max_corrections", "must be within 1..=100000");
        }
        if !(1..=100_000).contains(&self.recent_events) {
            problems.push("room.recent_events", "must be within 1..=100000");
        }
        if !(self.mute_cosine >= 0.5 && self.mute_cosine <= 1.0) {
            problems.push(
                "room.mute_cosine",
                "must be within [0.5, 1]: below 0.5 a correction would mute unrelated lines (0.9 is the measured choice)",
            );
        }
        if !(self.max_shift_logit > 0.0 && self.max_shift_logit <= 10.0) {
            problems.push(
                "room.max_shift_logit",
                "must be within (0, 10] log-odds (3.0 takes a 0.95 below every shipped operating point)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_name_their_field() {
        let mut p = Problems::default();
        RoomConfig::default().check(&mut p);
        assert!(p.is_empty(), "{p:?}");
        let c = RoomConfig {
            store: PathBuf::new(),
            max_corrections: 0,
            recent_events: 0,
            mute_cosine: 0.2,
            max_shift_logit: 0.0,
            ..Default::default()
        };
        let mut p = Problems::default();
        c.check(&mut p);
        let fields: Vec<&str> = p.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "room.store",
                "room.max_corrections",
                "room.recent_events",
                "room.mute_cosine",
                "room.max_shift_logit"
            ]
        );
    }
}
