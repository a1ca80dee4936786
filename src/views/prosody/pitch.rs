//! F0 by YIN (de Cheveigné & Kawahara 2002) with an FFT cross-correlation for the difference
//! function and parabolic interpolation, followed by a fixed-lag Viterbi tracker over the YIN
//! candidates of each frame (kills octave jumps and isolated voicing flips).
//!
//! # Per frame (YIN steps 1–3, 5)
//! `d(τ) = Σ_{j<W} (x_j − x_{j+τ})²` is computed as `E[0,W) + E[τ,τ+W) − 2·r(τ)`, with the
//! cross-correlation `r` from one packed complex FFT (1024 points by default) and the energies
//! from prefix sums; then the cumulative-mean-normalised `d′(τ)`. Every interior local minimum
//! of `d′` in `[sr/f0_max, sr/f0_min]` is refined by parabolic interpolation and kept as a
//! candidate (at most 6). Frames below [`VOICING_MIN_DB`] get no candidates.
//!
//! # Across frames (YIN step 4, generalised)
//! Local cost of candidate c: `max(d′_c, yin_threshold) − 0.005·log2(f_c/f0_min)`, plus 0.1 if
//! c is a sub-harmonic of the shortest lag under the threshold (YIN's absolute-threshold pick).
//! The unvoiced state costs 0.5, so a frame is locally voiced when some d′ < ~0.5. Transition
//! costs: 0.7 per octave of F0 change, 0.15 per voiced/unvoiced switch. The best path is decided
//! with a fixed lag of [`SMOOTH_LOOKAHEAD`] frames. Costs were tuned against Praat on the
//! espeak-ng set and half of the House clips (`models/tools/f0_reference.py`).
//!
//! # Why a longer pitch window than the 25 ms spectral frame
//! YIN's difference function at lag τ compares `x[j]` with `x[j+τ]` over an integration window
//! of `W` samples, so it needs `W + τ_max` samples, and a reliable dip needs the window to span
//! at least two periods. At the 60 Hz floor one period is 16.7 ms (267 samples), so a 25 ms
//! frame (400 samples) holds only 1.5 periods and cannot even evaluate lags beyond 400 − W.
//! We therefore keep `W = max(frame_len, τ_max)` (25 ms with the defaults, τ_max = 268) and
//! analyse `W + τ_max` samples (668 = 41.75 ms), while frames stay 25 ms long and 10 ms apart.
//!
//! # Where the pitch window sits
//! The lag-τ comparison is centred at `window_start + (W + τ)/2`, so no single placement is
//! centred for all lags. We place the window so that it is centred on the frame centre for a
//! reference voice of 150 Hz (clamped to the search range). With 60–500 Hz the effective
//! analysis centre is then within about −2.3 … +5 ms of the frame centre (within ±1.7 ms for
//! 100–250 Hz voices), instead of 0 … −8 ms for a naively centred window.

use std::collections::VecDeque;
use std::sync::Arc;

use rustfft::num_complex::Complex32;
use rustfft::{Fft, FftPlanner};

use super::config::ProsodyConfig;
use super::frame::ProsodyFrame;

/// Frames of look-ahead of the fixed-lag Viterbi tracker (adds 50 ms latency at a 10 ms hop).
pub const SMOOTH_LOOKAHEAD: usize = 5;

/// Tracker costs (see [`TrackerParams`]); tuned on the espeak set and half the House clips.
pub const UNVOICED_COST: f32 = 0.5;
pub const OCTAVE_JUMP_COST: f32 = 0.7;
pub const VUV_COST: f32 = 0.15;
pub const LAG_OCTAVE_COST: f32 = 0.005;
pub const SUBHARMONIC_COST: f32 = 0.1;
/// Relative tolerance for "lag is an integer multiple of YIN's pick".
const SUBHARMONIC_TOL: f32 = 0.04;
/// Candidates with d′ above this are not kept.
const CAND_MAX_DPRIME: f32 = 0.7;

