//! The counters and gauges every stage of a run updates, and the liveness marks its
//! threads leave. Read by the run summary (`pipeline`), `/metrics` (`metrics`), the
//! events file sink and the systemd watchdog (`service`); it sits below all of them,
//! so none of them imports another for it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::drops::DropRegistry;
use crate::common::shed::ShedCounters;
use serde::Serialize;

/// Counters every stage updates; all drops are here, in the run summary and in
/// `/metrics`. Gauges (queue depths, source state) hold the latest value.
#[derive(Debug, Default)]
pub struct Counters {
    pub samples_in: AtomicU64,
    pub utterances: AtomicU64,
    pub too_short: AtomicU64,
    pub events: AtomicU64,
    pub empty_transcripts: AtomicU64,
    pub partials: AtomicU64,
    /// Streaming steps decoded, skipped while the analyser was busy, not sent while
    /// finished utterances waited (load shedding), or arrived after their utterance.
    pub stream_steps: AtomicU64,
    pub stream_steps_skipped_busy: AtomicU64,
    pub stream_steps_shed: AtomicU64,
    pub stream_steps_stale: AtomicU64,
    /// Speculative decodes abandoned midway because speech resumed after their pause.
    pub stream_steps_abandoned: AtomicU64,
    /// Regular steps' decodes (captions only) abandoned for a pause's decode or a
    /// finished utterance.
    pub stream_steps_superseded: AtomicU64,
    /// Final transcripts taken from the speculative decode at the pause (no decode
    /// after the endpoint).
    pub speculative_finals: AtomicU64,
    /// Utterances ended by the sentence-end shortcut, and those of them reopened
    /// because the speaker went on within the full hangover (a revising event follows).
    pub early_ends: AtomicU64,
    pub reopened_after_early_end: AtomicU64,
    /// Reopened utterances that went on from the early end's decode (its words are
    /// committed when its pause was long enough) instead of starting again.
    pub reopened_carried_over: AtomicU64,
    /// Pause decodes committed: their audio is never decoded again.
    pub stream_commits: AtomicU64,
    /// Long utterances that got only the audio view because the analyser was behind.
    pub text_shed: AtomicU64,
    pub ring_fill_samples: AtomicU64,
    pub utterance_queue_depth: AtomicU64,
    pub event_queue_depth: AtomicU64,
    pub source_running: AtomicBool,
    pub budget_violations: AtomicU64,
    /// Events file writes that failed (lines dropped from its full backlog are in
    /// `drops`).
    pub events_file_errors: AtomicU64,
    /// Times the events file was opened again because its path no longer named it
    /// (removed, its directory removed, or moved away).
    pub events_file_reopens: AtomicU64,
    /// The events file cannot be written now (its lines wait in the backlog): the
    /// service status says so (`daemon::service::StatusWatch`), `/metrics` too.
    pub events_file_failing: AtomicBool,
    pub vision: VisionCounters,
    /// Load shedding steps taken and the work they skipped.
    pub shed: ShedCounters,
    /// Every drop of the run, by reason: the pipeline's own, and those of the devices
    /// and sinks attached to it. The run summary, `/metrics` and MQTT stats all read it.
    pub drops: DropRegistry,
    /// Intervals a live source lost (device gone or stalled) and their total length.
    pub source_gaps: AtomicU64,
    pub source_gap_ms: AtomicU64,
    /// Liveness marks for the systemd watchdog.
    pub heartbeat: Heartbeat,
}

/// Milliseconds on a process-wide monotonic clock, for heartbeats.
pub fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Liveness marks the pipeline threads leave; the watchdog reads them.
#[derive(Debug, Default)]
pub struct Heartbeat {
    /// Last time the segmenter loop ran (it loops every few ms, with or without audio).
    pub segmenter_ms: AtomicU64,
    /// When the analyser started on the current utterance; 0 while idle.
    pub analysing_since_ms: AtomicU64,
}

impl Heartbeat {
    pub fn beat(&self) {
        // 0 means "never beat"; the clock may still read 0 right after it starts.
        self.segmenter_ms.store(now_ms().max(1), Ordering::Relaxed);
    }

    pub fn analysing(&self, busy: bool) {
        self.analysing_since_ms
            .store(if busy { now_ms().max(1) } else { 0 }, Ordering::Relaxed);
    }

    /// Why the pipeline looks stuck, if it does: the segmenter has not looped for
    /// `max_gap`, or one utterance has been analysed for longer than `max_analysis`
    /// (Whisper needs about 1 s for 15 s of speech here; a hang is far beyond).
    pub fn stalled(&self, max_gap: Duration, max_analysis: Duration) -> Option<String> {
        let now = now_ms();
        let seg = self.segmenter_ms.load(Ordering::Relaxed);
        if seg != 0 && now.saturating_sub(seg) > max_gap.as_millis() as u64 {
            return Some(format!("segmenter silent for {} ms", now - seg));
        }
        let busy = self.analysing_since_ms.load(Ordering::Relaxed);
        if busy != 0 && now.saturating_sub(busy) > max_analysis.as_millis() as u64 {
            return Some(format!("one utterance in analysis for {} ms", now - busy));
        }
        None
    }
}

/// The vision side of a stream (`views::vision::stream` updates them): here, below
/// the views, so the run's counters can hold them without importing a view.
#[derive(Debug, Default)]
pub struct VisionCounters {
    pub frames_in: AtomicU64,
    pub frames_skipped: AtomicU64,
    pub frames_analysed: AtomicU64,
    pub frames_with_face: AtomicU64,
    /// Utterances whose video view is null: no analysed frame with a face.
    pub utterances_without_face: AtomicU64,
    /// The frame source failed or ended while audio went on: the stream is audio-only.
    pub source_failed: AtomicBool,
    pub source_running: AtomicBool,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct VisionStats {
    pub enabled: bool,
    pub source_failed: bool,
    /// Frames by fate and utterances without a face, by name (`crate::common::counts`,
    /// `InSummary::Vision`).
    #[serde(flatten)]
    pub counts: BTreeMap<&'static str, u64>,
}

impl VisionStats {
    /// A count by name (0 if the run had none).
    pub fn count(&self, name: &str) -> u64 {
        self.counts.get(name).copied().unwrap_or(0)
    }
}

impl VisionCounters {
    pub fn stats(&self, enabled: bool) -> VisionStats {
        VisionStats {
            enabled,
            source_failed: self.source_failed.load(Ordering::Relaxed),
            // Filled from the count registry by the run summary.
            counts: BTreeMap::new(),
        }
    }
}
