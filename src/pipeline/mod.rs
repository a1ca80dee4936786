//! The pipeline: source -> audio ring -> segmenter (VAD, prosody frames, context) ->
//! utterance queue -> analyser (ASR, text view, audio view, fusion) -> event queue ->
//! sink, with an optional interim decoder and camera -> vision threads beside it.
//! One thread per stage; `run_stream` is what the daemon, `replay`, `features` and
//! the tests all call, so every entry point exercises the same code.
//!
//! This file only wires the stages; each lives in its own module with one shape (a
//! struct of what it needs, and `run`):
//! - [`plan`]: every setting derived from the config and the source, pure and tested;
//! - [`queues`]: every queue, what flows on it and its full policy, stated once;
//! - [`shutdown`]: the one signal that ends a run (outside stop, failure, audio done);
//! - [`source`], [`segmenter`], [`analyser`], [`interim`], [`vision`], [`sink`]: the
//!   stages, in data-flow order; [`room`]: the room head's step, on the sink's thread
//!   before any output sees the event, so a score is final before it is written;
//! - [`engine`] and [`stats`]: the shared models, and the run summary.
//!
//! Load shedding, when the board cannot keep up: first streaming steps (see
//! `queues`), then the ladder in `crate::common::shed` (camera frame rate, smaller Whisper
//! model, text view of long utterances), each step counted and given back once
//! utterances are on time.

mod analyser;
mod clock;
pub mod context;
mod engine;
mod error;
mod interim;
mod plan;
mod queues;
mod room;
mod segmenter;
mod shutdown;
mod sink;
mod source;
mod stats;
mod vision;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use crate::common::counters::Counters;
use crate::common::shed::ShedLadder;
use crate::config::Config;
use crate::pipeline::context::ContextStore;
use crate::sinks::event::EventSink;
use crate::sources::audio::{AudioError, AudioSource};
use crate::sources::video::FrameSource;
use crate::views::room::Room;
use crate::views::vision::stream::VisionTimeline;
use crate::views::vision::VisionAnalyser;

pub use engine::{required_models, Engine, EngineError};
pub use error::PipelineError;
pub use stats::{RunStats, StageSummary, StreamingStats};

use analyser::AnalyserStage;
use interim::InterimStage;
use plan::{Plan, PlanInputs};
use queues::Queues;
use segmenter::{SegmenterOutputs, SegmenterStage, SpeechSignals};
use shutdown::Shutdown;
use sink::SinkStage;
use source::SourceStage;
use vision::{FrameReaderStage, VisionStage};

#[derive(Clone)]
pub struct RunOptions {
    /// Pace a file source at real time (as a microphone would deliver it).
    pub realtime: bool,
    /// Attach feature vectors to events (training and evaluation).
    pub with_features: bool,
    /// Set to stop early (SIGTERM); the current utterance is finished and flushed.
    pub stop: Arc<AtomicBool>,
    /// Shared with whoever reports them live (`/metrics`, MQTT stats).
    pub counters: Arc<Counters>,
    /// Set when the audio side is done, so a frame source waiting for a lost camera
    /// gives up (see `ReconnectingFrameSource`).
    pub frame_source_stop: Option<Arc<AtomicBool>>,
    /// The room head (`[room]` enabled): every event is scored through it before the
    /// sink sees it. Needs `with_features` (it compares text embeddings).
    pub room: Option<Arc<Room>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            realtime: false,
            with_features: false,
            stop: Arc::new(AtomicBool::new(false)),
            counters: Arc::new(Counters::default()),
            frame_source_stop: None,
            room: None,
        }
    }
}

/// Run one audio stream through the whole pipeline until the source ends (or `stop`
/// is set), writing one event per utterance to `sink`.
pub fn run_stream(
    engine: &Engine,
    cfg: &Config,
    source: Box<dyn AudioSource>,
    sink: &mut dyn EventSink,
    opts: &RunOptions,
) -> Result<RunStats, PipelineError> {
    run_stream_av(engine, cfg, source, None, sink, opts)
}

/// [`run_stream`] with frames from a camera or video file for the vision view. Frames
/// are stamped on the stream clock; without frames (or when the frame source fails)
/// the stream runs audio-only and `views.video` stays null.
pub fn run_stream_av(
    engine: &Engine,
    cfg: &Config,
    source: Box<dyn AudioSource>,
    frames: Option<Box<dyn FrameSource>>,
    sink: &mut dyn EventSink,
    opts: &RunOptions,
) -> Result<RunStats, PipelineError> {
    let t0 = Instant::now();
    let counters = opts.counters.clone();
    let vision = vision_parts(engine, cfg, frames, &counters);
    let plan = plan_of(
        engine,
        cfg,
        source.as_ref(),
        opts,
        vision.as_ref().map(|(f, _)| f.as_ref()),
    );
    let ladder = ShedLadder::new(plan.shed, cfg.budget.recover_after, &counters.shed);
    let stream = Stream {
        engine,
        cfg,
        plan: &plan,
        opts,
        counters: &counters,
        context: Arc::new(Mutex::new(ContextStore::new(
            plan.context_s,
            plan.audio_keep_s,
        ))),
        signals: Arc::new(SpeechSignals::default()),
        ladder: &ladder,
        timeline: VisionTimeline::new(plan.frames_keep_s),
        shutdown: Shutdown::new(opts.stop.clone(), opts.frame_source_stop.clone()),
        started: t0,
    };
    let stages = std::thread::scope(|s| stream.run(s, source, vision, sink))?;
    Ok(RunStats::collect(
        &counters,
        t0.elapsed().as_secs_f64(),
        stages,
        plan.streaming,
        plan.vision,
        ladder.stats(),
    ))
}

