//! One utterance's views, each a function that returns its score and its cost under the
//! names `docs/events.md` gives them (`views.{audio,video,text}`, `latency_ms.{audio,
//! video,asr,text,fusion}`): the audio view, the video view, transcription, the text
//! view and fusion, in the order the analyser runs them. The audio and video views need
//! no transcript, so they are ready first (`ready_ms`).

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::counters::Counters;
use crate::common::lock::LockOrRecover;
use crate::common::shed::{ShedLadder, ShedStep};
use crate::config::Config;
use crate::pipeline::context::ContextStore;
use crate::sources::audio::PIPELINE_RATE_HZ;
use crate::views::asr::Transcript;
use crate::views::extras::Extras;
use crate::views::prosody;
use crate::views::vision::stream::VisionTimeline;

use super::super::clock::{ms_since, RATE};
use super::super::engine::Engine;
use super::super::error::PipelineError;
use super::super::queues::Utterance;
use super::super::shutdown::Shutdown;
use super::state::StreamState;

/// The audio view: prosody functionals over the utterance's speech and the audio head.
pub struct AudioView {
    pub functionals: Vec<f32>,
    /// `views.audio`; `None` without heads (feature extraction).
    pub p: Option<f32>,
    /// `latency_ms.audio`.
    pub ms: f64,
}

pub fn audio_view(engine: &Engine, utt: &Utterance) -> Result<AudioView, PipelineError> {
    let t = Instant::now();
    let start_s = utt.span.speech_start as f64 / RATE;
    let s0 = (utt.span.speech_start - utt.audio_start) as usize;
    let s1 = ((utt.span.speech_end - utt.audio_start) as usize).min(utt.audio.len());
    let functionals = prosody::utterance_functionals_at(
        &utt.frames,
        &utt.audio[s0.min(s1)..s1],
        start_s,
        PIPELINE_RATE_HZ,
    );
    let p = match &engine.fusion {
        Some(f) => Some(f.audio.predict(&functionals.values)?),
        None => None,
    };
    Ok(AudioView {
        functionals: functionals.values,
        p,
        ms: ms_since(t),
    })
}

/// Where the analyser finds an utterance's frames.
pub struct VideoInput<'a> {
    pub timeline: Option<&'a VisionTimeline>,
    /// A camera: wait at most about one analysis period for the frames of the
    /// utterance's end; a file: wait until they are analysed (deterministic replays).
    pub live: bool,
    pub analyse_fps: f32,
    pub shutdown: &'a Shutdown,
}

impl VideoInput<'_> {
    /// Vision functionals over the utterance's frames; `None` without a face.
    fn functionals(&self, start_s: f64, end_s: f64) -> Option<Vec<f32>> {
        let tl = self.timeline?;
        let wait = self
            .live
            .then(|| Duration::from_secs_f64(1.5 / self.analyse_fps as f64));
        crate::views::vision::functionals(&tl.window(
            start_s,
            end_s,
            wait,
            self.shutdown.failed_flag(),
        ))
    }
}

/// The video view: frames were analysed while the person spoke, so only the
/// functionals and the head remain.
pub struct VideoView {
    /// `None` without a face in the utterance's frames.
    pub functionals: Option<Vec<f32>>,
    /// `views.video`.
    pub p: Option<f32>,
    /// `latency_ms.video`.
    pub ms: f64,
}

pub fn video_view(
    engine: &Engine,
    video: &VideoInput,
    counters: &Counters,
    (start_s, end_s): (f64, f64),
) -> Result<VideoView, PipelineError> {
    let t = Instant::now();
    let functionals = video.functionals(start_s, end_s);
    if video.timeline.is_some() && functionals.is_none() {
        counters
            .vision
            .utterances_without_face
            .fetch_add(1, Ordering::Relaxed);
    }
    let p = match (
        engine.fusion.as_ref().and_then(|f| f.video.as_ref()),
        &functionals,
    ) {
        (Some(head), Some(v)) => Some(head.predict(v)?),
        _ => None,
    };
    Ok(VideoView {
        functionals,
        p,
        ms: ms_since(t),
    })
}

/// What the shedding ladder leaves this utterance (`crate::common::shed`).
pub struct Shedding {
    /// Finished utterances waiting behind this one (for the log).
    pub backlog: usize,
    /// No transcript and no text view (`text_shed`).
    pub text: bool,
    /// The final transcript is decoded by the fallback model.
    pub fallback: bool,
}

/// Moves the ladder by whether this utterance starts behind: more utterances wait, or it
/// already waited past the latency budget (`waited_ms`: end of speech to now).
pub fn shedding(
    cfg: &Config,
    ladder: &ShedLadder,
    state: &StreamState,
    utt: &Utterance,
    backlog: usize,
    waited_ms: f64,
) -> Shedding {
    let duration_s = (utt.span.speech_end - utt.span.speech_start) as f64 / RATE;
    let budget_ms = cfg.budget.event_latency_ms as f64;
    let behind = backlog >= 1 || (budget_ms > 0.0 && waited_ms > budget_ms);
    match ladder.observe(behind) {
        Some((step, true)) => log::warn!(
            "utterance {}: behind ({backlog} waiting, {waited_ms:.0} ms since the end of speech): shedding {step:?}",
            utt.id,
        ),
        Some((step, false)) => log::info!("utterance {}: on time again: {step:?} restored", utt.id),
        None => {}
    }
    let shed_over_s = cfg.budget.shed_text_over_ms as f64 / 1e3;
    Shedding {
        backlog,
        text: behind && ladder.is_active(ShedStep::Text) && duration_s > shed_over_s,
        fallback: ladder.is_active(ShedStep::AsrModel) && state.fallback.is_some(),
    }
}

