//! Per-utterance functionals over [`ProsodyFrame`]s.
//!
//! Definitions (all values finite; every statistic of an empty set is 0):
//! * **Active (speech) frames**: `energy_db >= max(p99(energy_db) − 25 dB, −70 dBFS)`
//!   (silence threshold after de Jong & Wempe 2009). Energy, centroid, tilt, MFCC and voicing
//!   statistics use active frames only; F0 statistics use voiced frames (`f0_hz` set).
//! * **Statistics** of a descriptor: mean, population sd, min, max, range, p10/p50/p90
//!   (linear interpolation between order statistics), slope = least-squares slope against
//!   frame time in units per second (0 with fewer than 2 frames).
//! * **F0** in semitones re 100 Hz: `12·log2(f0/100)`.
//! * **voiced_fraction**: voiced active frames / active frames.
//! * **Pauses**: runs of non-active frames of at least 150 ms lying *between* active frames
//!   (leading/trailing silence is not a pause). The speech span runs from the first to the last
//!   active frame. `pause_rate_per_min` = pauses per minute of span, `pause_mean_s` = mean
//!   pause duration, `pause_fraction` = pause time / span.
//! * **Syllable nuclei** (de Jong & Wempe style): peaks of the 5-frame moving average of
//!   `energy_db` that are active, voiced, and separated from the previous accepted peak by a
//!   dip of at least 2 dB on both sides (else the higher of the two is kept).
//!   `speech_rate_syl_per_s` = nuclei / utterance duration;
//!   `articulation_rate_syl_per_s` = nuclei / (span − pause time), "per second of speech".
//! * **Jitter / shimmer** (local, %): within voiced stretches, consecutive glottal cycles are
//!   tracked on the waveform by normalised cross-correlation of one cycle with the next
//!   (search ±20 % around the frame F0, parabolic refinement); period `P_i` is the matched
//!   lag and amplitude `A_i` the peak-to-peak value of the cycle. Jitter = mean|P_i − P_{i−1}| /
//!   mean P · 100, shimmer = mean|A_i − A_{i−1}| / mean A · 100, using only pairs whose ratio
//!   is below 1.3 (periods) or 1.6 (amplitudes), as Praat does.
//! * **duration_s**: number of frames × hop; **speech_duration_s**: span − pause time.
//!
//! `samples` must be the audio the frames were computed from. [`utterance_functionals`] assumes
//! it starts at the start of the first frame, i.e. at stream time `frames[0].t_s − 12.5 ms`
//! (true for `extract_frames(samples, ..)` with the default 25 ms frame and for an utterance cut
//! on frame boundaries); [`utterance_functionals_at`] takes the start time explicitly. Voiced
//! stretches are shrunk by one hop at each end, so a few ms of misalignment do not matter.

use super::frame::ProsodyFrame;

/// Number of MFCC slots in the functionals (the default `n_mfcc`). Frames with fewer
/// coefficients leave the remaining slots 0; extra coefficients are ignored.
pub const FUNCTIONAL_N_MFCC: usize = 13;

/// Names of [`Functionals::values`], in order.
pub const FUNCTIONAL_NAMES: &[&str] = &[
    "f0_st_mean",
    "f0_st_sd",
    "f0_st_min",
    "f0_st_max",
    "f0_st_range",
    "f0_st_p10",
    "f0_st_p50",
    "f0_st_p90",
    "f0_st_slope_per_s",
    "energy_db_mean",
    "energy_db_sd",
    "energy_db_min",
    "energy_db_max",
    "energy_db_range",
    "energy_db_p10",
    "energy_db_p50",
    "energy_db_p90",
    "energy_db_slope_per_s",
    "centroid_hz_mean",
    "centroid_hz_sd",
    "centroid_hz_min",
    "centroid_hz_max",
    "centroid_hz_range",
    "centroid_hz_p10",
    "centroid_hz_p50",
    "centroid_hz_p90",
    "centroid_hz_slope_per_s",
    "tilt_db_oct_mean",
    "tilt_db_oct_sd",
    "tilt_db_oct_min",
    "tilt_db_oct_max",
    "tilt_db_oct_range",
    "tilt_db_oct_p10",
    "tilt_db_oct_p50",
    "tilt_db_oct_p90",
    "tilt_db_oct_slope_per_s",
    "voiced_fraction",
    "voicing_strength_mean",
    "speech_rate_syl_per_s",
    "articulation_rate_syl_per_s",
    "pause_rate_per_min",
    "pause_mean_s",
    "pause_fraction",
    "jitter_local_pct",
    "shimmer_local_pct",
    "duration_s",
    "speech_duration_s",
    "mfcc0_mean",
    "mfcc1_mean",
    "mfcc2_mean",
    "mfcc3_mean",
    "mfcc4_mean",
    "mfcc5_mean",
    "mfcc6_mean",
    "mfcc7_mean",
    "mfcc8_mean",
    "mfcc9_mean",
    "mfcc10_mean",
    "mfcc11_mean",
    "mfcc12_mean",
    "mfcc0_sd",
    "mfcc1_sd",
    "mfcc2_sd",
    "mfcc3_sd",
    "mfcc4_sd",
    "mfcc5_sd",
    "mfcc6_sd",
    "mfcc7_sd",
    "mfcc8_sd",
    "mfcc9_sd",
    "mfcc10_sd",
    "mfcc11_sd",
    "mfcc12_sd",
];

