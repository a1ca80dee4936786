//! End-to-end behaviour on real (espeak-ng) speech, through the same pipeline as the
//! daemon: words, timing, segmentation, chunking invariance, input formats.

use std::io::Read;

use crate::common::*;
use sarcasmd::sinks::event::UtteranceEvent;
use sarcasmd::sources::audio::{PcmReaderSource, WavSource};

const SENTENCES: [(&str, &str); 3] = [
    (
        "Oh great, another meeting that could have been an email.",
        "en-gb",
    ),
    ("The server went down again during the demo.", "en-us"),
    (
        "Thanks, the report is ready and I sent it to the team.",
        "en-us+f2",
    ),
];

#[test]
fn events_carry_spoken_words_and_accurate_times() {
    let c = compose(0.8, &SENTENCES, 1.5);
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("speech.wav");
    write_wav_i16(&wav, &c.samples, RATE);
    let (events, stats) = run(Box::new(WavSource::open(&wav).unwrap()));
    assert_eq!(events.len(), c.truth.len(), "{events:#?}");
    let (mut errs, mut total) = (0.0, 0usize);
    for (ev, (t0, t1, text)) in events.iter().zip(&c.truth) {
        let hyp = ev.transcript.as_deref().unwrap();
        let (w, n) = wer(text, hyp);
        eprintln!(
            "ref: {text}\nhyp: {hyp}\nWER {w:.3}  start {:.3} (true {t0:.3})  end {:.3} (true {t1:.3})",
            ev.start_s, ev.end_s
        );
        errs += w * n as f64;
        total += n;
        assert!(
            (ev.start_s - t0).abs() <= 0.3,
            "start {} vs {t0}",
            ev.start_s
        );
        assert!((ev.end_s - t1).abs() <= 0.3, "end {} vs {t1}", ev.end_s);
        assert!((0.0..=1.0).contains(&ev.p_sarcastic));
        assert!(ev.views.text.is_some() && ev.views.audio.is_some());
        assert_eq!(ev.views.video, None);
        assert_eq!(ev.language, "en");
    }
    let wer_all = errs / total as f64;
    eprintln!("overall WER {wer_all:.3} over {total} words; stats {stats:?}");
    // What tiny.en hears in espeak speech depends on the SIMD code ggml was built with:
    // the same binary's sources heard "Oh great, another meeting at Kudavina email."
    // (0.233 over these 30 words) built portable (AVX2, GGML_NATIVE=OFF, as packaged) and
    // less with AVX-512. The bound is about words arriving, not about one CPU's decode,
    // so it keeps a margin above every build measured (docs/testing.md).
    assert!(wer_all <= 0.35, "WER {wer_all}");
    assert_eq!(stats.dropped.values().sum::<u64>(), 0);
}

#[test]
fn one_second_of_silence_separates_two_utterances() {
    let c = compose(0.5, &SENTENCES[..2], 1.0);
    let src =
        PcmReaderSource::new("mem", std::io::Cursor::new(to_s16le(&c.samples)), RATE).unwrap();
    let (events, _) = run(Box::new(src));
    assert_eq!(events.len(), 2, "{events:#?}");
    assert!(events[0].end_s < c.truth[1].0);
    assert!(events[1].start_s > c.truth[0].1);
}

/// A reader that returns pseudo-random sizes (1 byte .. 10 kB), as a pipe might.
struct RandomChunks {
    data: Vec<u8>,
    pos: usize,
    state: u64,
}

impl Read for RandomChunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.state = self
            .state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let want = 1 + (self.state >> 33) as usize % 10_000;
        let n = want.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn comparable(mut evs: Vec<UtteranceEvent>) -> Vec<UtteranceEvent> {
    for e in &mut evs {
        // Timings differ between runs; everything else must not.
        e.latency_ms = Default::default();
        e.ready_ms = Default::default();
    }
    evs
}

#[test]
fn random_chunk_sizes_give_the_same_events_as_whole() {
    let c = compose(0.6, &SENTENCES, 1.2);
    let bytes = to_s16le(&c.samples);
    let whole = PcmReaderSource::new("whole", std::io::Cursor::new(bytes.clone()), RATE).unwrap();
    let (a, _) = run(Box::new(whole));
    for seed in [1u64, 99] {
        let chunked = PcmReaderSource::new(
            "chunked",
            RandomChunks {
                data: bytes.clone(),
                pos: 0,
                state: seed,
            },
            RATE,
        )
        .unwrap();
        let (b, _) = run(Box::new(chunked));
        assert_eq!(comparable(a.clone()), comparable(b), "seed {seed}");
    }
    assert_eq!(a.len(), 3);
}