/// Transcription: the final transcript, one-shot or finished from the streaming state.
pub struct Transcription {
    pub transcript: Transcript,
    /// `latency_ms.asr` before the part spent in the queue (below).
    pub ms: f64,
    /// The part of the queue time the utterance spent waiting for its own transcript: the
    /// speculative decode made at its final pause, still running at the endpoint. It is
    /// ASR time, and is reported as such (`latency_ms.asr`), not as queueing.
    pub in_queue_ms: f64,
    /// The fallback model decoded it (a speculative final was decoded by the main model
    /// during the pause, so it does not count).
    pub by_fallback: bool,
}

pub fn transcription(
    state: &mut StreamState,
    utt: &Utterance,
    shed: &Shedding,
    queue_ms: f64,
    counters: &Counters,
) -> Result<Transcription, PipelineError> {
    let StreamState {
        asr,
        fallback,
        streaming,
        ..
    } = state;
    let asr = match fallback.as_mut() {
        Some(f) if shed.fallback => f,
        _ => asr,
    };
    let t = Instant::now();
    let mut in_queue_ms = 0.0;
    let mut by_fallback = false;
    let transcript = if shed.text {
        counters.text_shed.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "utterance {} ({:.1} s): transcript and text view skipped, {} utterances waiting",
            utt.id,
            (utt.span.speech_end - utt.span.speech_start) as f64 / RATE,
            shed.backlog
        );
        Transcript::default()
    } else if let Some(st) = streaming.as_mut() {
        let carried = st.carried_over();
        let (tr, speculative) = st.finish(
            asr,
            utt.id,
            utt.audio_start,
            &utt.audio,
            utt.span.speech_end,
        )?;
        // A reopened utterance whose final came before any step on it goes on here.
        counters
            .reopened_carried_over
            .fetch_add(st.carried_over() - carried, Ordering::Relaxed);
        if speculative {
            counters.speculative_finals.fetch_add(1, Ordering::Relaxed);
            if let Some(done) = st.final_decoded_at() {
                in_queue_ms = done
                    .saturating_duration_since(utt.endpoint_at)
                    .as_secs_f64()
                    .min(queue_ms / 1e3)
                    * 1e3;
            }
        } else if shed.fallback {
            counters
                .shed
                .fallback_decodes
                .fetch_add(1, Ordering::Relaxed);
            by_fallback = true;
        }
        tr
    } else {
        if shed.fallback {
            counters
                .shed
                .fallback_decodes
                .fetch_add(1, Ordering::Relaxed);
            by_fallback = true;
        }
        let mut tr = asr.transcribe(&utt.audio)?;
        let offset_s = utt.audio_start as f64 / RATE;
        for seg in &mut tr.segments {
            seg.start_s += offset_s;
            seg.end_s += offset_s;
        }
        tr
    };
    Ok(Transcription {
        transcript,
        ms: ms_since(t),
        in_queue_ms,
        by_fallback,
    })
}

/// The text view: the sentence embedding of the transcript (with the context's earlier
/// transcripts when `context.text_uses_context`), the text head, and the extras head on
/// the same embedding (its time counts in `text`).
pub struct TextView {
    pub embedding: Option<Vec<f32>>,
    /// `views.text`; `None` for an empty transcript.
    pub p: Option<f32>,
    pub extras: Option<Extras>,
    /// `latency_ms.text`.
    pub ms: f64,
}

pub fn text_view(
    engine: &Engine,
    cfg: &Config,
    ctx: &Mutex<ContextStore>,
    transcript: &str,
    start_s: f64,
) -> Result<TextView, PipelineError> {
    let t = Instant::now();
    let mut view = TextView {
        embedding: None,
        p: None,
        extras: None,
        ms: 0.0,
    };
    if let Some(enc) = engine.text.as_ref().filter(|_| !transcript.is_empty()) {
        let input = if cfg.context.text_uses_context {
            let prev = ctx.lock_or_recover().transcripts_before(start_s);
            let mut s: Vec<&str> = prev.iter().map(|t| t.text.as_str()).collect();
            s.push(transcript);
            s.join(" ")
        } else {
            transcript.to_string()
        };
        let e = enc.embed(&input)?;
        if let Some(head) = engine.fusion.as_ref().and_then(|f| f.text.as_ref()) {
            view.p = Some(head.predict(&e)?);
        }
        if let Some(head) = engine.fusion.as_ref().and_then(|f| f.extras.as_ref()) {
            view.extras = Some(head.predict(&e)?);
        }
        view.embedding = Some(e);
    }
    view.ms = ms_since(t);
    Ok(view)
}

/// Fusion of the views present: `p_sarcastic` and the operating point's threshold.
pub struct Fused {
    /// NaN without heads (feature extraction only): it serialises as null and never
    /// reaches a user-facing sink, since the daemon always loads heads.
    pub p: f32,
    pub threshold: f32,
    /// `latency_ms.fusion`.
    pub ms: f64,
}

pub fn fusion(
    engine: &Engine,
    text: Option<f32>,
    audio: Option<f32>,
    video: Option<f32>,
) -> Result<Fused, PipelineError> {
    let t = Instant::now();
    let (p, threshold) = match &engine.fusion {
        Some(f) => (f.fuse(text, audio, video)?.unwrap_or(f32::NAN), f.threshold),
        None => (f32::NAN, f32::NAN),
    };
    Ok(Fused {
        p,
        threshold,
        ms: ms_since(t),
    })
}