/// Frames quieter than this (dBFS, 25 ms RMS) are never voiced.
pub const VOICING_MIN_DB: f32 = -60.0;

/// Number of candidate lags (local minima of d′) kept per frame for the tracker.
const N_CAND: usize = 6;

/// Reference F0 for placing the pitch window (see module docs).
const PLACEMENT_REF_HZ: f32 = 150.0;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Candidate {
    pub f0_hz: f32,
    pub dprime: f32,
}

/// Raw per-frame YIN result: the candidate lags; the tracker picks one (or "unvoiced").
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct PitchEstimate {
    /// 1 − (smallest d′ in the search range), clamped to 0..1.
    pub voicing: f32,
    /// Local minima of d′ (best first), the tracker's voiced states.
    pub cands: [Candidate; N_CAND],
    pub n_cands: usize,
}

pub(super) struct Yin {
    sr: f32,
    w: usize,
    tau_min: usize,
    tau_max: usize,
    len: usize,
    n_fft: usize,
    threshold: f32,
    fwd: Arc<dyn Fft<f32>>,
    inv: Arc<dyn Fft<f32>>,
    buf: Vec<Complex32>,
    prod: Vec<Complex32>,
    scratch: Vec<Complex32>,
    /// Prefix sums of squares (f64: differences of large sums).
    cumsq: Vec<f64>,
    /// d′(τ), τ = 0..=tau_max.
    dn: Vec<f32>,
}

impl Yin {
    pub fn new(cfg: &ProsodyConfig, sample_rate_hz: u32, frame_len: usize) -> Self {
        let sr = sample_rate_hz as f32;
        // One lag beyond the floor period so that a dip at exactly f0_min is an interior
        // local minimum (candidates are interior minima only).
        let tau_max = (sr / cfg.f0_min_hz).ceil() as usize + 1;
        let tau_min = ((sr / cfg.f0_max_hz).floor() as usize).max(2);
        let w = frame_len.max(tau_max);
        let len = w + tau_max;
        // Circular cross-correlation of a (len W) with b (len W+τmax) has no wrap-around for
        // lags 0..=τmax as long as n_fft >= W+τmax.
        let n_fft = len.next_power_of_two();
        let mut planner = FftPlanner::<f32>::new();
        let fwd = planner.plan_fft_forward(n_fft);
        let inv = planner.plan_fft_inverse(n_fft);
        let scratch_len = fwd
            .get_inplace_scratch_len()
            .max(inv.get_inplace_scratch_len());
        Self {
            sr,
            w,
            tau_min,
            tau_max,
            len,
            n_fft,
            threshold: cfg.yin_threshold,
            fwd,
            inv,
            buf: vec![Complex32::default(); n_fft],
            prod: vec![Complex32::default(); n_fft],
            scratch: vec![Complex32::default(); scratch_len],
            cumsq: vec![0.0; len + 1],
            dn: vec![0.0; tau_max + 1],
        }
    }

    /// Returns (samples of the pitch window before the spectral frame start, window length).
    pub fn placement(&self, frame_len: usize) -> (usize, usize) {
        let tau_ref = (self.sr / PLACEMENT_REF_HZ).round() as usize;
        let tau_ref = tau_ref.clamp(self.tau_min, self.tau_max);
        // Centre of the lag-τref comparison, (W + τref)/2 from the window start, is put on
        // the frame centre frame_len/2 from the frame start.
        let pad_left = ((self.w + tau_ref) / 2)
            .saturating_sub(frame_len / 2)
            .max(1);
        // The frame itself must lie inside the window.
        let pad_left = pad_left.min(self.len - frame_len);
        (pad_left.max(1), self.len.max(frame_len + pad_left))
    }

