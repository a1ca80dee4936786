//! Analyser stage: for each finished utterance, the audio view, the video view, the
//! transcript (one-shot, or finished from the streaming state), the text view and
//! fusion, into one event. Between finished utterances it runs streaming steps on
//! the utterance in progress; finished utterances always go first. Load shedding
//! (`crate::shed`) is decided here, where lateness is seen.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::asr::{AsrStream, Transcript};
use crate::audio::PIPELINE_RATE_HZ;
use crate::config::Config;
use crate::context::{ContextStore, ContextTranscript};
use crate::counters::Counters;
use crate::event::{LatencyMs, PartialEvent, ReadyMs, UtteranceEvent, UtteranceFeatures, Views};
use crate::lock::LockOrRecover;
use crate::prosody;
use crate::shed::{ShedLadder, ShedStep};
use crate::streaming::StreamingAsr;
use crate::vision::stream::VisionTimeline;

use super::engine::Engine;
use super::queues::{send_partial, Emitted, StepRequest, Utterance};
use super::segmenter::SpeechSignals;
use super::shutdown::Shutdown;
use super::{ms_since, round3, PipelineError, RATE};

pub struct Analyser<'a, 'l> {
    pub engine: &'a Engine,
    pub cfg: &'a Config,
    pub ctx: &'a Mutex<ContextStore>,
    pub counters: &'a Counters,
    pub ladder: &'a ShedLadder<'l>,
    pub utterances: Receiver<Utterance>,
    pub steps: Receiver<StepRequest>,
    pub events: Sender<Emitted>,
    /// Decode the utterance in progress in steps (`Plan::streaming`).
    pub streaming: bool,
    /// Interim text goes out (`Plan::partials`).
    pub partials: bool,
    /// Attach feature vectors to events.
    pub with_features: bool,
    /// The analysed frames, when the vision threads run.
    pub timeline: Option<&'a VisionTimeline>,
    /// The frames come from a camera (`Plan::frames_live`).
    pub frames_live: bool,
    pub signals: &'a SpeechSignals,
    pub shutdown: Shutdown,
}

impl Analyser<'_, '_> {
    /// Analyse until the segmenter is done and every utterance is out, or the sink is
    /// gone. A failure stops the run; either way the audio side is then finished, so
    /// the frame reader stops too.
    pub fn run(self) -> Result<(), PipelineError> {
        let shutdown = self.shutdown.clone();
        let r = self.analyse_all();
        if r.is_err() {
            shutdown.fail();
        }
        shutdown.finish_audio();
        r
    }

    fn analyse_all(self) -> Result<(), PipelineError> {
        let Self {
            engine,
            cfg,
            ctx,
            counters,
            ladder,
            utterances: utt_rx,
            steps,
            events: ev_tx,
            streaming,
            partials,
            with_features,
            timeline,
            frames_live,
            signals,
            shutdown,
        } = self;
        let mut asr = engine.asr.stream(&cfg.asr)?;
        let mut fallback_asr = match &engine.asr_fallback {
            Some(m) => Some(m.stream(&cfg.asr)?),
            None => None,
        };
        let mut stream_asr = streaming.then(StreamingAsr::new);
        let mut steps = steps;
        let mut last_final: Option<u64> = None;
        loop {
            // Finished utterances first; steps only when none waits.
            let utt = match utt_rx.try_recv() {
                Ok(u) => u,
                Err(crossbeam_channel::TryRecvError::Disconnected) => break,
                Err(crossbeam_channel::TryRecvError::Empty) => {
                    crossbeam_channel::select! {
                        recv(utt_rx) -> u => match u {
                            Ok(u) => u,
                            Err(_) => break,
                        },
                        recv(steps) -> req => {
                            match req {
                                Ok(req) => {
                                    counters.heartbeat.analysing(true);
                                    let r = run_step(
                                        &mut asr,
                                        stream_asr.as_mut(),
                                        req,
                                        last_final,
                                        partials,
                                        &ev_tx,
                                        counters,
                                        signals,
                                        &|| !utt_rx.is_empty(),
                                    );
                                    counters.heartbeat.analysing(false);
                                    r?;
                                }
                                // The segmenter is done; only finals remain.
                                Err(_) => steps = crossbeam_channel::never(),
                            }
                            continue;
                        }
                    }
                }
            };
            last_final = Some(utt.id);
            counters
                .utterance_queue_depth
                .store(utt_rx.len() as u64, Ordering::Relaxed);
            counters.heartbeat.analysing(true);
            let backlog = utt_rx.len();
            let ev = analyse(
                engine,
                cfg,
                Decoders {
                    asr: &mut asr,
                    fallback: fallback_asr.as_mut(),
                    ladder,
                },
                stream_asr.as_mut(),
                ctx,
                utt,
                with_features,
                backlog,
                counters,
                VideoInput {
                    timeline,
                    live: frames_live,
                    analyse_fps: cfg.vision.analyse_fps,
                    shutdown: &shutdown,
                },
            );
            counters.heartbeat.analysing(false);
            let ev = ev?;
            if ev.transcript.as_deref().is_some_and(str::is_empty) {
                counters.empty_transcripts.fetch_add(1, Ordering::Relaxed);
            }
            if ev_tx.send(Emitted::Utterance(Box::new(ev))).is_err() {
                break;
            }
        }
        Ok(())
    }
}

