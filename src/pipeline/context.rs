//! The rolling context store: the last N seconds of audio, prosody frames and
//! transcripts, shared by the segmenter (writes audio and frames) and the analyser
//! (reads them, writes transcripts).

use std::collections::VecDeque;

use crate::sources::audio::PIPELINE_RATE_HZ;
use crate::views::prosody::ProsodyFrame;

#[derive(Debug, Clone, PartialEq)]
pub struct ContextTranscript {
    pub start_s: f64,
    pub end_s: f64,
    pub text: String,
}

pub struct ContextStore {
    context_s: f64,
    audio: VecDeque<f32>,
    audio_capacity: usize,
    /// Stream index of `audio[0]`.
    audio_start: u64,
    frames: VecDeque<ProsodyFrame>,
    transcripts: VecDeque<ContextTranscript>,
}

impl ContextStore {
    /// `audio_keep_s` may exceed `context_s`: the segmenter cuts whole utterances (up to
    /// the maximum length plus pre-roll and hangover) out of this audio.
    pub fn new(context_s: f64, audio_keep_s: f64) -> Self {
        let keep = context_s.max(audio_keep_s);
        let audio_capacity = (keep * PIPELINE_RATE_HZ as f64).ceil() as usize;
        Self {
            context_s,
            audio: VecDeque::with_capacity(audio_capacity),
            audio_capacity,
            audio_start: 0,
            frames: VecDeque::with_capacity((keep * 100.0) as usize + 16),
            transcripts: VecDeque::new(),
        }
    }

    pub fn push_audio(&mut self, samples: &[f32]) {
        self.audio.extend(samples.iter().copied());
        let over = self.audio.len().saturating_sub(self.audio_capacity);
        if over > 0 {
            self.audio.drain(..over);
            self.audio_start += over as u64;
        }
    }

    /// One past the last stored sample.
    pub fn audio_end(&self) -> u64 {
        self.audio_start + self.audio.len() as u64
    }

    /// Samples `[from, to)` (stream indices), clipped to what is still stored.
    pub fn audio_range(&self, from: u64, to: u64) -> (u64, Vec<f32>) {
        let a = from.max(self.audio_start);
        let b = to.min(self.audio_end()).max(a);
        let i = (a - self.audio_start) as usize;
        let j = (b - self.audio_start) as usize;
        (a, self.audio.range(i..j).copied().collect())
    }

    pub fn push_frames(&mut self, frames: &[ProsodyFrame]) {
        self.frames.extend(frames.iter().cloned());
        let horizon = self.audio_start as f64 / PIPELINE_RATE_HZ as f64;
        while self.frames.front().is_some_and(|f| f.t_s < horizon) {
            self.frames.pop_front();
        }
    }

    /// Frames whose centre lies in `[from_s, to_s)`.
    pub fn frames_between(&self, from_s: f64, to_s: f64) -> Vec<ProsodyFrame> {
        self.frames
            .iter()
            .filter(|f| f.t_s >= from_s && f.t_s < to_s)
            .cloned()
            .collect()
    }

    /// Add the transcript of a finished utterance. Transcripts it overlaps are dropped:
    /// an utterance that reopens an early-ended one covers the same speech again, and
    /// the context must not hold it twice.
    pub fn push_transcript(&mut self, t: ContextTranscript) {
        while self.transcripts.back().is_some_and(|x| x.end_s > t.start_s) {
            self.transcripts.pop_back();
        }
        let horizon = t.end_s - self.context_s;
        self.transcripts.push_back(t);
        while self.transcripts.front().is_some_and(|x| x.end_s < horizon) {
            self.transcripts.pop_front();
        }
    }

    /// Transcripts that ended within `context_s` before `before_s`.
    pub fn transcripts_before(&self, before_s: f64) -> Vec<ContextTranscript> {
        self.transcripts
            .iter()
            .filter(|t| t.end_s <= before_s && t.end_s >= before_s - self.context_s)
            .cloned()
            .collect()
    }

    pub fn audio_len(&self) -> usize {
        self.audio.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_is_bounded_and_indexed_by_stream_position() {
        let mut c = ContextStore::new(1.0, 1.0);
        let x: Vec<f32> = (0..40_000).map(|i| i as f32).collect();
        for part in x.chunks(777) {
            c.push_audio(part);
        }
        assert_eq!(c.audio_len(), 16_000);
        assert_eq!(c.audio_end(), 40_000);
        let (start, a) = c.audio_range(30_000, 30_010);
        assert_eq!(start, 30_000);
        assert_eq!(a[0], 30_000.0);
        let (start, a) = c.audio_range(0, 24_010);
        assert_eq!(start, 24_000);
        assert_eq!(a.len(), 10);
    }

    #[test]
    fn transcripts_roll_off() {
        let mut c = ContextStore::new(15.0, 15.0);
        for i in 0..10 {
            let s = i as f64 * 5.0;
            c.push_transcript(ContextTranscript {
                start_s: s,
                end_s: s + 2.0,
                text: format!("t{i}"),
            });
        }
        let t = c.transcripts_before(47.5);
        let names: Vec<_> = t.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(names, vec!["t7", "t8", "t9"]);
    }

    #[test]
    fn a_reopened_utterance_replaces_the_early_one() {
        let mut c = ContextStore::new(15.0, 15.0);
        let t = |start_s, end_s, text: &str| ContextTranscript {
            start_s,
            end_s,
            text: text.into(),
        };
        c.push_transcript(t(1.0, 2.0, "Earlier."));
        c.push_transcript(t(3.0, 4.0, "How lovely."));
        c.push_transcript(t(3.0, 7.0, "How lovely, the video call froze."));
        let names: Vec<_> = c
            .transcripts_before(9.0)
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert_eq!(names, ["Earlier.", "How lovely, the video call froze."]);
    }
}
