//! Video sources: everything that turns a camera or a file into timestamped RGB frames.
//!
//! Frames are delivered at (at most) [`FRAME_WIDTH`] x [`FRAME_HEIGHT`], MuSAG's
//! processing format, each stamped on the stream clock (seconds since the stream
//! started, the same clock the audio's sample count gives), so the vision view can take
//! exactly the frames an utterance spans.

pub mod camera;
mod file;
mod live;

use thiserror::Error;

pub use camera::{CameraCounters, CameraError, CameraOptions, CameraSource, PixelFormatPref};
pub use file::{fit_frame, FileVideoOptions, FileVideoSource};
pub use live::{CameraOpener, FrameOpener, ReconnectingFrameSource};

/// MuSAG processes video at 426x240 and 15 fps; sources scale to this.
pub const FRAME_WIDTH: u32 = 426;
pub const FRAME_HEIGHT: u32 = 240;
pub const MAX_FPS: f32 = 15.0;

/// One decoded frame, packed RGB8, row-major, `width * height * 3` bytes.
#[derive(Clone)]
pub struct VideoFrame {
    /// Stream time of the frame, in seconds (same clock as the audio).
    pub t_s: f64,
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl std::fmt::Debug for VideoFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VideoFrame")
            .field("t_s", &self.t_s)
            .field("width", &self.width)
            .field("height", &self.height)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Error)]
pub enum VideoError {
    #[error("{what}: cannot open: {reason}")]
    Open { what: String, reason: String },
    #[error("{what}: decoding failed after {seconds:.2} s: {reason}")]
    Decode {
        what: String,
        seconds: f64,
        reason: String,
    },
    #[error("{what}: device lost: {reason}")]
    Lost { what: String, reason: String },
}

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