/// Fixed-length utterance feature vector, parallel to [`FUNCTIONAL_NAMES`].
#[derive(Debug, Clone, PartialEq)]
pub struct Functionals {
    pub values: Vec<f32>,
}

const SILENCE_REL_DB: f32 = 25.0;
const SILENCE_ABS_DB: f32 = -70.0;
const MIN_PAUSE_S: f64 = 0.150;
const NUCLEUS_MIN_DIP_DB: f32 = 2.0;
const DEFAULT_HOP_S: f64 = 0.010;
const DEFAULT_HALF_FRAME_S: f64 = 0.0125;
const MAX_PERIOD_FACTOR: f64 = 1.3;
const MAX_AMPLITUDE_FACTOR: f64 = 1.6;
const MIN_CYCLE_NCC: f64 = 0.6;
const JITTER_F0_MIN_HZ: f64 = 60.0;
const JITTER_F0_MAX_HZ: f64 = 500.0;

/// Computes the utterance functionals. Never returns NaN or infinities.
///
/// `samples[0]` is taken to be at stream time `frames[0].t_s − 12.5 ms` (see the module docs);
/// use [`utterance_functionals_at`] when the audio starts elsewhere.
pub fn utterance_functionals(
    frames: &[ProsodyFrame],
    samples: &[f32],
    sample_rate_hz: u32,
) -> Functionals {
    let t0 = frames.first().map_or(0.0, |f| f.t_s - DEFAULT_HALF_FRAME_S);
    utterance_functionals_at(frames, samples, t0, sample_rate_hz)
}

/// As [`utterance_functionals`], with the stream time of `samples[0]` given explicitly
/// (only the jitter/shimmer cycle tracking uses the audio).
pub fn utterance_functionals_at(
    frames: &[ProsodyFrame],
    samples: &[f32],
    samples_start_s: f64,
    sample_rate_hz: u32,
) -> Functionals {
    let mut v: Vec<f32> = Vec::with_capacity(FUNCTIONAL_NAMES.len());
    let n = frames.len();
    let hop_s = hop_of(frames);
    let active = active_frames(frames);

    // F0 (voiced frames).
    let (mut t, mut x) = (Vec::new(), Vec::new());
    for f in frames {
        if let Some(f0) = f.f0_hz.filter(|f0| f0.is_finite() && *f0 > 0.0) {
            t.push(f.t_s);
            x.push(12.0 * (f0 / 100.0).log2());
        }
    }
    push_stats(&mut v, &t, &mut x);

    // Energy, centroid, tilt over active frames.
    type Get = fn(&ProsodyFrame) -> f32;
    let getters: [Get; 3] = [|f| f.energy_db, |f| f.centroid_hz, |f| f.tilt];
    for get in getters {
        let (mut t, mut x) = (Vec::new(), Vec::new());
        for (f, _) in frames.iter().zip(&active).filter(|(_, a)| **a) {
            t.push(f.t_s);
            x.push(finite_or(get(f), 0.0));
        }
        push_stats(&mut v, &t, &mut x);
    }

    // Voicing.
    let n_active = active.iter().filter(|a| **a).count();
    let n_voiced_active = frames
        .iter()
        .zip(&active)
        .filter(|(f, a)| **a && f.f0_hz.is_some())
        .count();
    v.push(ratio(n_voiced_active as f64, n_active as f64));
    let vsum: f64 = frames
        .iter()
        .zip(&active)
        .filter(|(_, a)| **a)
        .map(|(f, _)| finite_or(f.voicing, 0.0) as f64)
        .sum();
    v.push(ratio(vsum, n_active as f64));

    let (n_pauses, pause_s, span_s) = pauses(&active, hop_s);
    let speech_s = (span_s - pause_s).max(0.0);
    let duration_s = n as f64 * hop_s;

    // Syllable nuclei.
    let nuclei = count_nuclei(frames, &active);
    v.push(ratio(nuclei as f64, duration_s));
    v.push(ratio(nuclei as f64, speech_s));
    v.push(ratio(n_pauses as f64, span_s / 60.0));
    v.push(ratio(pause_s, n_pauses as f64));
    v.push(ratio(pause_s, span_s));

    // Jitter / shimmer.
    let (jit, shim) = jitter_shimmer(frames, samples, samples_start_s, sample_rate_hz, hop_s);
    v.push(jit);
    v.push(shim);
    v.push(duration_s as f32);
    v.push(speech_s as f32);

    push_mfcc(&mut v, frames, &active);

    debug_assert_eq!(v.len(), FUNCTIONAL_NAMES.len());
    for x in &mut v {
        if !x.is_finite() {
            *x = 0.0;
        }
    }
    Functionals { values: v }
}

