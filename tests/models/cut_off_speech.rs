//! Speech cut off mid-utterance (SIGTERM, the end of a file or pipe, a forced split) is
//! transcribed once. tiny.en with the encoder trimmed to the audio plus 1 s wrote the
//! sentence, a timestamp short of the cut and the sentence again as a second segment
//! ("Go to morning everyone, let's load! Go to morning everyone, let's load!").

use crate::common;

use std::sync::Arc;

use crate::common::*;
use sarcasmd::common::words::normalise_words;
use sarcasmd::config::Config;
use sarcasmd::sources::audio::WavSource;
use sarcasmd::tools::bench::SamplesSource;
use sarcasmd::views::asr::streaming::StreamingAsr;
use sarcasmd::views::asr::Transcript;

/// The longest span (in words, case and punctuation aside) said twice in a row.
fn longest_doubled_span(text: &str) -> usize {
    let w = normalise_words(text);
    (1..=w.len() / 2)
        .rev()
        .find(|&n| (0..=w.len() - 2 * n).any(|i| w[i..i + n] == w[i + n..i + 2 * n]))
        .unwrap_or(0)
}

fn assert_said_once(what: &str, tr_text: &str, guards: &[&str]) {
    // The decode itself must not double: the guard is the second line of defence.
    assert!(
        !guards.contains(&"doubling_removed"),
        "{what}: Whisper wrote a copy: {tr_text:?} {guards:?}"
    );
    assert!(
        longest_doubled_span(tr_text) < 3,
        "{what}: doubled: {tr_text:?} {guards:?}"
    );
}

const MEETING: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/meeting.wav");

/// `samples/meeting.wav` (22.05 kHz) at the pipeline's rate.
fn meeting_16k() -> Vec<f32> {
    common::read_wav_16k(std::path::Path::new(MEETING))
}

/// The first `seconds` of `samples/meeting.wav`, as `sox meeting.wav cut.wav trim 0 S`.
fn meeting_cut(seconds: f64, path: &std::path::Path) {
    let mut r = hound::WavReader::open(MEETING).unwrap();
    let spec = r.spec();
    let n = (seconds * spec.sample_rate as f64) as usize;
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    for s in r.samples::<i16>().take(n) {
        w.write_sample(s.unwrap()).unwrap();
    }
    w.finalize().unwrap();
}

/// The input ends inside "let's look at" of the first sentence, where the old decode
/// doubled (2.55, 2.65 and 2.75 s; 2026-11-25). The end of input takes the same way as
/// SIGTERM (the source stops, the segmenter closes the open utterance, the analyser
/// decodes it), without depending on when a signal lands.
#[test]
fn an_utterance_flushed_mid_sentence_is_transcribed_once() {
    let dir = tempfile::tempdir().unwrap();
    for cut_s in [2.55, 2.65, 2.75] {
        let wav = dir.path().join(format!("cut-{cut_s}.wav"));
        meeting_cut(cut_s, &wav);
        let (events, _) = run_with(&Config::default(), Box::new(WavSource::open(&wav).unwrap()));
        let [ev] = &events[..] else {
            panic!("cut at {cut_s} s: expected the open utterance, got {events:#?}")
        };
        let text = ev.transcript.as_deref().unwrap();
        assert_said_once(&format!("replay cut at {cut_s} s"), text, &ev.asr_guards);
        // "Good morning everyone, let's look at": at most its 6 words and a fragment.
        assert!(
            normalise_words(text).len() <= 8,
            "cut at {cut_s} s: {text:?}"
        );
        // Captions come from the segments: no copy there either.
        let cued: String = ev.asr_segments.iter().map(|s| s.text.as_str()).collect();
        assert_said_once(
            &format!("segments, cut at {cut_s} s"),
            &cued,
            &ev.asr_guards,
        );
    }
}

