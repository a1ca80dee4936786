//! Per-frame spectral descriptors: energy, centroid, tilt, MFCC (definitions in `mod.rs`).
//!
//! One complex FFT per frame yields both spectra we need: the plain Hamming-windowed frame `a`
//! (centroid, tilt) and the pre-emphasised Hamming-windowed frame `b` (MFCC), packed as
//! `z = a + i·b` and separated by conjugate symmetry.

use std::sync::Arc;

use rustfft::num_complex::Complex32;
use rustfft::{Fft, FftPlanner};

const PRE_EMPHASIS: f32 = 0.97;
const LOG_FLOOR: f32 = 1e-10;
const ENERGY_FLOOR_DB: f32 = -100.0;
const TILT_LO_HZ: f32 = 100.0;
const TILT_HI_HZ: f32 = 5000.0;
/// Added to bin power before taking dB for the tilt fit (keeps silence finite: slope 0).
const TILT_POWER_FLOOR: f32 = 1e-12;

pub(super) struct SpectralOut {
    pub energy_db: f32,
    pub centroid_hz: f32,
    pub tilt: f32,
}

struct MelFilter {
    first_bin: usize,
    weights: Vec<f32>,
}

pub(super) struct Spectral {
    frame_len: usize,
    n_fft: usize,
    bin_hz: f32,
    fft: Arc<dyn Fft<f32>>,
    buf: Vec<Complex32>,
    scratch: Vec<Complex32>,
    window: Vec<f32>,
    /// Power spectrum of the pre-emphasised frame, bins 0..=n_fft/2.
    pow_pre: Vec<f32>,
    mel: Vec<MelFilter>,
    log_mel: Vec<f32>,
    /// DCT-II (orthonormal), row-major n_mfcc × n_mel.
    dct: Vec<f32>,
    n_mfcc: usize,
    // Tilt regression: bins tilt_lo..tilt_hi, x = log2 f, weight 1/f, precomputed sums.
    tilt_lo: usize,
    tilt_hi: usize,
    tilt_x: Vec<f32>,
    tilt_w: Vec<f32>,
    tilt_sw: f64,
    tilt_swx: f64,
    tilt_den: f64,
}

fn hz_to_mel(f: f32) -> f32 {
    2595.0 * (1.0 + f / 700.0).log10()
}
fn mel_to_hz(m: f32) -> f32 {
    700.0 * (10f32.powf(m / 2595.0) - 1.0)
}

impl Spectral {
    pub fn new(frame_len: usize, sample_rate_hz: u32, n_mel: usize, n_mfcc: usize) -> Self {
        let sr = sample_rate_hz as f32;
        let n_fft = frame_len.next_power_of_two();
        let n_bins = n_fft / 2 + 1;
        let bin_hz = sr / n_fft as f32;
        let fft = FftPlanner::<f32>::new().plan_fft_forward(n_fft);
        let scratch = vec![Complex32::default(); fft.get_inplace_scratch_len()];
        let window: Vec<f32> = (0..frame_len)
            .map(|i| {
                0.54 - 0.46
                    * (2.0 * std::f64::consts::PI * i as f64 / (frame_len - 1) as f64).cos() as f32
            })
            .collect();

        // Mel filterbank: n_mel triangles, edges equally spaced in mel over 0..sr/2.
        let mel_hi = hz_to_mel(sr / 2.0);
        let edges: Vec<f32> = (0..n_mel + 2)
            .map(|i| mel_to_hz(mel_hi * i as f32 / (n_mel + 1) as f32))
            .collect();
        let mel = (0..n_mel)
            .map(|m| {
                let (l, c, r) = (edges[m], edges[m + 1], edges[m + 2]);
                let mut first = None;
                let mut weights = Vec::new();
                for k in 0..n_bins {
                    let f = k as f32 * bin_hz;
                    let w = if f > l && f < r {
                        if f <= c {
                            (f - l) / (c - l)
                        } else {
                            (r - f) / (r - c)
                        }
                    } else {
                        0.0
                    };
                    if w > 0.0 {
                        first.get_or_insert(k);
                        weights.push(w);
                    } else if first.is_some() {
                        break;
                    }
                }
                MelFilter {
                    first_bin: first.unwrap_or(0),
                    weights,
                }
            })
            .collect();

        let mut dct = vec![0.0f32; n_mfcc * n_mel];
        for i in 0..n_mfcc {
            let s = if i == 0 {
                (1.0 / n_mel as f64).sqrt()
            } else {
                (2.0 / n_mel as f64).sqrt()
            };
            for m in 0..n_mel {
                dct[i * n_mel + m] = (s
                    * (std::f64::consts::PI * i as f64 * (m as f64 + 0.5) / n_mel as f64).cos())
                    as f32;
            }
        }

        let tilt_lo = ((TILT_LO_HZ / bin_hz).ceil() as usize).max(1);
        let tilt_hi = ((TILT_HI_HZ / bin_hz).floor() as usize).min(n_bins - 1);
        let (mut tilt_x, mut tilt_w) = (Vec::new(), Vec::new());
        let (mut sw, mut swx, mut swxx) = (0.0f64, 0.0f64, 0.0f64);
        for k in tilt_lo..=tilt_hi {
            let f = k as f64 * bin_hz as f64;
            let (x, w) = (f.log2(), 1.0 / f);
            tilt_x.push(x as f32);
            tilt_w.push(w as f32);
            sw += w;
            swx += w * x;
            swxx += w * x * x;
        }

        Self {
            frame_len,
            n_fft,
            bin_hz,
            fft,
            buf: vec![Complex32::default(); n_fft],
            scratch,
            window,
            pow_pre: vec![0.0; n_bins],
            mel,
            log_mel: vec![0.0; n_mel],
            dct,
            n_mfcc,
            tilt_lo,
            tilt_hi,
            tilt_x,
            tilt_w,
            tilt_sw: sw,
            tilt_swx: swx,
            tilt_den: sw * swxx - swx * swx,
        }
    }

