//! The vision view through the same frame path as a camera: video files decoded by
//! ffmpeg, frames thinned to the analysis rate, the real face models, and the
//! utterance's frames picked by the stream clock. Tests on the real TV clips need
//! ../shared and skip with a message without it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::*;
use sarcasmd::config::Config;
use sarcasmd::pipeline::{self, Engine, RunOptions};
use sarcasmd::sinks::event::VecSink;
use sarcasmd::sources::video::{FileVideoOptions, FileVideoSource, FrameSource};
use sarcasmd::views::vision::{VisionSourceConfig, EXPRESSIONS};

fn vision_config(video: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.vision.source = VisionSourceConfig::File {
        path: video.to_path_buf(),
        offset_s: 0.0,
    };
    cfg.validate().unwrap();
    cfg
}

/// One engine with the vision models and the video head, loaded once.
fn vision_engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        Engine::load(&vision_config(Path::new("unused.mp4"))).unwrap_or_else(|e| {
            panic!("cannot load models ({e}); run scripts/setup.sh first (it fetches them)")
        })
    })
}

/// A video without any face (ffmpeg's test pattern), `seconds` long.
fn pattern_video(dir: &Path, seconds: f64) -> Option<PathBuf> {
    let p = dir.join("pattern.mp4");
    let ok = Command::new("ffmpeg")
        .args(["-v", "error", "-f", "lavfi", "-i"])
        .arg(format!("testsrc=size=426x240:rate=15:duration={seconds}"))
        .args(["-pix_fmt", "yuv420p"])
        .arg(&p)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        println!(
            "SKIP: ffmpeg cannot make a test video (scripts/install-system-deps.sh installs it)"
        );
        return None;
    }
    Some(p)
}

#[test]
fn no_face_in_view_gives_a_null_video_view_not_a_score() {
    let dir = tempfile::tempdir().unwrap();
    let c = compose(
        0.5,
        &[(
            "Oh great, another meeting that could have been an email.",
            "en-us",
        )],
        1.0,
    );
    let Some(video) = pattern_video(dir.path(), c.samples.len() as f64 / RATE as f64) else {
        return;
    };
    let cfg = vision_config(&video);
    let frames = FileVideoSource::open(&video, FileVideoOptions::default()).unwrap();
    let src = sarcasmd::sources::audio::PcmReaderSource::new(
        "speech",
        std::io::Cursor::new(to_s16le(&c.samples)),
        RATE,
    )
    .unwrap();
    let mut sink = VecSink::default();
    let stats = pipeline::run_stream_av(
        vision_engine(),
        &cfg,
        Box::new(src),
        Some(Box::new(frames)),
        &mut sink,
        &RunOptions::default(),
    )
    .unwrap();
    let evs = sink.0;
    assert_eq!(evs.len(), 1, "{evs:#?}");
    assert_eq!(evs[0].views.video, None, "no face, no video score");
    assert!(evs[0].views.audio.is_some() && evs[0].views.text.is_some());
    let v = &stats.vision;
    assert!(v.enabled && !v.source_failed, "{v:?}");
    // 15 fps delivered, 5 fps analysed (the default budget): a third of the frames.
    let expected = (c.samples.len() as f64 / RATE as f64 * 5.0).round() as u64;
    assert!(
        v.count("frames_analysed").abs_diff(expected) <= 1,
        "{v:?}, expected {expected}"
    );
    assert_eq!(
        v.count("frames_in"),
        v.count("frames_analysed") + v.count("frames_skipped"),
        "{v:?}"
    );
    assert_eq!(
        stats.dropped["frame_queue_full"], 0,
        "a file waits instead of dropping"
    );
    assert_eq!(v.count("frames_with_face"), 0);
    assert_eq!(v.count("utterances_without_face"), 1);
}

#[test]
fn a_frame_source_that_fails_leaves_the_stream_audio_only() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("truncated.mp4");
    let Some(video) = pattern_video(dir.path(), 3.0) else {
        return;
    };
    // Half a file: ffmpeg starts, then fails mid-stream.
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let c = compose(0.5, &[("Sure, that went really well.", "en-us")], 1.0);
    let cfg = vision_config(&bad);
    let src = sarcasmd::sources::audio::PcmReaderSource::new(
        "speech",
        std::io::Cursor::new(to_s16le(&c.samples)),
        RATE,
    )
    .unwrap();
    let frames = FileVideoSource::open(&bad, FileVideoOptions::default()).ok();
    let mut sink = VecSink::default();
    let stats = pipeline::run_stream_av(
        vision_engine(),
        &cfg,
        Box::new(src),
        frames.map(|f| Box::new(f) as Box<dyn FrameSource>),
        &mut sink,
        &RunOptions::default(),
    )
    .unwrap();
    assert_eq!(sink.0.len(), 1, "the audio side carries on");
    assert_eq!(sink.0[0].views.video, None);
    eprintln!("vision stats with a broken file: {:?}", stats.vision);
}

