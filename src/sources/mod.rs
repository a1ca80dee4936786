//! Sources: where samples and frames come from. Microphones (cpal callback -> ring
//! buffer, nothing else), WAV files and raw PCM on stdin ([`audio`]); cameras and video
//! files ([`video`]); and what this machine has ([`devices`]). Every source reconnects
//! on its own and counts what it drops; the pipeline only sees samples, frames and gaps.

pub mod audio;
pub mod devices;
pub mod video;
