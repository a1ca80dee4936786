use super::*;
use proptest::prelude::*;

const SR: u32 = 16_000;

fn sine(f: f32, secs: f32, amp: f32) -> Vec<f32> {
    let n = (secs * SR as f32) as usize;
    (0..n)
        .map(|i| amp * (2.0 * std::f64::consts::PI * f as f64 * i as f64 / SR as f64).sin() as f32)
        .collect()
}

/// Harmonic complex with 1/k amplitudes and fixed pseudo-random phases.
fn harmonic_shape(phase: f64) -> f32 {
    let mut v = 0.0f64;
    for k in 1..=10 {
        v += (1.0 / k as f64)
            * (2.0 * std::f64::consts::PI * k as f64 * phase + 0.7 * k as f64).sin();
    }
    (0.25 * v) as f32
}

/// Deterministic LCG in [-1, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// Periodic signal by phase accumulation; each cycle's period is T0·(1 + jitter·u) and its
/// amplitude (1 + shimmer·u'), u, u' uniform in [-1, 1).
fn pulse_train(f0: f64, secs: f64, jitter: f64, shimmer: f64, seed: u64) -> Vec<f32> {
    let mut rng = Lcg(seed);
    let t0 = SR as f64 / f0;
    let mut period = t0;
    let mut amp = 1.0;
    let mut phase = 0.0f64;
    let n = (secs * SR as f64) as usize;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(amp as f32 * harmonic_shape(phase));
        phase += 1.0 / period;
        if phase >= 1.0 {
            phase -= 1.0;
            period = t0 * (1.0 + jitter * rng.next());
            amp = 1.0 + shimmer * rng.next();
        }
    }
    out
}

fn noise(secs: f32, amp: f32, seed: u64) -> Vec<f32> {
    let mut rng = Lcg(seed);
    (0..(secs * SR as f32) as usize)
        .map(|_| amp * rng.next() as f32)
        .collect()
}

fn frames(x: &[f32]) -> Vec<ProsodyFrame> {
    extract_frames(x, SR, 0.0, &ProsodyConfig::default()).unwrap()
}

fn all_finite(f: &ProsodyFrame) -> bool {
    f.t_s.is_finite()
        && f.f0_hz.is_none_or(|v| v.is_finite())
        && f.voicing.is_finite()
        && f.energy_db.is_finite()
        && f.centroid_hz.is_finite()
        && f.tilt.is_finite()
        && f.mfcc.iter().all(|v| v.is_finite())
}

#[test]
fn config_default_is_valid_and_errors_name_the_field() {
    ProsodyConfig::default().validate().unwrap();
    let cases: Vec<(ProsodyConfig, &str)> = vec![
        (
            ProsodyConfig {
                frame_ms: f32::NAN,
                ..Default::default()
            },
            "frame_ms",
        ),
        (
            ProsodyConfig {
                hop_ms: 30.0,
                ..Default::default()
            },
            "hop_ms",
        ),
        (
            ProsodyConfig {
                f0_min_hz: 10.0,
                ..Default::default()
            },
            "f0_min_hz",
        ),
        (
            ProsodyConfig {
                f0_max_hz: 70.0,
                ..Default::default()
            },
            "f0_max_hz",
        ),
        (
            ProsodyConfig {
                yin_threshold: 0.0,
                ..Default::default()
            },
            "yin_threshold",
        ),
        (
            ProsodyConfig {
                n_mel_filters: 2,
                ..Default::default()
            },
            "n_mel_filters",
        ),
        (
            ProsodyConfig {
                n_mfcc: 27,
                ..Default::default()
            },
            "n_mfcc",
        ),
    ];
    for (cfg, field) in cases {
        let e = cfg.validate().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(field) && msg.contains("allowed"), "{msg}");
        assert!(FrameExtractor::new(&cfg, SR).is_err());
    }
}

#[test]
fn wrong_sample_rate_is_rejected() {
    let e = FrameExtractor::new(&ProsodyConfig::default(), 44_100)
        .err()
        .unwrap();
    assert!(matches!(
        e,
        ProsodyError::UnsupportedSampleRate { got_hz: 44_100, .. }
    ));
    assert!(e.to_string().contains("resample"));
    assert!(extract_frames(&[0.0; 1000], 8000, 0.0, &ProsodyConfig::default()).is_err());
}

