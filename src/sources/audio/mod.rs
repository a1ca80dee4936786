//! Audio sources: everything that turns some input into 16 kHz mono `f32` samples.
//!
//! A source is pulled by the pipeline's source thread and pushes into the audio ring.
//! Files and stdin implement [`AudioSource`] here; live devices (cpal) plug into the
//! same seam: they also deliver 16 kHz mono chunks, but report `is_live() == true`, so
//! the pipeline drops and counts samples instead of blocking when the ring is full.

mod downmix;
mod error;
mod gap;
mod live;
pub mod mic;
mod pcm;
mod rate;
mod resample;
mod source;
mod wav;

pub use error::AudioError;
pub use gap::SourceGap;
pub use live::{FnOpener, Opener, ReconnectingSource};
pub use mic::{MicCounters, MicError, MicOpener, MicOptions, MicSource};
pub use pcm::PcmReaderSource;
pub use rate::{validate_rate, MAX_INPUT_RATE_HZ, MIN_INPUT_RATE_HZ, PIPELINE_RATE_HZ};
pub use resample::{ResampleError, StreamResampler};
pub use source::AudioSource;
pub use wav::{WavInfo, WavSource};
