//! The count registry: every counter of a run, named once, with where the run summary
//! and `/metrics` show it.
//!
//! Why it exists: drops had one registry (`drops`), but the other counters were listed
//! by hand in the run summary (`pipeline::stats`) and again in `/metrics`
//! (`sinks::metrics`), and the lists drifted (a counter in one and not the other). Now a
//! counter is a field of [`Counters`] plus one line in [`Counters::counts`]; the run
//! summary and `/metrics` both walk that list, and `tests/models/count_registry.rs` fails when a
//! counter field is missing from it or a listed count is missing from either output.
//!
//! Not here: gauges (queue depths, device up, the shedding level), which hold a latest
//! value, not a count ([`GAUGES`]); drops ([`super::drops`]); what the sinks count
//! themselves as they write (`events{type}`, `sarcasm_flags`, HTTP and MQTT figures).

use std::sync::atomic::Ordering;

use super::counters::Counters;
use super::shed::ShedStep;

/// The section of the run summary a count is in, and its key there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InSummary {
    /// A key of the summary itself (`utterances`).
    Top(&'static str),
    /// `streaming.<key>`.
    Streaming(&'static str),
    /// `vision.<key>`.
    Vision(&'static str),
    /// `shed.<key>`.
    Shed(&'static str),
    /// Shown converted, under this key (`samples_in` as `audio_s`).
    Converted(&'static str),
}

/// Where `/metrics` shows a count (metric names without `sarcasmd_` and `_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InMetrics {
    /// A counter of its own.
    Own(&'static str, &'static str),
    /// A row of a labelled family ([`FAMILIES`]): the family and the label's value.
    Row(&'static str, &'static str),
    /// Shown converted or combined with others under this metric (`samples_in` as
    /// `audio_seconds`; `early_ends` as `early_ends{outcome="kept"}` with `reopened`).
    Converted(&'static str),
}

/// One counter, read.
#[derive(Debug, Clone, Copy)]
pub struct Count {
    /// The field of [`Counters`] (`vision.` / `shed.` for the nested ones).
    pub field: &'static str,
    pub summary: InSummary,
    pub metrics: InMetrics,
    pub value: u64,
}

/// A labelled `/metrics` family of counts: name, label, help.
pub struct Family {
    pub name: &'static str,
    pub label: &'static str,
    pub help: &'static str,
}

/// The labelled families, in the order `/metrics` lists them.
pub const FAMILIES: &[Family] = &[
    Family {
        name: "discarded_utterances",
        label: "reason",
        help: "Speech that produced no event, by reason",
    },
    Family {
        name: "vision_frames",
        label: "fate",
        help: "Video frames by fate: received, skipped to stay within vision.analyse_fps, analysed, analysed with a face (queue drops are in dropped_events)",
    },
    Family {
        name: "stream_steps",
        label: "outcome",
        help: "Streaming recognition steps by outcome: decoded, skipped while the analyser was busy, shed while finished utterances waited, stale, abandoned (a pause's decode when speech resumed) or superseded (a captions-only decode that gave way to a pause's decode or a finished utterance)",
    },
    Family {
        name: "load_shed",
        label: "kind",
        help: "Work skipped to keep up, by kind (vision_frames: camera frames skipped at the lowered rate; asr_fallback: final transcripts decoded by the smaller asr.fallback_model; text_view: long utterances whose text view was skipped while the analyser was behind)",
    },
    Family {
        name: "shed_steps_taken",
        label: "step",
        help: "Load shedding steps taken, in their order: vision_fps, asr_model, text",
    },
    Family {
        name: "final_transcripts",
        label: "source",
        help: "Final transcripts by source: the speculative decode made at the final pause, or a decode after the endpoint",
    },
    Family {
        name: "early_ends",
        label: "outcome",
        help: "Utterances ended by the sentence-end shortcut, by outcome: kept, or reopened because the speaker went on (a revising event replaced it)",
    },
];

/// A row of a labelled family computed from other counts (`early_ends{outcome="kept"}` =
/// early ends minus the reopened ones).
#[derive(Debug, Clone, Copy)]
pub struct DerivedRow {
    /// The family ([`FAMILIES`]) and the label's value.
    pub family: &'static str,
    pub value_label: &'static str,
    pub value: u64,
}

/// Fields of [`Counters`] that are gauges (a latest value), not counts.
pub const GAUGES: &[&str] = &[
    "ring_fill_samples",
    "utterance_queue_depth",
    "event_queue_depth",
    "source_running",
    "events_file_failing",
    "vision.source_failed",
    "vision.source_running",
];

macro_rules! counts {
    ($c:ident; $($($field:ident).+ => $summary:expr, $metrics:expr;)*) => {
        vec![$(Count {
            field: stringify!($($field).+),
            summary: $summary,
            metrics: $metrics,
            value: $c.$($field).+.load(Ordering::Relaxed),
        },)*]
    };
}

impl Counters {
    /// Every count of the run, in the order outputs list them. A counter added to
    /// [`Counters`] is added here, once.
    pub fn counts(&self) -> Vec<Count> {
        use InMetrics::{Converted as MConv, Own, Row};
        use InSummary::{Converted as SConv, Shed, Streaming, Top, Vision};
        let c = self;
        let mut v = counts! { c;
            samples_in => SConv("audio_s"), MConv("audio_seconds");
            utterances => Top("utterances"),
                Own("utterances", "Utterances cut by the endpointer and sent to analysis");
            events => Top("events"), MConv("events");
            partials => Top("partials"), MConv("events");
            too_short => Top("too_short"), Row("discarded_utterances", "too_short");
            empty_transcripts => Top("empty_transcripts"),
                Row("discarded_utterances", "empty_transcript");
            budget_violations => Top("budget_violations"),
                Own("latency_budget_violations", "Events later than budget.event_latency_ms after the end of speech");
            events_file_errors => Top("events_file_errors"),
                Own("events_file_errors", "Failed writes or opens of the events file (disk full, path missing); lines wait in a backlog");
            events_file_reopens => Top("events_file_reopens"),
                Own("events_file_reopens", "Times the events file was opened again by path because it was removed, its directory removed, or it was moved away");
            source_gaps => Top("source_gaps"),
                Own("source_gaps", "Intervals a live source lost (device unplugged or stalled) and got back; each also emits a `gap` event");
            source_gap_ms => SConv("source_gap_s"), MConv("source_gap_seconds");
            vision.frames_in => Vision("frames_in"), Row("vision_frames", "received");
            vision.frames_skipped => Vision("frames_skipped"), Row("vision_frames", "skipped_rate");
            vision.frames_analysed => Vision("frames_analysed"), Row("vision_frames", "analysed");
            vision.frames_with_face => Vision("frames_with_face"), Row("vision_frames", "with_face");
            vision.utterances_without_face => Vision("utterances_without_face"),
                Own("utterances_without_face", "Utterances with a frame source whose video view is null: no analysed frame showed a face");
            stream_steps => Streaming("steps"), Row("stream_steps", "decoded");
            stream_steps_skipped_busy => Streaming("steps_skipped_busy"), Row("stream_steps", "skipped_busy");
            stream_steps_shed => Streaming("steps_shed"), Row("stream_steps", "shed_backlog");
            stream_steps_stale => Streaming("steps_stale"), Row("stream_steps", "stale");
            stream_steps_abandoned => Streaming("steps_abandoned"), Row("stream_steps", "abandoned");
            stream_steps_superseded => Streaming("steps_superseded"), Row("stream_steps", "superseded");
            speculative_finals => Streaming("speculative_finals"), Row("final_transcripts", "speculative");
            early_ends => Streaming("early_ends"), MConv("early_ends");
            reopened_after_early_end => Streaming("reopened_after_early_end"), Row("early_ends", "reopened");
            reopened_carried_over => Streaming("reopened_carried_over"),
                Own("reopened_carried_over", "Reopened utterances that went on from the early end's committed decode instead of starting again");
            stream_commits => Streaming("commits"),
                Own("stream_commits", "Pause decodes committed: their audio is never decoded again");
            shed.vision_frames_shed => Shed("vision_frames_shed"), Row("load_shed", "vision_frames");
            shed.fallback_decodes => Shed("fallback_decodes"), Row("load_shed", "asr_fallback");
            text_shed => Streaming("text_shed"), Row("load_shed", "text_view");
        };
        // The ladder's steps are an array behind accessors, not fields.
        for (step, key, row) in [
            (ShedStep::VisionFps, "vision_fps_taken", "vision_fps"),
            (ShedStep::AsrModel, "asr_model_taken", "asr_model"),
            (ShedStep::Text, "text_taken", "text"),
        ] {
            v.push(Count {
                field: "shed.taken",
                summary: Shed(key),
                metrics: Row("shed_steps_taken", row),
                value: c.shed.taken(step),
            });
        }
        v.push(Count {
            field: "shed.recoveries",
            summary: Shed("recoveries"),
            metrics: Own(
                "shed_recoveries",
                "Load shedding steps given back after utterances were on time again",
            ),
            value: c.shed.recoveries(),
        });
        v
    }

    /// The family rows that combine counts (their counts are marked `Converted`), so
    /// `/metrics` shows them from here rather than by matching family names itself.
    pub fn derived_rows(&self) -> Vec<DerivedRow> {
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        vec![
            DerivedRow {
                family: "final_transcripts",
                value_label: "after_endpoint",
                // Every event's final is speculative, decoded after the endpoint, or shed.
                value: get(&self.events)
                    .saturating_sub(get(&self.speculative_finals) + get(&self.text_shed)),
            },
            DerivedRow {
                family: "early_ends",
                value_label: "kept",
                value: get(&self.early_ends).saturating_sub(get(&self.reopened_after_early_end)),
            },
        ]
    }

    /// One count by field (0 if there is none: only for reading converted ones).
    pub fn count(&self, field: &str) -> u64 {
        self.counts()
            .iter()
            .find(|c| c.field == field)
            .map_or(0, |c| c.value)
    }
}
