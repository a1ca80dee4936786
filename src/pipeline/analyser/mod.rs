//! Analyser stage: for each finished utterance, the audio view, the video view,
//! transcription (one-shot, or finished from the streaming state), the text view and
//! fusion ([`views`]), into one event ([`event`]). Between finished utterances it runs
//! streaming steps on the utterance in progress ([`state`]); finished utterances always
//! go first. Load shedding (`crate::common::shed`) is decided here, where lateness is
//! seen.

mod event;
mod state;
mod views;

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use crate::common::counters::Counters;
use crate::common::lock::LockOrRecover;
use crate::common::shed::ShedLadder;
use crate::config::Config;
use crate::pipeline::context::{ContextStore, ContextTranscript};
use crate::sinks::event::UtteranceEvent;
use crate::views::vision::stream::VisionTimeline;

use super::clock::{ms_since, RATE};
use super::engine::Engine;
use super::error::PipelineError;
use super::queues::{Emitted, StepRequest, Utterance};
use super::segmenter::SpeechSignals;
use super::shutdown::Shutdown;
use state::{StepOutputs, StreamState};
use views::VideoInput;

pub struct AnalyserStage<'a, 'l> {
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

impl AnalyserStage<'_, '_> {
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
        let mut state = StreamState::new(self.engine, self.cfg, self.streaming)?;
        let (counters, utt_rx) = (self.counters, &self.utterances);
        let step_out = StepOutputs {
            partials: self.partials,
            events: &self.events,
            counters,
            signals: self.signals,
        };
        let mut steps = self.steps.clone();
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
                                    let r = state.step(req, &step_out, &|| !utt_rx.is_empty());
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
            state.last_final = Some(utt.id);
            counters
                .utterance_queue_depth
                .store(utt_rx.len() as u64, Ordering::Relaxed);
            counters.heartbeat.analysing(true);
            let backlog = utt_rx.len();
            let ev = self.analyse(&mut state, utt, backlog);
            counters.heartbeat.analysing(false);
            let ev = ev?;
            if ev.transcript.as_deref().is_some_and(str::is_empty) {
                counters.empty_transcripts.fetch_add(1, Ordering::Relaxed);
            }
            if self.events.send(Emitted::Utterance(Box::new(ev))).is_err() {
                break;
            }
        }
        Ok(())
    }

    /// One finished utterance through every view, into its event.
    fn analyse(
        &self,
        state: &mut StreamState,
        utt: Utterance,
        backlog: usize,
    ) -> Result<UtteranceEvent, PipelineError> {
        let (engine, cfg, counters) = (self.engine, self.cfg, self.counters);
        let queue_ms = ms_since(utt.endpoint_at);
        let start_s = utt.span.speech_start as f64 / RATE;
        let end_s = utt.span.speech_end as f64 / RATE;
        // Milliseconds from the end of speech to now (the hangover is audio time).
        let endpoint_ms = utt.endpoint_delay_samples as f64 / RATE * 1e3;
        let since_speech_end =
            |t: Instant| endpoint_ms + t.duration_since(utt.endpoint_at).as_secs_f64() * 1e3;

        // The audio view first: it needs no transcript, so it is ready within a
        // millisecond of the endpoint (`ready_ms.audio`).
        let audio = views::audio_view(engine, &utt)?;
        let audio_ready = since_speech_end(Instant::now());
        let video_input = VideoInput {
            timeline: self.timeline,
            live: self.frames_live,
            analyse_fps: cfg.vision.analyse_fps,
            shutdown: &self.shutdown,
        };
        let video = views::video_view(engine, &video_input, counters, (start_s, end_s))?;
        let video_ready = video.p.map(|_| since_speech_end(Instant::now()));

        let shed = views::shedding(
            cfg,
            self.ladder,
            state,
            &utt,
            backlog,
            endpoint_ms + queue_ms,
        );
        let asr = views::transcription(state, &utt, &shed, queue_ms, counters)?;
        let text = views::text_view(engine, cfg, self.ctx, &asr.transcript.text, start_s)?;
        let text_ready = text.p.map(|_| since_speech_end(Instant::now()));
        let fused = views::fusion(engine, text.p, audio.p, video.p)?;

        if !asr.transcript.text.is_empty() {
            self.ctx
                .lock_or_recover()
                .push_transcript(ContextTranscript {
                    start_s,
                    end_s,
                    text: asr.transcript.text.clone(),
                });
        }
        Ok(event::utterance_event(event::Analysed {
            engine,
            cfg,
            utt: &utt,
            with_features: self.with_features,
            times: event::Times {
                endpoint_ms,
                queue_ms,
                processing_ms: ms_since(utt.endpoint_at),
                audio_ready,
                video_ready,
                text_ready,
            },
            shed,
            audio,
            video,
            asr,
            text,
            fused,
        }))
    }
}
