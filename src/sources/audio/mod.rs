//! Audio sources: everything that turns some input into 16 kHz mono `f32` samples.
//!
//! A source is pulled by the pipeline's source thread and pushes into the audio ring.
//! Files and stdin implement [`AudioSource`] here; live devices (cpal) plug into the
//! same seam: they also deliver 16 kHz mono chunks, but report `is_live() == true`, so
//! the pipeline drops and counts samples instead of blocking when the ring is full.

mod live;
pub mod mic;
mod pcm;
mod resample;
mod wav;

use std::path::PathBuf;

use thiserror::Error;

pub use live::{FnOpener, Opener, ReconnectingSource};
pub use mic::{MicCounters, MicError, MicOpener, MicOptions, MicSource};
pub use pcm::PcmReaderSource;
pub use resample::{ResampleError, StreamResampler};
pub use wav::{WavInfo, WavSource};

/// The rate every stage after the source works at (Silero VAD and Whisper want 16 kHz).
pub const PIPELINE_RATE_HZ: u32 = 16_000;

/// Accepted input rates. Outside this range a "rate" is almost surely a corrupt header.
pub const MIN_INPUT_RATE_HZ: u32 = 4_000;
pub const MAX_INPUT_RATE_HZ: u32 = 384_000;

pub fn validate_rate(sample_rate_hz: u32) -> Result<(), String> {
    if (MIN_INPUT_RATE_HZ..=MAX_INPUT_RATE_HZ).contains(&sample_rate_hz) {
        Ok(())
    } else {
        Err(format!(
            "sample rate {sample_rate_hz} Hz is outside {MIN_INPUT_RATE_HZ}..={MAX_INPUT_RATE_HZ} Hz"
        ))
    }
}

#[derive(Debug, Error)]
pub enum AudioError {
    #[error("{path}: cannot open: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a readable WAV file: {reason}")]
    NotWav { path: PathBuf, reason: String },
    #[error("{path}: unsupported WAV format: {reason} (supported: PCM 16/24/32-bit integer, 32-bit float; convert with `sox IN -b 16 OUT.wav`)")]
    Unsupported { path: PathBuf, reason: String },
    #[error("{path}: WAV file is truncated: {reason}")]
    Truncated { path: PathBuf, reason: String },
    #[error("{path}: holds no audio samples")]
    Empty { path: PathBuf },
    #[error("{what}: read failed after {seconds:.2} s of audio: {reason}")]
    Read {
        what: String,
        seconds: f64,
        reason: String,
    },
    #[error("{what}: invalid sample rate: {reason}")]
    Rate { what: String, reason: String },
    #[error("{what}: resampling failed: {source}")]
    Resample { what: String, source: ResampleError },
}

/// A source of 16 kHz mono audio.
pub trait AudioSource: Send {
    /// Human-readable origin, used in logs and errors.
    fn describe(&self) -> String;
    /// Append the next samples (16 kHz mono, in [-1, 1]) to `out`. Returns `Ok(false)`
    /// once the stream has ended and everything was delivered.
    fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError>;
    /// Live sources cannot wait: when the ring is full their samples are dropped and
    /// counted. Files and pipes can wait, so they are never dropped.
    fn is_live(&self) -> bool {
        false
    }
    /// A live source that lost its device (unplugged, stalled) and got it back reports
    /// the lost interval once, here, after the `read_chunk` that resumed delivery. The
    /// pipeline records it and keeps the stream clock on wall time across the gap.
    fn take_gap(&mut self) -> Option<SourceGap> {
        None
    }
}

/// An interval of a live stream that was lost, on the stream clock (seconds of 16 kHz
/// audio delivered before it).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourceGap {
    /// Stream time at which delivery stopped.
    pub start_s: f64,
    /// Wall-clock length of the outage.
    pub duration_s: f64,
    /// Why, for logs and events (e.g. "device disappeared: ...").
    pub reason: String,
}

/// Convert interleaved frames to mono by averaging channels.
pub(crate) fn downmix_into(interleaved: &[f32], channels: usize, out: &mut Vec<f32>) {
    if channels == 1 {
        out.extend_from_slice(interleaved);
        return;
    }
    let scale = 1.0 / channels as f32;
    out.extend(
        interleaved
            .chunks_exact(channels)
            .map(|f| f.iter().sum::<f32>() * scale),
    );
}
