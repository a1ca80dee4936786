//! The event schema (one JSON object per line, see `docs/events.md`), the JSON-lines
//! sink and its section of the config file (`[output]`).

use std::collections::BTreeMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::common::asr_segment::AsrSegment;
use crate::common::extras::Extras;

/// `[output]`: the event stream, the primary output (its failure stops the run).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// `-` for stdout, otherwise a file that JSON lines are appended to.
    pub events: String,
    /// Include the transcript text in events, the overlay and MQTT (off = scores only,
    /// for privacy; interim text and captions are then off too).
    pub include_transcript: bool,
    /// Also write interim `partial` lines (needs `asr.interim_every_ms`).
    pub partials: bool,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            events: "-".into(),
            include_transcript: true,
            partials: false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Views {
    pub text: Option<f32>,
    pub audio: Option<f32>,
    /// Null without a frame source, or when no analysed frame of the utterance showed
    /// a face; never a made-up score.
    pub video: Option<f32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyMs {
    /// Audio time from the end of speech to the endpointer's decision (the hangover).
    pub endpoint: f64,
    /// Time the utterance waited for the analyser.
    pub queue: f64,
    pub asr: f64,
    pub text: f64,
    pub audio: f64,
    /// Vision functionals and head (frames were analysed while the person spoke).
    pub video: f64,
    pub fusion: f64,
    /// End of speech to event ready: endpoint + queue + all stages.
    pub total: f64,
}

impl LatencyMs {
    /// Every stage with its name, in pipeline order (summaries, metrics).
    pub fn stages(&self) -> [(&'static str, f64); 7] {
        [
            ("endpoint", self.endpoint),
            ("queue", self.queue),
            ("asr", self.asr),
            ("text", self.text),
            ("audio", self.audio),
            ("fusion", self.fusion),
            ("total", self.total),
        ]
    }
}

/// When each score was ready, in milliseconds after the end of speech (hangover
/// included). The audio view needs no transcript, so it is ready at the endpoint; the
/// text view waits for the final transcript; `fused` is when the event was ready.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReadyMs {
    pub audio: Option<f64>,
    pub text: Option<f64>,
    pub video: Option<f64>,
    pub fused: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtteranceEvent {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: u64,
    /// Speech boundaries, seconds from the start of the stream.
    pub start_s: f64,
    pub end_s: f64,
    /// Null when transcripts are switched off in the config.
    pub transcript: Option<String>,
    pub language: String,
    pub p_sarcastic: f32,
    pub sarcastic: bool,
    pub threshold: f32,
    pub views: Views,
    pub latency_ms: LatencyMs,
    pub ready_ms: ReadyMs,
    /// Load shedding skipped the transcript and text view (the analyser was behind).
    pub text_shed: bool,
    pub models: BTreeMap<String, String>,
    /// Cut at `segment.max_utterance_ms` instead of ended by silence.
    pub forced_split: bool,
    /// Ended by the sentence-end shortcut (`segment.sentence_end_hangover_ms`) before
    /// the full hangover: if the speaker goes on within `segment.hangover_ms` of
    /// `end_s`, a later event with `revises` set to this `id` replaces this one.
    pub early_end: bool,
    /// The `id` of an early-ended event this one replaces: the speaker went on after
    /// it, and this event covers that speech and what followed, decoded as one.
    pub revises: Option<u64>,
    /// Whisper segments (times in stream seconds) and the hallucination guards that fired.
    pub asr_segments: Vec<AsrSegment>,
    pub asr_guards: Vec<&'static str>,
    /// MUStARD++ extras (emotions, sarcasm type, valence, arousal) from the text
    /// embedding; null without a text view score (no transcript, text view off or shed)
    /// or without an extras head in the heads dir.
    pub extras: Option<Extras>,
    /// What the room head did (`[room]` enabled only; absent otherwise, so events of a
    /// daemon without it are as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room: Option<RoomNote>,
    /// Feature vectors, only when requested (`sarcasmd features`); not serialised.
    #[serde(skip)]
    pub features: Option<UtteranceFeatures>,
}

/// The room head's part in an event's score (`crate::views::room`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomNote {
    /// The score from the shipped heads, before the room head.
    pub p_shipped: f32,
    /// The correction (`sarcasmd feedback --list`) whose line muted this one: scored
    /// just below the threshold because the room marked a near-duplicate not sarcastic.
    pub muted_by: Option<u64>,
    /// Corrections the room head held when it scored this event.
    pub corrections: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtteranceFeatures {
    pub text_embedding: Option<Vec<f32>>,
    pub prosody: Vec<f32>,
    /// Vision functionals (`vision::functional_names`), null without a face.
    pub vision: Option<Vec<f32>>,
}

/// Interim text of the utterance still being spoken (`asr.interim_every_ms`). The final
/// `utterance` event with the same `id` replaces it; partials never carry scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartialEvent {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The id the final utterance event will carry.
    pub id: u64,
    pub start_s: f64,
    /// End of the audio decoded so far (seconds from the start of the stream).
    pub end_s: f64,
    pub text: String,
    pub language: String,
    /// Wall time of this interim decode.
    pub decode_ms: f64,
}

/// Where events go. Implementations must write whole lines or nothing.
/// An interval a live source lost (device unplugged or stalled, then back). Speech in
/// it was never heard, so no utterance event covers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapEvent {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `audio` or `video`.
    pub source: &'static str,
    /// Stream time where the loss started, and how long it lasted (wall clock).
    pub start_s: f64,
    pub end_s: f64,
    pub reason: String,
}