/// The same audio through streaming's final decode, as a live source flushes it at
/// SIGTERM when nothing was committed yet.
#[test]
fn streaming_final_decode_of_cut_off_speech_is_said_once() {
    let meeting = meeting_16k();
    let cfg = Config::default();
    let mut asr = engine().asr.stream(&cfg.asr).unwrap();
    // The utterance's audio as the segmenter cuts it: pre-roll before the onset at
    // 0.54 s, and nothing after the end of input.
    let start = (0.244 * RATE as f64) as usize;
    for cut_s in [2.55, 2.65, 2.75] {
        let audio = &meeting[start..(cut_s * RATE as f64) as usize];
        let mut st = StreamingAsr::new();
        let (tr, speculative): (Transcript, bool) = st
            .finish(
                &mut asr,
                0,
                start as u64,
                audio,
                (cut_s * RATE as f64) as u64,
            )
            .unwrap();
        assert!(!speculative);
        assert_said_once(&format!("finish at {cut_s} s"), &tr.text, &tr.guards);
    }
}

/// Real TV speech (../shared; skipped without it), whole and cut at 70 %: the clips
/// whose decode wrote a span of 5+ words twice with the encoder window ending 1 s after
/// the audio (14 of 129 whole clips, 17 cut; none of either with 3 s).
#[test]
fn real_speech_is_not_written_twice() {
    let Some(shared) = shared_dir() else {
        return;
    };
    let dir = shared.join("data/speech/house_mustardpp_ext/audio_16k/utterance");
    let whole = [
        "4_S01E03_005",
        "4_S01E03_082",
        "4_S01E03_089",
        "4_S01E04_102",
        "4_S01E05_042",
        "4_S01E05_108",
        "4_S01E05_118",
        "4_S01E07_133",
        "4_S01E07_148",
        "4_S01E07_154",
        "4_S01E14_160",
        "4_S02E18_027",
        "4_S02E18_034",
        "4_S03E23_014",
    ];
    let cut = [
        "4_S01E02_054",
        "4_S01E02_064",
        "4_S01E03_084",
        "4_S01E03_090",
        "4_S01E04_001",
        "4_S01E04_099",
        "4_S01E04_102",
        "4_S01E05_105",
        "4_S01E05_106",
        "4_S01E05_120",
        "4_S01E07_131",
        "4_S01E07_133",
        "4_S01E07_147",
        "4_S01E07_156",
        "4_S01E14_160",
        "4_S03E15_033",
        "4_S03E23_014",
    ];
    let mut asr = engine().asr.stream(&Config::default().asr).unwrap();
    let clips = whole
        .iter()
        .map(|k| (k, 1.0))
        .chain(cut.iter().map(|k| (k, 0.7)));
    for (key, fraction) in clips {
        let mut r = hound::WavReader::open(dir.join(format!("{key}.wav"))).unwrap();
        assert_eq!(r.spec().sample_rate, RATE);
        let x: Vec<f32> = r
            .samples::<i16>()
            .map(|s| s.unwrap() as f32 / 32768.0)
            .collect();
        let tr = asr
            .transcribe(&x[..(x.len() as f64 * fraction) as usize])
            .unwrap();
        let what = format!("{key} x {fraction}");
        assert!(
            !tr.guards.contains(&"doubling_removed"),
            "{what}: Whisper wrote a copy: {:?}",
            tr.segments
        );
        assert!(
            longest_doubled_span(&tr.text) < 5,
            "{what}: doubled: {:?}",
            tr.text
        );
    }
}

/// A pipe that ends mid-sentence is the same flush (`replay -`).
#[test]
fn samples_ending_mid_sentence_are_transcribed_once() {
    let meeting = meeting_16k();
    let n = (2.55 * RATE as f64) as usize;
    let (events, _) = run_with(
        &Config::default(),
        Box::new(SamplesSource::new(Arc::new(meeting[..n].to_vec()))),
    );
    assert_eq!(events.len(), 1, "{events:#?}");
    let ev = &events[0];
    assert_said_once(
        "samples cut at 2.55 s",
        ev.transcript.as_deref().unwrap(),
        &ev.asr_guards,
    );
}
