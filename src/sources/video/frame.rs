//! One decoded video frame.

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
