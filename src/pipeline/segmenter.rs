//! Segmenter stage: VAD, prosody frames and the context store over the audio stream,
//! endpointing into utterances, and the requests for interim text and streaming
//! steps while an utterance is in progress.
//!
//! [`Segmenter`] is a streaming state, as tract's: [`Segmenter::push`] takes audio in
//! chunks of any size and [`Segmenter::finish`] flushes the tail, so it runs (and is
//! tested) without threads; the audio is cut into 32 ms VAD chunks inside, and the
//! endpoints do not depend on how it arrived. [`SegmenterStage`] is the thread that
//! feeds it from the ring.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::common::counters::Counters;
use crate::common::lock::LockOrRecover;
use crate::config::Config;
use crate::pipeline::context::ContextStore;
use crate::views::prosody::{FrameExtractor, ProsodyFrame};
use crate::views::vad::{EndpointEvent, Endpointer, VadModel, VadStream, VAD_CHUNK};

use super::clock::RATE;
use super::error::PipelineError;
use super::plan::{Plan, WhenFull};
use super::queues::{
    send_interim, send_utterance, InterimRequest, Popped, RingReader, StepRequest, Utterance,
};
use super::shutdown::Shutdown;

/// What the segmenter and the analyser tell each other about the utterance in
/// progress (stream samples).
#[derive(Debug)]
pub struct SpeechSignals {
    /// Set by the analyser to the speech end of a pause whose speculative decode ended
    /// a sentence; the segmenter may then end the utterance after
    /// `segment.sentence_end_hangover_ms` instead of the full hangover.
    pub sentence_end_at: AtomicU64,
    /// Set by the segmenter when speech resumes after a pause inside an utterance: a
    /// speculative decode of that pause is then (mostly) useless and is abandoned.
    pub resumed: PauseResumed,
    /// Set by the segmenter to the speech end of the pause it has just sent a
    /// speculative step for: a regular step's decode still running on audio up to
    /// there (captions only) gives way to it.
    pub pause_step_at: AtomicU64,
}

impl Default for SpeechSignals {
    fn default() -> Self {
        Self {
            sentence_end_at: AtomicU64::new(u64::MAX),
            resumed: PauseResumed::default(),
            pause_step_at: AtomicU64::new(u64::MAX),
        }
    }
}

/// The latest pause inside an utterance after which speech resumed, published by the
/// segmenter for the analyser (stream samples).
#[derive(Debug)]
pub struct PauseResumed {
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
    pub fn after(&self, speech_end: u64) -> Option<u64> {
        (self.at.load(Ordering::Acquire) == speech_end).then(|| self.len.load(Ordering::Relaxed))
    }
}

/// Where the segmenter's output goes.
pub struct SegmenterOutputs {
    pub utterances: Sender<Utterance>,
    /// Interim decode requests, when the interim thread runs.
    pub interim: Option<Sender<InterimRequest>>,
    /// Streaming steps, when streaming.
    pub steps: Option<Sender<StepRequest>>,
}

/// The segmenter's streaming state.
pub struct Segmenter {
    vad: VadStream,
    frames_x: FrameExtractor,
    endpointer: Endpointer,
    /// Audio not yet cut into a full VAD chunk.
    pending: Vec<f32>,
    frames: Vec<ProsodyFrame>,
    events: Vec<EndpointEvent>,
    next_id: u64,
    /// Time of each VAD chunk, for the run summary.
    vad_ms: Vec<f64>,
    pre_roll_samples: u64,
    post_roll_samples: u64,
    interim_every_samples: u64,
    step_every_samples: u64,
    utterance_full: WhenFull,
    /// Stream sample of the last interim request, and the utterance it was for.
    interim_at: (u64, u64),
    step_at: (u64, u64),
    /// Speech end of the pause a speculative step was last sent for.
    speculated_for: u64,
    /// That pause once speech resumed after it: (start, length in samples). Kept for the
    /// analyser, which decides at a later step whether that decode is committed, by
    /// which time the endpointer's latest pause is often a dip inside a later word.
    speculated_gap: Option<(u64, u64)>,
    /// Id of the last utterance the sentence-end shortcut ended, while the speaker may
    /// still go on (then the next utterance revises it).
    ended_early: Option<u64>,
    ctx: Arc<Mutex<ContextStore>>,
    counters: Arc<Counters>,
    signals: Arc<SpeechSignals>,
    out: SegmenterOutputs,
}

