//! Every queue between the stages, what flows on it, and what happens when it is full.
//! Each policy is stated here once; the stages only call these functions.
//!
//! | queue | capacity | when full |
//! | --- | --- | --- |
//! | audio ring (lock-free) | `buffers.ring_ms` | live: the new samples are dropped and counted (`dropped_samples`); files and pipes wait for room. Silence filling a source gap always waits. |
//! | utterances | `buffers.utterance_queue` | live: the newest utterance is dropped and counted (`utterance_queue_full`); files wait |
//! | events | `buffers.event_queue` | final events wait for the sink (they are the product, never dropped); interim text is best-effort, dropped and counted (`partial_event_queue_full`); a gap event waits up to 200 ms, then is dropped and counted (`gap_event_queue_full`) |
//! | interim requests | 1 | skipped and counted while the interim decoder is busy (`partial_asr_busy`): the next request carries all the audio so far anyway |
//! | streaming steps | 1 | skipped while the analyser is busy (`stream_steps_skipped_busy`); none is sent while finished utterances wait (`stream_steps_shed`), see `segmenter` |
//! | camera frames | `vision.frame_queue` | see `vision::stream::read_frames` (a camera drops the oldest frame) |
//!
//! The ring's two ends block instead of polling: a side that finds the ring empty (or
//! full) parks its thread and the other side unparks it after each pop (or push).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};

use crate::common::counters::Counters;
use crate::common::drops::DropReason;
use crate::sinks::event::{GapEvent, PartialEvent, UtteranceEvent};
use crate::views::prosody::ProsodyFrame;
use crate::views::vad::Span;

use super::clock::{round3, RATE};
use super::plan::{Plan, WhenFull};

/// Longest a ring wait parks before looking again without being woken. Waits are
/// woken by the other end and by [`super::shutdown::Shutdown::fail`]; this bound is
/// only for what notifies nobody: `RunOptions::stop` (a plain flag the daemon's
/// signal handler sets) and the segmenter's watchdog heartbeat, which must beat
/// while a live source delivers nothing.
pub const RING_WAIT_MAX: Duration = Duration::from_millis(100);

/// What the analysis threads hand to the sink.
pub enum Emitted {
    Utterance(Box<UtteranceEvent>),
    Partial(PartialEvent),
    Gap(GapEvent),
}

/// A finished utterance on its way to the analyser.
pub struct Utterance {
    pub id: u64,
    pub span: Span,
    /// Audio with pre- and post-roll, starting at stream sample `audio_start`.
    pub audio: Vec<f32>,
    pub audio_start: u64,
    pub frames: Vec<ProsodyFrame>,
    pub endpoint_at: Instant,
    /// Audio that passed between the end of speech and the endpoint decision.
    pub endpoint_delay_samples: u64,
    /// The early-ended utterance this one reopens and replaces.
    pub revises: Option<u64>,
}

/// Audio of the utterance in progress, for an interim decode.
pub struct InterimRequest {
    /// The id the utterance will get when it ends.
    pub id: u64,
    pub speech_start: u64,
    pub audio_start: u64,
    pub audio: Vec<f32>,
}

/// Audio of the utterance in progress for a streaming step.
pub struct StepRequest {
    pub id: u64,
    pub speech_start: u64,
    pub audio_start: u64,
    pub audio: Vec<f32>,
    /// Sent at the first chunk of a pause: the result may become the final transcript.
    pub speculative: bool,
    /// End of the speech so far (stream sample).
    pub speech_end: u64,
    /// A finished pause in the utterance: (start sample, length in samples). The one
    /// after the speech the last speculative step decoded when it has finished (its
    /// length decides whether that decode is committed), else the latest.
    pub last_gap: Option<(u64, u64)>,
}

/// The channels of one run, sized by the plan.
pub struct Queues {
    pub utterances: (Sender<Utterance>, Receiver<Utterance>),
    pub events: (Sender<Emitted>, Receiver<Emitted>),
    pub interim: (Sender<InterimRequest>, Receiver<InterimRequest>),
    pub steps: (Sender<StepRequest>, Receiver<StepRequest>),
}