#[test]
fn frame_times_and_count() {
    let x = vec![0.0f32; 16_000];
    let f = extract_frames(&x, SR, 2.0, &ProsodyConfig::default()).unwrap();
    // 1 + (16000 - 400) / 160 frames whose 25 ms frame fits.
    assert_eq!(f.len(), 98);
    for (k, fr) in f.iter().enumerate() {
        assert!((fr.t_s - (2.0 + 0.0125 + 0.01 * k as f64)).abs() < 1e-9);
    }
    assert!(frames(&[]).is_empty());
    assert!(frames(&[0.1; 399]).is_empty());
    assert_eq!(frames(&[0.1; 400]).len(), 1);
}

#[test]
fn tones_at_known_f0_within_one_percent() {
    for &f0 in &[61.0f32, 100.0, 150.0, 220.0, 330.0, 450.0] {
        for (kind, x) in [
            ("sine", sine(f0, 0.3, 0.5)),
            ("harmonic", pulse_train(f0 as f64, 0.3, 0.0, 0.0, 1)),
        ] {
            let fr = frames(&x);
            let inner = &fr[3..fr.len() - 3];
            let voiced = inner.iter().filter(|f| f.f0_hz.is_some()).count();
            assert_eq!(
                voiced,
                inner.len(),
                "{kind} {f0} Hz: {voiced}/{} voiced",
                inner.len()
            );
            for f in inner {
                let e = (f.f0_hz.unwrap() / f0 - 1.0).abs();
                assert!(e < 0.01, "{kind} {f0} Hz: got {:?} at {}", f.f0_hz, f.t_s);
                assert!(f.voicing > 0.9, "{kind} {f0}: voicing {}", f.voicing);
            }
        }
    }
}

#[test]
fn silence_and_noise_are_unvoiced_and_finite() {
    let sil = frames(&vec![0.0; 8000]);
    assert!(!sil.is_empty());
    for f in &sil {
        assert!(all_finite(f));
        assert_eq!(f.f0_hz, None);
        assert_eq!(f.voicing, 0.0);
        assert_eq!(f.energy_db, -100.0);
        assert_eq!(f.centroid_hz, 0.0);
        assert_eq!(f.mfcc.len(), 13);
    }
    let nz = frames(&noise(1.0, 0.3, 7));
    let voiced = nz.iter().filter(|f| f.f0_hz.is_some()).count();
    assert!(
        voiced * 20 <= nz.len(),
        "white noise: {voiced}/{} voiced",
        nz.len()
    );
    assert!(nz.iter().all(all_finite));
    // White noise: flat spectrum, centroid near fs/4, tilt near 0 dB/octave.
    let mean = |g: fn(&ProsodyFrame) -> f32| nz.iter().map(g).sum::<f32>() / nz.len() as f32;
    let (c, t) = (mean(|f| f.centroid_hz), mean(|f| f.tilt));
    assert!((3000.0..5000.0).contains(&c), "noise centroid {c}");
    assert!(t.abs() < 1.5, "noise tilt {t}");
}

#[test]
fn spectral_descriptors_of_a_sine() {
    let fr = frames(&sine(1000.0, 0.3, 1.0));
    let mid = &fr[fr.len() / 2];
    assert!(
        (mid.energy_db + 3.01).abs() < 0.1,
        "energy {}",
        mid.energy_db
    );
    assert!(
        (mid.centroid_hz - 1000.0).abs() < 100.0,
        "centroid {}",
        mid.centroid_hz
    );
    // A low-pass harmonic complex (1/k amplitudes: -6 dB/octave) has a clearly negative tilt.
    let h = frames(&pulse_train(200.0, 0.3, 0.0, 0.0, 3));
    let tilt = h[h.len() / 2].tilt;
    assert!(tilt < -3.0, "harmonic tilt {tilt}");
}

#[test]
fn non_finite_input_is_sanitised() {
    let mut x = sine(200.0, 0.2, 0.5);
    x[500] = f32::NAN;
    x[900] = f32::INFINITY;
    let fr = frames(&x);
    assert!(fr.iter().all(all_finite));
}

