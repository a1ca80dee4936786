//! Where results go: the JSON-lines stream ([`event`], to stdout or an events [`file`])
//! and the outputs besides it, one folder each: caption files ([`captions`]), the browser
//! overlay, SSE and `/metrics` ([`http`], [`metrics`]), and MQTT for fleets ([`mqtt`]).
//!
//! Each output's config section builds it behind one trait ([`output::OutputKind`],
//! [`output::Output`]); this file names each output's folder and lists its section once,
//! and nothing else names a particular output. [`Outputs`] holds the started
//! outputs of a stream and [`SinkSet`] puts them behind one [`event::EventSink`] with the
//! JSON-lines stream, which is primary (see `set.rs`).
//!
//! Scores are final before an event gets here: the room head runs as a pipeline step
//! before the sinks. The feedback routes (HTTP, MQTT) reach the room through
//! [`crate::common::feedback::Feedback`], so this folder does not import the views.

pub mod event;
pub mod file;
mod kinds;
pub mod metrics;
pub mod output;
mod set;

// The outputs' folders.
pub mod captions;
pub mod http;
pub mod mqtt;

pub use set::{Outputs, SinkSet, StreamOutputs};

// The outputs besides the JSON-lines stream, in the order each event reaches them: the
// network first, files last, so a caption file on a share that blocks does not hold the
// overlay back (their sections are checked in this order too). A new output is a folder
// of its own, its `mod` line above and one line here.
kinds::outputs! {
    /// `[http]`: the overlay, live events (SSE), `/metrics`, corrections over HTTP.
    http: http::HttpConfig,
    /// `[mqtt]`: events, stats and status to a broker; corrections from it.
    mqtt: mqtt::MqttConfig,
    /// `[captions]`: WebVTT and SRT files written live.
    captions: captions::CaptionsConfig,
}