    /// Analyses one pitch window (`placement().1` samples). `energy_db` is the frame level.
    pub fn analyse(&mut self, win: &[f32], energy_db: f32) -> PitchEstimate {
        debug_assert!(win.len() >= self.len);
        let (w, tmax, n) = (self.w, self.tau_max, self.n_fft);
        let win = &win[..self.len];

        // Energies via prefix sums.
        let mut acc = 0.0f64;
        self.cumsq[0] = 0.0;
        for (i, &x) in win.iter().enumerate() {
            acc += (x as f64) * (x as f64);
            self.cumsq[i + 1] = acc;
        }
        let e0 = self.cumsq[w];
        if energy_db < VOICING_MIN_DB || e0 <= 1e-12 {
            return PitchEstimate::default();
        }

        // z = a + i·b with a = win[..W], b = win[..W+τmax]; one complex FFT gives both spectra.
        for (i, z) in self.buf.iter_mut().enumerate() {
            let a = if i < w { win[i] } else { 0.0 };
            let b = if i < self.len { win[i] } else { 0.0 };
            *z = Complex32::new(a, b);
        }
        self.fwd
            .process_with_scratch(&mut self.buf, &mut self.scratch);
        for k in 0..n {
            let zk = self.buf[k];
            // Z[(n − k) mod n] without a division per bin.
            let zc = self.buf[if k == 0 { 0 } else { n - k }].conj();
            let a = (zk + zc) * 0.5;
            let d = zk - zc; // = 2i·B
            let b = Complex32::new(d.im * 0.5, -d.re * 0.5);
            self.prod[k] = a.conj() * b;
        }
        self.inv
            .process_with_scratch(&mut self.prod, &mut self.scratch);
        let scale = 1.0 / n as f64;

        // d(τ) = E[0,W) + E[τ,τ+W) − 2·r(τ);  d′(τ) = d(τ)·τ / Σ_{j=1..τ} d(j).
        self.dn[0] = 1.0;
        let mut running = 0.0f64;
        for tau in 1..=tmax {
            let r = self.prod[tau].re as f64 * scale;
            let et = self.cumsq[tau + w] - self.cumsq[tau];
            let d = (e0 + et - 2.0 * r).max(0.0);
            running += d;
            self.dn[tau] = if running > 0.0 {
                (d * tau as f64 / running) as f32
            } else {
                1.0
            };
        }

        // Candidates: interior local minima of d′ in [τmin, τmax), best N_CAND by value.
        let mut est = PitchEstimate::default();
        let mut best = 1.0f32;
        for tau in self.tau_min..tmax {
            let dn = &self.dn;
            if dn[tau] <= dn[tau - 1] && dn[tau] < dn[tau + 1] {
                let (tf, v) = self.refine(tau);
                best = best.min(v);
                if v <= CAND_MAX_DPRIME {
                    insert_cand(
                        &mut est,
                        Candidate {
                            f0_hz: self.sr / tf,
                            dprime: v,
                        },
                        self.threshold,
                    );
                }
            }
        }
        est.voicing = (1.0 - best).clamp(0.0, 1.0);
        est
    }

    /// Parabolic interpolation of d′ around integer lag `t`: (fractional lag, d′ at it).
    fn refine(&self, t: usize) -> (f32, f32) {
        let dn = &self.dn;
        if t <= 1 || t >= self.tau_max {
            return (t as f32, dn[t]);
        }
        let (a, b, c) = (dn[t - 1], dn[t], dn[t + 1]);
        let denom = a - 2.0 * b + c;
        if denom <= 0.0 {
            return (t as f32, b);
        }
        let delta = (0.5 * (a - c) / denom).clamp(-1.0, 1.0);
        (t as f32 + delta, (b - 0.25 * (a - c) * delta).max(0.0))
    }
}