impl Segmenter {
    pub fn new(
        vad: &VadModel,
        cfg: &Config,
        plan: &Plan,
        ctx: Arc<Mutex<ContextStore>>,
        counters: Arc<Counters>,
        signals: Arc<SpeechSignals>,
        out: SegmenterOutputs,
    ) -> Result<Self, PipelineError> {
        Ok(Self {
            vad: vad.stream()?,
            frames_x: FrameExtractor::new(&cfg.prosody, crate::sources::audio::PIPELINE_RATE_HZ)?,
            endpointer: Endpointer::new(&cfg.segment),
            pending: Vec::with_capacity(VAD_CHUNK * 8),
            frames: Vec::new(),
            events: Vec::new(),
            next_id: 0,
            vad_ms: Vec::new(),
            pre_roll_samples: plan.pre_roll_samples,
            post_roll_samples: plan.post_roll_samples,
            interim_every_samples: plan.interim_every_samples,
            step_every_samples: plan.step_every_samples,
            utterance_full: plan.utterance_full,
            interim_at: (u64::MAX, 0),
            step_at: (u64::MAX, 0),
            speculated_for: u64::MAX,
            speculated_gap: None,
            ended_early: None,
            ctx,
            counters,
            signals,
            out,
        })
    }

    /// Take audio (any length); every full 32 ms chunk in it is processed now.
    pub fn push(&mut self, samples: &[f32]) -> Result<(), PipelineError> {
        self.pending.extend_from_slice(samples);
        self.process_pending(false)
    }

    /// The stream ended: process the last partial chunk, flush the prosody tail and
    /// end an utterance in progress. Returns the time of every VAD chunk (ms). The
    /// output queues close when the segmenter is dropped.
    pub fn finish(mut self) -> Result<Vec<f64>, PipelineError> {
        self.process_pending(true)?;
        // Flush the prosody tail so an utterance ending with the stream keeps its last
        // frames.
        self.frames.clear();
        self.frames_x.finish(&mut self.frames);
        self.ctx.lock_or_recover().push_frames(&self.frames);
        self.events.clear();
        self.endpointer.finish(&mut self.events);
        self.hand_over_endpoints();
        Ok(std::mem::take(&mut self.vad_ms))
    }

    fn process_pending(&mut self, finishing: bool) -> Result<(), PipelineError> {
        let pending = std::mem::take(&mut self.pending);
        let mut off = 0;
        while pending.len() - off >= VAD_CHUNK || (finishing && pending.len() > off) {
            let end = (off + VAD_CHUNK).min(pending.len());
            self.process_chunk(&pending[off..end])?;
            off = end;
        }
        self.pending = pending;
        self.pending.drain(..off);
        Ok(())
    }

    /// One VAD chunk (shorter only at the end of the stream).
    fn process_chunk(&mut self, chunk: &[f32]) -> Result<(), PipelineError> {
        self.frames.clear();
        self.frames_x.push(chunk, &mut self.frames);
        {
            let mut c = self.ctx.lock_or_recover();
            c.push_audio(chunk);
            c.push_frames(&self.frames);
        }
        let tv = Instant::now();
        let p = if chunk.len() == VAD_CHUNK {
            self.vad.process(chunk)?
        } else {
            // Last partial chunk: pad with silence for the model only.
            let mut padded = chunk.to_vec();
            padded.resize(VAD_CHUNK, 0.0);
            self.vad.process(&padded)?
        };
        self.vad_ms.push(tv.elapsed().as_secs_f64() * 1e3);
        self.events.clear();
        let sentence_ended = self
            .endpointer
            .open_speech_end()
            .is_some_and(|e| self.signals.sentence_end_at.load(Ordering::Acquire) == e);
        self.endpointer
            .push_knowing(p, chunk.len(), sentence_ended, &mut self.events);
        if let Some((at, len)) = self.endpointer.open_last_gap() {
            self.signals.resumed.publish(at, len);
            if at == self.speculated_for {
                self.speculated_gap = Some((at, len));
            }
        }
        if self.out.steps.is_some() {
            self.request_step();
        } else if self.out.interim.is_some() {
            self.request_interim();
        }
        self.hand_over_endpoints();
        Ok(())
    }

    fn hand_over_endpoints(&mut self) {
        let mut events = std::mem::take(&mut self.events);
        for ev in events.drain(..) {
            self.handle_endpoint(ev);
        }
        self.events = events;
    }

