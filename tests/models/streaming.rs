//! Streaming recognition on real (espeak-ng) speech paced like a microphone: words
//! come out as with one-shot decoding, the decode made at the final pause becomes the
//! transcript, and each view says when it was ready.

use std::sync::Arc;

use crate::common::*;
use sarcasmd::config::Config;
use sarcasmd::pipeline::{run_stream, RunOptions, RunStats};
use sarcasmd::sinks::event::VecSink;
use sarcasmd::tools::bench::SamplesSource;

const SENTENCES: [(&str, &str); 2] = [
    (
        "Oh great, another meeting that could have been an email.",
        "en-us+m3",
    ),
    (
        "Thanks, the report is ready and I sent it to the team.",
        "en-us",
    ),
];

/// The pipeline on `samples` paced like a microphone (streaming recognition is on).
fn run_paced(cfg: &Config, samples: Vec<f32>) -> (VecSink, RunStats) {
    let mut sink = VecSink::default();
    let opts = RunOptions {
        realtime: true,
        ..Default::default()
    };
    let stats = run_stream(
        engine(),
        cfg,
        Box::new(SamplesSource::new(Arc::new(samples))),
        &mut sink,
        &opts,
    )
    .unwrap();
    (sink, stats)
}

#[test]
fn streamed_transcripts_match_the_speech_and_views_report_readiness() {
    let c = compose(0.6, &SENTENCES, 1.5);
    let mut cfg = Config::default();
    cfg.asr.stream_step_ms = 1000;
    // Interim captions on: the streaming steps produce them.
    cfg.asr.interim_every_ms = 1000;
    let (sink, stats) = run_paced(&cfg, c.samples.clone());
    // The events that stand: an early end at a pause inside a sentence ("Thanks, ...")
    // is replaced by its revision when the speaker goes on (designed; tested below),
    // and whether it happens depends on how fast the decode at the pause returns.
    let all = &sink.0;
    let events: Vec<_> = all
        .iter()
        .filter(|e| !all.iter().any(|later| later.revises == Some(e.id)))
        .cloned()
        .collect();
    eprintln!("{:?}", stats.streaming);
    assert_eq!(events.len(), c.truth.len(), "{events:#?}");
    // The same audio decoded one-shot (read as fast as possible) is the reference
    // quality: streaming may not be much worse.
    let (one_shot, _) = run_with(
        &cfg,
        Box::new(SamplesSource::new(Arc::new(c.samples.clone()))),
    );
    assert_eq!(one_shot.len(), events.len());
    for ((ev, base), (_, _, text)) in events.iter().zip(&one_shot).zip(&c.truth) {
        let hyp = ev.transcript.as_deref().unwrap();
        let base_text = base.transcript.as_deref().unwrap();
        let (w, _) = wer(text, hyp);
        let (w_base, _) = wer(text, base_text);
        eprintln!(
            "ref: {text}\nstreamed: {hyp} (WER {w:.3})\none-shot: {base_text} (WER {w_base:.3})\nready {:?}",
            ev.ready_ms
        );
        assert!(w <= w_base + 0.15, "streamed WER {w} vs one-shot {w_base}");
        // Segment times stay within the audio decoded (at most the 1 s minimum of
        // padding past the end of speech), not at the end of Whisper's 30 s window.
        for seg in &ev.asr_segments {
            assert!(seg.end_s <= ev.end_s + 1.1, "{seg:?} in {ev:?}");
        }
        let audio = ev.ready_ms.audio.unwrap();
        let text_ready = ev.ready_ms.text.unwrap();
        assert!(audio <= text_ready && text_ready <= ev.ready_ms.fused);
        assert_eq!(ev.ready_ms.fused, ev.latency_ms.total);
        assert!(!ev.text_shed);
    }
    assert!(stats.streaming.enabled);
    assert!(stats.streaming.count("steps") >= 2, "{:?}", stats.streaming);
    // Sentences followed by silence: the decode started at the pause is the final one.
    assert!(
        stats.streaming.count("speculative_finals") >= 1,
        "{:?}",
        stats.streaming
    );
    // Interim text came from the steps, each with the id of its final event.
    assert!(!sink.1.is_empty());
    assert!(sink.1.iter().all(|p| p.id < all.len() as u64));
    assert_eq!(stats.dropped.values().sum::<u64>(), 0);
}

#[test]
fn a_file_read_as_fast_as_possible_is_decoded_one_shot() {
    let c = compose(0.5, &SENTENCES[..1], 0.5);
    let cfg = Config::default();
    assert!(cfg.asr.stream_step_ms > 0);
    let (events, stats) = run_with(
        &cfg,
        Box::new(SamplesSource::new(Arc::new(c.samples.clone()))),
    );
    assert_eq!(events.len(), 1);
    assert!(!stats.streaming.enabled);
    assert_eq!(stats.streaming.count("steps"), 0);
}