/// Keeps the N_CAND best candidates, ranked by max(d′, threshold) and then by higher F0, so
/// that for a clean periodic signal (d′ ≈ 0 at every multiple of the period) the shortest lags
/// are kept rather than an arbitrary subset of its sub-harmonics.
fn insert_cand(est: &mut PitchEstimate, c: Candidate, threshold: f32) {
    let key = |c: &Candidate| (c.dprime.max(threshold), -c.f0_hz);
    let better = |a: &Candidate, b: &Candidate| {
        let (ka, kb) = (key(a), key(b));
        ka.0 < kb.0 || (ka.0 == kb.0 && ka.1 < kb.1)
    };
    let n = est.n_cands;
    let mut pos = n;
    while pos > 0 && better(&c, &est.cands[pos - 1]) {
        pos -= 1;
    }
    if pos >= N_CAND {
        return;
    }
    let last = (n + 1).min(N_CAND);
    let mut i = last - 1;
    while i > pos {
        est.cands[i] = est.cands[i - 1];
        i -= 1;
    }
    est.cands[pos] = c;
    est.n_cands = last;
}

/// Tunable costs of the tracker (all in units of d′ per frame).
#[derive(Debug, Clone, Copy)]
pub(super) struct TrackerParams {
    /// Local cost of the unvoiced state: a candidate is locally preferred over "unvoiced"
    /// when its d′ is below this.
    pub unvoiced_cost: f32,
    /// Cost per octave of F0 change between consecutive voiced frames.
    pub octave_jump_cost: f32,
    /// Cost of a voiced/unvoiced transition.
    pub vuv_cost: f32,
    /// Cost per octave of lag above τ_min (YIN's preference for the shortest good lag).
    pub lag_octave_cost: f32,
    /// YIN absolute threshold: candidates with d′ below it count as equally good ...
    pub threshold: f32,
    /// ... except that sub-harmonics of the shortest such lag pay this extra cost.
    pub subharmonic_cost: f32,
}

const MAX_STATES: usize = N_CAND + 1;

/// One trellis column. State 0 is "unvoiced"; states 1..n are F0 candidates.
#[derive(Debug, Clone, Copy)]
struct Column {
    n: usize,
    f0: [f32; MAX_STATES],
    dprime: [f32; MAX_STATES],
    score: [f32; MAX_STATES],
    back: [u8; MAX_STATES],
    raw_voicing: f32,
}

/// Fixed-lag Viterbi F0 tracker over the YIN candidates of each frame.
///
/// The decision for frame k is made once frame k+L has been analysed (L =
/// [`SMOOTH_LOOKAHEAD`]) by back-tracking from the best state of frame k+L; at the end of a
/// stream the remaining frames are decided from the best final state. Decisions depend only on
/// the sequence of per-frame estimates, never on chunking, so streaming and batch agree
/// bit for bit.
pub(super) struct Tracker {
    cols: VecDeque<Column>,
    p: TrackerParams,
    f0_min_hz: f32,
}

impl Tracker {
    pub fn new(cfg: &ProsodyConfig) -> Self {
        Self {
            cols: VecDeque::with_capacity(SMOOTH_LOOKAHEAD + 2),
            p: TrackerParams {
                unvoiced_cost: UNVOICED_COST,
                octave_jump_cost: OCTAVE_JUMP_COST,
                vuv_cost: VUV_COST,
                lag_octave_cost: LAG_OCTAVE_COST,
                threshold: cfg.yin_threshold,
                subharmonic_cost: SUBHARMONIC_COST,
            },
            f0_min_hz: cfg.f0_min_hz,
        }
    }

    pub fn reset(&mut self) {
        self.cols.clear();
    }

    fn local_cost(&self, f0: f32, dprime: f32) -> f32 {
        dprime.max(self.p.threshold)
            - self.p.lag_octave_cost * (f0 / self.f0_min_hz).log2().max(0.0)
    }

    fn trans(&self, a: &Column, i: usize, b: &Column, j: usize) -> f32 {
        match (i, j) {
            (0, 0) => 0.0,
            (0, _) | (_, 0) => self.p.vuv_cost,
            _ => self.p.octave_jump_cost * (b.f0[j] / a.f0[i]).log2().abs(),
        }
    }

