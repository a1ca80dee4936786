//! The frame format every video source delivers.

/// MuSAG processes video at 426x240 and 15 fps; sources scale to this.
pub const FRAME_WIDTH: u32 = 426;
pub const FRAME_HEIGHT: u32 = 240;
pub const MAX_FPS: f32 = 15.0;