/// The House clips: faces are found, expressions are distributions, geometry is sane,
/// and a replay with video gives the video view a score.
#[test]
fn real_clips_show_faces_and_score_the_video_view() {
    let Some(shared) = shared_dir() else { return };
    let dir = shared.join("data/speech/house_mustardpp_ext");
    let mut clips: Vec<PathBuf> = std::fs::read_dir(dir.join("video_240p/utterance"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    clips.sort();
    let mut analyser = vision_engine()
        .vision
        .as_ref()
        .expect("vision models loaded")
        .analyser(&Default::default())
        .unwrap();
    let (mut frames, mut with_face) = (0, 0);
    for clip in clips.iter().take(6) {
        let mut src = FileVideoSource::open(
            clip,
            FileVideoOptions {
                fps: 5.0,
                offset_s: 0.0,
            },
        )
        .unwrap();
        while let Some(f) = src.next_frame().unwrap() {
            frames += 1;
            let obs = analyser.analyse(&f).unwrap();
            assert_eq!(obs.t_s, f.t_s);
            if let Some(face) = obs.face {
                with_face += 1;
                let sum: f32 = face.expression.iter().sum();
                assert!((sum - 1.0).abs() < 1e-3, "{:?}", face.expression);
                assert!(face.size > 0.02 && face.size < 1.0, "{face:?}");
                if let Some(g) = face.geometry {
                    assert!(g.mouth_width > 0.3 && g.mouth_width < 2.0, "{g:?}");
                    assert!(g.brow_raise > 0.0 && g.brow_raise < 1.5, "{g:?}");
                }
            }
        }
    }
    eprintln!("faces in {with_face} of {frames} frames (6 House clips at 5 fps)");
    assert!(frames > 50);
    assert!(
        with_face * 2 > frames,
        "a face in most frames of TV close-ups"
    );
    assert_eq!(EXPRESSIONS.len(), 7);

    // End to end: the clip's audio and video through the daemon's replay path. This
    // clip is a close-up (in 4_S01E01_003, the first, House is a 20-pixel face across
    // the room, too small for the short-range detector: its video view is null).
    let clip = &dir.join("video_240p/utterance/4_S01E02_050.mp4");
    let stem = clip.file_stem().unwrap().to_str().unwrap();
    let wav = dir.join(format!("audio_16k/utterance/{stem}.wav"));
    let mut cfg = vision_config(clip);
    cfg.segment.hangover_ms = 2000;
    let src = sarcasmd::sources::audio::WavSource::open(&wav).unwrap();
    let mut sink = VecSink::default();
    let frames = FileVideoSource::open(clip, FileVideoOptions::default()).unwrap();
    pipeline::run_stream_av(
        vision_engine(),
        &cfg,
        Box::new(src),
        Some(Box::new(frames)),
        &mut sink,
        &RunOptions::default(),
    )
    .unwrap();
    assert!(!sink.0.is_empty());
    let ev = &sink.0[0];
    eprintln!("{stem}: views {:?}, p {}", ev.views, ev.p_sarcastic);
    let p = ev
        .views
        .video
        .expect("a face is in view: the video view scores");
    assert!((0.0..=1.0).contains(&p));
    assert!(ev.ready_ms.video.is_some());
    assert!(ev.models.contains_key("video_head"));
}

/// A meeting-room profile with a camera on a machine without one: the daemon starts,
/// keeps retrying the camera in the background, and scores the speech audio-only.
#[test]
fn the_daemon_runs_audio_only_when_the_camera_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let c = compose(
        0.5,
        &[("Well, that was a productive meeting.", "en-us")],
        1.0,
    );
    let wav = dir.path().join("speech.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&wav, spec).unwrap();
    for s in &c.samples {
        w.write_sample((s * 32767.0) as i16).unwrap();
    }
    w.finalize().unwrap();
    let events = dir.path().join("events.jsonl");
    let mut cfg = Config {
        source: sarcasmd::config::SourceConfig::Wav {
            path: wav,
            realtime: false,
        },
        ..Default::default()
    };
    cfg.output.events = events.display().to_string();
    cfg.vision.source = VisionSourceConfig::Camera {
        device: Some("no-such-camera".into()),
    };
    cfg.validate().unwrap();
    let report = sarcasmd::daemon::builder::Daemon::builder(cfg)
        .run()
        .expect("runs without its camera");
    let v = &report.stats.vision;
    assert!(v.enabled, "{v:?}");
    assert_eq!(v.count("frames_analysed"), 0);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0]["views"]["video"].is_null());
    assert!(lines[0]["views"]["audio"].is_number());
}

/// Frames are matched to an utterance by the stream clock: the same clip's video
/// shifted 30 s later (`offset_s`) has no frame inside the utterance, so no video view.
#[test]
fn frames_are_matched_to_utterances_by_the_stream_clock() {
    let Some(shared) = shared_dir() else { return };
    let dir = shared.join("data/speech/house_mustardpp_ext");
    let clip = dir.join("video_240p/utterance/4_S01E02_050.mp4");
    let wav = dir.join("audio_16k/utterance/4_S01E02_050.wav");
    let run = |offset_s: f64| {
        let mut cfg = vision_config(&clip);
        cfg.segment.hangover_ms = 2000;
        let frames = FileVideoSource::open(
            &clip,
            FileVideoOptions {
                fps: 15.0,
                offset_s,
            },
        )
        .unwrap();
        let mut sink = VecSink::default();
        let stats = pipeline::run_stream_av(
            vision_engine(),
            &cfg,
            Box::new(sarcasmd::sources::audio::WavSource::open(&wav).unwrap()),
            Some(Box::new(frames)),
            &mut sink,
            &RunOptions::default(),
        )
        .unwrap();
        (sink.0, stats)
    };
    let (aligned, _) = run(0.0);
    let (shifted, stats) = run(30.0);
    assert!(aligned[0].views.video.is_some(), "{:?}", aligned[0].views);
    assert_eq!(shifted[0].views.video, None, "{:?}", shifted[0].views);
    assert!(
        stats.vision.count("frames_with_face") > 0,
        "the frames were seen, just not then"
    );
}
