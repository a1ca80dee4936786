//! Interim stage: decodes the audio of the utterance in progress on a second Whisper
//! state and emits it as `partial` text. Runs only for interim text without
//! streaming (with streaming, the analyser's steps give partials for free). Failures
//! here never stop the pipeline: the final decode is what counts.

use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use crate::common::counters::Counters;
use crate::config::Config;
use crate::sinks::event::PartialEvent;
use crate::views::asr::Urgency;

use super::clock::{ms_since, round3, RATE};
use super::engine::Engine;
use super::queues::{send_partial, Emitted, InterimRequest};

pub struct InterimStage<'a> {
    pub engine: &'a Engine,
    pub cfg: &'a Config,
    pub requests: Receiver<InterimRequest>,
    pub events: Sender<Emitted>,
    pub counters: &'a Counters,
}

impl InterimStage<'_> {
    /// Decode requests until the segmenter is done or the sink is gone.
    pub fn run(self) {
        let mut asr = match self.engine.asr.stream(&self.cfg.asr) {
            Ok(a) => a,
            Err(e) => {
                log::warn!("interim text off: cannot create a second ASR state: {e}");
                return;
            }
        };
        for req in self.requests.iter() {
            let t = Instant::now();
            let tr = match asr.transcribe_with(&req.audio, false, Urgency::Captions) {
                Ok(t) => t,
                Err(e) => {
                    log::warn!("interim decode of utterance {} failed: {e}", req.id);
                    continue;
                }
            };
            if tr.text.is_empty() {
                continue;
            }
            let p = PartialEvent {
                kind: "partial",
                id: req.id,
                start_s: round3(req.speech_start as f64 / RATE),
                end_s: round3((req.audio_start + req.audio.len() as u64) as f64 / RATE),
                text: tr.text,
                language: tr.language,
                decode_ms: round3(ms_since(t)),
            };
            if !send_partial(&self.events, self.counters, p) {
                break;
            }
        }
    }
}
