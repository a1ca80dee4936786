//! The pipeline: source -> audio ring -> segmenter (VAD, prosody frames, context) ->
//! utterance queue -> analyser (ASR, text view, audio view, fusion) -> event queue ->
//! sink. One thread per stage; `run_stream` is what the daemon, `replay`, `features`
//! and the tests all call, so every entry point exercises the same code.
//!
//! Queues and their full policies:
//! - audio ring (lock-free, `buffers.ring_ms`): a live source drops the new samples and
//!   counts them (`dropped.dropped_samples`); file and pipe sources wait for space.
//! - utterance queue (`buffers.utterance_queue`): a live stream drops the newest
//!   utterance and counts it (`dropped.utterance_queue_full`); files wait.
//! - event queue (`buffers.event_queue`): the analyser waits for the sink (events are
//!   the product; they are never dropped). Interim (partial) text is best-effort: it is
//!   dropped and counted when the queue is full (`partial_event_queue_full`).
//! - interim request queue (capacity 1): while the interim decoder is busy, newer
//!   requests are skipped and counted (`partial_asr_busy`); the next one carries
//!   all the audio so far anyway.
//! - streaming step queue (capacity 1, `asr.stream_step_ms` > 0): the analyser decodes
//!   the utterance in progress between finished utterances, which always go first. A
//!   step that finds the queue full is skipped (`stream_steps_skipped_busy`); none is
//!   sent while finished utterances wait (`stream_steps_shed`): streaming is the first
//!   load to shed, and it resumes by itself when the backlog is gone.
//!
//! Load shedding, when the board cannot keep up: first streaming steps (above), then
//! the ladder in `crate::shed` (camera frame rate, smaller Whisper model, text view of
//! long utterances), each step counted and given back once utterances are on time.

use crate::lock::LockOrRecover;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Sender, TrySendError};
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::HeapRb;
use serde::Serialize;
use thiserror::Error;

use crate::asr::Transcript;
use crate::asr::{AsrError, AsrModel, AsrStream, Urgency};
use crate::audio::{AudioError, AudioSource, PIPELINE_RATE_HZ};
use crate::config::Config;
use crate::context::{ContextStore, ContextTranscript};
pub use crate::counters::Counters;
use crate::drops::DropReason;
use crate::event::{
    EventSink, GapEvent, LatencyMs, PartialEvent, ReadyMs, UtteranceEvent, UtteranceFeatures, Views,
};
use crate::fusion::{Fusion, HeadError};
use crate::models::{ModelError, ModelStore};
use crate::prosody::{self, FrameExtractor, ProsodyError};
use crate::segment::{EndpointEvent, Endpointer, Span, VadError, VadModel, VAD_CHUNK};
use crate::shed::{Applicable, ShedLadder, ShedStats, ShedStep};
use crate::streaming::StreamingAsr;
use crate::text::{TextEncoder, TextError};
use crate::video::FrameSource;
use crate::vision::stream::{self as vstream, VisionStats, VisionTimeline};
use crate::vision::{VisionError, VisionModels};