/// The frames' hop: their mean spacing, or the default for fewer than two.
fn hop_of(frames: &[ProsodyFrame]) -> f64 {
    let n = frames.len();
    if n >= 2 {
        let d = (frames[n - 1].t_s - frames[0].t_s) / (n - 1) as f64;
        if d.is_finite() && d > 0.0 {
            d
        } else {
            DEFAULT_HOP_S
        }
    } else {
        DEFAULT_HOP_S
    }
}

/// Active frames: energy within `SILENCE_REL_DB` of the utterance's 99th percentile and
/// above `SILENCE_ABS_DB`.
fn active_frames(frames: &[ProsodyFrame]) -> Vec<bool> {
    let mut energies: Vec<f32> = frames
        .iter()
        .map(|f| finite_or(f.energy_db, -100.0))
        .collect();
    let p99 = percentile_unsorted(&mut energies, 0.99);
    let thr = (p99 - SILENCE_REL_DB).max(SILENCE_ABS_DB);
    frames
        .iter()
        .map(|f| finite_or(f.energy_db, -100.0) >= thr)
        .collect()
}

/// Pauses and speech span: the count and seconds of inactive runs of at least
/// `MIN_PAUSE_S` between the first and last active frame, and that span's seconds.
fn pauses(active: &[bool], hop_s: f64) -> (usize, f64, f64) {
    let first = active.iter().position(|a| *a);
    let last = active.iter().rposition(|a| *a);
    let (mut n_pauses, mut pause_s, mut span_s) = (0usize, 0.0f64, 0.0f64);
    if let (Some(a), Some(b)) = (first, last) {
        span_s = (b - a + 1) as f64 * hop_s;
        let mut run = 0usize;
        for &act in &active[a..=b] {
            if act {
                let d = run as f64 * hop_s;
                if d >= MIN_PAUSE_S - 1e-9 {
                    n_pauses += 1;
                    pause_s += d;
                }
                run = 0;
            } else {
                run += 1;
            }
        }
    }
    (n_pauses, pause_s, span_s)
}

/// MFCC means, then sds, over the active frames.
fn push_mfcc(v: &mut Vec<f32>, frames: &[ProsodyFrame], active: &[bool]) {
    let mut means = [0.0f32; FUNCTIONAL_N_MFCC];
    let mut sds = [0.0f32; FUNCTIONAL_N_MFCC];
    for c in 0..FUNCTIONAL_N_MFCC {
        let vals: Vec<f64> = frames
            .iter()
            .zip(active)
            .filter(|(_, a)| **a)
            .map(|(f, _)| finite_or(f.mfcc.get(c).copied().unwrap_or(0.0), 0.0) as f64)
            .collect();
        let (m, s) = mean_sd(&vals);
        means[c] = m as f32;
        sds[c] = s as f32;
    }
    v.extend_from_slice(&means);
    v.extend_from_slice(&sds);
}

fn finite_or(x: f32, d: f32) -> f32 {
    if x.is_finite() {
        x
    } else {
        d
    }
}

fn ratio(a: f64, b: f64) -> f32 {
    if b > 0.0 && a.is_finite() && b.is_finite() {
        (a / b) as f32
    } else {
        0.0
    }
}

fn mean_sd(x: &[f64]) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let m = x.iter().sum::<f64>() / x.len() as f64;
    let var = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / x.len() as f64;
    (m, var.max(0.0).sqrt())
}

