//! Prosody stage: frame-level acoustic descriptors and per-utterance functionals.
//!
//! Pure computation, no I/O. Input is 16 kHz mono `f32` audio (nominally in [-1, 1]).
//!
//! # Frames
//! * Spectral frames are `frame_ms` (25 ms = 400 samples) long, every `hop_ms` (10 ms = 160
//!   samples). Frame `k` covers stream samples `[k*hop, k*hop + frame_len)`; its time stamp
//!   `t_s` is the frame centre in stream seconds (`stream_start_s + (k*hop + frame_len/2)/sr`).
//! * F0 uses a longer window (see [`pitch`] for why and how it is placed): with the defaults it
//!   is 668 samples (41.75 ms) around the frame (53 before its start, 215 after its end).
//!   Samples before the stream start are taken as zeros, so frame 0 exists and is defined.
//! * `energy_db`: RMS of the raw (unwindowed) 25 ms frame in dBFS (a full-scale sine is
//!   -3 dB), floored at -100 dB.
//! * `centroid_hz`: magnitude-weighted mean frequency of the Hamming-windowed frame *without*
//!   pre-emphasis (0 for an all-zero frame).
//! * `tilt`: spectral tilt in **dB/octave**: weighted least-squares slope of the
//!   Hamming-windowed power spectrum in dB (no pre-emphasis) against log2(frequency), over the
//!   FFT bins in 100–5000 Hz with weight 1/f, so every octave counts equally (0 for silence).
//! * `mfcc`: `n_mfcc` coefficients c0..c(n-1) (c0 included): pre-emphasis 0.97 (using the real
//!   previous sample), Hamming window, zero-padded FFT (512 points for 25 ms), power spectrum,
//!   `n_mel_filters` triangular filters on the HTK mel scale (2595·log10(1+f/700)) spanning
//!   0–8000 Hz with unit peak, natural log floored at 1e-10, orthonormal DCT-II.
//!
//! # Streaming
//! [`FrameExtractor::push`] emits a frame only once every sample it needs has arrived, plus a
//! fixed look-ahead of [`pitch::SMOOTH_LOOKAHEAD`] frames used by the F0 tracker (fixed-lag
//! Viterbi). With the defaults a frame is emitted 215 + 5·160 samples (63 ms) after the end of
//! its 25 ms frame. Each frame depends only on the samples of the stream, never on how the
//! stream was chunked, so any chunking yields bit-identical frames. [`FrameExtractor::finish`]
//! flushes the frames whose 25 ms spectral frame is complete, treating samples past the end as
//! zeros; [`extract_frames`] is exactly `new` + `push(all)` + `finish`.

mod config;
mod error;
mod frame;
pub mod functionals;
pub mod pitch;
mod spectral;

use std::collections::VecDeque;

pub use config::ProsodyConfig;
pub use error::ProsodyError;
pub use frame::ProsodyFrame;
pub use functionals::{
    utterance_functionals, utterance_functionals_at, Functionals, FUNCTIONAL_NAMES,
};

/// Bump whenever any frame or functional definition changes (models depend on it).
pub const PROSODY_FEATURE_VERSION: &str = "prosody-v1";

/// The only sample rate the prosody stage accepts.
pub const REQUIRED_SAMPLE_RATE_HZ: u32 = 16_000;

/// Frame geometry in samples, derived from a validated config at 16 kHz.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    frame_len: usize,
    hop: usize,
    /// Samples of the pitch window before the spectral frame start (>= 1: pre-emphasis
    /// needs the previous sample).
    pad_left: usize,
    /// Total pitch window length.
    pitch_len: usize,
}

/// Streaming per-stream frame extractor. FFT plans and buffers are allocated once here.
pub struct FrameExtractor {
    geom: Geometry,
    sr: f64,
    stream_start_s: f64,
    /// Samples; `buf[0]` is absolute stream sample `buf_origin` (negative = zero padding).
    buf: Vec<f32>,
    buf_origin: i64,
    /// Index of the next frame to analyse.
    next_frame: u64,
    pitch: pitch::Yin,
    spectral: spectral::Spectral,
    tracker: pitch::Tracker,
    /// Frames analysed but waiting for the F0 post-processing look-ahead.
    pending: VecDeque<ProsodyFrame>,
    n_mfcc: usize,
}

impl FrameExtractor {
    /// Builds an extractor; validates `cfg` and requires 16 kHz.
    pub fn new(cfg: &ProsodyConfig, sample_rate_hz: u32) -> Result<Self, ProsodyError> {
        cfg.validate()?;
        if sample_rate_hz != REQUIRED_SAMPLE_RATE_HZ {
            return Err(ProsodyError::UnsupportedSampleRate {
                got_hz: sample_rate_hz,
                required_hz: REQUIRED_SAMPLE_RATE_HZ,
            });
        }
        let sr = sample_rate_hz as f64;
        let frame_len = ((cfg.frame_ms as f64) * sr / 1000.0).round() as usize;
        let hop = (((cfg.hop_ms as f64) * sr / 1000.0).round() as usize).max(1);
        let pitch = pitch::Yin::new(cfg, sample_rate_hz, frame_len);
        let (pad_left, pitch_len) = pitch.placement(frame_len);
        let spectral =
            spectral::Spectral::new(frame_len, sample_rate_hz, cfg.n_mel_filters, cfg.n_mfcc);
        let mut s = Self {
            geom: Geometry {
                frame_len,
                hop,
                pad_left,
                pitch_len,
            },
            sr,
            stream_start_s: 0.0,
            buf: Vec::with_capacity(pitch_len + 8 * hop + 4096),
            buf_origin: 0,
            next_frame: 0,
            pitch,
            spectral,
            tracker: pitch::Tracker::new(cfg),
            pending: VecDeque::with_capacity(2 * pitch::SMOOTH_LOOKAHEAD + 2),
            n_mfcc: cfg.n_mfcc,
        };
        s.reset(0.0);
        Ok(s)
    }

