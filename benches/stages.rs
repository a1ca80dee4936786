//! Per-stage costs at realistic shapes, with the real models from the cache.
//! Run: `cargo bench --bench stages`. Each group names the regression it guards.
//! Whisper runs on real speech synthesised with espeak-ng (a tone makes it decode
//! nothing, which is fast and meaningless). Vision runs on a real TV frame with a face
//! from ../shared when present (else only the no-face path, on a test pattern).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use sarcasmd::config::Config;
use sarcasmd::pipeline::Engine;
use sarcasmd::sources::audio::PIPELINE_RATE_HZ;
use sarcasmd::views::asr::{AsrConfig, Urgency};
use sarcasmd::views::prosody::{self, FrameExtractor, ProsodyConfig};
use sarcasmd::views::vad::VAD_CHUNK;

/// Voiced-like test signal: a gliding harmonic tone with some noise.
fn signal(seconds: f32) -> Vec<f32> {
    let n = (seconds * PIPELINE_RATE_HZ as f32) as usize;
    let mut s = 1u32;
    (0..n)
        .map(|i| {
            let t = i as f32 / PIPELINE_RATE_HZ as f32;
            let f0 = 120.0 + 40.0 * (t * 1.3).sin();
            let ph = 2.0 * std::f32::consts::PI * f0 * t;
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            0.3 * ph.sin()
                + 0.1 * (2.0 * ph).sin()
                + 0.05 * (3.0 * ph).sin()
                + 0.01 * ((s >> 16) as f32 / 65536.0 - 0.5)
        })
        .collect()
}

/// `seconds` of espeak-ng speech at 16 kHz (sentences repeated to length), or `None`
/// when espeak-ng is not installed.
fn speech(seconds: f32) -> Option<Vec<f32>> {
    use sarcasmd::sources::audio::{AudioSource, WavSource};
    let dir = tempfile::tempdir().ok()?;
    let wav = dir.path().join("speech.wav");
    let text = "Oh great, another meeting that could have been an email. \
                The server went down again during the demo, what a surprise. \
                Please send me the slides before lunch.";
    let ok = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "160", "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .ok()?
        .success();
    if !ok {
        return None;
    }
    let mut src = WavSource::open(&wav).ok()?;
    let mut one = Vec::new();
    while src.read_chunk(&mut one).ok()? {}
    let n = (seconds * PIPELINE_RATE_HZ as f32) as usize;
    Some(one.iter().copied().cycle().take(n).collect())
}

fn benches(c: &mut Criterion) {
    let cfg = Config::default();
    let x = signal(10.0);

    // Guards: prosody must stay far below 10 ms of CPU per 10 ms hop (it runs on all audio).
    let pc = ProsodyConfig::default();
    c.bench_function("prosody/frames_1s", |b| {
        b.iter(|| {
            let mut fx = FrameExtractor::new(&pc, PIPELINE_RATE_HZ).unwrap();
            let mut out = Vec::new();
            fx.push(black_box(&x[..16_000]), &mut out);
            out.len()
        })
    });
    let frames = prosody::extract_frames(&x[..16_000 * 5], PIPELINE_RATE_HZ, 0.0, &pc).unwrap();
    // Guards: per-utterance functionals (jitter/shimmer period search) on a 5 s utterance.
    c.bench_function("prosody/functionals_5s", |b| {
        b.iter(|| {
            prosody::utterance_functionals(black_box(&frames), &x[..16_000 * 5], PIPELINE_RATE_HZ)
        })
    });

    let engine = match Engine::load(&cfg) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("SKIP model benches: {e}");
            return;
        }
    };
    // Guards: VAD per 32 ms chunk (~0.25 ms expected in tract).
    let mut vad = engine.vad.stream().unwrap();
    let mut i = 0;
    c.bench_function("vad/chunk_32ms", |b| {
        b.iter(|| {
            let s = (i * VAD_CHUNK) % (x.len() - VAD_CHUNK);
            i += 1;
            vad.process(black_box(&x[s..s + VAD_CHUNK])).unwrap()
        })
    });
    // Guards: text encoder on a typical sentence.
    if let Some(t) = &engine.text {
        c.bench_function("text/embed_sentence", |b| {
            b.iter(|| {
                t.embed(black_box(
                    "Oh great, another meeting that could have been an email.",
                ))
                .unwrap()
            })
        });
    }
    // Guards: the heads' 5 ms budget.
    if let Some(f) = &engine.fusion {
        let feats = prosody::utterance_functionals(&frames, &x[..16_000 * 5], PIPELINE_RATE_HZ);
        c.bench_function("heads/audio", |b| {
            b.iter(|| f.audio.predict(black_box(&feats.values)).unwrap())
        });
        c.bench_function("heads/fusion", |b| {
            b.iter(|| f.fuse(Some(0.7), Some(0.4), None).unwrap())
        });
        // Guards: the extras head (5 outputs, ~24 linear units over the 512-d text
        // embedding, softmax/clip) that runs after the text head on every transcribed
        // utterance; it must stay a small fraction of the text stage, far inside the
        // heads' 5 ms budget (a regression here would be e.g. a heavier graph or a
        // second embedding slipping in).
        if let (Some(h), Some(t)) = (&f.extras, &engine.text) {
            let e = t
                .embed("Oh great, another meeting that could have been an email.")
                .unwrap();
            c.bench_function("heads/extras", |b| {
                b.iter(|| h.predict(black_box(&e)).unwrap())
            });
        }
    }
    vision_benches(c);
    // Guards: Whisper per 5 s and 10 s of speech (trimmed encoder), the dominant stage
    // of the one-shot path, and a 2 s streaming step with word times (what is left to
    // decode at the end of speech when streaming works).
    let Some(talk) = speech(10.0) else {
        eprintln!("SKIP whisper benches: espeak-ng not installed (scripts/install-test-tools.sh)");
        return;
    };
    let mut asr = engine.asr.stream(&cfg.asr).unwrap();
    let mut g = c.benchmark_group("asr");
    g.sample_size(10);
    g.bench_function("whisper_5s", |b| {
        b.iter(|| asr.transcribe(black_box(&talk[..16_000 * 5])).unwrap())
    });
    g.bench_function("whisper_10s", |b| {
        b.iter(|| asr.transcribe(black_box(&talk[..16_000 * 10])).unwrap())
    });
    // Guards `asr.final_threads`: a second thread on the decode an event waits on must
    // stay clearly faster than one (ggml's workers busy-wait, so it can also be slower).
    let two = AsrConfig {
        final_threads: 2,
        ..cfg.asr.clone()
    };
    let mut asr2 = engine.asr.stream(&two).unwrap();
    g.bench_function("whisper_5s_final_threads_2", |b| {
        b.iter(|| asr2.transcribe(black_box(&talk[..16_000 * 5])).unwrap())
    });
    g.bench_function("stream_step_2s_words", |b| {
        b.iter(|| {
            asr.transcribe_with(black_box(&talk[..16_000 * 2]), true, Urgency::Captions)
                .unwrap()
        })
    });
    g.finish();
}

