//! What an output besides the JSON-lines stream is, for the code that holds them all:
//! its config section ([`OutputKind`]: checked, preflighted, then started) and the
//! output it starts for a stream ([`Output`]: given every event, interim text and gap,
//! told the daemon's state, finished at the end of the stream).
//!
//! Nothing outside an output's own folder names it: `sinks/mod.rs` lists the outputs
//! once, and [`super::Outputs`] and [`super::SinkSet`] hold them as trait objects. An output
//! that needs another's section (the HTTP listener serves the caption files) finds it by
//! its type ([`Start::section`]), so no output imports the list.

use std::any::Any;
use std::cell::OnceCell;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::common::counters::Counters;
use crate::common::feedback::Feedback;
use crate::common::validate::Problems;
use crate::sinks::event::{GapEvent, OutputConfig, PartialEvent, UtteranceEvent};
use crate::sinks::metrics::Reports;

/// An error of an output's write, logged and counted by the set that holds it
/// (`sarcasmd_sink_errors_total{sink}`); the stream goes on.
pub type OutputError = Box<dyn std::error::Error + Send + Sync>;

/// Why an output could not start: a mistake in its section or in a file it names (the
/// daemon exits 2, as for any bad input), or something else (a port in use: 1).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    BadInput(OutputError),
    #[error(transparent)]
    Other(OutputError),
}

/// The files an output's section names, each with its field, for the preflight's one
/// rule: no output may be a file the daemon reads, nor another output.
#[derive(Debug, Default)]
pub struct Files<'a> {
    /// Files it writes (they must be writable).
    pub writes: Vec<(&'static str, &'a Path)>,
    /// Files it reads (secrets, certificates), whether or not the output is on.
    pub reads: Vec<(&'static str, &'a Path)>,
}

/// Lets a section be found by its type among the others ([`Start::section`]).
pub trait AsAny {
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The sections of every output, in the order the list gives them.
pub type Sections<'a> = [&'a dyn OutputKind];

/// The section of type `T` among `sections`.
pub fn section<'a, T: Any>(sections: &Sections<'a>) -> Option<&'a T> {
    // `**k`: the section itself, not the reference to it (which is `Any` too).
    sections
        .iter()
        .find_map(|k| (**k).as_any().downcast_ref::<T>())
}

/// An output's section of the config file (`[http]`, `[mqtt]`, `[captions]`).
pub trait OutputKind: AsAny + Send + Sync {
    /// The section's name (`[name]`), which its output and what it keeps also carry.
    fn name(&self) -> &'static str;
    /// Whether the section turns its output on.
    fn enabled(&self) -> bool;
    /// Every problem of the section (fields named `section.key`); `output` is the event
    /// stream's section, which some outputs depend on (captions need transcripts).
    fn check_section(&self, output: &OutputConfig, problems: &mut Problems);
    /// The files it names.
    fn files(&self) -> Files<'_> {
        Files::default()
    }
    /// What this machine must hold for it besides writable files: secrets that can be
    /// read, certificates that load (`sarcasmd validate`, every start and reload).
    fn preflight(&self, _problems: &mut Problems) {}
    /// Starts its output for a stream, before the models load (an overlay or a broker
    /// sees the daemon come up). Called only when [`enabled`](Self::enabled).
    fn start(&self, s: Start<'_>) -> Result<Box<dyn Output>, StartError>;
}

/// What every output of a stream is started with.
pub struct Start<'a> {
    /// The event stream's section (`[output]`).
    pub output: &'a OutputConfig,
    /// Every output's section: an output may read another's (the HTTP listener serves
    /// the caption files and names the device as MQTT does), by [`Start::section`].
    pub sections: &'a Sections<'a>,
    /// The Whisper model the stream runs (`asr.model`), for the build labels.
    pub asr_model: &'a str,
    /// The stream's counters (drops are attached to their registry).
    pub counters: &'a Arc<Counters>,
    /// What the outputs report to `/metrics` besides the counters.
    pub reports: &'a Arc<Reports>,
    /// Where corrections go (`[room]` enabled).
    pub feedback: Option<&'a Arc<dyn Feedback>>,
    /// What this kind kept from the previous stream ([`Output::finish`]), when it
    /// [`serves`](Lasting::serves) this one.
    pub kept: Option<Box<dyn Any + Send>>,
}

impl<'a> Start<'a> {
    /// Another output's section, by its type.
    pub fn section<T: Any>(&self) -> Option<&'a T> {
        section(self.sections)
    }
}

/// The daemon's state, as outputs show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Models are loading.
    Loading,
    /// The stream runs: models loaded, source open.
    Running,
}

/// The end of a stream, as [`Output::finish`] is told it.
pub struct End<'a> {
    /// The run summary as JSON (`None` when the stream failed).
    pub stats: Option<&'a serde_json::Value>,
    /// How long an output may take to deliver what it holds.
    pub grace: Duration,
}

/// One event on its way to the outputs, serialised once for all that send JSON.
pub struct Outgoing<'a, T: Serialize> {
    pub event: &'a T,
    json: OnceCell<String>,
}

impl<'a, T: Serialize> Outgoing<'a, T> {
    pub fn new(event: &'a T) -> Self {
        Self {
            event,
            json: OnceCell::new(),
        }
    }

    /// The event as one line of JSON (what SSE clients and MQTT subscribers get).
    pub fn json(&self) -> Result<&str, serde_json::Error> {
        if let Some(j) = self.json.get() {
            return Ok(j);
        }
        let j = serde_json::to_string(self.event)?;
        Ok(self.json.get_or_init(|| j))
    }
}

/// An output of one stream. Events come in stream order on the sink's thread; a panic
/// in any method turns the output off for the rest of the stream (logged, counted) and
/// an error is logged once when it starts and once when it ends, and counted each time.
pub trait Output: Send {
    /// Its name in logs and in `sarcasmd_sink_errors_total{sink}`.
    fn name(&self) -> &'static str;
    /// The daemon's state changed.
    fn state(&mut self, _state: State) {}
    /// A final event, after the room step: revisions too (an event whose `revises`
    /// names an earlier one), which each output shows as it can (a caption file cannot
    /// take a cue back; the overlay replaces the line).
    fn utterance(&mut self, ev: &Outgoing<'_, UtteranceEvent>) -> Result<(), OutputError>;
    /// Interim text of the utterance still being spoken.
    fn partial(&mut self, _p: &Outgoing<'_, PartialEvent>) -> Result<(), OutputError> {
        Ok(())
    }
    /// A lost interval of a live source.
    fn gap(&mut self, _g: &Outgoing<'_, GapEvent>) -> Result<(), OutputError> {
        Ok(())
    }
    /// Where it listens (the real port when its config asked for 0).
    fn listening(&self) -> Option<SocketAddr> {
        None
    }
    /// The stream is over: deliver, close, and hand back what the next stream may keep
    /// (a broker connection holding events for a broker that is down).
    fn finish(self: Box<Self>, end: &End<'_>) -> Option<Box<dyn Lasting>>;
}

/// What an output keeps across a reload.
pub trait Lasting: Send {
    /// Its output's name (the kind it goes back to).
    fn name(&self) -> &'static str;
    /// Whether it can serve the next stream as it is (its section unchanged, the same
    /// room); otherwise it is stopped and the kind starts afresh.
    fn serves(&self, next: &Sections<'_>, same_feedback: bool) -> bool;
    /// What its kind's [`OutputKind::start`] takes back as [`Start::kept`].
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
    /// Ends it, delivering what it holds within `grace`.
    fn stop(self: Box<Self>, grace: Duration);
}