#[test]
fn reset_restarts_the_stream() {
    let x = pulse_train(130.0, 0.4, 0.01, 0.05, 5);
    let cfg = ProsodyConfig::default();
    let mut ex = FrameExtractor::new(&cfg, SR).unwrap();
    let mut a = Vec::new();
    ex.push(&noise(0.3, 0.2, 9), &mut a);
    ex.reset(1.5);
    a.clear();
    ex.push(&x, &mut a);
    ex.finish(&mut a);
    assert_eq!(a, extract_frames(&x, SR, 1.5, &cfg).unwrap());
}

fn functionals_ok(frames: &[ProsodyFrame], x: &[f32]) -> Functionals {
    let f = utterance_functionals(frames, x, SR);
    assert_eq!(f.values.len(), FUNCTIONAL_NAMES.len());
    for (n, v) in FUNCTIONAL_NAMES.iter().zip(&f.values) {
        assert!(v.is_finite(), "{n} = {v}");
    }
    f
}

fn get(f: &Functionals, name: &str) -> f32 {
    f.values[FUNCTIONAL_NAMES.iter().position(|n| *n == name).unwrap()]
}

#[test]
fn functional_names_are_unique() {
    let mut names: Vec<_> = FUNCTIONAL_NAMES.to_vec();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), FUNCTIONAL_NAMES.len());
    assert_eq!(FUNCTIONAL_NAMES.len(), 73);
    assert_eq!(PROSODY_FEATURE_VERSION, "prosody-v1");
}

#[test]
fn functionals_never_nan() {
    // Empty.
    let f = functionals_ok(&[], &[]);
    assert!(f.values.iter().all(|v| *v == 0.0));
    // Silence.
    let x = vec![0.0; 16_000];
    let f = functionals_ok(&frames(&x), &x);
    assert_eq!(get(&f, "voiced_fraction"), 0.0);
    assert_eq!(get(&f, "f0_st_mean"), 0.0);
    assert_eq!(get(&f, "jitter_local_pct"), 0.0);
    // Clipped tone (square-ish at full scale) and clipped noise.
    let x: Vec<f32> = sine(150.0, 1.0, 5.0)
        .iter()
        .map(|v| v.clamp(-1.0, 1.0))
        .collect();
    functionals_ok(&frames(&x), &x);
    let x: Vec<f32> = noise(0.5, 4.0, 3)
        .iter()
        .map(|v| v.clamp(-1.0, 1.0))
        .collect();
    functionals_ok(&frames(&x), &x);
    // Frames without samples, samples shorter than a frame, a single frame.
    let x = sine(200.0, 0.5, 0.5);
    functionals_ok(&frames(&x), &[]);
    functionals_ok(&frames(&x), &x[..100]);
    let x = sine(200.0, 0.03, 0.5);
    functionals_ok(&frames(&x), &x);
    // Frames carrying non-finite values (hand-made) are tolerated.
    let mut fr = frames(&sine(200.0, 0.3, 0.5));
    fr[3].energy_db = f32::NAN;
    fr[4].centroid_hz = f32::INFINITY;
    fr[5].mfcc.clear();
    functionals_ok(&fr, &[]);
}

#[test]
fn functionals_of_a_tone_with_pauses() {
    // 3 × 300 ms of 150 Hz separated by 200 ms silences.
    let mut x = Vec::new();
    for i in 0..3 {
        if i > 0 {
            x.extend(std::iter::repeat_n(0.0f32, 3200));
        }
        x.extend(pulse_train(150.0, 0.3, 0.0, 0.0, 1));
    }
    let f = functionals_ok(&frames(&x), &x);
    let st = 12.0 * (150.0f32 / 100.0).log2();
    assert!(
        (get(&f, "f0_st_mean") - st).abs() < 0.2,
        "{}",
        get(&f, "f0_st_mean")
    );
    assert!(get(&f, "f0_st_sd") < 0.2);
    assert!(get(&f, "voiced_fraction") > 0.9);
    assert!(
        (get(&f, "pause_mean_s") - 0.2).abs() < 0.04,
        "{}",
        get(&f, "pause_mean_s")
    );
    let pf = get(&f, "pause_fraction");
    assert!((0.25..0.35).contains(&pf), "pause fraction {pf}");
    assert!(get(&f, "pause_rate_per_min") > 0.0);
}

