//! The trait every audio source implements.

use super::error::AudioError;
use super::gap::SourceGap;

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