#[test]
fn other_rates_channels_and_formats_give_the_same_words() {
    let c = compose(0.5, &SENTENCES[..2], 1.2);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.wav");
    write_wav_i16(&base, &c.samples, RATE);
    // (file, sox output options, check words): 8 kHz telephone audio has no energy above
    // 4 kHz, which costs tiny.en most of the words on synthetic speech; for it only the
    // segmentation is checked.
    let variants: [(&str, &[&str], bool); 4] = [
        (
            "48k_stereo_f32.wav",
            &["-r", "48000", "-c", "2", "-e", "floating-point", "-b", "32"],
            true,
        ),
        ("44k1_24bit.wav", &["-r", "44100", "-b", "24"], true),
        (
            "22k05_32bit.wav",
            &["-r", "22050", "-b", "32", "-e", "signed-integer"],
            true,
        ),
        ("8k_16bit.wav", &["-r", "8000", "-b", "16"], false),
    ];
    for (name, args, check_words) in variants {
        let out = dir.path().join(name);
        let st = std::process::Command::new("sox")
            .arg(&base)
            .args(args)
            .arg(&out)
            .status()
            .expect("sox not found: run scripts/install-system-deps.sh");
        assert!(st.success());
        let (events, _) = run(Box::new(WavSource::open(&out).unwrap()));
        assert_eq!(events.len(), 2, "{name}: {events:#?}");
        for (ev, (t0, t1, text)) in events.iter().zip(&c.truth) {
            let (w, _) = wer(text, ev.transcript.as_deref().unwrap());
            eprintln!("{name}: WER {w:.3} {:?}", ev.transcript);
            if check_words {
                assert!(w <= 0.35, "{name}: WER {w}");
            }
            assert!(
                (ev.start_s - t0).abs() <= 0.3,
                "{name}: start {} vs {t0}",
                ev.start_s
            );
            assert!(
                (ev.end_s - t1).abs() <= 0.3,
                "{name}: end {} vs {t1}",
                ev.end_s
            );
        }
    }
}

#[test]
fn a_wav_that_ffmpeg_streamed_to_a_pipe_is_read_whole() {
    // Written to a pipe, ffmpeg cannot seek back to fill in the sizes and leaves
    // 0xFFFFFFFF in the RIFF and data headers; such a file was refused ("data chunk length
    // is not a multiple of sample size"). It must give the same events as the file.
    let c = compose(0.5, &SENTENCES[..2], 1.2);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.wav");
    write_wav_i16(&base, &c.samples, RATE);
    let out = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-nostdin", "-i"])
        .arg(&base)
        .args(["-f", "wav", "-"])
        .output()
        .expect("ffmpeg not found: run scripts/install-system-deps.sh --test");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&out.stdout[4..8], &[0xff; 4], "ffmpeg wrote a sized header");
    let streamed = dir.path().join("streamed.wav");
    std::fs::write(&streamed, &out.stdout).unwrap();
    let (whole, _) = run(Box::new(WavSource::open(&base).unwrap()));
    let (piped, _) = run(Box::new(WavSource::open(&streamed).unwrap()));
    assert_eq!(comparable(piped), comparable(whole));
}

#[test]
fn silence_and_noise_give_no_events() {
    let mut x = silence(3.0);
    // Low-level deterministic noise, like a quiet room.
    let mut s = 12345u32;
    for v in x.iter_mut() {
        s = s.wrapping_mul(1103515245).wrapping_add(12345);
        *v = ((s >> 16) as f32 / 65536.0 - 0.5) * 0.002;
    }
    let src = PcmReaderSource::new("noise", std::io::Cursor::new(to_s16le(&x)), RATE).unwrap();
    let (events, stats) = run(Box::new(src));
    assert!(events.is_empty(), "{events:#?}");
    assert!((stats.audio_s - 3.0).abs() < 0.01);
}

/// A sink that fails on the first event, like a closed pipe or a full disk.
struct FailingSink;

impl sarcasmd::sinks::event::EventSink for FailingSink {
    fn write(&mut self, _: &UtteranceEvent) -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "reader went away",
        ))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_sink_stops_the_stream_with_an_error() {
    let c = compose(0.3, &SENTENCES, 1.0);
    let src =
        PcmReaderSource::new("mem", std::io::Cursor::new(to_s16le(&c.samples)), RATE).unwrap();
    let err = sarcasmd::pipeline::run_stream(
        engine(),
        &sarcasmd::config::Config::default(),
        Box::new(src),
        &mut FailingSink,
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, sarcasmd::pipeline::PipelineError::Sink(_)),
        "{err}"
    );
    assert!(err.to_string().contains("reader went away"));
}
