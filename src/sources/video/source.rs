//! The trait every video source implements.

use super::error::VideoError;
use super::frame::VideoFrame;

/// A source of timestamped frames.
pub trait FrameSource: Send {
    /// Human-readable origin, used in logs and errors.
    fn describe(&self) -> String;
    /// The next frame, `Ok(None)` once the stream has ended.
    fn next_frame(&mut self) -> Result<Option<VideoFrame>, VideoError>;
    /// Live sources (cameras) cannot wait: frames that find the queue full replace the
    /// oldest one and the drop is counted. Files can wait.
    fn is_live(&self) -> bool {
        false
    }
    /// A camera that was lost and is back reports the lost interval once, after the
    /// first frame it delivers again (as [`crate::sources::audio::AudioSource::take_gap`]).
    fn take_gap(&mut self) -> Option<crate::sources::audio::SourceGap> {
        None
    }
}
