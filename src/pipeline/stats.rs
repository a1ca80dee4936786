//! What a run reports when it ends: counts, per-stage latency summaries, drops by
//! their registered names, streaming and shedding totals. Built from the live
//! [`Counters`] so the summary and `/metrics` cannot disagree.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::common::counters::Counters;
use crate::common::shed::ShedStats;
use crate::views::vision::stream::VisionStats;

use super::RATE;

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
    /// Every drop of the run by its registered name ([`crate::common::drops::DropReason`]),
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
    pub steps_superseded: u64,
    pub speculative_finals: u64,
    pub early_ends: u64,
    pub reopened_after_early_end: u64,
    pub reopened_carried_over: u64,
    pub commits: u64,
    pub text_shed: u64,
}

impl RunStats {
    /// The summary of a finished run: totals from `counters`, the sink's per-stage
    /// latencies, and what the plan switched on.
    pub(super) fn collect(
        c: &Counters,
        wall_s: f64,
        stages: BTreeMap<String, Vec<f64>>,
        streaming: bool,
        vision: bool,
        shed: ShedStats,
    ) -> Self {
        RunStats {
            audio_s: c.samples_in.load(Ordering::Relaxed) as f64 / RATE,
            wall_s,
            utterances: c.utterances.load(Ordering::Relaxed),
            events: c.events.load(Ordering::Relaxed),
            too_short: c.too_short.load(Ordering::Relaxed),
            budget_violations: c.budget_violations.load(Ordering::Relaxed),
            partials: c.partials.load(Ordering::Relaxed),
            vision: c.vision.stats(vision),
            shed,
            source_gaps: c.source_gaps.load(Ordering::Relaxed),
            source_gap_s: c.source_gap_ms.load(Ordering::Relaxed) as f64 / 1e3,
            streaming: StreamingStats {
                enabled: streaming,
                steps: c.stream_steps.load(Ordering::Relaxed),
                steps_skipped_busy: c.stream_steps_skipped_busy.load(Ordering::Relaxed),
                steps_shed: c.stream_steps_shed.load(Ordering::Relaxed),
                steps_stale: c.stream_steps_stale.load(Ordering::Relaxed),
                steps_abandoned: c.stream_steps_abandoned.load(Ordering::Relaxed),
                steps_superseded: c.stream_steps_superseded.load(Ordering::Relaxed),
                speculative_finals: c.speculative_finals.load(Ordering::Relaxed),
                early_ends: c.early_ends.load(Ordering::Relaxed),
                reopened_after_early_end: c.reopened_after_early_end.load(Ordering::Relaxed),
                reopened_carried_over: c.reopened_carried_over.load(Ordering::Relaxed),
                commits: c.stream_commits.load(Ordering::Relaxed),
                text_shed: c.text_shed.load(Ordering::Relaxed),
            },
            empty_transcripts: c.empty_transcripts.load(Ordering::Relaxed),
            dropped: c.drops.snapshot().by_name(),
            stages: stages
                .into_iter()
                .map(|(k, v)| (k, StageSummary::from(v)))
                .collect(),
        }
    }
}
