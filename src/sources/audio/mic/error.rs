//! The microphone source's error type.

use thiserror::Error;

use crate::common::error::BoxError;
use crate::sources::audio::resample::ResampleError;

#[derive(Debug, Error)]
pub enum MicError {
    #[error("cannot list audio input devices: {source}")]
    Enumerate {
        #[source]
        source: BoxError,
    },
    #[error("no default audio input device; plug in a microphone or set `source.device` (see `sarcasmd devices`)")]
    NoDefault,
    #[error("no audio input device matches \"{wanted}\" ({available}); set `source.device` to a name or index from `sarcasmd devices`")]
    NotFound { wanted: String, available: String },
    #[error("{device}: not available: {source} (no sound card, or it was unplugged; `arecord -l` lists the cards ALSA sees)")]
    Unavailable {
        device: String,
        #[source]
        source: BoxError,
    },
    #[error("{device}: offers no sample format sarcasmd can convert (it offers: {offered}); choose another device, e.g. an ALSA `plughw:` one")]
    NoUsableFormat { device: String, offered: String },
    #[error("{device}: refused {config}: {source} (it offers: {offered})")]
    Refused {
        device: String,
        config: String,
        #[source]
        source: BoxError,
        offered: String,
    },
    #[error("{device}: cannot start capture: {source}")]
    Start {
        device: String,
        #[source]
        source: BoxError,
    },
    #[error("{device}: {reason}")]
    Stream { device: String, reason: String },
    #[error("{device}: stalled: no audio from the device for {waited_ms} ms (limit `source.stall_timeout_ms` = {limit_ms})")]
    Stalled {
        device: String,
        waited_ms: u64,
        limit_ms: u64,
    },
    #[error("{device}: {source}")]
    Resample {
        device: String,
        source: ResampleError,
    },
}