impl Queues {
    pub fn new(plan: &Plan) -> Self {
        Self {
            utterances: bounded(plan.utterance_queue),
            events: bounded(plan.event_queue),
            interim: bounded(1),
            steps: bounded(1),
        }
    }
}

/// Queue a finished utterance under the plan's policy. Returns whether it was queued.
pub fn send_utterance(
    tx: &Sender<Utterance>,
    utt: Utterance,
    full: WhenFull,
    counters: &Counters,
) -> bool {
    match full {
        WhenFull::Wait => tx.send(utt).is_ok(),
        WhenFull::DropNewest => match tx.try_send(utt) {
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
        },
    }
}

/// Interim text is best-effort: dropped and counted when the event queue is full.
/// Returns false once the sink side is gone.
pub fn send_partial(tx: &Sender<Emitted>, counters: &Counters, p: PartialEvent) -> bool {
    match tx.try_send(Emitted::Partial(p)) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            counters.drops.add(DropReason::PartialEventQueueFull, 1);
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

/// An interim request is skipped and counted while the interim decoder is busy.
pub fn send_interim(tx: &Sender<InterimRequest>, counters: &Counters, req: InterimRequest) {
    if let Err(TrySendError::Full(_)) = tx.try_send(req) {
        counters.drops.add(DropReason::PartialAsrBusy, 1);
    }
}

/// A lost interval of a live source: logged, counted and sent as a `gap` event.
pub fn record_gap(
    counters: &Counters,
    tx: &Sender<Emitted>,
    source: &'static str,
    what: &str,
    gap: crate::sources::audio::SourceGap,
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

/// The audio ring between the source and the segmenter.
pub fn audio_ring(plan: &Plan) -> (RingWriter, RingReader) {
    let (prod, cons) = HeapRb::<f32>::new(plan.ring_samples).split();
    let ends = Arc::new(RingEnds::default());
    (
        RingWriter {
            prod,
            ends: ends.clone(),
            full: plan.ring_full,
        },
        RingReader { cons, ends },
    )
}

/// Who waits on the ring, and whether the writer is done.
#[derive(Default)]
struct RingEnds {
    closed: AtomicBool,
    reader: OnceLock<Thread>,
    writer: OnceLock<Thread>,
}

fn wake(t: &OnceLock<Thread>) {
    if let Some(t) = t.get() {
        t.unpark();
    }
}

/// The source's end of the ring.
pub struct RingWriter {
    prod: HeapProd<f32>,
    ends: Arc<RingEnds>,
    full: WhenFull,
}

impl RingWriter {
    /// Call from the thread that writes, before it writes: it parks there when the
    /// ring is full, and `shutdown` wakes it if the reader side fails.
    pub fn attach(&self, shutdown: &super::shutdown::Shutdown) {
        let me = std::thread::current();
        let _ = self.ends.writer.set(me.clone());
        shutdown.wake_on_fail(me);
    }

    fn push_some(&mut self, samples: &[f32]) -> usize {
        let n = self.prod.push_slice(samples);
        if n > 0 {
            wake(&self.ends.reader);
        }
        n
    }

    /// Push all of `samples`, waiting for room, until `halted()`.
    fn push_waiting(&mut self, mut samples: &[f32], halted: &dyn Fn() -> bool) {
        while !samples.is_empty() {
            let n = self.push_some(samples);
            samples = &samples[n..];
            if !samples.is_empty() {
                if halted() {
                    return;
                }
                std::thread::park_timeout(RING_WAIT_MAX);
            }
        }
    }

    /// Push `n` samples of silence (filling a source gap), waiting for room whatever
    /// the policy: the stream clock must stay on wall time.
    pub fn push_silence(&mut self, n: usize, halted: &dyn Fn() -> bool) {
        let zeros = [0.0f32; 4096];
        let mut left = n;
        while left > 0 && !halted() {
            let k = left.min(zeros.len());
            self.push_waiting(&zeros[..k], halted);
            left -= k;
        }
    }

    /// Push source audio under the plan's policy. Returns how many samples were
    /// dropped (live source, ring full).
    pub fn push(&mut self, samples: &[f32], halted: &dyn Fn() -> bool) -> usize {
        match self.full {
            WhenFull::Wait => {
                self.push_waiting(samples, halted);
                0
            }
            WhenFull::DropNewest => {
                let n = self.push_some(samples);
                samples.len() - n
            }
        }
    }

    /// The source is done: the reader drains what is left and ends.
    pub fn close(self) {
        self.ends.closed.store(true, Ordering::Release);
        wake(&self.ends.reader);
    }
}

/// What a pop found.
#[derive(Debug, PartialEq, Eq)]
pub enum Popped {
    Samples(usize),
    /// Nothing yet: wait with [`RingReader::wait`].
    Empty,
    /// The writer closed the ring and everything was read.
    Ended,
}

/// The segmenter's end of the ring.
pub struct RingReader {
    cons: HeapCons<f32>,
    ends: Arc<RingEnds>,
}

impl RingReader {
    /// Call from the thread that reads, before it reads: it parks there while the ring
    /// is empty.
    pub fn attach(&self) {
        let _ = self.ends.reader.set(std::thread::current());
    }

    pub fn pop(&mut self, buf: &mut [f32]) -> Popped {
        let n = self.cons.pop_slice(buf);
        if n > 0 {
            wake(&self.ends.writer);
            Popped::Samples(n)
        } else if self.ends.closed.load(Ordering::Acquire) && self.cons.is_empty() {
            Popped::Ended
        } else {
            Popped::Empty
        }
    }

    /// Samples waiting in the ring.
    pub fn occupied(&self) -> usize {
        self.cons.occupied_len()
    }

    /// Park until the writer pushes or closes (or `RING_WAIT_MAX` passes).
    pub fn wait(&self) {
        std::thread::park_timeout(RING_WAIT_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pipeline::plan::PlanInputs;

    fn plan(live: bool) -> Plan {
        let mut cfg = Config::default();
        cfg.buffers.ring_ms = 1;
        Plan::new(
            &cfg,
            PlanInputs {
                live,
                ..PlanInputs::default()
            },
        )
    }

    #[test]
    fn a_live_ring_drops_what_does_not_fit_and_a_file_ring_does_not() {
        let p = plan(true);
        let (mut w, mut r) = audio_ring(&p);
        let big = vec![0.5f32; p.ring_samples + 10];
        assert_eq!(w.push(&big, &|| false), 10);
        let mut buf = vec![0.0; p.ring_samples * 2];
        assert_eq!(r.pop(&mut buf), Popped::Samples(p.ring_samples));
        assert_eq!(r.pop(&mut buf), Popped::Empty);
        w.close();
        assert_eq!(r.pop(&mut buf), Popped::Ended);
    }

    #[test]
    fn a_full_file_ring_blocks_the_writer_until_the_reader_makes_room() {
        let p = plan(false);
        let (mut w, mut r) = audio_ring(&p);
        let total = p.ring_samples * 5 + 3;
        let audio: Vec<f32> = (0..total).map(|i| i as f32).collect();
        let shutdown = super::super::shutdown::Shutdown::new(Default::default(), None);
        let got = std::thread::scope(|s| {
            s.spawn(|| {
                w.attach(&shutdown);
                assert_eq!(w.push(&audio, &|| false), 0);
                w.close();
            });
            r.attach();
            let mut got = Vec::new();
            let mut buf = vec![0.0; 97];
            loop {
                match r.pop(&mut buf) {
                    Popped::Samples(n) => got.extend_from_slice(&buf[..n]),
                    Popped::Empty => r.wait(),
                    Popped::Ended => break got,
                }
            }
        });
        assert_eq!(got, audio);
    }
}