/// What the stages of one stream share: the models, the settings, the counters, the
/// rolling context, the shedding ladder, the vision timeline and the stop signal.
struct Stream<'a> {
    engine: &'a Engine,
    cfg: &'a Config,
    plan: &'a Plan,
    opts: &'a RunOptions,
    counters: &'a Arc<Counters>,
    context: Arc<Mutex<ContextStore>>,
    signals: Arc<SpeechSignals>,
    ladder: &'a ShedLadder<'a>,
    timeline: VisionTimeline,
    shutdown: Shutdown,
    started: Instant,
}

impl Stream<'_> {
    /// One thread per stage, wired by the queues; the sink runs on this thread until
    /// every sender is gone. The run's per-stage times, or its first error.
    fn run<'s>(
        &'s self,
        s: &'s std::thread::Scope<'s, '_>,
        source: Box<dyn AudioSource>,
        vision: Option<(Box<dyn FrameSource>, VisionAnalyser)>,
        sink: &mut dyn EventSink,
    ) -> Result<std::collections::BTreeMap<String, Vec<f64>>, PipelineError> {
        let (engine, cfg, plan, counters) = (self.engine, self.cfg, self.plan, self.counters);
        let (ring_writer, ring_reader) = queues::audio_ring(plan);
        let Queues {
            utterances: (utt_tx, utt_rx),
            events: (ev_tx, ev_rx),
            interim: (int_tx, int_rx),
            steps: (step_tx, step_rx),
        } = Queues::new(plan);
        spawn_vision(
            s,
            vision,
            VisionWiring {
                cfg,
                plan,
                ladder: self.ladder,
                timeline: &self.timeline,
                counters,
                gaps: ev_tx.clone(),
                shutdown: self.shutdown.clone(),
                started: self.started,
            },
        );
        let feeder = SourceStage {
            source,
            ring: ring_writer,
            realtime: plan.realtime,
            counters: counters.clone(),
            gaps: ev_tx.clone(),
            shutdown: self.shutdown.clone(),
        };
        let source_h = spawn_stage(s, "source", move || feeder.run());
        let segmenter = SegmenterStage {
            vad: &engine.vad,
            cfg,
            plan,
            ctx: self.context.clone(),
            counters: counters.clone(),
            signals: self.signals.clone(),
            out: SegmenterOutputs {
                utterances: utt_tx,
                interim: plan.interim_thread.then_some(int_tx),
                steps: plan.streaming.then_some(step_tx),
            },
            ring: ring_reader,
            shutdown: self.shutdown.clone(),
        };
        let segmenter_h = spawn_stage(s, "segmenter", move || segmenter.run());
        let interim_h = plan.interim_thread.then(|| {
            let interim = InterimStage {
                engine,
                cfg,
                requests: int_rx,
                events: ev_tx.clone(),
                counters,
            };
            spawn_stage(s, "interim", move || interim.run())
        });
        let analyser = AnalyserStage {
            engine,
            cfg,
            ctx: &self.context,
            counters,
            ladder: self.ladder,
            utterances: utt_rx,
            steps: step_rx,
            events: ev_tx,
            streaming: plan.streaming,
            partials: plan.partials,
            with_features: self.opts.with_features,
            timeline: plan.vision.then_some(&self.timeline),
            frames_live: plan.frames_live,
            signals: &self.signals,
            shutdown: self.shutdown.clone(),
        };
        let analyser_h = spawn_stage(s, "analyser", move || analyser.run());
        let out = SinkStage {
            events: ev_rx,
            counters,
            budget_ms: cfg.budget.event_latency_ms,
            room: self.opts.room.as_deref(),
            shutdown: self.shutdown.clone(),
        }
        .run(sink);
        Joined {
            source: source_h.join(),
            segmenter: segmenter_h.join(),
            analyser: analyser_h.join(),
            interim: interim_h.map(|h| h.join()),
        }
        .outcome(out, sink)
    }
}