/// Percentile `q` in 0..1 of `x` (sorted in place), linear interpolation; 0 if empty.
fn percentile_unsorted(x: &mut [f32], q: f64) -> f32 {
    x.sort_by(|a, b| a.total_cmp(b));
    percentile_sorted(x, q)
}

fn percentile_sorted(x: &[f32], q: f64) -> f32 {
    if x.is_empty() {
        return 0.0;
    }
    let pos = q * (x.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    (x[lo] as f64 * (1.0 - frac) + x[hi] as f64 * frac) as f32
}

/// Appends mean, sd, min, max, range, p10, p50, p90, slope/s.
fn push_stats(v: &mut Vec<f32>, t: &[f64], x: &mut [f32]) {
    let xd: Vec<f64> = x.iter().map(|&a| a as f64).collect();
    let (m, sd) = mean_sd(&xd);
    // Slope by least squares against time.
    let slope = if x.len() >= 2 {
        let tm = t.iter().sum::<f64>() / t.len() as f64;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (ti, xi) in t.iter().zip(&xd) {
            sxy += (ti - tm) * (xi - m);
            sxx += (ti - tm) * (ti - tm);
        }
        if sxx > 1e-12 {
            sxy / sxx
        } else {
            0.0
        }
    } else {
        0.0
    };
    x.sort_by(|a, b| a.total_cmp(b));
    let (mn, mx) = if x.is_empty() {
        (0.0, 0.0)
    } else {
        (x[0], x[x.len() - 1])
    };
    v.extend_from_slice(&[
        m as f32,
        sd as f32,
        mn,
        mx,
        mx - mn,
        percentile_sorted(x, 0.10),
        percentile_sorted(x, 0.50),
        percentile_sorted(x, 0.90),
        slope as f32,
    ]);
}

fn count_nuclei(frames: &[ProsodyFrame], active: &[bool]) -> usize {
    let n = frames.len();
    if n < 3 {
        return 0;
    }
    let e: Vec<f32> = frames
        .iter()
        .map(|f| finite_or(f.energy_db, -100.0))
        .collect();
    let sm: Vec<f32> = (0..n)
        .map(|i| {
            let (a, b) = (i.saturating_sub(2), (i + 2).min(n - 1));
            e[a..=b].iter().sum::<f32>() / (b - a + 1) as f32
        })
        .collect();
    // Accepted peaks as frame indices.
    let mut peaks: Vec<usize> = Vec::new();
    for i in 1..n - 1 {
        let is_peak = sm[i] > sm[i - 1] && sm[i] >= sm[i + 1];
        if !(is_peak && active[i] && frames[i].f0_hz.is_some()) {
            continue;
        }
        match peaks.last().copied() {
            None => peaks.push(i),
            Some(p) => {
                let dip = sm[p..=i].iter().copied().fold(f32::INFINITY, f32::min);
                if sm[p] - dip >= NUCLEUS_MIN_DIP_DB && sm[i] - dip >= NUCLEUS_MIN_DIP_DB {
                    peaks.push(i);
                } else if sm[i] > sm[p] {
                    *peaks.last_mut().unwrap() = i;
                }
            }
        }
    }
    peaks.len()
}

/// Jitter and shimmer (local, %) from cycle-to-cycle waveform matching in voiced stretches.
fn jitter_shimmer(
    frames: &[ProsodyFrame],
    samples: &[f32],
    t0: f64,
    sample_rate_hz: u32,
    hop_s: f64,
) -> (f32, f32) {
    if frames.is_empty() || samples.is_empty() || sample_rate_hz == 0 || !t0.is_finite() {
        return (0.0, 0.0);
    }
    let sr = sample_rate_hz as f64;
    let x: Vec<f64> = samples
        .iter()
        .map(|&s| if s.is_finite() { s as f64 } else { 0.0 })
        .collect();
    let (mut pdiff, mut psum, mut np_pairs, mut nper) = (0.0f64, 0.0f64, 0usize, 0usize);
    let (mut adiff, mut asum, mut na_pairs, mut namp) = (0.0f64, 0.0f64, 0usize, 0usize);

    let mut i = 0;
    while i < frames.len() {
        if frames[i].f0_hz.is_none() {
            i += 1;
            continue;
        }
        let mut j = i;
        while j + 1 < frames.len() && frames[j + 1].f0_hz.is_some() {
            j += 1;
        }
        // Stretch i..=j, shrunk by one hop at each end for alignment tolerance.
        let a_t = frames[i].t_s + hop_s - t0 - 0.5 * hop_s;
        let b_t = frames[j].t_s - hop_s - t0 + 0.5 * hop_s;
        if b_t > a_t {
            let f0_at = |pos: f64| -> f64 {
                let t = pos / sr + t0;
                let k = ((t - frames[i].t_s) / hop_s)
                    .round()
                    .clamp(0.0, (j - i) as f64) as usize;
                frames[i + k].f0_hz.unwrap_or(100.0) as f64
            };
            let start = (a_t * sr).max(0.0) as usize;
            let end = ((b_t * sr) as usize).min(x.len());
            let cycles = track_cycles(&x, start, end, sr, f0_at);
            // cycles: (period samples, peak-to-peak amplitude, continues previous)
            let mut prev: Option<(f64, f64)> = None;
            for (p, a, cont) in cycles {
                psum += p;
                nper += 1;
                asum += a;
                namp += 1;
                if let (true, Some((pp, pa))) = (cont, prev) {
                    if p.max(pp) / p.min(pp) <= MAX_PERIOD_FACTOR {
                        pdiff += (p - pp).abs();
                        np_pairs += 1;
                    }
                    if pa > 0.0 && a > 0.0 && a.max(pa) / a.min(pa) <= MAX_AMPLITUDE_FACTOR {
                        adiff += (a - pa).abs();
                        na_pairs += 1;
                    }
                }
                prev = Some((p, a));
            }
        }
        i = j + 1;
    }
    let jitter = if np_pairs > 0 && psum > 0.0 {
        100.0 * (pdiff / np_pairs as f64) / (psum / nper as f64)
    } else {
        0.0
    };
    let shimmer = if na_pairs > 0 && asum > 0.0 {
        100.0 * (adiff / na_pairs as f64) / (asum / namp as f64)
    } else {
        0.0
    };
    (jitter as f32, shimmer as f32)
}

/// Tracks consecutive cycles in `x[start..end]`. Returns (period in samples, peak-to-peak
/// amplitude of the cycle, whether it directly follows the previous returned cycle).
fn track_cycles(
    x: &[f64],
    start: usize,
    end: usize,
    sr: f64,
    f0_at: impl Fn(f64) -> f64,
) -> Vec<(f64, f64, bool)> {
    let mut out = Vec::new();
    let (pmin, pmax) = (sr / JITTER_F0_MAX_HZ, sr / JITTER_F0_MIN_HZ);
    let mut p = start;
    let mut cont = false;
    loop {
        let t = (sr / f0_at(p as f64)).clamp(pmin, pmax);
        let tw = t.round() as usize; // comparison window: one cycle
        let lmin = (0.8 * t).floor().max(2.0) as usize;
        let lmax = (1.2 * t).ceil() as usize;
        if p + lmax + 1 + tw > end {
            break;
        }
        let seg = &x[p..p + tw];
        let e0: f64 = seg.iter().map(|v| v * v).sum();
        let mut best = (f64::NEG_INFINITY, 0usize);
        let mut nccs = [0.0f64; 3];
        let ncc = |l: usize| -> f64 {
            let other = &x[p + l..p + l + tw];
            let (mut num, mut e1) = (0.0, 0.0);
            for (a, b) in seg.iter().zip(other) {
                num += a * b;
                e1 += b * b;
            }
            let den = (e0 * e1).sqrt();
            if den > 1e-20 {
                num / den
            } else {
                0.0
            }
        };
        for l in lmin..=lmax {
            let c = ncc(l);
            if c > best.0 {
                best = (c, l);
            }
        }
        let (c, l) = best;
        if c < MIN_CYCLE_NCC || l <= lmin || l >= lmax {
            // No clear cycle here: skip ahead one nominal period and restart the chain.
            p += tw.max(1);
            cont = false;
            continue;
        }
        nccs[0] = ncc(l - 1);
        nccs[1] = c;
        nccs[2] = ncc(l + 1);
        let den = nccs[0] - 2.0 * nccs[1] + nccs[2];
        let delta = if den < 0.0 {
            (0.5 * (nccs[0] - nccs[2]) / den).clamp(-0.5, 0.5)
        } else {
            0.0
        };
        let period = l as f64 + delta;
        let cyc = &x[p..p + l];
        let (mn, mx) = cyc
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        out.push((period, mx - mn, cont));
        cont = true;
        p += l;
    }
    out
}