    /// Forgets all audio and starts a new stream whose first sample is at `stream_start_s`.
    pub fn reset(&mut self, stream_start_s: f64) {
        self.stream_start_s = stream_start_s;
        self.buf.clear();
        self.buf.resize(self.geom.pad_left, 0.0);
        self.buf_origin = -(self.geom.pad_left as i64);
        self.next_frame = 0;
        self.tracker.reset();
        self.pending.clear();
    }

    /// Appends samples (non-finite samples are replaced by 0) and appends to `out` every frame
    /// that is now complete. Any chunking of the same stream yields identical frames.
    pub fn push(&mut self, samples: &[f32], out: &mut Vec<ProsodyFrame>) {
        self.buf
            .extend(samples.iter().map(|&x| if x.is_finite() { x } else { 0.0 }));
        self.drain_frames(out, false);
    }

    /// Ends the stream: emits the remaining frames whose spectral frame is complete (samples
    /// past the end are zeros for the pitch window) and flushes the F0 look-ahead. The
    /// extractor must be [`reset`](Self::reset) before it is fed again.
    pub fn finish(&mut self, out: &mut Vec<ProsodyFrame>) {
        self.drain_frames(out, true);
        while let Some(f) = self.tracker.flush_one(&mut self.pending) {
            out.push(f);
        }
    }

    fn drain_frames(&mut self, out: &mut Vec<ProsodyFrame>, at_end: bool) {
        let g = self.geom;
        let buf_end = self.buf_origin + self.buf.len() as i64;
        loop {
            let start = (self.next_frame * g.hop as u64) as i64;
            let win_start = start - g.pad_left as i64;
            let win_end = win_start + g.pitch_len as i64;
            if win_end > buf_end {
                if !at_end || start + g.frame_len as i64 > buf_end {
                    break;
                }
                // End of stream: zero-pad the pitch window tail.
                let need = (win_end - buf_end) as usize;
                let old_len = self.buf.len();
                self.buf.resize(old_len + need, 0.0);
                let f = self.analyse_at(win_start, start);
                self.buf.truncate(old_len);
                self.emit(f, out);
            } else {
                let f = self.analyse_at(win_start, start);
                self.emit(f, out);
            }
            self.next_frame += 1;
        }
        // Drop samples no future frame needs; compact only when worthwhile (amortised O(1)).
        let next_win_start = (self.next_frame * g.hop as u64) as i64 - g.pad_left as i64;
        let dead = (next_win_start - self.buf_origin).max(0) as usize;
        let dead = dead.min(self.buf.len());
        if dead > 0 && dead >= self.buf.len() / 2 {
            self.buf.drain(..dead);
            self.buf_origin += dead as i64;
        }
    }

    fn analyse_at(&mut self, win_start: i64, start: i64) -> (ProsodyFrame, pitch::PitchEstimate) {
        let g = self.geom;
        let off = (win_start - self.buf_origin) as usize;
        let win = &self.buf[off..off + g.pitch_len];
        let frame_off = g.pad_left;
        let prev = win[frame_off - 1];
        let frame = &win[frame_off..frame_off + g.frame_len];
        let mut mfcc = vec![0.0f32; self.n_mfcc];
        let sp = self.spectral.compute(prev, frame, &mut mfcc);
        let est = self.pitch.analyse(win, sp.energy_db);
        let t_s = self.stream_start_s + (start as f64 + g.frame_len as f64 / 2.0) / self.sr;
        (
            ProsodyFrame {
                t_s,
                f0_hz: None, // decided by the tracker
                voicing: est.voicing,
                energy_db: sp.energy_db,
                centroid_hz: sp.centroid_hz,
                tilt: sp.tilt,
                mfcc,
            },
            est,
        )
    }

    fn emit(&mut self, f: (ProsodyFrame, pitch::PitchEstimate), out: &mut Vec<ProsodyFrame>) {
        if let Some(done) = self.tracker.push(f.0, f.1, &mut self.pending) {
            out.push(done);
        }
    }
}

/// Batch extraction: identical to `FrameExtractor::new` + `push(samples)` + `finish`.
pub fn extract_frames(
    samples: &[f32],
    sample_rate_hz: u32,
    start_s: f64,
    cfg: &ProsodyConfig,
) -> Result<Vec<ProsodyFrame>, ProsodyError> {
    let mut ex = FrameExtractor::new(cfg, sample_rate_hz)?;
    ex.reset(start_s);
    let g = ex.geom;
    let mut out = Vec::with_capacity(samples.len() / g.hop + 2);
    ex.push(samples, &mut out);
    ex.finish(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests;
