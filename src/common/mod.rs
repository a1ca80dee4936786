//! The leaves: small types every stage shares, importing nothing above this folder.
//!
//! Errors as chains ([`error`]), checks on paths before they are opened ([`file_kind`],
//! [`secret_file`]), field-level config checks ([`validate`]), the model cache and its
//! lock ([`models`], [`onnx`]), words as compared across decodes ([`words`]), the drop
//! registry and the run's counters ([`drops`], [`counters`]), the shedding ladder
//! ([`shed`]), reconnect backoff ([`reconnect`]), resource usage ([`resources`]),
//! poison-tolerant mutexes ([`lock`]); and what the views hand the outputs, so that
//! neither imports the other: the parts of an event the views make ([`asr_segment`],
//! [`extras`]) and the room's corrections as the outputs see them ([`feedback`]).
//! When two stages need the same piece, it moves here.

pub mod asr_segment;
pub mod counters;
pub mod counts;
pub mod drops;
pub mod error;
pub mod extras;
pub mod feedback;
pub mod file_kind;
pub mod lock;
pub mod models;
pub mod onnx;
pub mod reconnect;
pub mod resources;
pub mod secret_file;
pub mod shed;
pub mod validate;
pub mod words;
