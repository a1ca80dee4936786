//! Video sources: everything that turns a camera or a file into timestamped RGB frames.
//!
//! Frames are delivered at (at most) [`FRAME_WIDTH`] x [`FRAME_HEIGHT`], MuSAG's
//! processing format, each stamped on the stream clock (seconds since the stream
//! started, the same clock the audio's sample count gives), so the vision view can take
//! exactly the frames an utterance spans.

pub mod camera;
mod error;
mod file;
mod format;
mod frame;
mod live;
mod source;

pub use camera::{CameraCounters, CameraError, CameraOptions, CameraSource, PixelFormatPref};
pub use error::VideoError;
pub use file::{fit_frame, FileVideoOptions, FileVideoSource};
pub use format::{FRAME_HEIGHT, FRAME_WIDTH, MAX_FPS};
pub use frame::VideoFrame;
pub use live::{CameraOpener, FrameOpener, ReconnectingFrameSource};
pub use source::FrameSource;