/// One streaming step in the analyser thread, and its interim text.
#[allow(clippy::too_many_arguments)]
fn run_step(
    asr: &mut AsrStream,
    stream_asr: Option<&mut StreamingAsr>,
    req: StepRequest,
    last_final: Option<u64>,
    partials_on: bool,
    tx: &Sender<Emitted>,
    counters: &Counters,
    signals: &SpeechSignals,
    utterance_waits: &dyn Fn() -> bool,
) -> Result<(), PipelineError> {
    let Some(st) = stream_asr else {
        return Ok(());
    };
    if last_final.is_some_and(|l| req.id <= l) {
        counters.stream_steps_stale.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    let t = Instant::now();
    let at = crate::streaming::StepAt {
        id: req.id,
        audio_start: req.audio_start,
        speech_end: req.speech_end,
        last_gap: req.last_gap,
    };
    let pause_ended = || {
        signals
            .resumed
            .after(req.speech_end)
            .map(|len| len as f64 / RATE)
    };
    // Only captions wait on a regular step: it gives way to a pause's decode (which may
    // be the final transcript) and to a finished utterance.
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
        partials_on,
        &crate::streaming::GiveUp {
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
    if partials_on && !text.is_empty() {
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
        send_partial(tx, counters, p);
    }
    Ok(())
}

/// Where the analyser finds an utterance's frames.
struct VideoInput<'a> {
    timeline: Option<&'a VisionTimeline>,
    /// A camera: wait at most about one analysis period for the frames of the
    /// utterance's end; a file: wait until they are analysed (deterministic replays).
    live: bool,
    analyse_fps: f32,
    shutdown: &'a Shutdown,
}

impl VideoInput<'_> {
    /// Vision functionals over the utterance's frames; `None` without a face.
    fn functionals(&self, start_s: f64, end_s: f64) -> Option<Vec<f32>> {
        let tl = self.timeline?;
        let wait = self
            .live
            .then(|| Duration::from_secs_f64(1.5 / self.analyse_fps as f64));
        crate::vision::functionals(&tl.window(start_s, end_s, wait, self.shutdown.failed_flag()))
    }
}

/// The analyser's Whisper states, and the ladder that says which one decodes.
struct Decoders<'a, 'l> {
    asr: &'a mut AsrStream,
    fallback: Option<&'a mut AsrStream>,
    ladder: &'a ShedLadder<'l>,
}