    /// `prev` is the sample just before `frame` (for pre-emphasis); `mfcc.len() == n_mfcc`.
    pub fn compute(&mut self, prev: f32, frame: &[f32], mfcc: &mut [f32]) -> SpectralOut {
        debug_assert_eq!(frame.len(), self.frame_len);
        let n = self.n_fft;

        let mut sumsq = 0.0f32;
        let mut p = prev;
        for (i, &x) in frame.iter().enumerate() {
            sumsq += x * x;
            let w = self.window[i];
            self.buf[i] = Complex32::new(w * x, w * (x - PRE_EMPHASIS * p));
            p = x;
        }
        for z in &mut self.buf[self.frame_len..] {
            *z = Complex32::default();
        }
        let ms = sumsq / self.frame_len as f32;
        let energy_db = (10.0 * (ms + 1e-10).log10()).max(ENERGY_FLOOR_DB);

        self.fft
            .process_with_scratch(&mut self.buf, &mut self.scratch);

        // Separate the two real spectra; accumulate centroid and tilt on the plain one.
        let (mut cnum, mut cden) = (0.0f32, 0.0f32);
        let (mut swy, mut swxy) = (0.0f64, 0.0f64);
        for k in 0..=n / 2 {
            let zk = self.buf[k];
            let zc = self.buf[if k == 0 { 0 } else { n - k }].conj();
            let a = (zk + zc) * 0.5;
            let d = zk - zc; // 2i·B
            let pa = a.norm_sqr();
            self.pow_pre[k] = 0.25 * d.norm_sqr();
            let mag = pa.sqrt();
            cnum += k as f32 * mag;
            cden += mag;
            if k >= self.tilt_lo && k <= self.tilt_hi {
                let j = k - self.tilt_lo;
                let y = 10.0 * (pa + TILT_POWER_FLOOR).log10();
                let w = self.tilt_w[j] as f64;
                swy += w * y as f64;
                swxy += w * self.tilt_x[j] as f64 * y as f64;
            }
        }
        let centroid_hz = if cden > 1e-9 {
            cnum / cden * self.bin_hz
        } else {
            0.0
        };
        let tilt = if self.tilt_den > 0.0 {
            ((self.tilt_sw * swxy - self.tilt_swx * swy) / self.tilt_den) as f32
        } else {
            0.0
        };

        for (m, f) in self.mel.iter().enumerate() {
            let e: f32 = f
                .weights
                .iter()
                .zip(&self.pow_pre[f.first_bin..])
                .map(|(w, p)| w * p)
                .sum();
            self.log_mel[m] = e.max(LOG_FLOOR).ln();
        }
        let n_mel = self.log_mel.len();
        for (i, c) in mfcc.iter_mut().enumerate().take(self.n_mfcc) {
            let row = &self.dct[i * n_mel..(i + 1) * n_mel];
            *c = row.iter().zip(&self.log_mel).map(|(a, b)| a * b).sum();
        }

        SpectralOut {
            energy_db,
            centroid_hz,
            tilt,
        }
    }
}