    /// Adds a freshly analysed frame; returns a finished frame once its look-ahead is full.
    pub fn push(
        &mut self,
        frame: ProsodyFrame,
        est: PitchEstimate,
        pending: &mut VecDeque<ProsodyFrame>,
    ) -> Option<ProsodyFrame> {
        let mut col = Column {
            n: 1,
            f0: [0.0; MAX_STATES],
            dprime: [1.0; MAX_STATES],
            score: [0.0; MAX_STATES],
            back: [0; MAX_STATES],
            raw_voicing: est.voicing,
        };
        let mut local = [0.0f32; MAX_STATES];
        local[0] = self.p.unvoiced_cost;
        // YIN's pick: the highest-F0 (shortest-lag) candidate under the absolute threshold.
        let yin_pick = est.cands[..est.n_cands]
            .iter()
            .filter(|c| c.dprime < self.p.threshold)
            .map(|c| c.f0_hz)
            .fold(0.0f32, f32::max);
        for c in &est.cands[..est.n_cands] {
            col.f0[col.n] = c.f0_hz;
            col.dprime[col.n] = c.dprime;
            let mut cost = self.local_cost(c.f0_hz, c.dprime);
            // Sub-harmonics of YIN's pick (lag ≈ m·lag_pick, m ≥ 2) are penalised.
            if yin_pick > 0.0 && c.f0_hz < yin_pick {
                let m = yin_pick / c.f0_hz;
                if m.round() >= 2.0 && (m / m.round() - 1.0).abs() < SUBHARMONIC_TOL {
                    cost += self.p.subharmonic_cost;
                }
            }
            local[col.n] = cost;
            col.n += 1;
        }
        match self.cols.back() {
            None => col.score[..col.n].copy_from_slice(&local[..col.n]),
            Some(prev) => {
                for (j, &lj) in local.iter().enumerate().take(col.n) {
                    let mut best = (f32::INFINITY, 0u8);
                    for i in 0..prev.n {
                        let s = prev.score[i] + self.trans(prev, i, &col, j);
                        if s < best.0 {
                            best = (s, i as u8);
                        }
                    }
                    col.score[j] = best.0 + lj;
                    col.back[j] = best.1;
                }
            }
        }
        let min = col.score[..col.n]
            .iter()
            .copied()
            .fold(f32::INFINITY, f32::min);
        for s in &mut col.score[..col.n] {
            *s -= min;
        }
        self.cols.push_back(col);
        pending.push_back(frame);
        if self.cols.len() > SMOOTH_LOOKAHEAD {
            Some(self.decide_oldest(pending))
        } else {
            None
        }
    }

    /// Finalises the oldest pending frame with the look-ahead available (end of stream).
    pub fn flush_one(&mut self, pending: &mut VecDeque<ProsodyFrame>) -> Option<ProsodyFrame> {
        if self.cols.is_empty() {
            None
        } else {
            Some(self.decide_oldest(pending))
        }
    }

    fn decide_oldest(&mut self, pending: &mut VecDeque<ProsodyFrame>) -> ProsodyFrame {
        let last = self.cols.back().expect("column");
        let mut s = 0usize;
        for j in 1..last.n {
            if last.score[j] < last.score[s] {
                s = j;
            }
        }
        for k in (1..self.cols.len()).rev() {
            s = self.cols[k].back[s] as usize;
        }
        let col = self.cols.pop_front().expect("column");
        let mut frame = pending.pop_front().expect("pending frame");
        if s == 0 {
            frame.f0_hz = None;
            frame.voicing = col.raw_voicing;
        } else {
            frame.f0_hz = Some(col.f0[s]);
            frame.voicing = (1.0 - col.dprime[s]).clamp(0.0, 1.0);
        }
        frame
    }
}
