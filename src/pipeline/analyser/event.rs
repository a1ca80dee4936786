//! An analysed utterance as its event: the scores, the threshold, each view's cost
//! (`latency_ms`) and readiness (`ready_ms`), and which models made it (`models`).

use crate::config::Config;
use crate::sinks::event::{LatencyMs, ReadyMs, UtteranceEvent, UtteranceFeatures, Views};

use super::super::clock::{round3, RATE};
use super::super::engine::Engine;
use super::super::queues::Utterance;
use super::views::{AudioView, Fused, Shedding, TextView, Transcription, VideoView};

/// Milliseconds since the end of speech, as the analyser saw them.
pub struct Times {
    /// The endpointer's hangover (audio time).
    pub endpoint_ms: f64,
    /// Endpoint to the analyser taking the utterance (includes [`Transcription::in_queue_ms`]).
    pub queue_ms: f64,
    /// Endpoint to the event ready.
    pub processing_ms: f64,
    pub audio_ready: f64,
    pub video_ready: Option<f64>,
    pub text_ready: Option<f64>,
}

/// Everything an utterance's event is made of.
pub struct Analysed<'a> {
    pub engine: &'a Engine,
    pub cfg: &'a Config,
    pub utt: &'a Utterance,
    pub with_features: bool,
    pub times: Times,
    pub shed: Shedding,
    pub audio: AudioView,
    pub video: VideoView,
    pub asr: Transcription,
    pub text: TextView,
    pub fused: Fused,
}

pub fn utterance_event(a: Analysed) -> UtteranceEvent {
    let Analysed {
        engine,
        cfg,
        utt,
        with_features,
        times,
        shed,
        audio,
        video,
        asr,
        text,
        fused,
    } = a;
    let total = round3(times.endpoint_ms + times.processing_ms);
    UtteranceEvent {
        kind: "utterance",
        id: utt.id,
        start_s: round3(utt.span.speech_start as f64 / RATE),
        end_s: round3(utt.span.speech_end as f64 / RATE),
        transcript: (cfg.output.include_transcript && !shed.text)
            .then(|| asr.transcript.text.clone()),
        language: asr.transcript.language.clone(),
        p_sarcastic: fused.p,
        sarcastic: fused.p >= fused.threshold,
        threshold: fused.threshold,
        views: Views {
            text: text.p,
            audio: audio.p,
            video: video.p,
        },
        latency_ms: LatencyMs {
            endpoint: round3(times.endpoint_ms),
            queue: round3(times.queue_ms - asr.in_queue_ms),
            asr: round3(asr.ms + asr.in_queue_ms),
            text: round3(text.ms),
            audio: round3(audio.ms),
            video: round3(video.ms),
            fusion: round3(fused.ms),
            total,
        },
        ready_ms: ReadyMs {
            audio: audio.p.map(|_| round3(times.audio_ready)),
            video: times.video_ready.map(round3),
            text: times.text_ready.map(round3),
            fused: total,
        },
        text_shed: shed.text,
        models: {
            let mut m = engine.models.clone();
            // Which Whisper decoded this transcript (load shedding may have switched).
            if let Some(f) = m.remove("asr_fallback").filter(|_| asr.by_fallback) {
                m.insert("asr".into(), f);
            }
            m
        },
        forced_split: utt.span.forced,
        early_end: utt.span.early,
        revises: utt.revises,
        asr_segments: if cfg.output.include_transcript {
            asr.transcript.segments
        } else {
            Vec::new()
        },
        asr_guards: asr.transcript.guards,
        extras: text.extras,
        room: None,
        features: with_features.then_some(UtteranceFeatures {
            text_embedding: text.embedding,
            prosody: audio.functionals,
            vision: video.functionals,
        }),
    }
}