#[test]
fn jitter_and_shimmer_of_periodic_vs_perturbed() {
    let clean = pulse_train(120.0, 1.0, 0.0, 0.0, 11);
    let fc = functionals_ok(&frames(&clean), &clean);
    let (jc, sc) = (get(&fc, "jitter_local_pct"), get(&fc, "shimmer_local_pct"));
    assert!(jc < 0.1, "jitter of a periodic signal {jc}");
    assert!(sc < 0.5, "shimmer of a periodic signal {sc}");

    // Explicit start time: same result as the implied one for batch frames.
    let fr = frames(&clean);
    assert_eq!(utterance_functionals_at(&fr, &clean, 0.0, SR), fc);
    // Audio starting 7 ms later than implied (a VAD cut): still ~0.
    let fl = utterance_functionals_at(&fr[1..], &clean[112..], 0.007, SR);
    assert!(get(&fl, "jitter_local_pct") < 0.1);

    let rough = pulse_train(120.0, 1.0, 0.03, 0.15, 11);
    let fr = functionals_ok(&frames(&rough), &rough);
    let (jr, sr) = (get(&fr, "jitter_local_pct"), get(&fr, "shimmer_local_pct"));
    // Uniform ±3 % periods: expected mean |ΔP|/P ≈ 2 %.
    assert!(
        jr > 1.0 && jr > 10.0 * jc,
        "jitter perturbed {jr} vs clean {jc}"
    );
    assert!(
        sr > 3.0 && sr > 5.0 * sc,
        "shimmer perturbed {sr} vs clean {sc}"
    );
}

/// A test signal mixing silence, tones, noise and a glide.
fn mixed_signal(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Lcg(seed);
    let mut x = Vec::with_capacity(len);
    let mut f = 120.0f64;
    let mut phase = 0.0f64;
    while x.len() < len {
        let seg = 400 + ((rng.next() + 1.0) * 1500.0) as usize;
        let kind = ((rng.next() + 1.0) * 2.0) as u32;
        for _ in 0..seg.min(len - x.len()) {
            let v = match kind {
                0 => 0.0,
                1 => 0.3 * rng.next() as f32,
                _ => {
                    f = (f * (1.0 + 0.0005 * rng.next())).clamp(70.0, 400.0);
                    phase = (phase + f / SR as f64).fract();
                    0.6 * harmonic_shape(phase)
                }
            };
            x.push(v);
        }
    }
    x
}

proptest! {
    // A failing case is printed, not saved: tests never write into the source tree.
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn streaming_matches_batch_bit_for_bit(
        len in 0usize..9000,
        seed in any::<u64>(),
        chunks in proptest::collection::vec(1usize..1200, 1..40),
        start in 0.0f64..100.0,
    ) {
        let x = mixed_signal(len, seed);
        let cfg = ProsodyConfig::default();
        let batch = extract_frames(&x, SR, start, &cfg).unwrap();
        let mut ex = FrameExtractor::new(&cfg, SR).unwrap();
        ex.reset(start);
        let mut out = Vec::new();
        let mut pos = 0;
        let mut i = 0;
        while pos < x.len() {
            let n = chunks[i % chunks.len()].min(x.len() - pos);
            ex.push(&x[pos..pos + n], &mut out);
            // Frames only come out once complete: never more than the batch has.
            prop_assert!(out.len() <= batch.len());
            prop_assert_eq!(&out[..], &batch[..out.len()]);
            pos += n;
            i += 1;
        }
        ex.push(&[], &mut out);
        ex.finish(&mut out);
        prop_assert_eq!(out.len(), batch.len());
        for (a, b) in out.iter().zip(&batch) {
            // Bit-identical, including f32 bit patterns.
            prop_assert_eq!(a.t_s.to_bits(), b.t_s.to_bits());
            prop_assert_eq!(a.f0_hz.map(f32::to_bits), b.f0_hz.map(f32::to_bits));
            prop_assert_eq!(a.voicing.to_bits(), b.voicing.to_bits());
            prop_assert_eq!(a.energy_db.to_bits(), b.energy_db.to_bits());
            prop_assert_eq!(a.centroid_hz.to_bits(), b.centroid_hz.to_bits());
            prop_assert_eq!(a.tilt.to_bits(), b.tilt.to_bits());
            let ma: Vec<u32> = a.mfcc.iter().map(|v| v.to_bits()).collect();
            let mb: Vec<u32> = b.mfcc.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(ma, mb);
        }
    }
}
