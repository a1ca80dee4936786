//! What a run reports when it ends: counts, per-stage latency summaries, drops by
//! their registered names, streaming and shedding totals. Built from the live
//! [`Counters`] so the summary and `/metrics` cannot disagree.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::common::counters::Counters;
use crate::common::counts::InSummary;
use crate::common::shed::ShedStats;
use crate::views::vision::stream::VisionStats;

use super::clock::RATE;

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
    /// Every count of the summary's own section by name (`utterances`, `events`, ...):
    /// the count registry's [`InSummary::Top`] entries, so a counter added there shows
    /// here without another list.
    #[serde(flatten)]
    pub counts: BTreeMap<&'static str, u64>,
    /// Every drop of the run by its registered name ([`crate::common::drops::DropReason`]),
    /// zeros included: the same names as `/metrics` and MQTT stats.
    pub dropped: BTreeMap<String, u64>,
    pub stages: BTreeMap<String, StageSummary>,
    /// The total length of the intervals a live source lost (`source_gaps`), seconds.
    pub source_gap_s: f64,
    pub streaming: StreamingStats,
    pub vision: VisionStats,
    pub shed: ShedStats,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamingStats {
    pub enabled: bool,
    /// Steps by outcome, speculative finals, early ends, commits, shed text views, by
    /// name ([`InSummary::Streaming`]).
    #[serde(flatten)]
    pub counts: BTreeMap<&'static str, u64>,
}

/// A count by name in a section's map (0 if the run had none).
fn count_in(counts: &BTreeMap<&'static str, u64>, name: &str) -> u64 {
    counts.get(name).copied().unwrap_or(0)
}

impl StreamingStats {
    pub fn count(&self, name: &str) -> u64 {
        count_in(&self.counts, name)
    }
}

impl RunStats {
    /// A count of the summary's own section by its name (0 if the run had none).
    pub fn count(&self, name: &str) -> u64 {
        count_in(&self.counts, name)
    }

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
        let mut stats = RunStats {
            audio_s: c.samples_in.load(Ordering::Relaxed) as f64 / RATE,
            wall_s,
            source_gap_s: c.source_gap_ms.load(Ordering::Relaxed) as f64 / 1e3,
            streaming: StreamingStats {
                enabled: streaming,
                counts: BTreeMap::new(),
            },
            vision: c.vision.stats(vision),
            shed,
            dropped: c.drops.snapshot().by_name(),
            stages: stages
                .into_iter()
                .map(|(k, v)| (k, StageSummary::from(v)))
                .collect(),
            counts: BTreeMap::new(),
        };
        for count in c.counts() {
            let section = match count.summary {
                InSummary::Top(k) => Some((&mut stats.counts, k)),
                InSummary::Streaming(k) => Some((&mut stats.streaming.counts, k)),
                InSummary::Vision(k) => Some((&mut stats.vision.counts, k)),
                InSummary::Shed(k) => Some((&mut stats.shed.counts, k)),
                // Converted above (`audio_s`, `source_gap_s`).
                InSummary::Converted(_) => None,
            };
            if let Some((map, key)) = section {
                map.insert(key, count.value);
            }
        }
        stats
    }
}