    fn handle_endpoint(&mut self, ev: EndpointEvent) {
        let counters = &self.counters;
        let span = match ev {
            EndpointEvent::TooShort(span) => {
                counters.too_short.fetch_add(1, Ordering::Relaxed);
                // Nothing went out, so a reopened utterance replaces nothing.
                if span.early {
                    self.ended_early = None;
                }
                return;
            }
            EndpointEvent::Utterance(span) => span,
        };
        let revises = if span.continues_early {
            self.ended_early.take()
        } else {
            None
        };
        if revises.is_some() {
            counters
                .reopened_after_early_end
                .fetch_add(1, Ordering::Relaxed);
        }
        let (audio_start, audio, frames) = {
            let c = self.ctx.lock_or_recover();
            let (a0, audio) = c.audio_range(
                span.speech_start.saturating_sub(self.pre_roll_samples),
                span.speech_end + self.post_roll_samples,
            );
            let frames = c.frames_between(
                span.speech_start as f64 / RATE,
                span.speech_end as f64 / RATE,
            );
            (a0, audio, frames)
        };
        let utt = Utterance {
            id: self.next_id,
            span,
            audio,
            audio_start,
            frames,
            endpoint_at: Instant::now(),
            endpoint_delay_samples: self.endpointer.position().saturating_sub(span.speech_end),
            revises,
        };
        self.ended_early = None;
        if span.early {
            counters.early_ends.fetch_add(1, Ordering::Relaxed);
        }
        self.next_id += 1;
        counters.utterances.fetch_add(1, Ordering::Relaxed);
        counters
            .utterance_queue_depth
            .store(self.out.utterances.len() as u64 + 1, Ordering::Relaxed);
        let id = utt.id;
        let sent = send_utterance(&self.out.utterances, utt, self.utterance_full, counters);
        if sent && span.early {
            self.ended_early = Some(id);
        }
    }

    /// Ask for an interim decode every `interim_every_samples` of an utterance in
    /// progress.
    fn request_interim(&mut self) {
        let Some(tx) = &self.out.interim else {
            return;
        };
        let Some(speech_start) = self.endpointer.open_speech_start() else {
            return;
        };
        let pos = self.endpointer.position();
        let last = &mut self.interim_at;
        if last.1 != speech_start || last.0 == u64::MAX {
            // A new utterance: its first interim comes `every` after its onset.
            *last = (speech_start, speech_start);
        }
        if pos < last.0 + self.interim_every_samples {
            return;
        }
        last.0 = pos;
        let (audio_start, audio) = self.open_audio(speech_start, pos);
        let req = InterimRequest {
            id: self.next_id,
            speech_start,
            audio_start,
            audio,
        };
        send_interim(tx, &self.counters, req);
    }

    /// The utterance in progress so far, with its pre-roll, from the context store:
    /// (first sample's stream position, audio).
    fn open_audio(&self, speech_start: u64, pos: u64) -> (u64, Vec<f32>) {
        self.ctx
            .lock_or_recover()
            .audio_range(speech_start.saturating_sub(self.pre_roll_samples), pos)
    }

    /// Send the utterance in progress to the analyser for a streaming step: every
    /// `step_every_samples` of speech, and once at the first chunk of each pause
    /// (speculative: if the utterance ends there, that decode is its final transcript).
    fn request_step(&mut self) {
        let Some(tx) = &self.out.steps else {
            return;
        };
        let endpointer = &self.endpointer;
        let counters = &self.counters;
        let (Some(speech_start), Some(speech_end)) =
            (endpointer.open_speech_start(), endpointer.open_speech_end())
        else {
            return;
        };
        let pos = endpointer.position();
        let last = &mut self.step_at;
        if last.1 != speech_start || last.0 == u64::MAX {
            *last = (speech_start, speech_start);
        }
        // A pause is two silent chunks: single-chunk dips inside words (plosives) would
        // each cost a wasted decode (measured: +8 % CPU-s per audio-s for no latency).
        let pause = pos >= speech_end + 2 * VAD_CHUNK as u64 && self.speculated_for != speech_end;
        let due = pos >= last.0 + self.step_every_samples && pos == speech_end;
        if !pause && !due {
            return;
        }
        if !self.out.utterances.is_empty() {
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
        let (audio_start, audio) = self.open_audio(speech_start, pos);
        let req = StepRequest {
            id: self.next_id,
            speech_start,
            audio_start,
            audio,
            speculative: pause,
            speech_end,
            last_gap: self
                .speculated_gap
                .filter(|&(at, _)| at >= speech_start && at == self.speculated_for)
                .or(endpointer.open_last_gap()),
        };
        // The segmenter is the only sender, so the queue cannot have filled since the
        // check; a disconnected analyser has failed and reports that itself.
        if tx.try_send(req).is_ok() {
            self.step_at.0 = pos;
            if pause {
                self.speculated_for = speech_end;
                self.signals
                    .pause_step_at
                    .store(speech_end, Ordering::Release);
            }
        }
    }
}

/// The segmenter's thread: drains the ring into a [`Segmenter`] until the source
/// closes it.
pub struct SegmenterStage<'a> {
    pub vad: &'a VadModel,
    pub cfg: &'a Config,
    pub plan: &'a Plan,
    pub ctx: Arc<Mutex<ContextStore>>,
    pub counters: Arc<Counters>,
    pub signals: Arc<SpeechSignals>,
    pub out: SegmenterOutputs,
    pub ring: RingReader,
    pub shutdown: Shutdown,
}

