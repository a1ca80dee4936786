//! sarcasmd: real-time multimodal sarcasm detection for edge boards.
//!
//! # Layout
//!
//! The folders of `src/` follow the data, one way, and each imports only the ones listed
//! before it, except two pairs that stand side by side and import neither each other:
//! [`views`] and [`sinks`], [`tools`] and [`daemon`] (`tests/pure/module_graph.rs` holds
//! that, between files and between folders, the binary's too):
//!
//! - [`common`]: the leaves every stage shares (errors, path checks, the drop registry and
//!   counters, the model cache, the shedding ladder), and what the views hand the outputs
//!   (a segment's words, the extras, the room's corrections as the feedback routes reach
//!   them); imports nothing above it.
//! - [`sources`]: microphones, WAV files and raw PCM ([`sources::audio`]), cameras and
//!   video files ([`sources::video`]): samples, frames and gaps, every drop counted.
//! - [`views`]: what an utterance becomes: segmentation ([`views::vad`]), the transcript
//!   ([`views::asr`], streaming while it is spoken), prosody, the sentence embedding,
//!   faces, the trained heads that score each view, their [`views::fusion`], the extras,
//!   and the [`views::room`] head: corrections from the room, kept and applied on top.
//! - [`sinks`]: where results go: the event schema and JSON-lines stream
//!   ([`sinks::event`]), and the outputs besides it, a folder each, listed once in
//!   `sinks/mod.rs`: captions, the HTTP overlay and `/metrics`, MQTT.
//! - [`config`]: the one TOML file, every stage's section parsed and validated, and the
//!   board classes a profile is written for.
//! - [`pipeline`]: the stages wired with bounded queues (the queue table in
//!   `pipeline/queues.rs`), threads, the rolling context, the room head's step before the
//!   sinks (a score is final before any output sees it), the run summary.
//! - [`tools`]: offline: `bench`, `eval`, `plot`, `report` and dataset manifests.
//! - [`daemon`]: building a run from a validated config, preflight, the reloading
//!   service and its systemd notifications, the watch on the room's corrections file;
//!   what `sarcasmd run` and the tests hold.
//! - `cli` and `main.rs` (the binary): `main.rs` parses the arguments; `cli/` has one file
//!   per command, each an `Args` struct whose `run()` maps its errors to its exit code.
//!
//! A stage's config is parsed, then validated (`common::validate`), then built; models
//! are loaded once into an [`Engine`] and each stream keeps its own state.
//!
//! # For callers
//!
//! [`Daemon`] runs a configured source to its sinks (what `sarcasmd run` does);
//! [`run_stream`] runs one stream through a loaded [`Engine`] (what `replay`, `bench`
//! and `eval` do).

pub mod common;
pub mod config;
pub mod daemon;
pub mod pipeline;
pub mod sinks;
pub mod sources;
pub mod tools;
pub mod views;

pub use config::Config;
pub use daemon::builder::Daemon;
pub use pipeline::{run_stream, run_stream_av, Engine, RunStats};
pub use sinks::event::UtteranceEvent;