const RATE: f64 = PIPELINE_RATE_HZ as f64;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Asr(#[from] AsrError),
    #[error(transparent)]
    Vad(#[from] VadError),
    #[error(transparent)]
    Text(#[from] TextError),
    #[error(transparent)]
    Head(#[from] HeadError),
    #[error(transparent)]
    Vision(#[from] VisionError),
}

#[derive(Debug, Error)]
pub enum PipelineError {
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Vad(#[from] VadError),
    #[error(transparent)]
    Asr(#[from] AsrError),
    #[error(transparent)]
    Text(#[from] TextError),
    #[error(transparent)]
    Head(#[from] HeadError),
    #[error(transparent)]
    Prosody(#[from] ProsodyError),
    #[error("cannot write events: {0}")]
    Sink(std::io::Error),
    #[error("pipeline thread `{0}` panicked")]
    Panic(&'static str),
}

/// Everything loaded once and shared by all streams.
pub struct Engine {
    pub vad: VadModel,
    pub asr: Arc<AsrModel>,
    /// `asr.fallback_model`, for load shedding.
    pub asr_fallback: Option<Arc<AsrModel>>,
    pub text: Option<TextEncoder>,
    /// `None` only for feature extraction (`sarcasmd features`), which runs before any
    /// head exists; the daemon always loads heads.
    pub fusion: Option<Fusion>,
    /// Loaded when a frame source is configured (and for feature extraction).
    pub vision: Option<VisionModels>,
    pub models: BTreeMap<String, String>,
    pub load_ms: f64,
}

/// The model-store names [`Engine::load`] gets for this config (checked by `preflight`
/// without loading them).
pub fn required_models(cfg: &Config, with_vision: bool) -> Vec<String> {
    let mut names = vec!["silero-vad".to_string(), cfg.asr.store_name()];
    names.extend(cfg.asr.fallback_store_name());
    if cfg.text.enabled {
        names.extend(["usem3".to_string(), "usem3-spm".to_string()]);
    }
    if with_vision {
        names.extend(
            [
                crate::vision::DETECTOR_MODEL,
                crate::vision::LANDMARK_MODEL,
                crate::vision::EXPRESSION_MODEL,
            ]
            .map(String::from),
        );
    }
    names
}

impl Engine {
    pub fn load(cfg: &Config) -> Result<Self, EngineError> {
        Self::load_inner(cfg, true, cfg.vision.enabled())
    }

    /// Models without the trained heads: for computing training features. The vision
    /// models load when `with_vision` (a manifest with video).
    pub fn load_for_features(cfg: &Config, with_vision: bool) -> Result<Self, EngineError> {
        Self::load_inner(cfg, false, with_vision)
    }

    /// Heads as the daemon serves them, plus the vision models when `with_vision` (a
    /// manifest with video), whatever the config says about the camera: `sarcasmd eval`.
    pub fn load_for_eval(cfg: &Config, with_vision: bool) -> Result<Self, EngineError> {
        Self::load_inner(cfg, true, with_vision)
    }

    // Keep in step with `required_models`, which preflight checks.
    fn load_inner(cfg: &Config, with_heads: bool, with_vision: bool) -> Result<Self, EngineError> {
        let t0 = Instant::now();
        let store = ModelStore::new(
            crate::models::model_dir(cfg.models.dir.as_deref()),
            !cfg.models.skip_checksums,
        )?;
        let short = |sha: &str| sha.chars().take(12).collect::<String>();
        let mut models = BTreeMap::new();

        let vad_file = store.get("silero-vad")?;
        let vad = VadModel::load(&vad_file.path)?;
        models.insert(
            "vad".into(),
            format!("silero-vad@{}", short(&vad_file.sha256)),
        );

        let asr_file = store.get(&cfg.asr.store_name())?;
        let asr = Arc::new(AsrModel::load(&asr_file.path)?);
        models.insert(
            "asr".into(),
            format!("{}@{}", asr_file.name, short(&asr_file.sha256)),
        );

        let asr_fallback = match cfg.asr.fallback_store_name() {
            Some(name) => {
                let f = store.get(&name)?;
                models.insert(
                    "asr_fallback".into(),
                    format!("{}@{}", f.name, short(&f.sha256)),
                );
                Some(Arc::new(AsrModel::load(&f.path)?))
            }
            None => None,
        };

        let text = if cfg.text.enabled {
            let m = store.get("usem3")?;
            let t = store.get("usem3-spm")?;
            models.insert("text_encoder".into(), format!("usem3@{}", short(&m.sha256)));
            Some(TextEncoder::load(&m.path, &t.path, &cfg.text)?)
        } else {
            None
        };
        let vision = if with_vision {
            let v = VisionModels::load(&store)?;
            for (k, name) in [
                ("face_detector", crate::vision::DETECTOR_MODEL),
                ("face_landmarks", crate::vision::LANDMARK_MODEL),
                ("expression", crate::vision::EXPRESSION_MODEL),
            ] {
                let f = store.get(name)?;
                models.insert(k.into(), format!("{name}@{}", short(&f.sha256)));
            }
            Some(v)
        } else {
            None
        };
        let fusion = if with_heads {
            let f = Fusion::load(&cfg.fusion, cfg.text.enabled, with_vision)?;
            if let Some(h) = &f.text {
                models.insert("text_head".into(), h.label());
            }
            models.insert("audio_head".into(), f.audio.label());
            if let Some(h) = &f.video {
                models.insert("video_head".into(), h.label());
            }
            models.insert("fusion_head".into(), f.fused.label());
            let w = f.weighted;
            if w != crate::fusion::WeightedViews::ALL {
                log::info!(
                    "fusion: p_sarcastic weighs {} only; the other views are scored and \
                     reported in `views` but did not raise the cross-corpus figure \
                     (models/heads/CROSS_CORPUS.md)",
                    w.names().join(" + ")
                );
            }
            if f.text.is_none() && !w.audio && !(w.video && f.video.is_some()) {
                log::warn!(
                    "fusion: the text view is off ([text] enabled = false) and p_sarcastic \
                     weighs only {}: events will carry the views but no fused score",
                    w.names().join(" + ")
                );
            }
            if (f.threshold - cfg.fusion.threshold).abs() > 1e-6 {
                log::info!(
                    "fusion: prior {} moves the threshold from {} to {:.3}",
                    cfg.fusion.prior,
                    cfg.fusion.threshold,
                    f.threshold
                );
            }
            if let Some(h) = &f.extras {
                models.insert("extras_head".into(), h.label());
            }
            Some(f)
        } else {
            None
        };
        models.insert("prosody".into(), prosody::PROSODY_FEATURE_VERSION.into());
        Ok(Self {
            vad,
            asr,
            asr_fallback,
            text,
            fusion,
            vision,
            models,
            load_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StageSummary {
    pub count: usize,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
    pub sum_ms: f64,
}

impl StageSummary {
    fn from(mut v: Vec<f64>) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        Self {
            count: v.len(),
            median_ms: q(0.5),
            p95_ms: q(0.95),
            max_ms: *v.last().unwrap(),
            sum_ms: v.iter().sum(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    pub audio_s: f64,
    pub wall_s: f64,
    pub utterances: u64,
    pub events: u64,
    pub too_short: u64,
    pub partials: u64,
    pub empty_transcripts: u64,
    /// Every drop of the run by its registered name ([`crate::drops::DropReason`]),
    /// zeros included: the same names as `/metrics` and MQTT stats.
    pub dropped: BTreeMap<String, u64>,
    pub stages: BTreeMap<String, StageSummary>,
    /// Events whose end-of-speech -> event latency exceeded `budget.event_latency_ms`.
    pub budget_violations: u64,
    /// Intervals a live source lost, and their total length in seconds.
    pub source_gaps: u64,
    pub source_gap_s: f64,
    pub streaming: StreamingStats,
    pub vision: VisionStats,
    pub shed: ShedStats,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamingStats {
    pub enabled: bool,
    pub steps: u64,
    pub steps_skipped_busy: u64,
    pub steps_shed: u64,
    pub steps_stale: u64,
    pub steps_abandoned: u64,
    pub speculative_finals: u64,
    pub early_ends: u64,
    pub reopened_after_early_end: u64,
    pub text_shed: u64,
}

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
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            realtime: false,
            with_features: false,
            stop: Arc::new(AtomicBool::new(false)),
            counters: Arc::new(Counters::default()),
            frame_source_stop: None,
        }
    }
}

/// What the analysis threads hand to the sink.
enum Emitted {
    Utterance(Box<UtteranceEvent>),
    Partial(PartialEvent),
    Gap(GapEvent),
}

/// Longest outage filled with silence to keep the stream clock on wall time. Beyond
/// it the clock simply skips ahead by less: minutes of zeros would only cost VAD time.
const MAX_GAP_FILL_S: f64 = 60.0;

/// Audio of the utterance in progress, for an interim decode.
struct InterimRequest {
    /// The id the utterance will get when it ends.
    id: u64,
    speech_start: u64,
    audio_start: u64,
    audio: Vec<f32>,
}

/// Audio of the utterance in progress for a streaming step.
struct StepRequest {
    id: u64,
    speech_start: u64,
    audio_start: u64,
    audio: Vec<f32>,
    /// Sent at the first chunk of a pause: the result may become the final transcript.
    speculative: bool,
    /// End of the speech so far (stream sample).
    speech_end: u64,
    /// The latest finished pause in the utterance: (start sample, length in samples).
    last_gap: Option<(u64, u64)>,
}

/// A finished utterance on its way to the analyser.
struct Utterance {
    id: u64,
    span: Span,
    /// Audio with pre- and post-roll, starting at stream sample `audio_start`.
    audio: Vec<f32>,
    audio_start: u64,
    frames: Vec<prosody::ProsodyFrame>,
    endpoint_at: Instant,
    /// Audio that passed between the end of speech and the endpoint decision.
    endpoint_delay_samples: u64,
    /// The early-ended utterance this one reopens and replaces.
    revises: Option<u64>,
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
    let seg = &cfg.segment;
    let ring_len =
        (cfg.buffers.ring_ms as usize * PIPELINE_RATE_HZ as usize / 1000).max(VAD_CHUNK * 4);
    let (mut prod, mut cons) = HeapRb::<f32>::new(ring_len).split();
    let source_done = Arc::new(AtomicBool::new(false));
    let live = source.is_live();

    let audio_keep_s = (seg.max_utterance_ms + seg.pre_roll_ms + seg.hangover_ms + seg.post_roll_ms)
        as f64
        / 1000.0
        + 1.0;
    let context = Arc::new(Mutex::new(ContextStore::new(
        cfg.context.seconds as f64,
        audio_keep_s,
    )));
    let (utt_tx, utt_rx) = bounded::<Utterance>(cfg.buffers.utterance_queue);
    let (ev_tx, ev_rx) = bounded::<Emitted>(cfg.buffers.event_queue);
    let interim_every = ms_samples(cfg.asr.interim_every_ms);
    let interim_on = interim_every > 0 && cfg.output.include_transcript;
    // Streaming only pays where audio arrives in real time (a live source, or a file
    // paced like one). A file read as fast as possible is all there already: it is
    // decoded one-shot, which also keeps its events independent of thread timing
    // (features, evaluation and tests rely on that).
    let streaming = cfg.asr.stream_step_ms > 0 && (live || opts.realtime);
    let step_every = ms_samples(cfg.asr.stream_step_ms);
    let (int_tx, int_rx) = bounded::<InterimRequest>(1);
    let (step_tx, step_rx) = bounded::<StepRequest>(1);
    // Set by the analyser to the speech end (stream sample) of a pause whose
    // speculative decode ended a sentence; the segmenter may then end the utterance
    // after `segment.sentence_end_hangover_ms` instead of the full hangover.
    let sentence_end_at = Arc::new(AtomicU64::new(u64::MAX));
    // Set by the segmenter when speech resumes after a pause inside an utterance: a
    // speculative decode of that pause is then (mostly) useless and is abandoned.
    let resumed = Arc::new(PauseResumed::default());

    // Set by any stage that fails, so the source stops feeding a pipeline that can no
    // longer drain (a file source would otherwise wait forever for ring space).
    let abort = Arc::new(AtomicBool::new(false));
    let mut stages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    // Vision: only with both a frame source and the models.
    let vision = match (frames, &engine.vision) {
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
    };
    let vision_on = vision.is_some();
    // Shedding only where someone waits for the events: a file read as fast as possible
    // (`replay FILE`, `features`, `eval`) is always "behind", and its events must not
    // depend on thread timing.
    let sheds = live || opts.realtime;
    let ladder = ShedLadder::new(
        Applicable {
            vision_fps: sheds
                && vision_on
                && cfg.budget.shed_vision_fps > 0.0
                && cfg.budget.shed_vision_fps < cfg.vision.analyse_fps,
            asr_model: sheds && engine.asr_fallback.is_some(),
            text: sheds && cfg.budget.shed_text_over_ms > 0 && engine.text.is_some(),
        },
        cfg.budget.recover_after,
        &counters.shed,
    );
    let ladder = &ladder;
    let frames_live = vision.as_ref().is_some_and(|(f, _)| f.is_live());
    // Frames are kept as long as audio is (plus the context) so every utterance
    // still finds its frames when it is analysed.
    let timeline = VisionTimeline::new(audio_keep_s + cfg.context.seconds as f64);
    // Set when the audio side is finished: the frame reader then stops too.
    let audio_finished = AtomicBool::new(false);
    let result = std::thread::scope(|s| -> Result<(), PipelineError> {
        // --- vision threads: frame reader -> bounded queue -> analyser --------------
        if let Some((frame_source, analyser)) = vision {
            let (frame_tx, frame_rx) = bounded(cfg.vision.frame_queue);
            let oldest = frame_rx.clone();
            let vc = &counters.vision;
            let rate = vstream::FrameRate {
                analyse_fps: cfg.vision.analyse_fps,
                shed: Some((ladder, cfg.budget.shed_vision_fps)),
            };
            let pacing = (opts.realtime && !frame_source.is_live())
                .then_some(vstream::Pacing { started: t0 });
            let stop = opts.stop.clone();
            let (abort, audio_finished, timeline) = (&abort, &audio_finished, &timeline);
            let gap_tx = ev_tx.clone();
            let gap_counters = &counters;
            std::thread::Builder::new()
                .name("frames".into())
                .spawn_scoped(s, move || {
                    let what = frame_source.describe();
                    let halted = || {
                        stop.load(Ordering::Relaxed)
                            || abort.load(Ordering::Relaxed)
                            || audio_finished.load(Ordering::Relaxed)
                    };
                    let mut on_gap = |g: crate::audio::SourceGap| {
                        record_gap(gap_counters, &gap_tx, "video", &what, g)
                    };
                    let r = vstream::read_frames(
                        frame_source,
                        rate,
                        frame_tx,
                        oldest,
                        vc,
                        &gap_counters.drops,
                        pacing,
                        &halted,
                        &mut on_gap,
                    );
                    if let Err(e) = r {
                        vc.source_failed.store(true, Ordering::Relaxed);
                        log::warn!("{e}; the stream continues audio-only (views.video null)");
                    } else if !halted() {
                        log::debug!("{what}: no more frames; later utterances have no video view");
                    }
                })
                .expect("spawn frames thread");
            std::thread::Builder::new()
                .name("vision".into())
                .spawn_scoped(s, move || {
                    let mut analyser = analyser;
                    if let Err(e) = vstream::analyse_frames(&mut analyser, frame_rx, timeline, vc) {
                        vc.source_failed.store(true, Ordering::Relaxed);
                        log::warn!("vision stage stopped: {e}; the stream continues audio-only");
                    }
                    timeline.end();
                })
                .expect("spawn vision thread");
        } else {
            timeline.end();
        }

        // --- source thread ---------------------------------------------------------
        let src_counters = counters.clone();
        let src_done = source_done.clone();
        let stop = opts.stop.clone();
        let src_abort = abort.clone();
        let halted = move || stop.load(Ordering::Relaxed) || src_abort.load(Ordering::Relaxed);
        let realtime = opts.realtime;
        let gap_tx = ev_tx.clone();
        let source_h = std::thread::Builder::new()
            .name("source".into())
            .spawn_scoped(s, move || -> Result<(), AudioError> {
                let mut source = source;
                src_counters.source_running.store(true, Ordering::Relaxed);
                let mut buf = Vec::with_capacity(8192);
                let started = Instant::now();
                let mut pushed: u64 = 0;
                let res = (|| {
                    while !halted() {
                        buf.clear();
                        let more = source.read_chunk(&mut buf)?;
                        if let Some(gap) = source.take_gap() {
                            // The read that resumed delivery reports the gap: silence
                            // for the lost interval goes before its audio, keeping the
                            // stream clock on wall time (camera frames still line up).
                            let fill = (gap.duration_s.min(MAX_GAP_FILL_S) * RATE) as usize;
                            let zeros = vec![0.0f32; 4096];
                            let mut left = fill;
                            while left > 0 && !halted() {
                                let n = prod.push_slice(&zeros[..left.min(zeros.len())]);
                                if n == 0 {
                                    std::thread::sleep(Duration::from_millis(2));
                                }
                                left -= n;
                            }
                            pushed += fill as u64;
                            src_counters
                                .samples_in
                                .fetch_add(fill as u64, Ordering::Relaxed);
                            record_gap(&src_counters, &gap_tx, "audio", &source.describe(), gap);
                        }
                        src_counters
                            .samples_in
                            .fetch_add(buf.len() as u64, Ordering::Relaxed);
                        let mut rest = &buf[..];
                        while !rest.is_empty() {
                            let n = prod.push_slice(rest);
                            rest = &rest[n..];
                            if !rest.is_empty() {
                                if live {
                                    src_counters
                                        .drops
                                        .add(DropReason::DroppedSamples, rest.len() as u64);
                                    break;
                                }
                                if halted() {
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(2));
                            }
                        }
                        pushed += buf.len() as u64;
                        if realtime {
                            let due = Duration::from_secs_f64(pushed as f64 / RATE);
                            if let Some(wait) = due.checked_sub(started.elapsed()) {
                                std::thread::sleep(wait);
                            }
                        }
                        if !more {
                            break;
                        }
                    }
                    Ok(())
                })();
                src_counters.source_running.store(false, Ordering::Relaxed);
                src_done.store(true, Ordering::Release);
                res
            })
            .expect("spawn source thread");

        // --- segmenter thread ------------------------------------------------------
        let seg_counters = counters.clone();
        let seg_ctx = context.clone();
        let seg_done = source_done.clone();
        let seg_cfg = cfg.clone();
        let vad = engine.vad.clone();
        let seg_abort = abort.clone();
        let seg_sentence_end = sentence_end_at.clone();
        let seg_resumed = resumed.clone();
        let segmenter_h = std::thread::Builder::new()
            .name("segmenter".into())
            .spawn_scoped(s, move || -> Result<Vec<f64>, PipelineError> {
                let r = (|| -> Result<Vec<f64>, PipelineError> {
                    let mut vad = vad.stream()?;
                    let mut frames_x = FrameExtractor::new(&seg_cfg.prosody, PIPELINE_RATE_HZ)?;
                    let mut endpointer = Endpointer::new(&seg_cfg.segment);
                    let mut pending: Vec<f32> = Vec::with_capacity(VAD_CHUNK * 8);
                    let mut frames = Vec::new();
                    let mut events = Vec::new();
                    let mut next_id = 0u64;
                    let mut vad_ms = Vec::new();
                    let pre = ms_samples(seg_cfg.segment.pre_roll_ms);
                    let post = ms_samples(seg_cfg.segment.post_roll_ms);
                    let mut tmp = vec![0.0f32; VAD_CHUNK * 8];
                    let mut finishing = false;
                    // Stream sample of the last interim request, and the utterance it was for.
                    let mut interim_at: (u64, u64) = (u64::MAX, 0);
                    let mut step_at: (u64, u64) = (u64::MAX, 0);
                    // Speech end of the pause a speculative step was last sent for.
                    let mut speculated_for: u64 = u64::MAX;
                    // Id of the last utterance the sentence-end shortcut ended, while
                    // the speaker may still go on (then the next utterance revises it).
                    let mut ended_early: Option<u64> = None;
                    loop {
                        seg_counters.heartbeat.beat();
                        let n = cons.pop_slice(&mut tmp);
                        seg_counters
                            .ring_fill_samples
                            .store(cons.occupied_len() as u64, Ordering::Relaxed);
                        if n == 0 {
                            if seg_done.load(Ordering::Acquire) && cons.is_empty() {
                                finishing = true;
                            } else {
                                std::thread::sleep(Duration::from_millis(2));
                                continue;
                            }
                        }
                        pending.extend_from_slice(&tmp[..n]);
                        let mut off = 0;
                        while pending.len() - off >= VAD_CHUNK || (finishing && pending.len() > off)
                        {
                            let end = (off + VAD_CHUNK).min(pending.len());
                            let chunk = &pending[off..end];
                            frames.clear();
                            frames_x.push(chunk, &mut frames);
                            {
                                let mut c = seg_ctx.lock_or_recover();
                                c.push_audio(chunk);
                                c.push_frames(&frames);
                            }
                            let tv = Instant::now();
                            let p = if chunk.len() == VAD_CHUNK {
                                vad.process(chunk)?
                            } else {
                                // Last partial chunk: pad with silence for the model only.
                                let mut padded = chunk.to_vec();
                                padded.resize(VAD_CHUNK, 0.0);
                                vad.process(&padded)?
                            };
                            vad_ms.push(tv.elapsed().as_secs_f64() * 1e3);
                            events.clear();
                            let sentence_ended = endpointer
                                .open_speech_end()
                                .is_some_and(|e| seg_sentence_end.load(Ordering::Acquire) == e);
                            endpointer.push_knowing(p, chunk.len(), sentence_ended, &mut events);
                            if let Some((at, len)) = endpointer.open_last_gap() {
                                seg_resumed.publish(at, len);
                            }
                            off = end;
                            if streaming {
                                request_step(
                                    &endpointer,
                                    &seg_ctx,
                                    &seg_counters,
                                    &step_tx,
                                    utt_tx.len(),
                                    step_every,
                                    pre,
                                    next_id,
                                    &mut step_at,
                                    &mut speculated_for,
                                );
                            } else if interim_on {
                                request_interim(
                                    &endpointer,
                                    &seg_ctx,
                                    &seg_counters,
                                    &int_tx,
                                    interim_every,
                                    pre,
                                    next_id,
                                    &mut interim_at,
                                );
                            }
                            for ev in events.drain(..) {
                                handle_endpoint(
                                    ev,
                                    &seg_ctx,
                                    &seg_counters,
                                    &utt_tx,
                                    live,
                                    pre,
                                    post,
                                    endpointer.position(),
                                    &mut next_id,
                                    &mut ended_early,
                                );
                            }
                        }
                        pending.drain(..off);
                        if finishing {
                            // Flush the prosody tail so an utterance ending with the stream
                            // keeps its last frames.
                            frames.clear();
                            frames_x.finish(&mut frames);
                            seg_ctx.lock_or_recover().push_frames(&frames);
                            events.clear();
                            endpointer.finish(&mut events);
                            for ev in events.drain(..) {
                                handle_endpoint(
                                    ev,
                                    &seg_ctx,
                                    &seg_counters,
                                    &utt_tx,
                                    live,
                                    pre,
                                    post,
                                    endpointer.position(),
                                    &mut next_id,
                                    &mut ended_early,
                                );
                            }
                            break;
                        }
                    }
                    drop(utt_tx);
                    drop(int_tx);
                    drop(step_tx);
                    Ok(vad_ms)
                })();
                if r.is_err() {
                    seg_abort.store(true, Ordering::Relaxed);
                }
                r
            })
            .expect("spawn segmenter thread");

        // --- interim decoder thread (optional) ---------------------------------------
        let interim_h = if interim_on && !streaming {
            let int_counters = counters.clone();
            let int_cfg = cfg.clone();
            let int_ev_tx = ev_tx.clone();
            Some(
                std::thread::Builder::new()
                    .name("interim".into())
                    .spawn_scoped(s, move || {
                        interim_loop(engine, &int_cfg, int_rx, int_ev_tx, &int_counters)
                    })
                    .expect("spawn interim thread"),
            )
        } else {
            drop(int_rx);
            None
        };

        // --- analyser thread -------------------------------------------------------
        let an_ctx = context.clone();
        let an_counters = counters.clone();
        let an_cfg = cfg.clone();
        let with_features = opts.with_features;
        let an_abort = abort.clone();
        let an_timeline = &timeline;
        let an_audio_finished = &audio_finished;
        let an_frame_stop = opts.frame_source_stop.clone();
        let an_ev_tx = ev_tx.clone();
        let partials_on = interim_on;
        let an_sentence_end = sentence_end_at.clone();
        let an_resumed = resumed.clone();
        let analyser_h = std::thread::Builder::new()
            .name("analyser".into())
            .spawn_scoped(s, move || -> Result<(), PipelineError> {
                let r = (|| -> Result<(), PipelineError> {
                    let mut asr = engine.asr.stream(&an_cfg.asr)?;
                    let mut fallback_asr = match &engine.asr_fallback {
                        Some(m) => Some(m.stream(&an_cfg.asr)?),
                        None => None,
                    };
                    let mut stream_asr = streaming.then(StreamingAsr::new);
                    let mut steps = step_rx;
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
                                                an_counters.heartbeat.analysing(true);
                                                let r = run_step(
                                                    &mut asr,
                                                    stream_asr.as_mut(),
                                                    req,
                                                    last_final,
                                                    partials_on,
                                                    &an_ev_tx,
                                                    &an_counters,
                                                    &an_sentence_end,
                                                    &an_resumed,
                                                );
                                                an_counters.heartbeat.analysing(false);
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
                        an_counters
                            .utterance_queue_depth
                            .store(utt_rx.len() as u64, Ordering::Relaxed);
                        an_counters.heartbeat.analysing(true);
                        let backlog = utt_rx.len();
                        let ev = analyse(
                            engine,
                            &an_cfg,
                            Decoders {
                                asr: &mut asr,
                                fallback: fallback_asr.as_mut(),
                                ladder,
                            },
                            stream_asr.as_mut(),
                            &an_ctx,
                            utt,
                            with_features,
                            backlog,
                            &an_counters,
                            VideoInput {
                                timeline: vision_on.then_some(an_timeline),
                                live: frames_live,
                                analyse_fps: an_cfg.vision.analyse_fps,
                                halted: &an_abort,
                            },
                        );
                        an_counters.heartbeat.analysing(false);
                        let ev = ev?;
                        if ev.transcript.as_deref().is_some_and(str::is_empty) {
                            an_counters
                                .empty_transcripts
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        if ev_tx.send(Emitted::Utterance(Box::new(ev))).is_err() {
                            break;
                        }
                    }
                    Ok(())
                })();
                if r.is_err() {
                    an_abort.store(true, Ordering::Relaxed);
                }
                an_audio_finished.store(true, Ordering::Relaxed);
                if let Some(f) = &an_frame_stop {
                    f.store(true, Ordering::Relaxed);
                }
                r
            })
            .expect("spawn analyser thread");

        // --- sink (this thread) ------------------------------------------------------
        let mut sink_err = None;
        let mut last_final: Option<u64> = None;
        for emitted in ev_rx.iter() {
            counters
                .event_queue_depth
                .store(ev_rx.len() as u64, Ordering::Relaxed);
            let ev = match emitted {
                Emitted::Utterance(ev) => ev,
                Emitted::Gap(g) => {
                    if sink_err.is_none() {
                        if let Err(e) = sink.gap(&g) {
                            abort.store(true, Ordering::Relaxed);
                            sink_err = Some(e);
                        }
                    }
                    continue;
                }
                Emitted::Partial(p) => {
                    // The final event of this utterance already went out.
                    if last_final.is_some_and(|l| p.id <= l) {
                        counters.drops.add(DropReason::PartialStale, 1);
                        continue;
                    }
                    if sink_err.is_none() {
                        match sink.partial(&p) {
                            Ok(()) => {
                                counters.partials.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => {
                                abort.store(true, Ordering::Relaxed);
                                sink_err = Some(e);
                            }
                        }
                    }
                    continue;
                }
            };
            last_final = Some(ev.id);
            let budget_ms = cfg.budget.event_latency_ms;
            if budget_ms > 0 && ev.latency_ms.total > budget_ms as f64 {
                let n = counters.budget_violations.fetch_add(1, Ordering::Relaxed);
                // First one, then every 100th: an overloaded board must not also flood its log.
                if n % 100 == 0 {
                    log::warn!(
                        "utterance {} flagged {:.0} ms after the end of speech, over the {budget_ms} ms budget ({} violations so far)",
                        ev.id,
                        ev.latency_ms.total,
                        n + 1
                    );
                }
            }
            for (k, v) in ev.latency_ms.stages() {
                stages.entry(k.to_string()).or_default().push(v);
            }
            if sink_err.is_none() {
                match sink.write(&ev) {
                    Ok(()) => {
                        counters.events.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        // Stop the stream: nothing downstream can take events.
                        abort.store(true, Ordering::Relaxed);
                        sink_err = Some(e);
                    }
                }
            }
        }
        let src = source_h
            .join()
            .map_err(|_| PipelineError::Panic("source"))?;
        let seg = segmenter_h
            .join()
            .map_err(|_| PipelineError::Panic("segmenter"))?;
        let an = analyser_h
            .join()
            .map_err(|_| PipelineError::Panic("analyser"))?;
        if let Some(h) = interim_h {
            h.join().map_err(|_| PipelineError::Panic("interim"))?;
        }
        // The first error in data-flow order is the cause; later ones are consequences.
        src?;
        stages.insert("vad_chunk".into(), seg?);
        an?;
        if let Some(e) = sink_err {
            return Err(PipelineError::Sink(e));
        }
        sink.flush().map_err(PipelineError::Sink)?;
        Ok(())
    });
    result?;

    let c = &counters;
    Ok(RunStats {
        audio_s: c.samples_in.load(Ordering::Relaxed) as f64 / RATE,
        wall_s: t0.elapsed().as_secs_f64(),
        utterances: c.utterances.load(Ordering::Relaxed),
        events: c.events.load(Ordering::Relaxed),
        too_short: c.too_short.load(Ordering::Relaxed),
        budget_violations: c.budget_violations.load(Ordering::Relaxed),
        partials: c.partials.load(Ordering::Relaxed),
        vision: c.vision.stats(vision_on),
        shed: ladder.stats(),
        source_gaps: c.source_gaps.load(Ordering::Relaxed),
        source_gap_s: c.source_gap_ms.load(Ordering::Relaxed) as f64 / 1e3,
        streaming: StreamingStats {
            enabled: streaming,
            steps: c.stream_steps.load(Ordering::Relaxed),
            steps_skipped_busy: c.stream_steps_skipped_busy.load(Ordering::Relaxed),
            steps_shed: c.stream_steps_shed.load(Ordering::Relaxed),
            steps_stale: c.stream_steps_stale.load(Ordering::Relaxed),
            steps_abandoned: c.stream_steps_abandoned.load(Ordering::Relaxed),
            speculative_finals: c.speculative_finals.load(Ordering::Relaxed),
            early_ends: c.early_ends.load(Ordering::Relaxed),
            reopened_after_early_end: c.reopened_after_early_end.load(Ordering::Relaxed),
            text_shed: c.text_shed.load(Ordering::Relaxed),
        },
        empty_transcripts: c.empty_transcripts.load(Ordering::Relaxed),
        dropped: c.drops.snapshot().by_name(),
        stages: stages
            .into_iter()
            .map(|(k, v)| (k, StageSummary::from(v)))
            .collect(),
    })
}

/// A lost interval of a live source: logged, counted and sent as a `gap` event.
fn record_gap(
    counters: &Counters,
    tx: &Sender<Emitted>,
    source: &'static str,
    what: &str,
    gap: crate::audio::SourceGap,
) {
    log::warn!(
        "{what}: lost {:.1} s of {source} at {:.1} s: {}",
        gap.duration_s,
        gap.start_s,
        gap.reason
    );
    counters.source_gaps.fetch_add(1, Ordering::Relaxed);
    counters
        .source_gap_ms
        .fetch_add((gap.duration_s * 1e3) as u64, Ordering::Relaxed);
    let ev = Emitted::Gap(GapEvent {
        kind: "gap",
        source,
        start_s: round3(gap.start_s),
        end_s: round3(gap.start_s + gap.duration_s),
        reason: gap.reason,
    });
    // Rare and small: wait briefly for room rather than lose it; the counters above
    // record the gap either way.
    if tx.send_timeout(ev, Duration::from_millis(200)).is_err() {
        counters.drops.add(DropReason::GapEventQueueFull, 1);
        log::warn!("{what}: gap event not delivered: event queue full");
    }
}

fn ms_samples(ms: u32) -> u64 {
    ms as u64 * PIPELINE_RATE_HZ as u64 / 1000
}

#[allow(clippy::too_many_arguments)]
fn handle_endpoint(
    ev: EndpointEvent,
    ctx: &Mutex<ContextStore>,
    counters: &Counters,
    tx: &Sender<Utterance>,
    live: bool,
    pre: u64,
    post: u64,
    position: u64,
    next_id: &mut u64,
    ended_early: &mut Option<u64>,
) {
    let span = match ev {
        EndpointEvent::TooShort(span) => {
            counters.too_short.fetch_add(1, Ordering::Relaxed);
            // Nothing went out, so a reopened utterance replaces nothing.
            if span.early {
                *ended_early = None;
            }
            return;
        }
        EndpointEvent::Utterance(span) => span,
    };
    let revises = if span.continues_early {
        ended_early.take()
    } else {
        None
    };
    if revises.is_some() {
        counters
            .reopened_after_early_end
            .fetch_add(1, Ordering::Relaxed);
    }
    let (audio_start, audio, frames) = {
        let c = ctx.lock_or_recover();
        let (a0, audio) = c.audio_range(
            span.speech_start.saturating_sub(pre),
            span.speech_end + post,
        );
        let frames = c.frames_between(
            span.speech_start as f64 / RATE,
            span.speech_end as f64 / RATE,
        );
        (a0, audio, frames)
    };
    let utt = Utterance {
        id: *next_id,
        span,
        audio,
        audio_start,
        frames,
        endpoint_at: Instant::now(),
        endpoint_delay_samples: position.saturating_sub(span.speech_end),
        revises,
    };
    *ended_early = None;
    if span.early {
        counters.early_ends.fetch_add(1, Ordering::Relaxed);
    }
    *next_id += 1;
    counters.utterances.fetch_add(1, Ordering::Relaxed);
    counters
        .utterance_queue_depth
        .store(tx.len() as u64 + 1, Ordering::Relaxed);
    let id = utt.id;
    let sent = if live {
        match tx.try_send(utt) {
            Ok(()) => true,
            Err(TrySendError::Full(u)) => {
                counters.drops.add(DropReason::UtteranceQueueFull, 1);
                log::warn!(
                    "utterance {} ({:.2}-{:.2} s) dropped: analysis queue full",
                    u.id,
                    u.span.speech_start as f64 / RATE,
                    u.span.speech_end as f64 / RATE
                );
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    } else {
        tx.send(utt).is_ok()
    };
    if sent && span.early {
        *ended_early = Some(id);
    }
}

/// Ask for an interim decode every `every` samples of an utterance in progress.
#[allow(clippy::too_many_arguments)]
fn request_interim(
    endpointer: &Endpointer,
    ctx: &Mutex<ContextStore>,
    counters: &Counters,
    tx: &Sender<InterimRequest>,
    every: u64,
    pre: u64,
    next_id: u64,
    last: &mut (u64, u64),
) {
    let Some(speech_start) = endpointer.open_speech_start() else {
        return;
    };
    let pos = endpointer.position();
    if last.1 != speech_start || last.0 == u64::MAX {
        // A new utterance: its first interim comes `every` after its onset.
        *last = (speech_start, speech_start);
    }
    if pos < last.0 + every {
        return;
    }
    last.0 = pos;
    let (audio_start, audio) = ctx
        .lock()
        .expect("context lock")
        .audio_range(speech_start.saturating_sub(pre), pos);
    let req = InterimRequest {
        id: next_id,
        speech_start,
        audio_start,
        audio,
    };
    if let Err(TrySendError::Full(_)) = tx.try_send(req) {
        counters.drops.add(DropReason::PartialAsrBusy, 1);
    }
}

/// Send the utterance in progress to the analyser for a streaming step: every `every`
/// samples of speech, and once at the first chunk of each pause (speculative: if the
/// utterance ends there, that decode is its final transcript).
#[allow(clippy::too_many_arguments)]
fn request_step(
    endpointer: &Endpointer,
    ctx: &Mutex<ContextStore>,
    counters: &Counters,
    tx: &Sender<StepRequest>,
    finals_waiting: usize,
    every: u64,
    pre: u64,
    next_id: u64,
    last: &mut (u64, u64),
    speculated_for: &mut u64,
) {
    let (Some(speech_start), Some(speech_end)) =
        (endpointer.open_speech_start(), endpointer.open_speech_end())
    else {
        return;
    };
    let pos = endpointer.position();
    if last.1 != speech_start || last.0 == u64::MAX {
        *last = (speech_start, speech_start);
    }
    // A pause is two silent chunks: single-chunk dips inside words (plosives) would
    // each cost a wasted decode (measured: +8 % CPU-s per audio-s for no latency).
    let pause = pos >= speech_end + 2 * VAD_CHUNK as u64 && *speculated_for != speech_end;
    let due = pos >= last.0 + every && pos == speech_end;
    if !pause && !due {
        return;
    }
    if finals_waiting > 0 {
        // Shed: finished utterances come first and a step would delay them.
        counters.stream_steps_shed.fetch_add(1, Ordering::Relaxed);
        last.0 = pos;
        return;
    }
    if tx.is_full() {
        // Checked before copying up to 15 s of audio: a pause step is retried at
        // every 32 ms chunk until the analyser takes the previous one.
        if !pause {
            last.0 = pos;
        }
        counters
            .stream_steps_skipped_busy
            .fetch_add(1, Ordering::Relaxed);
        return;
    }
    let (audio_start, audio) = ctx
        .lock()
        .expect("context lock")
        .audio_range(speech_start.saturating_sub(pre), pos);
    let req = StepRequest {
        id: next_id,
        speech_start,
        audio_start,
        audio,
        speculative: pause,
        speech_end,
        last_gap: endpointer.open_last_gap(),
    };
    // The segmenter is the only sender, so the queue cannot have filled since the
    // check; a disconnected analyser has failed and reports that itself.
    if tx.try_send(req).is_ok() {
        last.0 = pos;
        if pause {
            *speculated_for = speech_end;
        }
    }
}

/// The latest pause inside an utterance after which speech resumed, published by the
/// segmenter for the analyser (stream samples).
#[derive(Debug)]
struct PauseResumed {
    at: AtomicU64,
    len: AtomicU64,
}

impl Default for PauseResumed {
    fn default() -> Self {
        Self {
            at: AtomicU64::new(u64::MAX),
            len: AtomicU64::new(0),
        }
    }
}

impl PauseResumed {
    fn publish(&self, at: u64, len: u64) {
        if self.at.load(Ordering::Relaxed) != at {
            self.len.store(len, Ordering::Relaxed);
            self.at.store(at, Ordering::Release);
        }
    }

    /// The length of the pause that began at `speech_end`, once speech resumed after it.
    fn after(&self, speech_end: u64) -> Option<u64> {
        (self.at.load(Ordering::Acquire) == speech_end).then(|| self.len.load(Ordering::Relaxed))
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
    sentence_end_at: &AtomicU64,
    resumed: &PauseResumed,
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
    let pause_ended = || resumed.after(req.speech_end).map(|len| len as f64 / RATE);
    let abandoned = st.abandoned_decodes();
    let r = st.step(
        asr,
        &at,
        &req.audio,
        req.speculative,
        partials_on,
        &pause_ended,
    )?;
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
        sentence_end_at.store(req.speech_end, Ordering::Release);
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

/// Decode the audio of utterances in progress and emit their interim text. Failures
/// here never stop the pipeline: the final decode is what counts.
fn interim_loop(
    engine: &Engine,
    cfg: &Config,
    rx: crossbeam_channel::Receiver<InterimRequest>,
    tx: Sender<Emitted>,
    counters: &Counters,
) {
    let mut asr = match engine.asr.stream(&cfg.asr) {
        Ok(a) => a,
        Err(e) => {
            log::warn!("interim text off: cannot create a second ASR state: {e}");
            return;
        }
    };
    for req in rx.iter() {
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
        if !send_partial(&tx, counters, p) {
            break;
        }
    }
}

/// Interim text is best-effort: dropped and counted when the event queue is full.
/// Returns false once the sink side is gone.
fn send_partial(tx: &Sender<Emitted>, counters: &Counters, p: PartialEvent) -> bool {
    match tx.try_send(Emitted::Partial(p)) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            counters.drops.add(DropReason::PartialEventQueueFull, 1);
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Where the analyser finds an utterance's frames.
struct VideoInput<'a> {
    timeline: Option<&'a VisionTimeline>,
    /// A camera: wait at most about one analysis period for the frames of the
    /// utterance's end; a file: wait until they are analysed (deterministic replays).
    live: bool,
    analyse_fps: f32,
    halted: &'a AtomicBool,
}

impl VideoInput<'_> {
    /// Vision functionals over the utterance's frames; `None` without a face.
    fn functionals(&self, start_s: f64, end_s: f64) -> Option<Vec<f32>> {
        let tl = self.timeline?;
        let wait = self
            .live
            .then(|| Duration::from_secs_f64(1.5 / self.analyse_fps as f64));
        crate::vision::functionals(&tl.window(start_s, end_s, wait, self.halted))
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
    let transcript = if shed_text {
        counters.text_shed.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "utterance {} ({:.1} s): transcript and text view skipped, {backlog} utterances waiting",
            utt.id,
            end_s - start_s
        );
        Transcript::default()
    } else if let Some(st) = stream_asr {
        let (tr, speculative) = st.finish(
            asr,
            utt.id,
            utt.audio_start,
            &utt.audio,
            utt.span.speech_end,
        )?;
        if speculative {
            counters.speculative_finals.fetch_add(1, Ordering::Relaxed);
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
            let prev = ctx
                .lock()
                .expect("context lock")
                .transcripts_before(start_s);
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
        ctx.lock()
            .expect("context lock")
            .push_transcript(ContextTranscript {
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
            queue: round3(queue),
            asr: round3(asr_ms),
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

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