pub trait EventSink {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()>;
    /// A lost interval of a live source; sinks that only want utterances ignore it.
    fn gap(&mut self, _g: &GapEvent) -> std::io::Result<()> {
        Ok(())
    }
    /// Interim text; sinks that only want final results ignore it.
    fn partial(&mut self, _p: &PartialEvent) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()>;
}

/// JSON lines to any writer (stdout or a file). Each line is serialised completely
/// before a single write, so a failure never leaves half an event behind.
pub struct JsonLinesSink<W: Write> {
    out: W,
    line: Vec<u8>,
    partials: bool,
}

impl<W: Write> JsonLinesSink<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            line: Vec::with_capacity(1024),
            partials: false,
        }
    }

    /// Also write `partial` lines (`output.partials`).
    pub fn with_partials(mut self, on: bool) -> Self {
        self.partials = on;
        self
    }

    fn write_line<T: Serialize>(&mut self, v: &T) -> std::io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, v)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.out.flush()
    }
}

impl<W: Write> EventSink for JsonLinesSink<W> {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.write_line(ev)
    }
    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        if self.partials {
            self.write_line(p)?;
        }
        Ok(())
    }
    fn gap(&mut self, g: &GapEvent) -> std::io::Result<()> {
        self.write_line(g)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Collects events in memory (tests, `features`, `eval`).
#[derive(Default)]
pub struct VecSink(
    pub Vec<UtteranceEvent>,
    pub Vec<PartialEvent>,
    pub Vec<GapEvent>,
);

impl EventSink for VecSink {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.0.push(ev.clone());
        Ok(())
    }
    fn gap(&mut self, g: &GapEvent) -> std::io::Result<()> {
        self.2.push(g.clone());
        Ok(())
    }
    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        self.1.push(p.clone());
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A [`VecSink`] that can be read while a daemon on another thread writes to it:
/// clones share one store. Tests hand it to
/// [`DaemonBuilder::sink`](crate::daemon::builder::DaemonBuilder::sink) and wait on its contents.
#[derive(Clone, Default)]
pub struct MemorySink(std::sync::Arc<std::sync::Mutex<VecSink>>);

impl MemorySink {
    fn store(&self) -> std::sync::MutexGuard<'_, VecSink> {
        crate::common::lock::LockOrRecover::lock_or_recover(&*self.0)
    }

    /// The final events so far, in order.
    pub fn utterances(&self) -> Vec<UtteranceEvent> {
        self.store().0.clone()
    }

    /// The interim events so far, in order.
    pub fn partials(&self) -> Vec<PartialEvent> {
        self.store().1.clone()
    }

    /// The gaps so far, in order.
    pub fn gaps(&self) -> Vec<GapEvent> {
        self.store().2.clone()
    }
}

impl EventSink for MemorySink {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.store().write(ev)
    }
    fn gap(&mut self, g: &GapEvent) -> std::io::Result<()> {
        self.store().gap(g)
    }
    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        self.store().partial(p)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
