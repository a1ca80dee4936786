//! Degrade, don't fall behind: the order in which a stream gives up work when the
//! board cannot keep up, and takes it back when it can.
//!
//! Before any of these, streaming steps are skipped while finished utterances wait
//! (`stream_steps_shed`, per utterance, see `pipeline`). Then, one step per utterance
//! that starts its analysis behind (more utterances wait, or it already waited past
//! `budget.event_latency_ms`):
//! 1. [`ShedStep::VisionFps`]: the camera is analysed at `budget.shed_vision_fps`
//!    instead of `vision.analyse_fps` (frames skipped for it: `vision_frames`);
//! 2. [`ShedStep::AsrModel`]: final transcripts are decoded by `asr.fallback_model`
//!    (utterances: `asr_model`);
//! 3. [`ShedStep::Text`]: behind utterances longer than `budget.shed_text_over_ms` get
//!    only the audio view (`text_view`).
//!
//! Steps that do not apply to a stream (no camera, no fallback model, no text limit)
//! are left out of its ladder, so the next one comes first. After
//! `budget.recover_after` utterances in a row analysed on time, one step is taken back
//! (the last one first). Only the analyser thread moves the ladder; the frame reader
//! reads its state.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShedStep {
    VisionFps,
    AsrModel,
    Text,
}

impl ShedStep {
    const ALL: [ShedStep; 3] = [ShedStep::VisionFps, ShedStep::AsrModel, ShedStep::Text];

    fn index(self) -> usize {
        self as usize
    }
}

/// Which steps exist for this stream.
#[derive(Debug, Clone, Copy, Default)]
pub struct Applicable {
    pub vision_fps: bool,
    pub asr_model: bool,
    pub text: bool,
}

/// Totals over the life of the process (kept in `pipeline::Counters`, so `/metrics`
/// keeps counting across a reload's new stream).
#[derive(Debug, Default)]
pub struct ShedCounters {
    /// Times each step was taken, and steps given back.
    taken: [AtomicU64; 3],
    recoveries: AtomicU64,
    /// Steps of the current stream's ladder in force now (the ladder's only state
    /// besides its on-time run), and the most at once.
    level: AtomicUsize,
    max_level: AtomicUsize,
    /// Work skipped under each step: frames, utterances decoded by the fallback model.
    pub vision_frames_shed: AtomicU64,
    pub fallback_decodes: AtomicU64,
}

impl ShedCounters {
    pub fn taken(&self, step: ShedStep) -> u64 {
        self.taken[step.index()].load(Ordering::Relaxed)
    }
    pub fn recoveries(&self) -> u64 {
        self.recoveries.load(Ordering::Relaxed)
    }
    pub fn level(&self) -> usize {
        self.level.load(Ordering::Relaxed)
    }
}

/// The ladder of one stream.
#[derive(Debug)]
pub struct ShedLadder<'a> {
    steps: Vec<ShedStep>,
    recover_after: u64,
    on_time_run: AtomicU64,
    counters: &'a ShedCounters,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ShedStats {
    /// The ladder of this stream, in order.
    pub steps: Vec<ShedStep>,
    pub level: usize,
    pub max_level: usize,
    /// Steps taken, given back and the work they skipped, by name
    /// (`crate::common::counts`, [`InSummary::Shed`](crate::common::counts::InSummary)).
    #[serde(flatten)]
    pub counts: BTreeMap<&'static str, u64>,
}

impl ShedStats {
    /// A count by name (0 if the run had none).
    pub fn count(&self, name: &str) -> u64 {
        self.counts.get(name).copied().unwrap_or(0)
    }
}

impl<'a> ShedLadder<'a> {
    pub fn new(applicable: Applicable, recover_after: u32, counters: &'a ShedCounters) -> Self {
        let steps = ShedStep::ALL
            .into_iter()
            .filter(|s| match s {
                ShedStep::VisionFps => applicable.vision_fps,
                ShedStep::AsrModel => applicable.asr_model,
                ShedStep::Text => applicable.text,
            })
            .collect();
        counters.level.store(0, Ordering::Relaxed);
        Self {
            steps,
            recover_after: recover_after.max(1) as u64,
            on_time_run: AtomicU64::new(0),
            counters,
        }
    }

