//! sarcasmd: real-time multimodal sarcasm detection for edge boards.
//!
//! Data flows one way: [`audio`] sources -> ring buffer -> [`segment`] (Silero VAD +
//! endpointing) -> per-utterance views ([`asr`] text, [`prosody`], later vision) ->
//! [`fusion`] -> sinks ([`event`] JSON lines, [`sinks`]: captions, browser overlay and
//! metrics over HTTP, MQTT). [`pipeline`] wires the stages with bounded queues;
//! [`daemon`] builds them from a [`config::Config`].

pub mod asr;
pub mod audio;
pub mod bench;
pub mod boards;
pub mod config;
pub mod context;
pub mod counters;
pub mod daemon;
pub mod devices;
pub mod drops;
pub mod error;
pub mod eval;
pub mod event;
pub mod extras;
pub mod file_kind;
pub mod fusion;
pub mod heads;
pub mod lock;
pub mod manifest;
pub mod metrics;
pub mod models;
pub mod onnx;
pub mod pipeline;
pub mod plot;
pub mod preflight;
pub mod prosody;
pub mod reconnect;
pub mod report;
pub mod resources;
pub mod secret_file;
pub mod segment;
pub mod service;
pub mod shed;
pub mod sinks;
pub mod streaming;
pub mod text;
pub mod validate;
pub mod video;
pub mod vision;
pub mod words;