/// A pause after words Whisper ends with a full stop, inside one turn: the sentence-end
/// shortcut ends the utterance there, the speaker goes on within the full hangover, so
/// the utterance is reopened and one revising event carries the whole turn, decoded as
/// one (cutting it costs words: "How lovely." | "But video co-throws ...", seen).
#[test]
fn a_turn_that_goes_on_after_an_early_end_is_revised_as_one() {
    let samples = turn_going_on_after_a_full_stop(0.6);
    let mut cfg = Config::default();
    cfg.segment.hangover_ms = 900;
    let (sink, stats) = run_paced(&cfg, samples);
    let events = sink.0;
    eprintln!("{:?}\n{events:#?}", stats.streaming);
    assert!(
        stats.streaming.count("early_ends") >= 1
            && stats.streaming.count("reopened_after_early_end") >= 1,
        "the decode of \"How lovely.\" did not end the utterance early: {:?}",
        stats.streaming
    );
    let [early, whole] = &events[..] else {
        panic!("expected an early event and its revision: {events:#?}")
    };
    assert!(early.early_end);
    assert_eq!(whole.revises, Some(early.id));
    assert_eq!(whole.start_s, early.start_s);
    assert!(whole.end_s > early.end_s + 1.0);
    let reference = "How lovely, the video call froze right at the important part.";
    let (w, _) = wer(reference, whole.transcript.as_deref().unwrap());
    assert!(w <= 0.25, "WER {w}: {:?}", whole.transcript);
}

/// A decode abandoned midway (speech resumed after the pause it was for) returns
/// nothing, stops while whisper.cpp is still working, and leaves the per-stream decoder
/// state fit for the next decode.
#[test]
fn an_abandoned_decode_stops_midway_and_the_decoder_goes_on() {
    use sarcasmd::views::asr::Urgency;
    use std::cell::Cell;
    let text = "Oh great, another meeting that could have been an email.";
    let speech = speak(text, "en-us+m3");
    let mut asr = engine().asr.stream(&Config::default().asr).unwrap();
    let decode = |asr: &mut sarcasmd::views::asr::AsrStream| {
        asr.transcribe_unless(&speech, true, Urgency::Event, &|| false)
            .unwrap()
            .expect("not abandoned")
            .text
    };
    let before = decode(&mut asr);
    let asked = Cell::new(0u32);
    let after_three = || {
        asked.set(asked.get() + 1);
        asked.get() > 3
    };
    let r = asr
        .transcribe_unless(&speech, true, Urgency::Event, &after_three)
        .unwrap();
    assert!(r.is_none(), "{r:?}");
    // Asked once before starting, then by whisper.cpp while it worked, until told to stop.
    assert_eq!(asked.get(), 4);
    // The same words as before the abandoned decode.
    assert_eq!(decode(&mut asr), before);
    let (w, _) = wer(text, &before);
    assert!(w <= 0.6, "WER {w}: {before}");
}

/// Two sentences in one turn with a pause a commit may be made at (0.4 s, after 3 s of
/// speech): the decode made at that pause is committed, whether the speaker's going on
/// reopened an early end or not, so the decode left at the end covers the second
/// sentence only; the transcript that stands keeps both. (The commit check once read
/// the endpointer's latest pause, by then a dip inside a later word, and never fired.)
#[test]
fn a_pause_inside_a_turn_is_committed_and_the_turn_keeps_its_words() {
    let first_text = "Fantastic, the printer is jammed again, what a lovely start to the day.";
    let first = speak(first_text, "en-us+m3");
    let second = speak(SENTENCES[1].0, SENTENCES[1].1);
    let (a, b) = speech_bounds(&first);
    let (c, d) = speech_bounds(&second);
    assert!(
        (b - a) as f64 / RATE as f64 >= 3.0,
        "the first sentence is long enough to commit"
    );
    let mut samples = silence(0.6);
    samples.extend_from_slice(&first[a..b]);
    samples.extend(silence(0.4));
    samples.extend_from_slice(&second[c..d]);
    samples.extend(silence(1.5));
    let mut cfg = Config::default();
    // One turn: the pause is well inside the hangover.
    cfg.segment.hangover_ms = 900;
    let (sink, stats) = run_paced(&cfg, samples);
    let all = &sink.0;
    let standing: Vec<_> = all
        .iter()
        .filter(|e| !all.iter().any(|later| later.revises == Some(e.id)))
        .collect();
    eprintln!("{:?}\n{all:#?}", stats.streaming);
    assert_eq!(standing.len(), 1, "{all:#?}");
    assert!(
        stats.streaming.count("commits") >= 1,
        "the decode at the pause was not committed: {:?}",
        stats.streaming
    );
    let reference = format!("{first_text} {}", SENTENCES[1].0);
    let (w, _) = wer(&reference, standing[0].transcript.as_deref().unwrap());
    assert!(w <= 0.35, "WER {w}: {:?}", standing[0].transcript);
}
