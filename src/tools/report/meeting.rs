//! A meeting as read from its event stream (and optional `--stats` summary), with the
//! checks each line passes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::error::ReportError;
use super::events::{Gap, RunStats, Utterance};
use super::limits::{
    MAX_EVENTS, MAX_EVENTS_BYTES, MAX_MISSING_LISTED, MAX_STATS_BYTES, MAX_STREAM_S,
};
use crate::tools::bench::Percentiles;

/// A meeting as read from its event stream.
#[derive(Debug, Clone, Default)]
pub struct Meeting {
    pub name: String,
    /// Final utterances in stream order; an early-ended event that a later one revises
    /// is replaced by it (as the overlay replaces the line).
    pub utterances: Vec<Utterance>,
    pub revised: usize,
    pub gaps: Vec<Gap>,
    /// Ids below the highest one seen that no event carries: the pipeline gives an
    /// utterance its id before queueing it, so these were cut and then dropped (the
    /// analysis queue of a live source was full). Drops after the last event cannot
    /// be seen this way; `--stats` counts them all. The first [`MAX_MISSING_LISTED`].
    pub missing_ids: Vec<u64>,
    /// How many ids are missing in all (`missing_ids` lists the first ones).
    pub missing_total: u64,
    pub partials: usize,
    /// Lines of a type this page does not draw (named in the page).
    pub other_types: BTreeMap<String, usize>,
    pub stats: Option<RunStats>,
}

impl Meeting {
    /// Parse an event stream (JSON lines; blank lines skipped).
    pub fn parse(name: &str, path: &Path, text: &str) -> Result<Self, ReportError> {
        let mut all: Vec<Utterance> = Vec::new();
        let mut m = Meeting {
            name: name.to_string(),
            ..Default::default()
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            if i >= MAX_EVENTS {
                return Err(ReportError::TooManyEvents {
                    path: path.to_path_buf(),
                });
            }
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|source| ReportError::NotJson {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source,
                })?;
            let bad = |kind: &'static str| {
                let path = path.to_path_buf();
                move |source| ReportError::BadEvent {
                    path,
                    line: i + 1,
                    kind,
                    source,
                }
            };
            let times = |start: f64, end: f64| check_times(path, i + 1, start, end);
            let kind = v.get("type").and_then(|t| t.as_str()).map(str::to_owned);
            match kind.as_deref() {
                Some("utterance") => {
                    let u: Utterance = serde_json::from_value(v).map_err(bad("utterance"))?;
                    times(u.start_s, u.end_s)?;
                    all.push(u);
                }
                Some("gap") => {
                    let g: Gap = serde_json::from_value(v).map_err(bad("gap"))?;
                    times(g.start_s, g.end_s)?;
                    m.gaps.push(g);
                }
                Some("partial") => m.partials += 1,
                other => {
                    *m.other_types
                        .entry(other.unwrap_or("(no type)").to_string())
                        .or_default() += 1
                }
            }
        }
        let seen: BTreeSet<u64> = all.iter().map(|u| u.id).collect();
        (m.missing_ids, m.missing_total) = missing_ids(&seen);
        let revised: BTreeSet<u64> = all.iter().filter_map(|u| u.revises).collect();
        m.revised = revised.len();
        m.utterances = all
            .into_iter()
            .filter(|u| !revised.contains(&u.id))
            .collect();
        m.utterances.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        m.gaps.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        Ok(m)
    }

    pub fn load(events: &Path, stats: Option<&Path>) -> Result<Self, ReportError> {
        // Bounded and by kind: `/dev/zero` or a FIFO is refused, not read until memory ends.
        let read = |p: &Path, max: u64| {
            crate::common::file_kind::read_text(p, max).map_err(|source| ReportError::Read {
                path: p.to_path_buf(),
                source,
            })
        };
        let name = events.file_name().map_or_else(
            || events.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let mut m = Self::parse(&name, events, &read(events, MAX_EVENTS_BYTES)?)?;
        if let Some(p) = stats {
            m.stats = Some(
                serde_json::from_str(&read(p, MAX_STATS_BYTES)?).map_err(|source| {
                    ReportError::Stats {
                        path: p.to_path_buf(),
                        source,
                    }
                })?,
            );
        }
        Ok(m)
    }

    /// Stream seconds the page spans: the last event, gap or (with stats) audio end.
    pub fn span_s(&self) -> f64 {
        let ends = self
            .utterances
            .iter()
            .map(|u| u.end_s)
            .chain(self.gaps.iter().map(|g| g.end_s))
            .chain(self.stats.iter().map(|s| s.audio_s));
        ends.fold(0.0, f64::max)
    }

    pub fn flagged(&self) -> usize {
        self.utterances.iter().filter(|u| u.sarcastic).count()
    }

    /// End of speech -> event (`latency_ms.total`) over the utterances.
    pub fn latency(&self, stage: &str) -> Percentiles {
        Percentiles::of(
            self.utterances
                .iter()
                .filter_map(|u| u.latency_ms.get(stage).copied())
                .collect(),
        )
    }

    /// Where a missing id's speech was: after the previous id's event, before the next.
    pub(super) fn missing_between(&self, id: u64) -> (f64, f64) {
        let before = self
            .utterances
            .iter()
            .filter(|u| u.id < id)
            .map(|u| u.end_s)
            .fold(0.0, f64::max);
        let after = self
            .utterances
            .iter()
            .filter(|u| u.id > id)
            .map(|u| u.start_s)
            .fold(f64::INFINITY, f64::min);
        (before, if after.is_finite() { after } else { before })
    }
}

/// A time pair from line `line`: finite, within the stream, end not before start.
fn check_times(path: &Path, line: usize, start: f64, end: f64) -> Result<(), ReportError> {
    let in_range = |t: f64| t.is_finite() && (0.0..=MAX_STREAM_S).contains(&t);
    let bad = |field, value| ReportError::BadTime {
        path: path.to_path_buf(),
        line,
        field,
        value,
    };
    if !in_range(start) {
        return Err(bad("start_s", start));
    }
    if !in_range(end) || end < start {
        return Err(bad("end_s", end));
    }
    Ok(())
}

/// The first [`MAX_MISSING_LISTED`] ids below the highest seen that none carries, and
/// how many are missing in all: counted from the gaps between seen ids, never by
/// walking every id up to the highest (which may be any u64).
pub(super) fn missing_ids(seen: &BTreeSet<u64>) -> (Vec<u64>, u64) {
    let mut listed = Vec::new();
    let mut total = 0u64;
    let mut next = 0u64;
    for &id in seen {
        let gap = id - next;
        total = total.saturating_add(gap);
        let room = (MAX_MISSING_LISTED - listed.len()) as u64;
        listed.extend(next..next + gap.min(room));
        next = id.saturating_add(1);
    }
    (listed, total)
}