impl SegmenterStage<'_> {
    /// Returns the time of every VAD chunk (ms). A failure stops the run.
    pub fn run(self) -> Result<Vec<f64>, PipelineError> {
        let Self {
            vad,
            cfg,
            plan,
            ctx,
            counters,
            signals,
            out,
            mut ring,
            shutdown,
        } = self;
        ring.attach();
        let r = (|| {
            let mut seg = Segmenter::new(vad, cfg, plan, ctx, counters.clone(), signals, out)?;
            let mut buf = vec![0.0f32; VAD_CHUNK * 8];
            loop {
                counters.heartbeat.beat();
                let popped = ring.pop(&mut buf);
                counters
                    .ring_fill_samples
                    .store(ring.occupied() as u64, Ordering::Relaxed);
                match popped {
                    Popped::Samples(n) => seg.push(&buf[..n])?,
                    Popped::Empty => ring.wait(),
                    Popped::Ended => return seg.finish(),
                }
            }
        })();
        if r.is_err() {
            shutdown.fail();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::plan::PlanInputs;
    use crate::sources::audio::AudioSource;
    use crossbeam_channel::unbounded;

    fn meeting() -> Vec<f32> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/meeting.wav");
        let mut src = crate::sources::audio::WavSource::open(&path).expect("samples/meeting.wav");
        let mut all = Vec::new();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let more = src.read_chunk(&mut buf).unwrap();
            all.extend_from_slice(&buf);
            if !more {
                break;
            }
        }
        all
    }

    fn vad() -> VadModel {
        let cfg = Config::default();
        let store = crate::common::models::ModelStore::new(
            crate::common::models::model_dir(cfg.models.dir.as_deref()),
            false,
        )
        .unwrap();
        let f = store
            .get("silero-vad")
            .expect("silero-vad missing: run scripts/setup.sh");
        VadModel::load(&f.path).unwrap()
    }

    /// Push `audio` in pieces of the given sizes (cycled) and return every utterance's
    /// span and audio, and how many chunks the VAD saw.
    fn segment(
        vad: &VadModel,
        audio: &[f32],
        sizes: &[usize],
    ) -> (Vec<(u64, u64, u64, usize)>, usize) {
        let cfg = Config::default();
        let plan = Plan::new(&cfg, PlanInputs::default());
        let (tx, rx) = unbounded();
        let mut seg = Segmenter::new(
            vad,
            &cfg,
            &plan,
            Arc::new(Mutex::new(ContextStore::new(
                plan.context_s,
                plan.audio_keep_s,
            ))),
            Arc::new(Counters::default()),
            Arc::new(SpeechSignals::default()),
            SegmenterOutputs {
                utterances: tx,
                interim: None,
                steps: None,
            },
        )
        .unwrap();
        let mut rest = audio;
        for &n in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let n = n.min(rest.len());
            seg.push(&rest[..n]).unwrap();
            rest = &rest[n..];
        }
        let chunks = seg.finish().unwrap().len();
        let spans = rx
            .iter()
            .map(|u: Utterance| {
                (
                    u.span.speech_start,
                    u.span.speech_end,
                    u.audio_start,
                    u.audio.len(),
                )
            })
            .collect();
        (spans, chunks)
    }

    #[test]
    fn endpoints_do_not_depend_on_how_the_audio_arrives() {
        let vad = vad();
        let audio = meeting();
        let whole = segment(&vad, &audio, &[audio.len()]);
        assert!(
            whole.0.len() >= 3,
            "meeting.wav has several utterances: {whole:?}"
        );
        // Random piece sizes from a fixed seed (xorshift), from 1 sample to 3 chunks.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let sizes: Vec<usize> = (0..997)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                1 + (x % (3 * VAD_CHUNK as u64)) as usize
            })
            .collect();
        assert_eq!(segment(&vad, &audio, &sizes), whole);
        // One sample at a time, and exact chunks.
        assert_eq!(segment(&vad, &audio, &[VAD_CHUNK]), whole);
        assert_eq!(segment(&vad, &audio[..audio.len() / 3], &[1]).0, {
            let third = segment(&vad, &audio[..audio.len() / 3], &[audio.len()]);
            third.0
        });
    }
}