#[allow(clippy::too_many_arguments)]
fn analyse(
    engine: &Engine,
    cfg: &Config,
    decoders: Decoders,
    stream_asr: Option<&mut StreamingAsr>,
    ctx: &Mutex<ContextStore>,
    utt: Utterance,
    with_features: bool,
    backlog: usize,
    counters: &Counters,
    video: VideoInput,
) -> Result<UtteranceEvent, PipelineError> {
    let queue = ms_since(utt.endpoint_at);
    let start_s = utt.span.speech_start as f64 / RATE;
    let end_s = utt.span.speech_end as f64 / RATE;
    // Milliseconds from the end of speech to now (the hangover is audio time).
    let endpoint = utt.endpoint_delay_samples as f64 / RATE * 1e3;
    let since_speech_end =
        |t: Instant| endpoint + t.duration_since(utt.endpoint_at).as_secs_f64() * 1e3;

    // The audio view first: it needs no transcript, so it is ready within a
    // millisecond of the endpoint (`ready_ms.audio`).
    let t = Instant::now();
    let s0 = (utt.span.speech_start - utt.audio_start) as usize;
    let s1 = ((utt.span.speech_end - utt.audio_start) as usize).min(utt.audio.len());
    let functionals = prosody::utterance_functionals_at(
        &utt.frames,
        &utt.audio[s0.min(s1)..s1],
        start_s,
        PIPELINE_RATE_HZ,
    );
    let p_audio = match &engine.fusion {
        Some(f) => Some(f.audio.predict(&functionals.values)?),
        None => None,
    };
    let audio_ms = ms_since(t);
    let audio_ready = since_speech_end(Instant::now());

    // The video view: frames were analysed while the person spoke, so only the
    // functionals and the head remain.
    let t = Instant::now();
    let vision_functionals = video.functionals(start_s, end_s);
    if video.timeline.is_some() && vision_functionals.is_none() {
        counters
            .vision
            .utterances_without_face
            .fetch_add(1, Ordering::Relaxed);
    }
    let p_video = match (
        engine.fusion.as_ref().and_then(|f| f.video.as_ref()),
        &vision_functionals,
    ) {
        (Some(head), Some(v)) => Some(head.predict(v)?),
        _ => None,
    };
    let video_ms = ms_since(t);
    let video_ready = p_video.map(|_| since_speech_end(Instant::now()));

    let shed_over = cfg.budget.shed_text_over_ms as f64 / 1e3;
    // Behind: more utterances wait, or this one already waited past the latency budget.
    let budget_ms = cfg.budget.event_latency_ms as f64;
    let behind = backlog >= 1 || (budget_ms > 0.0 && endpoint + queue > budget_ms);
    let Decoders {
        asr,
        fallback,
        ladder,
    } = decoders;
    match ladder.observe(behind) {
        Some((step, true)) => log::warn!(
            "utterance {}: behind ({backlog} waiting, {:.0} ms since the end of speech): shedding {step:?}",
            utt.id,
            endpoint + queue
        ),
        Some((step, false)) => log::info!("utterance {}: on time again: {step:?} restored", utt.id),
        None => {}
    }
    let shed_text = behind && ladder.is_active(ShedStep::Text) && end_s - start_s > shed_over;
    let use_fallback = ladder.is_active(ShedStep::AsrModel) && fallback.is_some();
    // A speculative final was decoded by the main model during the pause.
    let mut decoded_by_fallback = false;
    let asr = match fallback {
        Some(f) if use_fallback => f,
        _ => asr,
    };
    let t = Instant::now();
    // The part of `queue` the utterance spent waiting for its own transcript: the
    // speculative decode made at its final pause, still running at the endpoint. It is
    // ASR time, and is reported as such (`latency_ms.asr`), not as queueing.
    let mut asr_in_queue_ms = 0.0;
    let transcript = if shed_text {
        counters.text_shed.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "utterance {} ({:.1} s): transcript and text view skipped, {backlog} utterances waiting",
            utt.id,
            end_s - start_s
        );
        Transcript::default()
    } else if let Some(st) = stream_asr {
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
                asr_in_queue_ms = done
                    .saturating_duration_since(utt.endpoint_at)
                    .as_secs_f64()
                    .min(queue / 1e3)
                    * 1e3;
            }
        } else if use_fallback {
            counters
                .shed
                .fallback_decodes
                .fetch_add(1, Ordering::Relaxed);
            decoded_by_fallback = true;
        }
        tr
    } else {
        if use_fallback {
            counters
                .shed
                .fallback_decodes
                .fetch_add(1, Ordering::Relaxed);
            decoded_by_fallback = true;
        }
        let mut tr = asr.transcribe(&utt.audio)?;
        let offset_s = utt.audio_start as f64 / RATE;
        for seg in &mut tr.segments {
            seg.start_s += offset_s;
            seg.end_s += offset_s;
        }
        tr
    };
    let asr_ms = ms_since(t);

    let t = Instant::now();
    let mut embedding = None;
    let mut p_text = None;
    let mut extras = None;
    if let Some(enc) = engine.text.as_ref().filter(|_| !transcript.text.is_empty()) {
        let input = if cfg.context.text_uses_context {
            let prev = ctx.lock_or_recover().transcripts_before(start_s);
            let mut s: Vec<&str> = prev.iter().map(|t| t.text.as_str()).collect();
            s.push(&transcript.text);
            s.join(" ")
        } else {
            transcript.text.clone()
        };
        let e = enc.embed(&input)?;
        if let Some(head) = engine.fusion.as_ref().and_then(|f| f.text.as_ref()) {
            p_text = Some(head.predict(&e)?);
        }
        // The extras head runs on the same embedding (its time counts in `text`).
        if let Some(head) = engine.fusion.as_ref().and_then(|f| f.extras.as_ref()) {
            extras = Some(head.predict(&e)?);
        }
        embedding = Some(e);
    }
    let text_ms = ms_since(t);
    let text_ready = p_text.map(|_| since_speech_end(Instant::now()));

    let t = Instant::now();
    // Without heads (feature extraction only) there is no score: NaN serialises as null
    // and never reaches a user-facing sink, since the daemon always loads heads.
    let (p, threshold) = match &engine.fusion {
        Some(f) => (
            f.fuse(p_text, p_audio, p_video)?.unwrap_or(f32::NAN),
            f.threshold,
        ),
        None => (f32::NAN, f32::NAN),
    };
    let fusion_ms = ms_since(t);

    if !transcript.text.is_empty() {
        ctx.lock_or_recover().push_transcript(ContextTranscript {
            start_s,
            end_s,
            text: transcript.text.clone(),
        });
    }
    let processing = ms_since(utt.endpoint_at);
    Ok(UtteranceEvent {
        kind: "utterance",
        id: utt.id,
        start_s: round3(start_s),
        end_s: round3(end_s),
        transcript: (cfg.output.include_transcript && !shed_text).then(|| transcript.text.clone()),
        language: transcript.language.clone(),
        p_sarcastic: p,
        sarcastic: p >= threshold,
        threshold,
        views: Views {
            text: p_text,
            audio: p_audio,
            video: p_video,
        },
        latency_ms: LatencyMs {
            endpoint: round3(endpoint),
            queue: round3(queue - asr_in_queue_ms),
            asr: round3(asr_ms + asr_in_queue_ms),
            text: round3(text_ms),
            audio: round3(audio_ms),
            video: round3(video_ms),
            fusion: round3(fusion_ms),
            total: round3(endpoint + processing),
        },
        ready_ms: ReadyMs {
            audio: p_audio.map(|_| round3(audio_ready)),
            video: video_ready.map(round3),
            text: text_ready.map(round3),
            fused: round3(endpoint + processing),
        },
        text_shed: shed_text,
        models: {
            let mut m = engine.models.clone();
            // Which Whisper decoded this transcript (load shedding may have switched).
            if let Some(f) = m.remove("asr_fallback").filter(|_| decoded_by_fallback) {
                m.insert("asr".into(), f);
            }
            m
        },
        forced_split: utt.span.forced,
        early_end: utt.span.early,
        revises: utt.revises,
        asr_segments: if cfg.output.include_transcript {
            transcript.segments
        } else {
            Vec::new()
        },
        asr_guards: transcript.guards,
        extras,
        features: with_features.then_some(UtteranceFeatures {
            text_embedding: embedding,
            prosody: functionals.values,
            vision: vision_functionals,
        }),
    })
}
