//! One frame's descriptors: what the frame extractor produces and the functionals read
//! (a file of its own so `functionals` does not import the extractor's module).

/// Descriptors of one frame.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProsodyFrame {
    /// Frame centre, stream seconds.
    pub t_s: f64,
    /// F0 in Hz if the frame is voiced.
    pub f0_hz: Option<f32>,
    /// Periodicity strength 0..1 (1 − YIN d′ at the chosen lag).
    pub voicing: f32,
    /// RMS level, dBFS, floored at -100.
    pub energy_db: f32,
    /// Spectral centroid, Hz.
    pub centroid_hz: f32,
    /// Spectral tilt, dB/octave.
    pub tilt: f32,
    /// MFCCs c0..c(n_mfcc-1).
    pub mfcc: Vec<f32>,
}