criterion_group!(stages, benches);
criterion_main!(stages);

/// First frame of `path` (through the file source, as replays decode it).
fn first_frame(path: &std::path::Path) -> Option<sarcasmd::sources::video::VideoFrame> {
    use sarcasmd::sources::video::{FileVideoSource, FrameSource};
    FileVideoSource::open(path, Default::default())
        .ok()?
        .next_frame()
        .ok()?
}

fn vision_benches(c: &mut Criterion) {
    use sarcasmd::common::models::{model_dir, ModelStore};
    use sarcasmd::views::vision::{functionals, VisionModels};
    let store = match ModelStore::new(model_dir(None), false) {
        Ok(s) => s,
        Err(e) => return eprintln!("SKIP vision benches: {e}"),
    };
    let models = match VisionModels::load(&store) {
        Ok(m) => m,
        Err(e) => return eprintln!("SKIP vision benches: {e}"),
    };
    let mut analyser = models.analyser(&Default::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pattern = dir.path().join("pattern.mp4");
    let made = std::process::Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=426x240:rate=15:duration=1",
        ])
        .arg(&pattern)
        .status()
        .is_ok_and(|s| s.success());
    let mut g = c.benchmark_group("vision");
    g.sample_size(20);
    // Guards: a frame without a face costs only the detector (~6 ms): an empty room
    // must stay cheap.
    if let Some(f) = made.then(|| first_frame(&pattern)).flatten() {
        g.bench_function("frame_426x240_no_face", |b| {
            b.iter(|| analyser.analyse(black_box(&f)).unwrap())
        });
        // Guards: the letterbox resample into the detector's 128x128 input (area
        // filter); it must stay a small part of the detector's cost.
        let roi = sarcasmd::views::vision::Roi {
            cx: 213.0,
            cy: 120.0,
            width: 426.0,
            height: 426.0,
            angle_rad: 0.0,
        };
        let mut x = vec![0.0f32; 3 * 128 * 128];
        g.bench_function("letterbox_128", |b| {
            b.iter(|| {
                sarcasmd::views::vision::sample_roi(
                    &f.rgb,
                    f.width,
                    f.height,
                    &roi,
                    128,
                    128,
                    |u, v, c| {
                        x[(v * 128 + u) * 3] = c[0];
                    },
                )
            })
        });
    }
    // Guards: a frame with a face: detector + face mesh + expression (~18 ms), the
    // per-frame cost that `vision.analyse_fps` multiplies.
    let clip = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/speech/house_mustardpp_ext/video_240p/utterance/4_S01E02_050.mp4");
    match first_frame(&clip) {
        Some(f) if analyser.analyse(&f).unwrap().face.is_some() => {
            g.bench_function("frame_426x240_face", |b| {
                b.iter(|| analyser.analyse(black_box(&f)).unwrap())
            });
            // Guards: per utterance, functionals over 9 s at 5 fps (MuSAG's mean length).
            let obs: Vec<_> = (0..45)
                .map(|k| {
                    let mut o = analyser.analyse(&f).unwrap();
                    o.t_s = k as f64 * 0.2;
                    o
                })
                .collect();
            g.bench_function("functionals_9s_5fps", |b| {
                b.iter(|| functionals(black_box(&obs)))
            });
        }
        _ => eprintln!(
            "SKIP vision/frame_426x240_face: no House clip with a face (../shared absent)"
        ),
    }
    g.finish();
}