    /// An utterance starts its analysis, behind or on time: move the ladder. Returns
    /// the step taken (true) or given back (false), if any, for the log.
    pub fn observe(&self, behind: bool) -> Option<(ShedStep, bool)> {
        let c = self.counters;
        let level = c.level();
        if behind {
            self.on_time_run.store(0, Ordering::Relaxed);
            let step = *self.steps.get(level)?;
            c.level.store(level + 1, Ordering::Relaxed);
            c.taken[step.index()].fetch_add(1, Ordering::Relaxed);
            c.max_level.fetch_max(level + 1, Ordering::Relaxed);
            return Some((step, true));
        }
        let run = self.on_time_run.fetch_add(1, Ordering::Relaxed) + 1;
        if level == 0 || run < self.recover_after {
            return None;
        }
        self.on_time_run.store(0, Ordering::Relaxed);
        let step = self.steps[level - 1];
        c.level.store(level - 1, Ordering::Relaxed);
        c.recoveries.fetch_add(1, Ordering::Relaxed);
        Some((step, false))
    }

    /// The first `level` steps of the ladder are in force.
    pub fn is_active(&self, step: ShedStep) -> bool {
        self.steps[..self.counters.level()].contains(&step)
    }

    pub fn counters(&self) -> &ShedCounters {
        self.counters
    }

    pub fn stats(&self) -> ShedStats {
        let c = self.counters;
        ShedStats {
            steps: self.steps.clone(),
            level: c.level(),
            max_level: c.max_level.load(Ordering::Relaxed),
            // Filled from the count registry by the run summary.
            counts: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Applicable {
        Applicable {
            vision_fps: true,
            asr_model: true,
            text: true,
        }
    }

    #[test]
    fn steps_are_taken_in_order_and_given_back_last_first() {
        let c = ShedCounters::default();
        let l = ShedLadder::new(all(), 2, &c);
        assert_eq!(l.observe(false), None);
        assert_eq!(l.observe(true), Some((ShedStep::VisionFps, true)));
        assert!(l.is_active(ShedStep::VisionFps) && !l.is_active(ShedStep::AsrModel));
        assert_eq!(l.observe(true), Some((ShedStep::AsrModel, true)));
        assert_eq!(l.observe(true), Some((ShedStep::Text, true)));
        // Nothing left to shed.
        assert_eq!(l.observe(true), None);
        assert_eq!(l.stats().level, 3);
        // One on-time utterance is not enough; two give back the last step.
        assert_eq!(l.observe(false), None);
        assert_eq!(l.observe(false), Some((ShedStep::Text, false)));
        assert!(!l.is_active(ShedStep::Text) && l.is_active(ShedStep::AsrModel));
        // A late one resets the on-time run and takes the step again.
        assert_eq!(l.observe(false), None);
        assert_eq!(l.observe(true), Some((ShedStep::Text, true)));
        for _ in 0..6 {
            l.observe(false);
        }
        let s = l.stats();
        assert_eq!((s.level, s.max_level, c.recoveries()), (0, 3, 4));
        assert_eq!(
            (
                c.taken(ShedStep::VisionFps),
                c.taken(ShedStep::AsrModel),
                c.taken(ShedStep::Text)
            ),
            (1, 1, 2)
        );
        assert!(ShedStep::ALL.iter().all(|&st| !l.is_active(st)));
    }

    #[test]
    fn steps_that_do_not_apply_are_skipped() {
        let c = ShedCounters::default();
        let l = ShedLadder::new(
            Applicable {
                text: true,
                ..Default::default()
            },
            3,
            &c,
        );
        assert_eq!(l.stats().steps, vec![ShedStep::Text]);
        assert_eq!(l.observe(true), Some((ShedStep::Text, true)));
        let c2 = ShedCounters::default();
        let none = ShedLadder::new(Applicable::default(), 3, &c2);
        assert_eq!(none.observe(true), None);
        assert_eq!(none.stats().max_level, 0);
    }
}