/// What the frame reader and the vision thread are wired to.
struct VisionWiring<'a> {
    cfg: &'a Config,
    plan: &'a Plan,
    ladder: &'a ShedLadder<'a>,
    timeline: &'a VisionTimeline,
    counters: &'a Counters,
    /// Where the frame reader reports a lost camera.
    gaps: crossbeam_channel::Sender<queues::Emitted>,
    shutdown: Shutdown,
    /// When the stream started (a video file is paced from it).
    started: Instant,
}

/// The frame reader and vision threads, when there are frames and vision models:
/// frames thinned to the analysis rate into a bounded queue, analysed into the
/// timeline the analyser reads. Without them the timeline ends at once, so the
/// analyser never waits for frames.
fn spawn_vision<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    vision: Option<(Box<dyn FrameSource>, VisionAnalyser)>,
    w: VisionWiring<'s>,
) {
    let Some((frame_source, analyser)) = vision else {
        w.timeline.end();
        return;
    };
    let (frame_tx, frame_rx) = crossbeam_channel::bounded(w.plan.frame_queue);
    let reader = FrameReaderStage {
        source: frame_source,
        frames: frame_tx,
        oldest: frame_rx.clone(),
        analyse_fps: w.cfg.vision.analyse_fps,
        shed: (w.ladder, w.cfg.budget.shed_vision_fps),
        paced_from: w.plan.pace_frames.then_some(w.started),
        counters: w.counters,
        gaps: w.gaps,
        shutdown: w.shutdown,
    };
    spawn_stage(s, "frames", move || reader.run());
    let stage = VisionStage {
        analyser,
        frames: frame_rx,
        timeline: w.timeline,
        counters: w.counters,
    };
    spawn_stage(s, "vision", move || stage.run());
}

/// Every setting of this stream, from the config and what it runs with.
fn plan_of(
    engine: &Engine,
    cfg: &Config,
    source: &dyn AudioSource,
    opts: &RunOptions,
    frames: Option<&dyn FrameSource>,
) -> Plan {
    Plan::new(
        cfg,
        PlanInputs {
            live: source.is_live(),
            realtime: opts.realtime,
            vision: frames.is_some(),
            frames_live: frames.is_some_and(|f| f.is_live()),
            asr_fallback: engine.asr_fallback.is_some(),
            text_encoder: engine.text.is_some(),
        },
    )
}

/// A stage on a thread of its own, named (for `top`, and in panic messages).
fn spawn_stage<'s, T: Send + 's>(
    s: &'s std::thread::Scope<'s, '_>,
    name: &str,
    run: impl FnOnce() -> T + Send + 's,
) -> std::thread::ScopedJoinHandle<'s, T> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn_scoped(s, run)
        .unwrap_or_else(|e| panic!("spawn {name} thread: {e}"))
}

/// What the stage threads ended with, joined.
struct Joined {
    source: std::thread::Result<Result<(), AudioError>>,
    segmenter: std::thread::Result<Result<Vec<f64>, PipelineError>>,
    analyser: std::thread::Result<Result<(), PipelineError>>,
    interim: Option<std::thread::Result<()>>,
}

impl Joined {
    /// The run's per-stage times, or its first error in data-flow order (later ones are
    /// consequences); the sink is flushed last.
    fn outcome(
        self,
        out: sink::SinkOutcome,
        sink: &mut dyn EventSink,
    ) -> Result<std::collections::BTreeMap<String, Vec<f64>>, PipelineError> {
        let src = self.source.map_err(|_| PipelineError::Panic("source"))?;
        let seg = self
            .segmenter
            .map_err(|_| PipelineError::Panic("segmenter"))?;
        let an = self
            .analyser
            .map_err(|_| PipelineError::Panic("analyser"))?;
        if let Some(h) = self.interim {
            h.map_err(|_| PipelineError::Panic("interim"))?;
        }
        src?;
        let vad_ms = seg?;
        an?;
        if let Some(e) = out.error {
            return Err(PipelineError::Sink(e));
        }
        sink.flush().map_err(PipelineError::Sink)?;
        let mut stages = out.stages;
        stages.insert("vad_chunk".into(), vad_ms);
        Ok(stages)
    }
}

/// The frame source and its analyser, when both a frame source and the vision models
/// are there; otherwise the stream runs audio-only (and says why).
fn vision_parts(
    engine: &Engine,
    cfg: &Config,
    frames: Option<Box<dyn FrameSource>>,
    counters: &Counters,
) -> Option<(Box<dyn FrameSource>, VisionAnalyser)> {
    match (frames, &engine.vision) {
        (Some(f), Some(m)) => match m.analyser(&cfg.vision) {
            Ok(a) => Some((f, a)),
            Err(e) => {
                counters.vision.source_failed.store(true, Ordering::Relaxed);
                log::warn!("{e}; running audio-only (views.video null)");
                None
            }
        },
        (Some(f), None) => {
            log::warn!(
                "{}: vision models are not loaded (vision.source is `none`); running audio-only",
                f.describe()
            );
            None
        }
        _ => None,
    }
}
