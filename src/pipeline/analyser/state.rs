//! The analyser's per-stream decoder state (tract's plan/state split: the [`Engine`]'s
//! models are shared and loaded once; this is what one stream owns): the Whisper state,
//! the fallback model's state, the streaming decoder, and the last finished utterance.
//! Streaming steps run here, between finished utterances.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::common::counters::Counters;
use crate::config::Config;
use crate::sinks::event::PartialEvent;
use crate::views::asr::streaming::{GiveUp, StepAt, StreamingAsr};
use crate::views::asr::AsrStream;

use super::super::clock::{ms_since, round3, RATE};
use super::super::engine::Engine;
use super::super::error::PipelineError;
use super::super::queues::{send_partial, Emitted, StepRequest};
use super::super::segmenter::SpeechSignals;

/// What one stream's analyser decodes with.
pub struct StreamState {
    pub asr: AsrStream,
    /// The shedding ladder's smaller Whisper (`asr.fallback_model`).
    pub fallback: Option<AsrStream>,
    /// The utterance in progress, decoded in steps (`Plan::streaming`).
    pub streaming: Option<StreamingAsr>,
    /// The id of the last finished utterance: a step for it or before is stale.
    pub last_final: Option<u64>,
}

/// Where a streaming step's interim text and counts go.
pub struct StepOutputs<'a> {
    pub partials: bool,
    pub events: &'a Sender<Emitted>,
    pub counters: &'a Counters,
    pub signals: &'a SpeechSignals,
}

impl StreamState {
    pub fn new(engine: &Engine, cfg: &Config, streaming: bool) -> Result<Self, PipelineError> {
        Ok(Self {
            asr: engine.asr.stream(&cfg.asr)?,
            fallback: match &engine.asr_fallback {
                Some(m) => Some(m.stream(&cfg.asr)?),
                None => None,
            },
            streaming: streaming.then(StreamingAsr::new),
            last_final: None,
        })
    }

    /// One streaming step, and its interim text. `utterance_waits` says a finished
    /// utterance is queued: a regular step then gives way.
    pub fn step(
        &mut self,
        req: StepRequest,
        out: &StepOutputs,
        utterance_waits: &dyn Fn() -> bool,
    ) -> Result<(), PipelineError> {
        let Self {
            asr,
            streaming,
            last_final,
            ..
        } = self;
        let Some(st) = streaming.as_mut() else {
            return Ok(());
        };
        let counters = out.counters;
        if last_final.is_some_and(|l| req.id <= l) {
            counters.stream_steps_stale.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let t = Instant::now();
        let at = StepAt {
            id: req.id,
            audio_start: req.audio_start,
            speech_end: req.speech_end,
            last_gap: req.last_gap,
        };
        let signals = out.signals;
        let pause_ended = || {
            signals
                .resumed
                .after(req.speech_end)
                .map(|len| len as f64 / RATE)
        };
        // Only captions wait on a regular step: it gives way to a pause's decode (which
        // may be the final transcript) and to a finished utterance.
        let superseded = || {
            let p = signals.pause_step_at.load(Ordering::Acquire);
            (p != u64::MAX && p >= req.speech_end) || utterance_waits()
        };
        let (abandoned, superseded_before, carried, commits) = (
            st.abandoned_decodes(),
            st.superseded_decodes(),
            st.carried_over(),
            st.commits(),
        );
        let r = st.step(
            asr,
            &at,
            &req.audio,
            req.speculative,
            out.partials,
            &GiveUp {
                pause_ended: &pause_ended,
                superseded: &superseded,
            },
        )?;
        counters.stream_steps_superseded.fetch_add(
            st.superseded_decodes() - superseded_before,
            Ordering::Relaxed,
        );
        counters
            .reopened_carried_over
            .fetch_add(st.carried_over() - carried, Ordering::Relaxed);
        counters
            .stream_commits
            .fetch_add(st.commits() - commits, Ordering::Relaxed);
        if st.abandoned_decodes() > abandoned {
            counters
                .stream_steps_abandoned
                .fetch_add(1, Ordering::Relaxed);
            log::debug!(
                "step utt {}: decode at the pause after {:.2} s abandoned after {:.0} ms: speech resumed",
                req.id,
                req.speech_end as f64 / RATE,
                ms_since(t)
            );
        }
        if req.speculative && st.speculation_ends_sentence(req.id) {
            signals
                .sentence_end_at
                .store(req.speech_end, Ordering::Release);
        }
        let Some(r) = r else {
            return Ok(());
        };
        counters.stream_steps.fetch_add(1, Ordering::Relaxed);
        log::debug!(
            "step utt {} {:.2}-{:.2} s{}: committed {:?} (+{}), tentative {:?}, {:.0} ms",
            req.id,
            req.audio_start as f64 / RATE,
            (req.audio_start + req.audio.len() as u64) as f64 / RATE,
            if req.speculative { " (pause)" } else { "" },
            r.committed_text,
            r.committed_words,
            r.tentative_text,
            ms_since(t)
        );
        let text = [r.committed_text.as_str(), r.tentative_text.as_str()]
            .iter()
            .filter(|t| !t.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        if out.partials && !text.is_empty() {
            let p = PartialEvent {
                kind: "partial",
                id: req.id,
                start_s: round3(req.speech_start as f64 / RATE),
                end_s: round3((req.audio_start + req.audio.len() as u64) as f64 / RATE),
                text,
                language: r.language,
                decode_ms: round3(ms_since(t)),
            };
            // A gone sink ends the run through the final events' path.
            send_partial(out.events, counters, p);
        }
        Ok(())
    }
}
